"""The :class:`~dsched_server.engine.worker_client.WorkerClient` over gRPC (``WorkerService``).

It owns the channels to workers: one per address, cached, closed when the worker leaves the
registry (:meth:`GrpcWorkerClient.forget`) and at shutdown. The master's log proxy borrows the same
channels for ``LogService`` (:meth:`GrpcWorkerClient.log_stub`): it forwards protobuf as it is.
"""

from __future__ import annotations

from collections.abc import Sequence

import grpc
from grpc import aio

from dsched.errors import InvalidArgument
from dsched.v1 import log_service_pb2_grpc, worker_service_pb2_grpc
from dsched_server.engine.worker_client import RequestRefused, WorkerCallError
from dsched_server.protocol.dispatch import DispatchReply
from dsched_server.protocol.execution import TaskExecution
from dsched_server.protocol.orders import Kill, TakeOver
from dsched_server.protocol.wire.dispatch import reply_from_proto
from dsched_server.protocol.wire.execution import dispatch_request
from dsched_server.protocol.wire.orders import kill_to_proto, take_over_to_proto
from dsched_server.rpc import probe
from dsched_server.rpc.channels import Channels


class GrpcWorkerClient:
    """Calls workers over gRPC; see the module docstring."""

    def __init__(self) -> None:
        self._channels = Channels()  # unbounded: the directory drops those of workers that left

    async def dispatch(
        self, address: str, specs: Sequence[TaskExecution], *, timeout: float
    ) -> DispatchReply:
        try:
            reply = await self._stub(address).DispatchTasks(
                dispatch_request(specs), timeout=timeout
            )
        except aio.AioRpcError as err:
            raise _error(address, err) from err
        try:
            return reply_from_proto(reply, [spec.key for spec in specs])
        except InvalidArgument as err:
            # Which attempts it took is unknown, as if the answer had been lost.
            raise WorkerCallError(address, "INVALID_REPLY", str(err)) from err

    async def kill(self, address: str, order: Kill, *, timeout: float) -> bool:
        try:
            reply = await self._stub(address).KillTask(kill_to_proto(order), timeout=timeout)
        except aio.AioRpcError as err:
            raise _error(address, err) from err
        return reply.found

    async def take_over(self, address: str, order: TakeOver, *, timeout: float) -> bool:
        try:
            reply = await self._stub(address).TakeOverTask(
                take_over_to_proto(order), timeout=timeout
            )
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
