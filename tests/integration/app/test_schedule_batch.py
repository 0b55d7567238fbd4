"""The scheduler firing due schedules in batches (``app/firing.py``), on SQLite, PostgreSQL and
MariaDB, with a clock the test moves and no worker (a run stays unfinished until the test ends it):

* a batch in which another master already fired one schedule's fire time (its row is there)
  rolls back on the unique key, and each schedule is fired on its own: the other 199 fire once,
  that one not again;
* one batch mixing the overlap policies, previous runs going on or ended, catch-up policies and
  an offline workflow writes what firing each schedule alone writes.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import func, select, update

from dsched.options import ReleaseState, RunTrigger
from dsched.states import WorkflowState
from dsched_server.app import firing, schedules
from dsched_server.app.context import AppContext
from dsched_server.app.scheduler import Scheduler
from dsched_server.app.transaction import Transaction, transact
from dsched_server.core.schedule import CatchUp, Overlap, ScheduleSpec
from dsched_server.store import definitions, events, instances
from dsched_server.store import schedules as store
from dsched_server.store.models import Base, Command, WorkflowInstance, table
from tests.integration.app.conftest import chain_spec, make_workflow

WI = table(WorkflowInstance)
C = table(Command)
# 200 schedules fired and each checked row by row: on MariaDB under a loaded machine this takes
# longer than the default minute.
pytestmark = pytest.mark.timeout(300)


class ManualClock:
    def __init__(self, at: datetime) -> None:
        self.at = at

    def now(self) -> datetime:
        return self.at

    def monotonic(self) -> float:
        return self.at.timestamp()


def hour(h: float) -> datetime:
    return datetime(2026, 6, 1, tzinfo=UTC) + timedelta(hours=h)


def aware(when: datetime) -> datetime:
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(hour(0.5))


@pytest.fixture
def ctx(app: AppContext, clock: ManualClock) -> AppContext:
    return dataclasses.replace(app, clock=clock)


def scheduler(ctx: AppContext, batch: int) -> Scheduler:
    return Scheduler(ctx, slot=lambda: (0, 1), enabled=lambda: True, refresh=3600.0, batch=batch)


async def online_schedules(
    ctx: AppContext, specs: list[ScheduleSpec], workflow: str = "etl"
) -> list[int]:
    """Online schedules of ``proj/<workflow>``, one per spec, created in one transaction."""

    async def work(tx: Transaction) -> list[int]:
        ids = []
        for spec in specs:
            record = await schedules.create(tx, "proj", workflow, spec, timedelta(seconds=1))
            await schedules.set_online(tx, record.id, True)
            ids.append(record.id)
        return ids

    return await transact(ctx, work)


async def fires(ctx: AppContext, schedule_id: int) -> list[tuple[datetime, str]]:
    """The schedule's fire rows, oldest first; each FIRED one's run is checked: a SUBMITTED
    instance of the schedule with its fire time as its schedule time, its START command and its
    "submitted" event."""
    out = []
    async with ctx.db.read() as conn:
        for when, state, instance_id in await store.fires(conn, schedule_id):
            if state == store.FIRED and instance_id is not None:
                run = await instances.get_instance(conn, instance_id)
                assert (run.trigger, run.schedule_id) == (RunTrigger.SCHEDULE, schedule_id)
                assert run.schedule_time is not None and aware(run.schedule_time) == aware(when)
                commands = select(func.count()).where(C.c.workflow_instance_id == instance_id)
                assert await conn.scalar(commands) == 1
                logged = await events.after(conn, instance_id, 0)
                assert [(e.workflow_state, e.message) for e in logged] == [
                    (WorkflowState.SUBMITTED, "submitted")
                ]
            out.append((aware(when), state))
    return out


async def count(ctx: AppContext, model: type[Base]) -> int:
    async with ctx.db.read() as conn:
        return int(await conn.scalar(select(func.count()).select_from(table(model))))


async def test_a_batch_with_a_fire_time_another_master_fired_fires_the_others_once(
    ctx: AppContext, clock: ManualClock
) -> None:
    await make_workflow(ctx)
    ids = await online_schedules(ctx, [ScheduleSpec(cron="0 * * * *")] * 200)
    s = scheduler(ctx, batch=200)
    assert await s.pass_once() == 0  # loads the share: all 200 due at 01:00
    taken = ids[57]

    clock.at = hour(1)  # another master fires 01:00 of one of them (its row, run, last fire)
    assert [
        len(f.started) for f in (await transact(ctx, lambda tx: firing.fire(tx, [taken]))).values()
    ] == [1]
    clock.at = hour(1) + timedelta(seconds=1)
    assert await s.pass_once() == 199
    for schedule_id in ids:
        assert await fires(ctx, schedule_id) == [(hour(1), "FIRED")]
    assert await count(ctx, WorkflowInstance) == await count(ctx, Command) == 200

    clock.at = hour(2) + timedelta(seconds=1)  # the next fire time: all 200 in one batch
    assert await s.pass_once() == 200
    for schedule_id in ids:
        assert await fires(ctx, schedule_id) == [(hour(1), "FIRED"), (hour(2), "FIRED")]
    assert await count(ctx, WorkflowInstance) == 400
    assert s.fired == 399


@pytest.mark.parametrize("batch", [1, 200])
async def test_one_batch_of_mixed_policies_writes_what_each_schedule_alone_writes(
    ctx: AppContext, clock: ManualClock, batch: int
) -> None:
    """At 03:00:01 after firing 01:00, 02:00 was missed (older than the grace) and 03:00 is on
    time. ``batch=1`` fires each schedule in its own transaction; both give these rows."""
    await make_workflow(ctx)
    other = dataclasses.replace(chain_spec(), name="other")

    async def define_other(tx: Transaction) -> None:
        await definitions.create_workflow(tx.conn, other, tx.now)
        await definitions.set_release_state(tx.conn, "proj", "other", ReleaseState.ONLINE, tx.now)

    await transact(ctx, define_other)
    hourly = ScheduleSpec(cron="0 * * * *")
    cases = {  # name: (spec, previous run ended, rows of 02:00 and 03:00)
        "run, going on": (hourly, False, ["FIRED", "FIRED"]),
        "skip, going on": (
            dataclasses.replace(hourly, overlap=Overlap.SKIP),
            False,
            ["SKIPPED"] * 2,
        ),
        "queue, going on": (
            dataclasses.replace(hourly, overlap=Overlap.QUEUE),
            False,
            ["QUEUED"] * 2,
        ),
        "skip, ended": (
            dataclasses.replace(hourly, overlap=Overlap.SKIP),
            True,
            ["FIRED", "SKIPPED"],
        ),
        "queue, ended": (
            dataclasses.replace(hourly, overlap=Overlap.QUEUE),
            True,
            ["FIRED", "QUEUED"],
        ),
        "catch-up none": (dataclasses.replace(hourly, catch_up=CatchUp.NONE), False, ["FIRED"]),
        "catch-up all, skip": (
            dataclasses.replace(hourly, catch_up=CatchUp.ALL, overlap=Overlap.SKIP),
            True,
            ["FIRED", "SKIPPED"],
        ),
    }
    ids = dict(zip(cases, await online_schedules(ctx, [c[0] for c in cases.values()]), strict=True))
    (offline,) = await online_schedules(ctx, [hourly], workflow="other")
    s = scheduler(ctx, batch=batch)
    await s.pass_once()
    clock.at = hour(1) + timedelta(seconds=1)
    assert await s.pass_once() == len(cases) + 1  # each one's first run
    ended = [ids[name] for name, (_, done, _) in cases.items() if done]
    async with ctx.db.transaction() as conn:  # those runs end (no worker here runs them)
        await conn.execute(
            update(WI)
            .where(WI.c.schedule_id.in_(ended))
            .values(state=WorkflowState.SUCCEEDED.value)
        )
    await transact(
        ctx,
        lambda tx: definitions.set_release_state(
            tx.conn, "proj", "other", ReleaseState.OFFLINE, tx.now
        ),
    )

    clock.at = hour(3) + timedelta(seconds=1)
    started = await s.pass_once()
    for name, (_, _, rows) in cases.items():
        times = [hour(2), hour(3)][-len(rows) :]
        assert await fires(ctx, ids[name]) == [
            (hour(1), "FIRED"),
            *zip(times, rows, strict=True),
        ], name
    assert await fires(ctx, offline) == [
        (hour(1), "FIRED"),
        (hour(2), "SKIPPED"),
        (hour(3), "SKIPPED"),
    ]
    states = Counter(state for _, (_, _, rows) in cases.items() for state in rows)
    assert started == states["FIRED"]
    async with ctx.db.read() as conn:
        for schedule_id in [*ids.values(), offline]:
            record = await store.get(conn, schedule_id)
            assert record.last_fire_time is not None and aware(record.last_fire_time) == hour(3)
            assert record.next_fire_time is not None and aware(record.next_fire_time) == hour(4)
    assert s.queue.earliest() == hour(4)
