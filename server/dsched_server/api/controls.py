"""MasterService pause and stop: parse, call :mod:`dsched_server.app.controls` (which records the
control, has the instance's owner apply it and waits), render (ARCHITECTURE.md §4).

The call waits up to its deadline (less a margin for the answer to arrive) and answers APPLIED with
the instance, FAILED_PRECONDITION if the owner found the control illegal, or PENDING with the
instance as it is (the control stays recorded and is still applied).

A ``request_id`` makes the call idempotent: it names the control, which is found again (on any
master) and waited for; the first APPLIED answer is stored and repeated.
"""

from __future__ import annotations

from typing import Any, TypeVar, cast

from grpc import aio

from dsched.errors import FailedPrecondition
from dsched.v1 import enums_pb2
from dsched.v1 import master_service_pb2 as pb
from dsched_server.api import convert
from dsched_server.api.context import MasterContext
from dsched_server.api.idempotency import recall, remember_answer
from dsched_server.api.validation import check_id_request
from dsched_server.app import controls
from dsched_server.core.controls import ControlKind

Ctx = aio.ServicerContext[Any, Any]
R = TypeVar("R", pb.PauseWorkflowInstanceResponse, pb.StopWorkflowInstanceResponse)


def _wait(context: Ctx) -> float:
    """How long the call may wait: up to its deadline, less a margin for the answer to arrive
    (without a deadline, as long as the application layer waits at most)."""
    # None without a deadline (grpc's stubs say float).
    remaining = cast(float | None, context.time_remaining())
    if remaining is None:
        return controls.CONTROL_WAIT_S
    # The margin covers reading the instance back, rendering and the trip to the client: a
    # second, or half of a shorter deadline. A tenth of a short deadline (0.3 s of 3 s) is too
    # little for a loaded master on MariaDB: the client would get DEADLINE_EXCEEDED, not PENDING.
    return max(0.0, remaining - min(1.0, 0.5 * remaining))


class ControlsApi:
    ctx: MasterContext

    async def PauseWorkflowInstance(
        self, request: pb.PauseWorkflowInstanceRequest, context: Ctx
    ) -> Any:
        return await self._answer(
            request,
            ControlKind.PAUSE,
            "PauseWorkflowInstance",
            pb.PauseWorkflowInstanceResponse,
            context,
        )

    async def StopWorkflowInstance(
        self, request: pb.StopWorkflowInstanceRequest, context: Ctx
    ) -> Any:
        return await self._answer(
            request,
            ControlKind.STOP,
            "StopWorkflowInstance",
            pb.StopWorkflowInstanceResponse,
            context,
        )

    async def _answer(
        self,
        request: pb.PauseWorkflowInstanceRequest | pb.StopWorkflowInstanceRequest,
        kind: ControlKind,
        method: str,
        response_type: type[R],
        context: Ctx,
    ) -> R:
        check_id_request(request.id, request.request_id)
        stored = await recall(self.ctx, request, method, response_type)
        if stored is not None and stored.instance.id != request.id:
            raise FailedPrecondition(
                f"request_id {request.request_id!r} was already used for workflow instance "
                f"{stored.instance.id}",
                reason="REQUEST_ID_REUSED",
                metadata={"request_id": request.request_id, "instance": str(stored.instance.id)},
            )
        if stored is not None:
            return stored
        done = await controls.control(
            self.ctx, request.id, kind, request.request_id, _wait(context)
        )
        reply = response_type(
            instance=convert.instance(done.instance),
            status=enums_pb2.CONTROL_STATUS_APPLIED
            if done.applied
            else enums_pb2.CONTROL_STATUS_PENDING,
        )
        if done.applied:
            await remember_answer(self.ctx, request, method, reply)
        return reply
