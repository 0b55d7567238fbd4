"""The :class:`~dsched.server.engine.worker_client.WorkerClient` over gRPC (``WorkerService``).

It owns the channels to workers: one per address, cached, closed when the worker leaves the
registry (:meth:`GrpcWorkerClient.forget`) and at shutdown. The master's log proxy borrows the same
channels for ``LogService`` (:meth:`GrpcWorkerClient.log_stub`): it forwards protobuf as it is.
"""

from __future__ import annotations

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
from dsched.server.rpc.channels import Channels
from dsched.v1 import enums_pb2, log_service_pb2_grpc, worker_service_pb2, worker_service_pb2_grpc

_ACCEPTED = frozenset(
    {enums_pb2.DISPATCH_OUTCOME_ACCEPTED, enums_pb2.DISPATCH_OUTCOME_ALREADY_ACCEPTED}
)


class GrpcWorkerClient:
    """Calls workers over gRPC; see the module docstring."""

    def __init__(self) -> None:
        self._channels = Channels()  # unbounded: the directory drops those of workers that left

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
        self._channels.drop(address)

    async def close(self) -> None:
        await self._channels.close()

    def log_stub(self, address: str) -> log_service_pb2_grpc.LogServiceAsyncStub:
        """A ``LogService`` stub on the worker's channel, for the master's log proxy."""
        return log_service_pb2_grpc.LogServiceStub(self._channels.get(address))

    def _stub(self, address: str) -> worker_service_pb2_grpc.WorkerServiceAsyncStub:
        return worker_service_pb2_grpc.WorkerServiceStub(self._channels.get(address))


def _error(address: str, err: aio.AioRpcError) -> WorkerCallError:
    kind = RequestRefused if err.code() == grpc.StatusCode.INVALID_ARGUMENT else WorkerCallError
    return kind(address, err.code().name, err.details() or "")
