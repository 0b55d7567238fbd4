"""Pause and stop applied inside an instance runner's decision (ARCHITECTURE.md §4).

A control reaches the owning runner two ways: as a :class:`Control` message when a client asked
this master (recorded and applied in the batch's transaction: no extra round trip), or recorded in
the store by another master, or while nobody drove the instance (announced by
:class:`ApplyControls`, found when a runner starts, or by the owner's fallback sweep). The runner
reads the controls a batch needs before deciding it; for a :class:`Control` the commit checks
under the fence that they are still what was read (else the batch fails and is redone from the
store), so the controls judged are every one committed before it. They are judged in recording
order, each against the state its predecessors left
(:func:`~dsched_server.core.controls.resolve`), so a pause followed by a stop always ends in a
stop. Their outcomes are written before their effect on the execution, whose finish refuses
whatever is still pending (in the commit, ``dsched_server/store/batch.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from dsched.states import InstanceEventKind, WorkflowState
from dsched_server.core import controls as rules
from dsched_server.core.controls import ControlOutcome, ControlRecord, Resolution, refused, reused
from dsched_server.engine.actions import Decider
from dsched_server.engine.messages import ApplyControls, Control
from dsched_server.store.batch import ControlAdd, ControlSettle
from dsched_server.store.events import NewEvent

W = WorkflowState


def on_start(d: Decider, pending: Sequence[ControlRecord]) -> None:
    """Before a (re)started runner's first actions: pending controls set the phase the execution
    starts in, so ``Execution.start`` cancels, adopts and kills as a master that died half-way
    through the pause or stop would have."""
    if pending:
        _apply(d, list(pending), live=False)


def on_apply(d: Decider, msg: ApplyControls, pending: Sequence[ControlRecord]) -> None:
    """A nudge: applies what other masters recorded."""
    if pending:
        _apply(d, list(pending), live=True)
    if msg.reply is not None:
        d.fx.done(msg.reply)


def on_control(d: Decider, msg: Control, rows: Sequence[ControlRecord]) -> None:
    """A client's pause or stop sent to this master: recorded and applied in this batch, after
    the controls recorded before it. ``rows``: the pending controls and the one recorded under
    the message's request id, if any."""
    if msg.reply.done():
        return  # withdrawn: its caller's deadline passed before the runner took it up
    instance_id = d.st.id
    known = next((r for r in rows if r.request_id == msg.request_id), None)
    earlier = [r for r in rows if r.pending and r.instance_id == instance_id]
    if known is not None:  # the same request again (maybe recorded elsewhere, maybe pending)
        now_known = {c.id: c for c in _apply(d, earlier, live=True)}
        _answer_repeat(d, msg, now_known.get(known.id, known), instance_id)
        return
    new = ControlRecord(
        id=0,
        request_id=msg.request_id,
        instance_id=instance_id,
        kind=msg.kind,
        requested_by=msg.requested_by,
        create_time=d.now,
    )
    settled = _apply(d, [*earlier, new], live=True)
    mine = settled[-1]
    if mine.outcome is ControlOutcome.REJECTED:
        d.fx.refuse(msg.reply, refused(mine))
        return
    d.w.adds.append(
        ControlAdd(
            request_id=msg.request_id,
            kind=msg.kind,
            requested_by=msg.requested_by,
            state=mine.outcome_state or W.RUNNING,
        )
    )
    d.fx.reply_instance(msg.reply)


def _apply(d: Decider, controls: list[ControlRecord], *, live: bool) -> list[ControlRecord]:
    """Judges ``controls`` in order, records the outcome of each stored one, then moves the
    execution once to where the applied ones lead. Returns them settled."""
    ex = d.st.execution
    epoch = d.st.instance.epoch
    before = ex.finished or ex.phase
    resolutions = rules.resolve(before, [c.kind for c in controls])
    settled = [_settled(c, r, epoch, d) for c, r in zip(controls, resolutions, strict=True)]
    for control in settled:
        if control.id:
            d.w.settles.append(
                ControlSettle(
                    control_id=control.id,
                    outcome=control.outcome,
                    state=control.outcome_state or before,
                    reason=control.outcome_reason,
                )
            )
        if control.outcome is ControlOutcome.REJECTED and control.id:
            d.w.events.append(
                NewEvent(
                    workflow_instance_id=d.st.id,
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
    d.phase(after)
    if ex.finished is None:  # else the Finish among the actions records the end state
        where = "" if via == d.st.settings.address else f" on {via}"
        d.w.events.append(
            NewEvent(
                workflow_instance_id=d.st.id,
                workflow_state=after,
                message=f"{applied[-1].kind.lower()} requested{where}",
            )
        )
    d.apply(actions)
    return settled


def _settled(control: ControlRecord, r: Resolution, epoch: int, d: Decider) -> ControlRecord:
    return replace(
        control,
        outcome=r.outcome,
        outcome_state=r.state,
        outcome_reason=r.reason,
        applied_by=epoch,
        apply_time=d.now,
    )


def _answer_repeat(d: Decider, msg: Control, known: ControlRecord, instance_id: int) -> None:
    if known.instance_id != instance_id or known.kind is not msg.kind:
        d.fx.refuse(msg.reply, reused(known))
    elif known.outcome is ControlOutcome.REJECTED:
        d.fx.refuse(msg.reply, refused(known))
    else:
        d.fx.reply_instance(msg.reply)
