"""Pause and stop: accepted by any master, applied by the instance's owner (ARCHITECTURE.md §4).

1. This master drives the instance: its runner records and applies the control in one batch (the
   owner's fast path, no extra round trip).
2. Otherwise the control is recorded in one transaction that locks the instance row, judged against
   the state the instance will have once the controls recorded before it are applied. A stop of an
   instance nobody drives that may stop in the store (SUBMITTED, PAUSED, ...) is made right there.
3. The owner is nudged (another master through the peers port, or this master's own runner) and
   the call waits for the control to be settled: it reads the control again when a nudge was
   answered, when this master's runner commits (it may be the one adopting the instance after a
   failover), and after a back-off while the owner cannot be reached or the instance is being
   taken over (the adopting master applies pending controls when it restores the instance; the
   owner's sweep is the fallback for a lost nudge).
4. It returns the instance once the control is applied, raises FAILED_PRECONDITION if the owner
   found it illegal by then, or returns the instance as it is, not applied, when the wait ends
   first (the control stays recorded and is still applied).

A control is named by its ``request_id`` (unique in the store): the same id again finds the same
control (on any master) and waits for it; the id used for another control is REQUEST_ID_REUSED.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.exc import IntegrityError

from dsched.backoff import Backoff
from dsched.errors import Aborted, IllegalTransition, OwnershipLost, Unavailable
from dsched.states import InstanceEventKind, WorkflowState
from dsched_server.app.context import AppContext
from dsched_server.core import controls as rules
from dsched_server.core import transitions
from dsched_server.core.controls import (
    ControlKind,
    ControlOutcome,
    ControlRecord,
    refused,
    reused,
)
from dsched_server.core.records import InstanceRecord
from dsched_server.engine.messages import ApplyControls, Control
from dsched_server.store import controls as control_repo
from dsched_server.store import events
from dsched_server.store import instances as instance_repo
from dsched_server.store.database import Conn
from dsched_server.store.events import NewEvent

W = WorkflowState

CONTROL_WAIT_S = 30.0  # the longest a call waits for the owner
NUDGE_TIMEOUT_S = 2.0  # per nudge: a frozen owner must not hold the wait past a failover
_WAIT = Backoff(initial=0.1, maximum=2.0)


@dataclass(frozen=True, slots=True)
class Controlled:
    """The instance after a control; ``applied`` False: recorded, still to be applied."""

    instance: InstanceRecord
    applied: bool


async def pause(
    ctx: AppContext, instance_id: int, request_id: str = "", wait: float = CONTROL_WAIT_S
) -> Controlled:
    """Pauses a RUNNING instance: its running tasks finish, no new ones start."""
    return await control(ctx, instance_id, ControlKind.PAUSE, request_id, wait)


async def stop(
    ctx: AppContext, instance_id: int, request_id: str = "", wait: float = CONTROL_WAIT_S
) -> Controlled:
    """Stops an instance: its running tasks are killed."""
    return await control(ctx, instance_id, ControlKind.STOP, request_id, wait)


async def control(
    ctx: AppContext, instance_id: int, kind: ControlKind, request_id: str, wait: float
) -> Controlled:
    """Records ``kind`` for the instance's owner and waits up to ``wait`` seconds (at most
    :data:`CONTROL_WAIT_S`) for it to be applied; ``request_id`` names the control ("": a new
    one)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(0.0, min(wait, CONTROL_WAIT_S))
    rid = request_id or f"auto-{uuid.uuid4()}"
    runner = ctx.runners.get(instance_id)
    if runner is not None and not runner.done:
        reply: asyncio.Future[InstanceRecord] = loop.create_future()
        runner.post(Control(kind, rid, ctx.address, reply))
        try:
            async with asyncio.timeout_at(deadline):
                return Controlled(await asyncio.shield(reply), applied=True)
        except (OwnershipLost, Unavailable):
            pass  # the runner stopped (the instance moved, or is reloading): record it
        except TimeoutError:
            if not reply.cancel():  # answered after all
                return Controlled(reply.result(), applied=True)
            raise Unavailable(
                f"the master driving workflow instance {instance_id} did not apply the "
                f"{kind.lower()} in time; retry with the same request_id",
                reason="OWNER_BUSY",
                metadata={"instance": str(instance_id)},
            ) from None
    recorded = await _record(ctx, instance_id, kind, rid)
    return await _settle(ctx, recorded, deadline)


# ---------------------------------------------------------------------------- recording


async def _record(ctx: AppContext, instance_id: int, kind: ControlKind, rid: str) -> ControlRecord:
    try:
        async with ctx.db.transaction() as conn:
            recorded = await _record_in(ctx, conn, instance_id, kind, rid)
    except IntegrityError:  # the same request_id, recorded concurrently by another call
        async with ctx.db.read() as conn:
            known = await control_repo.find(conn, rid)
        if known is None:
            raise Aborted("a concurrent change conflicted; retry", reason="CONFLICT") from None
        recorded = known
    if recorded.instance_id != instance_id or recorded.kind is not kind:
        raise reused(recorded)
    ctx.notifier.notify(instance_id)  # watchers: a CONTROL event or the stop
    return recorded


async def _record_in(
    ctx: AppContext, conn: Conn, instance_id: int, kind: ControlKind, rid: str
) -> ControlRecord:
    # The lock first: every read below sees what the owner committed before it, and the owner
    # sees this control in any batch that starts after the commit.
    await instance_repo.lock(conn, instance_id)
    known = await control_repo.find(conn, rid)
    if known is not None:
        return known
    instance = await instance_repo.get_instance(conn, instance_id)
    now = ctx.clock.now()
    transitions.require_state(
        instance.state, rules.ACCEPTED_IN[kind], action=kind.lower(), instance_id=instance_id
    )
    in_store = kind is ControlKind.STOP and instance.state in transitions.CAN_STOP_IN_STORE
    if in_store:
        await _stop_in_store(conn, instance, now)
    else:
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
        requested_by=ctx.address,
        now=now,
        applied=(W.STOPPED, 0) if in_store else None,
    )
    if not in_store:
        owner = f"master {instance.host}" if instance.host else "its owner"
        await events.append(
            conn,
            [
                NewEvent(
                    workflow_instance_id=instance_id,
                    kind=InstanceEventKind.CONTROL,
                    message=f"{kind.lower()} requested on {ctx.address}; to be applied by {owner}",
                )
            ],
            now,
        )
    return await control_repo.get(conn, control_id)


async def _stop_in_store(conn: Conn, instance: InstanceRecord, now: datetime) -> None:
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


# ---------------------------------------------------------------------------- waiting


async def _settle(ctx: AppContext, recorded: ControlRecord, deadline: float) -> Controlled:
    loop = asyncio.get_running_loop()
    delays = _WAIT.delays()
    nudged = False
    while True:
        signal = ctx.notifier.signal(recorded.instance_id)
        async with ctx.db.read() as conn:
            recorded = await control_repo.get(conn, recorded.id)
            instance = await instance_repo.get_instance(conn, recorded.instance_id)
        if recorded.outcome is ControlOutcome.REJECTED:
            raise refused(recorded)
        if recorded.outcome is ControlOutcome.APPLIED:
            return Controlled(instance, applied=True)
        remaining = deadline - loop.time()
        if remaining <= 0:
            return Controlled(instance, applied=False)
        if not nudged:
            nudged = True
            if await _nudge(ctx, instance, remaining):
                continue  # applied: read it
        await ctx.notifier.wait(signal, min(next(delays), remaining))
        nudged = False


async def _nudge(ctx: AppContext, instance: InstanceRecord, remaining: float) -> bool:
    """Asks the owner to apply the instance's controls now; True once it did."""
    if instance.state not in transitions.OWNED_STATES:
        return False  # being taken over: the adopting master applies them on restore
    runner = ctx.runners.get(instance.id)
    if runner is not None and not runner.done:
        return await apply_recorded(ctx, instance.id, remaining)
    if instance.epoch == ctx.epoch():
        return False  # ours, being reloaded: its first batch applies them
    target = ctx.owner_cluster_address(instance.host) if instance.host else ""
    if not target:
        return False  # its master is not registered: it is being taken over
    return await ctx.peers.apply_controls(target, instance.id, min(remaining, NUDGE_TIMEOUT_S))


async def apply_recorded(ctx: AppContext, instance_id: int, timeout: float | None = None) -> bool:
    """Has this master's runner of the instance apply the controls recorded for it (another
    master's nudge, or this master's own); True once it did, False if no runner of this master
    drives the instance, or it stopped (moved, reloading) before getting to them, or ``timeout``
    seconds passed."""
    runner = ctx.runners.get(instance_id)
    if runner is None or runner.done:
        return False
    reply: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    runner.post(ApplyControls(reply))
    try:
        await asyncio.wait_for(asyncio.shield(reply), timeout)
    except (OwnershipLost, Unavailable, TimeoutError):
        return False
    return True
