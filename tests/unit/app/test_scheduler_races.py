"""The scheduler's races and overlap over a real SQLite store with a clock the test moves: a master
with a stale view of a schedule writes nothing for a fire time already fired, and overlap QUEUE
(runs here never start: there is no worker, so a run stays unfinished). Firing on time, catch-up,
two masters and DST are in test_scheduler.py."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import func, select, update

from dsched.errors import AlreadyExists
from dsched.options import ReleaseState
from dsched_server.app import schedules
from dsched_server.app.context import AppContext
from dsched_server.app.scheduler import Scheduler
from dsched_server.app.transaction import Transaction, transact
from dsched_server.core.schedule import Overlap, ScheduleSpec
from dsched_server.store import definitions
from dsched_server.store import schedules as store
from dsched_server.store.models import Schedule, WorkflowInstance, table
from tests.unit.core.specs import task, workflow
from tests.unit.engine.conftest import Engine

T0 = datetime(2026, 6, 1, 0, 10, tzinfo=UTC)
HOURLY = ScheduleSpec(cron="0 * * * *")


class ManualClock:
    def __init__(self, now: datetime) -> None:
        self.at = now

    def now(self) -> datetime:
        return self.at

    def monotonic(self) -> float:
        return self.at.timestamp()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
async def ctx(app: AppContext, clock: ManualClock) -> AsyncIterator[AppContext]:
    yield replace(app, clock=clock, min_schedule_interval=timedelta(seconds=1))


async def define(ctx: AppContext) -> None:
    spec = workflow(task("a"))

    async def work(tx: Transaction) -> None:
        conn = tx.conn
        with contextlib.suppress(AlreadyExists):
            await definitions.create_project(conn, spec.project, "", T0)
        await definitions.create_workflow(conn, spec, T0)
        await definitions.set_release_state(conn, spec.project, spec.name, ReleaseState.ONLINE, T0)

    await transact(ctx, work)


async def online(ctx: AppContext, spec: ScheduleSpec) -> int:
    await define(ctx)
    record = await transact(
        ctx, lambda tx: schedules.create(tx, "proj", "wf", spec, timedelta(seconds=1))
    )
    await transact(ctx, lambda tx: schedules.set_online(tx, record.id, True))
    return record.id


def scheduler(ctx: AppContext) -> Scheduler:
    return Scheduler(ctx, slot=lambda: (0, 1), enabled=lambda: True)


async def fired(ctx: AppContext, schedule_id: int) -> list[tuple[datetime, str]]:
    async with ctx.db.read() as conn:
        return [(t, s) for t, s, _ in await store.fires(conn, schedule_id)]


def hour(h: float) -> datetime:
    return datetime(2026, 6, 1, tzinfo=UTC) + timedelta(hours=h)


async def test_a_master_with_a_stale_view_writes_nothing_for_a_fire_time_already_fired(
    engine: Engine, ctx: AppContext, clock: ManualClock
) -> None:
    """The second master read the schedule before the first fired 01:00: its fire of 01:00 hits
    the unique key, and its whole transaction (the run and the command too) rolls back."""
    schedule_id = await online(ctx, HOURLY)
    first, second = scheduler(ctx), scheduler(ctx)
    clock.at = hour(1) + timedelta(seconds=1)
    await first.pass_once()
    async with ctx.db.transaction() as conn:  # the stale view: last fire before 01:00
        await conn.execute(
            update(table(Schedule))
            .where(table(Schedule).c.id == schedule_id)
            .values(last_fire_time=hour(0.5))
        )
    await second.pass_once()
    assert await fired(ctx, schedule_id) == [(hour(1), "FIRED")]
    assert await runs_of(ctx, schedule_id) == 1


async def runs_of(ctx: AppContext, schedule_id: int) -> int:
    wi = table(WorkflowInstance)
    async with ctx.db.read() as conn:
        query = select(func.count()).select_from(wi).where(wi.c.schedule_id == schedule_id)
        return int(await conn.scalar(query))


async def test_overlap_queue_holds_fire_times_while_the_run_goes_on(
    engine: Engine, ctx: AppContext, clock: ManualClock
) -> None:
    schedule_id = await online(ctx, replace(HOURLY, overlap=Overlap.QUEUE))
    s = scheduler(ctx)
    for h in (1, 2, 3):
        clock.at = hour(h) + timedelta(seconds=1)
        await s.pass_once()
    assert await fired(ctx, schedule_id) == [
        (hour(1), "FIRED"),
        (hour(2), "QUEUED"),
        (hour(3), "QUEUED"),
    ]
