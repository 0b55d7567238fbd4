"""Pause and stop applied inside an instance runner's batch (ARCHITECTURE.md §4).

A control reaches the owning runner two ways: as a :class:`Control` message when a client asked
this master (recorded and applied in the batch's transaction: no extra round trip), or recorded in
the store by another master, or while nobody drove the instance (announced by
:class:`ApplyControls`, found when a runner starts, or by the owner's fallback sweep). The batch
holds the instance row through its fence, so the pending controls it reads are every one committed
so far. They are judged in recording order, each against the state its predecessors left
(:func:`~dsched.server.core.controls.resolve`), so a pause followed by a stop always ends in a
stop. Their outcomes are written before their effect on the execution, whose finish refuses
whatever is still pending (:func:`refuse_leftovers`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from dsched.server.core import controls as rules
from dsched.server.core.controls import ControlOutcome, ControlRecord, Resolution, refused, reused
from dsched.server.engine.messages import ApplyControls, Control
from dsched.server.store import controls as control_repo
from dsched.server.store.events import NewEvent
from dsched.states import InstanceEventKind, WorkflowState

if TYPE_CHECKING:
    from dsched.server.engine.runner import InstanceRunner, _Batch

W = WorkflowState


async def on_start(runner: InstanceRunner, b: _Batch) -> None:
    """Before a (re)started runner's first actions: pending controls set the phase the execution
    starts in, so ``Execution.start`` cancels, adopts and kills as a master that died half-way
    through the pause or stop would have."""
    pending = await control_repo.pending(b.conn, runner.id)
    if pending:
        await _apply(runner, b, pending, live=False)


async def on_apply(runner: InstanceRunner, b: _Batch, msg: ApplyControls) -> None:
    """A nudge: applies what other masters recorded."""
    pending = await control_repo.pending(b.conn, runner.id)
    if pending:
        await _apply(runner, b, pending, live=True)
    if msg.reply is not None:
        b.effects.done(msg.reply)


async def on_control(runner: InstanceRunner, b: _Batch, msg: Control) -> None:
    """A client's pause or stop sent to this master: recorded and applied in this batch, after
    the controls recorded before it."""
    if msg.reply.done():
        return  # withdrawn: its caller's deadline passed before the runner took it up
    rows = await control_repo.pending(b.conn, runner.id, or_request=msg.request_id)
    known = next((r for r in rows if r.request_id == msg.request_id), None)
    earlier = [r for r in rows if r.pending and r.instance_id == runner.id]
    if known is not None:  # the same request again (maybe recorded elsewhere, maybe pending)
        now_known = {c.id: c for c in await _apply(runner, b, earlier, live=True)}
        _answer_repeat(b, msg, now_known.get(known.id, known), runner.id)
        return
    new = ControlRecord(
        id=0,
        request_id=msg.request_id,
        instance_id=runner.id,
        kind=msg.kind,
        requested_by=msg.requested_by,
        create_time=b.now,
    )
    settled = await _apply(runner, b, [*earlier, new], live=True)
    mine = settled[-1]
    if mine.outcome is ControlOutcome.REJECTED:
        b.effects.refuse(msg.reply, refused(mine))
        return
    await control_repo.add(
        b.conn,
        request_id=msg.request_id,
        instance_id=runner.id,
        kind=msg.kind,
        requested_by=msg.requested_by,
        now=b.now,
        applied=(mine.outcome_state or W.RUNNING, runner.instance.epoch),
    )
    b.effects.reply_instance(msg.reply)


async def refuse_leftovers(runner: InstanceRunner, b: _Batch, end: WorkflowState) -> None:
    """The instance ends in ``end``: controls recorded since the last application are refused
    (their callers learn it, and the instance's events say so)."""
    count = await control_repo.reject_pending(
        b.conn,
        runner.id,
        state=end,
        reason=f"the instance ended {end} before the control was applied",
        epoch=runner.instance.epoch,
        now=b.now,
    )
    if count:
        b.events.append(
            NewEvent(
                workflow_instance_id=runner.id,
                kind=InstanceEventKind.CONTROL,
                message=f"{count} requested control(s) not applied: the instance ended {end}",
            )
        )


async def _apply(
    runner: InstanceRunner, b: _Batch, controls: list[ControlRecord], *, live: bool
) -> list[ControlRecord]:
    """Judges ``controls`` in order, records the outcome of each stored one, then moves the
    execution once to where the applied ones lead. Returns them settled."""
    ex = runner.execution
    before = ex.finished or ex.phase
    resolutions = rules.resolve(before, [c.kind for c in controls])
    settled = [
        _settled(c, r, runner.instance.epoch, b) for c, r in zip(controls, resolutions, strict=True)
    ]
    for control in settled:
        if control.id:
            await control_repo.settle(
                b.conn,
                control.id,
                outcome=control.outcome,
                state=control.outcome_state or before,
                reason=control.outcome_reason,
                epoch=runner.instance.epoch,
                now=b.now,
            )
        if control.outcome is ControlOutcome.REJECTED and control.id:
            b.events.append(
                NewEvent(
                    workflow_instance_id=runner.id,
                    kind=InstanceEventKind.CONTROL,
                    message=f"{control.kind.lower()} requested on {control.requested_by} not "
                    f"applied: {control.outcome_reason}",
                )
            )
    applied = [c for c in settled if c.outcome is ControlOutcome.APPLIED]
    after = resolutions[-1].state if resolutions else before
    if not applied or after is before:
        return settled
    via = applied[-1].requested_by
    # The last applied control leads furthest (a pause, then a stop, is a stop: queued attempts
    # end KILLED, not PAUSED).
    if live:
        actions = ex.stop() if after is W.READY_STOP else ex.pause()
    else:
        ex.phase, actions = after, []
    if ex.finished is None:  # else the Finish among the actions records the end state
        b.instance_values["state"] = after.value
        where = "" if via == runner.s.address else f" on {via}"
        b.events.append(
            NewEvent(
                workflow_instance_id=runner.id,
                workflow_state=after,
                message=f"{applied[-1].kind.lower()} requested{where}",
            )
        )
    await runner.apply_actions(b, actions)
    return settled


def _settled(control: ControlRecord, r: Resolution, epoch: int, b: _Batch) -> ControlRecord:
    return replace(
        control,
        outcome=r.outcome,
        outcome_state=r.state,
        outcome_reason=r.reason,
        applied_by=epoch,
        apply_time=b.now,
    )


def _answer_repeat(b: _Batch, msg: Control, known: ControlRecord, instance_id: int) -> None:
    if known.instance_id != instance_id or known.kind is not msg.kind:
        b.effects.refuse(msg.reply, reused(known))
    elif known.outcome is ControlOutcome.REJECTED:
        b.effects.refuse(msg.reply, refused(known))
    else:
        b.effects.reply_instance(msg.reply)
