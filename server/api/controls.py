"""MasterService pause and stop: accepted by any master, applied by the instance's owner
(ARCHITECTURE.md §4).

1. This master drives the instance: its runner records and applies the control in one batch (the
   owner's fast path, no extra round trip).
2. Otherwise the control is recorded in one transaction that locks the instance row, judged against
   the state the instance will have once the controls recorded before it are applied. A stop of an
   instance nobody drives that may stop in the store (SUBMITTED, PAUSED, ...) is made right there.
3. The owner is nudged (``MasterPeerService.ApplyControls``, or this master's own runner) and the
   call waits for the control to be settled: it reads the control again when a nudge was answered,
   when this master's runner commits (it may be the one adopting the instance after a failover), and
   after a back-off while the owner cannot be reached or the instance is being taken over (the
   adopting master applies pending controls when it restores the instance; the owner's sweep is the
   fallback for a lost nudge).
4. It answers APPLIED with the instance once the control is applied, FAILED_PRECONDITION if the
   owner found it illegal by then, or PENDING with the instance as it is when the deadline comes
   first (the control stays recorded and is still applied).

A ``request_id`` makes the call idempotent: its control is found again (on any master) and waited
for; the first APPLIED answer is stored and repeated.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from grpc import aio
from sqlalchemy.exc import IntegrityError

from dsched.errors import (
    Aborted,
    FailedPrecondition,
    IllegalTransition,
    OwnershipLost,
    Unavailable,
)
from dsched.server.api import convert
from dsched.server.api.context import MasterContext
from dsched.server.api.idempotency import recall, remember_answer
from dsched.server.api.validation import Checks
from dsched.server.core import controls as rules
from dsched.server.core import transitions
from dsched.server.core.backoff import Backoff
from dsched.server.core.controls import ControlKind, ControlOutcome, ControlRecord
from dsched.server.core.records import InstanceRecord
from dsched.server.engine.control_apply import refused, reused
from dsched.server.engine.messages import ApplyControls, Control
from dsched.server.store import controls as control_repo
from dsched.server.store import events
from dsched.server.store import instances as instance_repo
from dsched.server.store.database import Conn
from dsched.server.store.events import NewEvent
from dsched.states import InstanceEventKind, WorkflowState
from dsched.v1 import enums_pb2
from dsched.v1 import master_service_pb2 as pb

Ctx = aio.ServicerContext[Any, Any]
R = TypeVar("R", pb.PauseWorkflowInstanceResponse, pb.StopWorkflowInstanceResponse)
W = WorkflowState

CONTROL_WAIT_S = 30.0  # the longest a call waits for the owner (also without a client deadline)
NUDGE_TIMEOUT_S = 2.0  # per nudge: a frozen owner must not hold the wait past a failover
_WAIT = Backoff(initial=0.1, maximum=2.0)


@dataclass(frozen=True, slots=True)
class Answer:
    instance: InstanceRecord
    applied: bool


def _status(answer: Answer) -> enums_pb2.ControlStatus:
    return enums_pb2.CONTROL_STATUS_APPLIED if answer.applied else enums_pb2.CONTROL_STATUS_PENDING


def _budget(context: Ctx) -> float:
    """How long the call may wait: up to its deadline, less a margin for the answer to arrive."""
    # None without a deadline (grpc's stubs say float).
    remaining = cast(float | None, context.time_remaining())
    if remaining is None:
        return CONTROL_WAIT_S
    return max(0.0, min(CONTROL_WAIT_S, remaining - min(1.0, 0.1 * remaining)))


def _checks(instance_id: int, request_id: str) -> None:
    checks = Checks()
    checks.positive_id("id", instance_id)
    checks.request_id(request_id)
    checks.raise_if_any()


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
        _checks(request.id, request.request_id)
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
        answer = await self.control(request.id, kind, request.request_id, context)
        reply = response_type(instance=convert.instance(answer.instance), status=_status(answer))
        if answer.applied:
            await remember_answer(self.ctx, request, method, reply)
        return reply

    async def control(
        self, instance_id: int, kind: ControlKind, request_id: str, context: Ctx
    ) -> Answer:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + _budget(context)
        rid = request_id or f"auto-{uuid.uuid4()}"
        runner = self.ctx.runners.get(instance_id)
        if runner is not None and not runner.done:
            reply: asyncio.Future[InstanceRecord] = loop.create_future()
            runner.post(Control(kind, rid, self.ctx.address, reply))
            try:
                async with asyncio.timeout_at(deadline):
                    return Answer(await asyncio.shield(reply), applied=True)
            except (OwnershipLost, Unavailable):
                pass  # the runner stopped (the instance moved, or is reloading): record it
            except TimeoutError:
                if not reply.cancel():  # answered after all
                    return Answer(reply.result(), applied=True)
                raise Unavailable(
                    f"the master driving workflow instance {instance_id} did not apply the "
                    f"{kind.lower()} in time; retry with the same request_id",
                    reason="OWNER_BUSY",
                    metadata={"instance": str(instance_id)},
                ) from None
        control = await self._record(instance_id, kind, rid)
        return await self._settle(control, deadline)

    # ------------------------------------------------------------------------ recording

    async def _record(self, instance_id: int, kind: ControlKind, rid: str) -> ControlRecord:
        try:
            async with self.ctx.db.transaction() as conn:
                control = await self._record_in(conn, instance_id, kind, rid)
        except IntegrityError:  # the same request_id, recorded concurrently by another call
            async with self.ctx.db.read() as conn:
                known = await control_repo.find(conn, rid)
            if known is None:
                raise Aborted("a concurrent change conflicted; retry", reason="CONFLICT") from None
            control = known
        if control.instance_id != instance_id or control.kind is not kind:
            raise reused(control)
        self.ctx.notifier.notify(instance_id)  # watchers: a CONTROL event or the stop
        return control

    async def _record_in(
        self, conn: Conn, instance_id: int, kind: ControlKind, rid: str
    ) -> ControlRecord:
        # The lock first: every read below sees what the owner committed before it, and the owner
        # sees this control in any batch that starts after the commit.
        await instance_repo.lock(conn, instance_id)
        known = await control_repo.find(conn, rid)
        if known is not None:
            return known
        instance = await instance_repo.get_instance(conn, instance_id)
        now = self.ctx.clock.now()
        transitions.require_state(
            instance.state, rules.ACCEPTED_IN[kind], action=kind.lower(), instance_id=instance_id
        )
        if kind is ControlKind.STOP and instance.state in transitions.CAN_STOP_IN_STORE:
            await _stop_in_store(conn, instance, now)
            control_id = await control_repo.add(
                conn,
                request_id=rid,
                instance_id=instance_id,
                kind=kind,
                requested_by=self.ctx.address,
                now=now,
                applied=(W.STOPPED, 0),
            )
            return await control_repo.get(conn, control_id)
        base = instance.state
        if base is W.FAILOVER:
            base = await instance_repo.restore_state(conn, instance_id) or W.RUNNING
        pending = await control_repo.pending(conn, instance_id)
        effective = rules.effective_state(base, [p.kind for p in pending])
        if rules.target(effective, kind) is None:
            raise IllegalTransition(
                f"cannot {kind.lower()} workflow instance {instance_id}: "
                f"{rules.refusal(effective, kind)} (requested, not applied yet)",
                metadata={
                    "instance": str(instance_id),
                    "state": effective.value,
                    "action": kind.lower(),
                },
            )
        control_id = await control_repo.add(
            conn,
            request_id=rid,
            instance_id=instance_id,
            kind=kind,
            requested_by=self.ctx.address,
            now=now,
        )
        owner = f"master {instance.host}" if instance.host else "its owner"
        await events.append(
            conn,
            [
                NewEvent(
                    workflow_instance_id=instance_id,
                    kind=InstanceEventKind.CONTROL,
                    message=f"{kind.lower()} requested on {self.ctx.address}; "
                    f"to be applied by {owner}",
                )
            ],
            now,
        )
        return await control_repo.get(conn, control_id)

    # ------------------------------------------------------------------------ waiting

    async def _settle(self, control: ControlRecord, deadline: float) -> Answer:
        loop = asyncio.get_running_loop()
        delays = _WAIT.delays()
        nudged = False
        while True:
            signal = self.ctx.notifier.signal(control.instance_id)
            async with self.ctx.db.read() as conn:
                control = await control_repo.get(conn, control.id)
                instance = await instance_repo.get_instance(conn, control.instance_id)
            if control.outcome is ControlOutcome.REJECTED:
                raise refused(control)
            if control.outcome is ControlOutcome.APPLIED:
                return Answer(instance, applied=True)
            remaining = deadline - loop.time()
            if remaining <= 0:
                return Answer(instance, applied=False)
            if not nudged:
                nudged = True
                if await self._nudge(instance, remaining):
                    continue  # applied: read it
            await self.ctx.notifier.wait(signal, min(next(delays), remaining))
            nudged = False

    async def _nudge(self, instance: InstanceRecord, remaining: float) -> bool:
        """Asks the owner to apply the instance's controls now; True once it did."""
        if instance.state not in transitions.OWNED_STATES:
            return False  # being taken over: the adopting master applies them on restore
        runner = self.ctx.runners.get(instance.id)
        if runner is not None and not runner.done:
            reply: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            runner.post(ApplyControls(reply))
            try:
                await asyncio.wait_for(asyncio.shield(reply), remaining)
            except (OwnershipLost, Unavailable, TimeoutError):
                return False
            return True
        if instance.epoch == self.ctx.epoch():
            return False  # ours, being reloaded: its first batch applies them
        target = self.ctx.owner_cluster_address(instance.host) if instance.host else ""
        if not target:
            return False  # its master is not registered: it is being taken over
        return await self.ctx.peers.apply_controls(
            target, instance.id, min(remaining, NUDGE_TIMEOUT_S)
        )


async def _stop_in_store(conn: Conn, instance: InstanceRecord, now: Any) -> None:
    """Stops an instance nobody drives (the row is locked: its state cannot change meanwhile)."""
    await instance_repo.set_state(
        conn,
        instance.id,
        epoch=None,
        expected={instance.state},
        state=W.STOPPED,
        values={"end_time": now, "state_reason": "stopped by user"},
    )
    await instance_repo.delete_commands(conn, instance.id)
    await events.append(
        conn,
        [
            NewEvent(
                workflow_instance_id=instance.id,
                workflow_state=W.STOPPED,
                message="stopped by user",
            )
        ],
        now,
    )
