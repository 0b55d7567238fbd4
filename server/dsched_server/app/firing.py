"""Firing due schedules (README "Schedules"): ``app/scheduler.py`` calls :func:`fire` with up to
a batch of schedules of its master's share that are due, and :func:`start_queued` when a run of a
schedule with queued fire times ended.

Firing writes, in one transaction, each due fire time's row (unique per schedule and time), the
run it starts and its command, and the schedules' last and next fire times. A second master firing
the same time fails on the unique key and writes nothing, so every fire time starts one run.

A batch costs a statement per kind of row, not per schedule: the schedules are read in one
SELECT, their fire times are computed in memory (:class:`~dsched_server.core.schedule.FireTimes`
walks each cron once for the batch), and the runs, their commands and events, the fire rows and
the schedules' fire times are each written by one multi-row statement. A cron storm (10,000
schedules due on the same second) is 50 such batches.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

from dsched.errors import NotFound
from dsched.options import ReleaseState, RunTrigger
from dsched_server.app import runs
from dsched_server.app.transaction import Transaction
from dsched_server.core.cron import Cron, compile_cron
from dsched_server.core.records import WorkflowRecord
from dsched_server.core.schedule import (
    FireTimes,
    Overlap,
    OverlapAction,
    ScheduleRecord,
    due,
    on_overlap,
)
from dsched_server.store import definitions
from dsched_server.store import schedules as store
from dsched_server.store.instances import NewRun, RunTime

_STATES = {OverlapAction.FIRE: store.FIRED, OverlapAction.SKIP: store.SKIPPED}


@dataclass(frozen=True, slots=True)
class Fired:
    started: tuple[int, ...]  # the runs started
    next_fire: datetime | None  # None: not online (any more), or no fire time left


@dataclass(slots=True)
class _Plan:
    """What one schedule of the batch fires: its fire times due now, then what each did."""

    record: ScheduleRecord
    times: tuple[datetime, ...]
    next_fire: datetime | None
    actions: list[tuple[datetime, OverlapAction, int | None]]  # time, action, index of its run
    gone: bool = False  # its workflow is gone: nothing written for it


async def fire(tx: Transaction, ids: Sequence[int]) -> dict[int, Fired]:
    """Fires what is due of each of ``ids`` at ``tx.now``; a schedule that is gone or offline
    fires nothing and has no next fire time. Raises IntegrityError when another master fired one
    of the same fire times first (nothing is written then)."""
    out = {schedule_id: Fired((), None) for schedule_id in ids}
    found = FireTimes(tx.now)
    plans = [_plan(r, found) for r in await store.get_many(tx.conn, ids) if r.online]
    firing = [p for p in plans if p.times]
    # QUEUE serialises with start_queued, which locks the row too: a run that ends between this
    # reading it as going on and this commit would otherwise look for queued fire times before
    # this one is visible, and leave it queued for good.
    await store.lock_many(tx.conn, [p.record.id for p in firing if _overlap(p) is Overlap.QUEUE])
    # Whether a previous run goes on matters only to the policies that do not run anyway.
    asked = [p.record.id for p in firing if _overlap(p) is not Overlap.RUN]
    going = await store.runs_going_on(tx.conn, asked) if asked else set()
    workflows = await _workflows(tx, firing)
    new: list[NewRun] = []
    for p in firing:
        workflow = workflows.get(p.record.workflow_code)
        if workflow is None:  # deleted with its schedules meanwhile: read the schedule again
            p.gone = True
            continue
        going_on = p.record.id in going
        for when in p.times:
            action = on_overlap(_overlap(p), going_on)
            if workflow.release_state is not ReleaseState.ONLINE:
                action = OverlapAction.SKIP  # the workflow went offline: its fire times pass
            index = None
            if action is OverlapAction.FIRE:
                index = len(new)
                new.append(NewRun(workflow, p.record.spec.run_options, _run_time(p.record, when)))
                going_on = True  # the run just started goes on: the next fire time overlaps it
            p.actions.append((when, action, index))
    started = await runs.create_many(tx, new)
    fires = [
        store.NewFire(
            p.record.id,
            when,
            _STATES.get(action, store.QUEUED),
            None if index is None else started[index],
        )
        for p in firing
        for when, action, index in p.actions
    ]
    await store.add_fires(tx.conn, fires, tx.now)
    kept = [p for p in plans if not p.gone]
    marks = [store.Fired(p.record.id, found.latest(*_cron(p.record)), p.next_fire) for p in kept]
    await store.set_fired_many(tx.conn, marks)
    for p in kept:
        runs_of = tuple(started[i] for _, _, i in p.actions if i is not None)
        out[p.record.id] = Fired(runs_of, p.next_fire)
    return out


def _plan(record: ScheduleRecord, found: FireTimes) -> _Plan:
    spec = record.spec
    cron, zone = _cron(record)
    times = due(
        cron,
        zone,
        last=record.last_fire_time,
        now=found.now,
        window=spec.window,
        catch_up=spec.catch_up,
        cap=spec.catch_up_cap,
        times=found,
    ).fire
    return _Plan(record, times, found.upcoming(cron, zone, spec.window), actions=[])


def _cron(record: ScheduleRecord) -> tuple[Cron, ZoneInfo]:
    return compile_cron(record.spec.cron), ZoneInfo(record.spec.time_zone)


def _overlap(plan: _Plan) -> Overlap:
    return plan.record.spec.overlap


async def _workflows(tx: Transaction, plans: Sequence[_Plan]) -> dict[int, WorkflowRecord]:
    """The current version of each workflow the plans fire, read once per workflow."""
    out: dict[int, WorkflowRecord] = {}
    for code in sorted({p.record.workflow_code for p in plans}):
        with contextlib.suppress(NotFound):
            out[code] = await definitions.get_workflow_by_code(tx.conn, code)
    return out


async def start_queued(tx: Transaction, schedule_id: int) -> int | None:
    """Starts the oldest QUEUED fire time of the schedule once its previous run has ended."""
    await store.lock(tx.conn, schedule_id)
    when = await store.oldest_queued(tx.conn, schedule_id)
    if when is None or await store.run_going_on(tx.conn, schedule_id):
        return None
    record = await store.get(tx.conn, schedule_id)
    workflow = await runs.online_workflow(tx, record.project, record.workflow)
    instance_id = await runs.create(tx, workflow, record.spec.run_options, _run_time(record, when))
    await store.start_queued(tx.conn, schedule_id, when, instance_id)
    return instance_id


def _run_time(record: ScheduleRecord, when: datetime) -> RunTime:
    return RunTime(
        schedule_time=when,
        time_zone=record.spec.time_zone,
        trigger=RunTrigger.SCHEDULE,
        schedule_id=record.id,
    )
