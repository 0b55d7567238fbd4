"""The :class:`~dsched.server.engine.worker_client.WorkerClient` over gRPC (``WorkerService``).

It owns the channels to workers: one per address, cached, closed when the worker leaves the
registry (:meth:`GrpcWorkerClient.forget`) and at shutdown. The master's log proxy borrows the same
channels for ``LogService`` (:meth:`GrpcWorkerClient.log_stub`): it forwards protobuf as it is.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import grpc
from grpc import aio

from dsched.server.engine.jobs import DispatchSpec
from dsched.server.engine.wire import task_execution
from dsched.server.engine.worker_client import (
    DispatchReply,
    DispatchResult,
    RequestRefused,
    WorkerCallError,
)
from dsched.server.rpc import probe
from dsched.server.rpc.serving import CHANNEL_OPTIONS
from dsched.v1 import enums_pb2, log_service_pb2_grpc, worker_service_pb2, worker_service_pb2_grpc

_ACCEPTED = frozenset(
    {enums_pb2.DISPATCH_OUTCOME_ACCEPTED, enums_pb2.DISPATCH_OUTCOME_ALREADY_ACCEPTED}
)


class GrpcWorkerClient:
    """Calls workers over gRPC; see the module docstring."""

    def __init__(self) -> None:
        self._channels: dict[str, aio.Channel] = {}
        self._closing: set[asyncio.Task[None]] = set()  # referenced until done, not collected

    async def dispatch(
        self, address: str, specs: Sequence[DispatchSpec], *, timeout: float
    ) -> DispatchReply:
        request = worker_service_pb2.DispatchTasksRequest(
            tasks=[task_execution(spec) for spec in specs]
        )
        try:
            reply = await self._stub(address).DispatchTasks(request, timeout=timeout)
        except aio.AioRpcError as err:
            raise _error(address, err) from err
        return DispatchReply(
            worker_epoch=reply.worker_epoch,
            results=[
                DispatchResult(
                    accepted=r.outcome in _ACCEPTED, log_path=r.log_path, reason=r.reason
                )
                for r in reply.results
            ],
        )

    async def kill(
        self, address: str, task_instance_id: int, attempt: int, reason: str, *, timeout: float
    ) -> bool:
        request = worker_service_pb2.KillTaskRequest(
            task_instance_id=task_instance_id, attempt=attempt, reason=reason
        )
        try:
            reply = await self._stub(address).KillTask(request, timeout=timeout)
        except aio.AioRpcError as err:
            raise _error(address, err) from err
        return reply.found

    async def take_over(
        self,
        address: str,
        task_instance_id: int,
        attempt: int,
        *,
        owner_address: str,
        owner_epoch: int,
        timeout: float,
    ) -> bool:
        request = worker_service_pb2.TakeOverTaskRequest(
            task_instance_id=task_instance_id,
            attempt=attempt,
            owner_address=owner_address,
            owner_epoch=owner_epoch,
        )
        try:
            reply = await self._stub(address).TakeOverTask(request, timeout=timeout)
        except aio.AioRpcError as err:
            raise _error(address, err) from err
        return reply.found

    async def refused(self, address: str, *, timeout: float) -> bool:
        return await probe.refused(address, timeout)

    def forget(self, address: str) -> None:
        channel = self._channels.pop(address, None)
        if channel is not None:
            task = asyncio.get_running_loop().create_task(channel.close())
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)

    async def close(self) -> None:
        channels, self._channels = list(self._channels.values()), {}
        for channel in channels:
            await channel.close()
        await asyncio.gather(*self._closing, return_exceptions=True)

    def log_stub(self, address: str) -> log_service_pb2_grpc.LogServiceAsyncStub:
        """A ``LogService`` stub on the worker's channel, for the master's log proxy."""
        return log_service_pb2_grpc.LogServiceStub(self._channel(address))

    def _stub(self, address: str) -> worker_service_pb2_grpc.WorkerServiceAsyncStub:
        return worker_service_pb2_grpc.WorkerServiceStub(self._channel(address))

    def _channel(self, address: str) -> aio.Channel:
        channel = self._channels.get(address)
        if channel is None:
            channel = self._channels[address] = aio.insecure_channel(
                address, options=CHANNEL_OPTIONS
            )
        return channel


def _error(address: str, err: aio.AioRpcError) -> WorkerCallError:
    kind = RequestRefused if err.code() == grpc.StatusCode.INVALID_ARGUMENT else WorkerCallError
    return kind(address, err.code().name, err.details() or "")
