"""The worker's ``WorkerService``: dispatch, kill and take-over, as thin adapters over the runner.

Requests are decoded by :mod:`dsched_server.protocol.wire` (bad input raises InvalidArgument
before anything happens). A dispatch is answered REJECTED_UNAVAILABLE while the worker is starting,
stopping, fenced or cut off from the registry, except that an attempt it already has is always
answered ALREADY_ACCEPTED: a repeated dispatch learns what the worker has whatever its state.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass
from typing import Any

from grpc import aio

from dsched.errors import FailedPrecondition
from dsched.v1 import worker_service_pb2, worker_service_pb2_grpc
from dsched_server.protocol.dispatch import Dispatch, DispatchOutcome, DispatchReply
from dsched_server.protocol.execution import TaskExecution
from dsched_server.protocol.wire.dispatch import dispatch_to_proto, reply_to_proto
from dsched_server.protocol.wire.execution import execution_from_request, executions_from_request
from dsched_server.protocol.wire.orders import kill_from_proto, take_over_from_proto
from dsched_worker.clock import Clock
from dsched_worker.runner import Runner

Context = aio.ServicerContext[Any, Any]


@dataclass(slots=True, eq=False)
class WorkerServicer(worker_service_pb2_grpc.WorkerServiceServicer):
    """``epoch`` returns the incarnation's current epoch (the master's fencing token for the
    attempt); ``unavailable`` returns why new dispatches are refused right now, or None."""

    runner: Runner
    _: KW_ONLY
    epoch: Callable[[], int]
    unavailable: Callable[[], str | None]
    clock: Clock

    async def DispatchTask(
        self, request: worker_service_pb2.DispatchTaskRequest, context: Context
    ) -> worker_service_pb2.DispatchTaskResponse:
        execution = execution_from_request(request, now=self.clock())
        dispatch = self.runner.submit(execution, unavailable=self.unavailable())
        return dispatch_to_proto(dispatch, self.epoch())

    async def DispatchTasks(
        self, request: worker_service_pb2.DispatchTasksRequest, context: Context
    ) -> worker_service_pb2.DispatchTasksResponse:
        executions = executions_from_request(request, now=self.clock())
        unavailable = self.unavailable()
        results = [self._submit(e, unavailable) for e in executions]
        return reply_to_proto(DispatchReply(self.epoch(), results), [e.key for e in executions])

    def _submit(self, execution: TaskExecution, unavailable: str | None) -> Dispatch:
        # In a batch, one conflicting attempt is that task's rejection, not the whole call's.
        try:
            return self.runner.submit(execution, unavailable=unavailable)
        except FailedPrecondition as err:
            return Dispatch(outcome=DispatchOutcome.REJECTED_UNAVAILABLE, reason=err.message)

    async def KillTask(
        self, request: worker_service_pb2.KillTaskRequest, context: Context
    ) -> worker_service_pb2.KillTaskResponse:
        kill = kill_from_proto(request)
        return worker_service_pb2.KillTaskResponse(found=self.runner.kill(kill.key, kill.reason))

    async def TakeOverTask(
        self, request: worker_service_pb2.TakeOverTaskRequest, context: Context
    ) -> worker_service_pb2.TakeOverTaskResponse:
        order = take_over_from_proto(request)
        return worker_service_pb2.TakeOverTaskResponse(
            found=self.runner.take_over(order.key, order.owner_address, order.owner_epoch)
        )
