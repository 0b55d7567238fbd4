"""One owner batch of an instance, written in one call (ARCHITECTURE.md §3 step 3).

An instance's runner decides a batch in memory (``dsched_server/engine/decision.py``) and hands the
store one :class:`BatchWrites` value; :func:`commit` applies it in one transaction that starts
with the ownership fence, or not at all. Every state write in it goes through the transition
guard (``dsched_server/store/guard.py``).

Attempts created by the batch have no id until they are inserted, so the batch names them by
*provisional* ids: ``-1`` is ``creates[0]``, ``-2`` is ``creates[1]`` and so on. Task writes and
events may use them; :func:`commit` returns the real ids in the order of ``creates``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from dsched.errors import Aborted
from dsched.states import InstanceEventKind, WorkflowState
from dsched_server.core.controls import ControlKind, ControlOutcome
from dsched_server.store import controls as control_repo
from dsched_server.store import events as event_log
from dsched_server.store import instances as instance_repo
from dsched_server.store import task_instances as ti_repo
from dsched_server.store.database import Conn, Database
from dsched_server.store.events import NewEvent
from dsched_server.store.instances import InstanceValues
from dsched_server.store.task_instances import NewAttempt, TaskWrite


@dataclass(frozen=True, slots=True, kw_only=True)
class ControlSettle:
    """What became of a pending control."""

    control_id: int
    outcome: ControlOutcome
    state: WorkflowState
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ControlAdd:
    """A control sent to the owner itself, recorded APPLIED in the state it led to."""

    request_id: str
    kind: ControlKind
    requested_by: str
    state: WorkflowState


@dataclass(slots=True, kw_only=True)
class BatchWrites:
    """Everything one batch writes. ``path``: the states the instance passed through, from
    ``state_before`` (empty: its state did not change). ``controls_seen``: the ids of the
    controls the decision read (pending, or recorded under ``control_request``), which must
    still be exactly those under the fence; None when the batch read none."""

    instance_id: int
    epoch: int
    now: datetime
    state_before: WorkflowState
    task_writes: dict[int, TaskWrite] = field(default_factory=dict)
    creates: list[NewAttempt] = field(default_factory=list)
    path: list[WorkflowState] = field(default_factory=list)
    fields: InstanceValues = field(default_factory=lambda: InstanceValues())
    controls_seen: tuple[int, ...] | None = None
    control_request: str = ""
    settles: list[ControlSettle] = field(default_factory=list)
    adds: list[ControlAdd] = field(default_factory=list)
    events: list[NewEvent] = field(default_factory=list)
    # The instance ends: controls still pending are refused (saying ``reason``), then the end
    # event, which watchers take as the last one, is appended.
    end_event: NewEvent | None = None

    def provisional_id(self, attempt: NewAttempt) -> int:
        """Queues ``attempt`` for creation; returns the id this batch knows it by."""
        self.creates.append(attempt)
        return -len(self.creates)


async def commit(db: Database, w: BatchWrites) -> list[int]:
    """Applies ``w`` in one fenced transaction; returns the ids of the created attempts. Raises
    OwnershipLost (another epoch owns the instance), IllegalTransition (a write the tables forbid),
    Aborted (a row or the pending controls changed behind the owner's back); nothing is written
    then."""
    async with db.transaction() as conn:
        return await apply(conn, w)


async def apply(
    conn: Conn,
    w: BatchWrites,
    events: list[tuple[Sequence[NewEvent], datetime]] | None = None,
) -> list[int]:
    """Applies ``w`` in the caller's transaction, starting with the fence (see :func:`commit`;
    the caller rolls back what it applied when this raises). Given ``events``, the batch's events
    are added to it for the caller to append with those of the other batches of its transaction
    (:func:`dsched_server.store.events.append_written`), after them all."""
    await instance_repo.fence(conn, w.instance_id, w.epoch)
    if w.controls_seen is not None:
        await _check_controls(conn, w)
    existing = [t for t in w.task_writes.values() if t.task_instance_id > 0]
    await ti_repo.apply_writes(conn, existing)
    ids = await ti_repo.create_attempts(conn, w.instance_id, w.creates, w.now)
    created = [
        replace(t, task_instance_id=ids[-t.task_instance_id - 1])
        for t in w.task_writes.values()
        if t.task_instance_id < 0
    ]
    await ti_repo.apply_writes(conn, created)
    await _write_instance(conn, w)
    await _write_controls(conn, w)
    ending = await _finish(conn, w, w.end_event) if w.end_event is not None else []
    written = [*_resolved(w.events, ids), *ending]
    if events is None:
        await event_log.append(conn, written, w.now)
    else:
        events.append((written, w.now))
    return ids


async def _check_controls(conn: Conn, w: BatchWrites) -> None:
    rows = await control_repo.pending(conn, w.instance_id, or_request=w.control_request)
    if tuple(r.id for r in rows) != w.controls_seen:
        raise Aborted(
            f"controls of workflow instance {w.instance_id} were recorded meanwhile",
            reason="CONCURRENT_MODIFICATION",
        )


async def _write_instance(conn: Conn, w: BatchWrites) -> None:
    if w.path:
        if not await instance_repo.set_state(
            conn,
            w.instance_id,
            epoch=w.epoch,
            expected={w.state_before},
            state=w.path[-1],
            values=w.fields,
            via=w.path[:-1],
        ):
            raise Aborted(
                f"workflow instance {w.instance_id} is not {w.state_before} any more",
                reason="CONCURRENT_MODIFICATION",
            )
    elif w.fields:
        await instance_repo.update_fields(conn, w.instance_id, w.epoch, w.fields)


async def _write_controls(conn: Conn, w: BatchWrites) -> None:
    for s in w.settles:
        await control_repo.settle(
            conn,
            s.control_id,
            outcome=s.outcome,
            state=s.state,
            reason=s.reason,
            epoch=w.epoch,
            now=w.now,
        )
    for a in w.adds:
        await control_repo.add(
            conn,
            request_id=a.request_id,
            instance_id=w.instance_id,
            kind=a.kind,
            requested_by=a.requested_by,
            now=w.now,
            applied=(a.state, w.epoch),
        )


async def _finish(conn: Conn, w: BatchWrites, end: NewEvent) -> list[NewEvent]:
    """Refuses the controls still pending; returns the events that end the instance's log."""
    state = end.workflow_state or WorkflowState.FAILED
    count = await control_repo.reject_pending(
        conn,
        w.instance_id,
        state=state,
        reason=f"the instance ended {state} before the control was applied",
        epoch=w.epoch,
        now=w.now,
    )
    refusal = NewEvent(
        workflow_instance_id=w.instance_id,
        kind=InstanceEventKind.CONTROL,
        message=f"{count} requested control(s) not applied: the instance ended {state}",
    )
    # The refusal comes before the end event, which watchers take as the last one.
    return [refusal, end] if count else [end]


def _resolved(events: Sequence[NewEvent], ids: Sequence[int]) -> list[NewEvent]:
    return [
        replace(e, task_instance_id=ids[-e.task_instance_id - 1]) if e.task_instance_id < 0 else e
        for e in events
    ]
