"""A master's scheduler (``app/scheduler.py``) with a controllable clock, over the engine's real
SQLite store: each pass is driven by the test at a chosen instant, so firing on time (never
early), catch-up after downtime, a disabled (fenced) master, two masters sharing a schedule and
DST are checked at exact instants, without waiting for wall-clock time."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from dsched.options import ReleaseState, RunTrigger
from dsched_server.app import schedules
from dsched_server.app.context import AppContext
from dsched_server.app.scheduler import Scheduler
from dsched_server.app.transaction import Transaction, transact
from dsched_server.core.schedule import CatchUp, ScheduleRecord, ScheduleSpec
from dsched_server.store import definitions
from dsched_server.store import instances as instance_repo
from dsched_server.store import schedules as schedule_store
from tests.unit.core.specs import task, workflow

REFRESH_S = 3600.0  # no refresh inside a test: what a pass does is what the test asked for


class Clock:
    """Wall-clock time the test sets."""

    def __init__(self, at: datetime) -> None:
        self.at = at

    def now(self) -> datetime:
        return self.at

    def monotonic(self) -> float:
        return self.at.timestamp()


def utc(
    year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0, us: int = 0
) -> datetime:
    return datetime(year, month, day, hour, minute, second, us, tzinfo=UTC)


def aware(when: datetime) -> datetime:
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


async def online_schedule(ctx: AppContext, spec: ScheduleSpec) -> int:
    """Stores the test workflow online and ``spec`` as its online schedule (at ``ctx``'s now)."""
    wf = workflow(task("a"))

    async def define(tx: Transaction) -> int:
        await definitions.create_project(tx.conn, wf.project, "", tx.now)
        await definitions.create_workflow(tx.conn, wf, tx.now)
        await definitions.set_release_state(
            tx.conn, wf.project, wf.name, ReleaseState.ONLINE, tx.now
        )
        record = await schedules.create(tx, wf.project, wf.name, spec, timedelta(seconds=1))
        await schedules.set_online(tx, record.id, True)
        return record.id

    return await transact(ctx, define)


async def fired(ctx: AppContext, schedule_id: int) -> list[tuple[datetime, str]]:
    """The schedule's fire rows, oldest first; each FIRED one's run is checked to carry its fire
    time as its schedule time."""
    out = []
    async with ctx.db.read() as conn:
        for when, state, instance_id in await schedule_store.fires(conn, schedule_id):
            if instance_id is not None:
                run = await instance_repo.get_instance(conn, instance_id)
                assert run.trigger is RunTrigger.SCHEDULE
                assert run.schedule_id == schedule_id
                assert run.schedule_time is not None
                assert aware(run.schedule_time) == aware(when)
            out.append((aware(when), state))
    return out


@pytest.fixture
def clock() -> Clock:
    return Clock(utc(2026, 1, 5, 9, 59, 30))


@pytest.fixture
def ctx(app: AppContext, clock: Clock) -> AppContext:
    return dataclasses.replace(app, clock=clock)


def scheduler(ctx: AppContext, slot: tuple[int, int] = (0, 1), **kw: object) -> Scheduler:
    return Scheduler(ctx, slot=lambda: slot, refresh=REFRESH_S, **kw)  # type: ignore[arg-type]


async def test_fires_at_the_fire_time_once_and_never_before(ctx: AppContext, clock: Clock) -> None:
    schedule_id = await online_schedule(ctx, ScheduleSpec(cron="0 10 * * *"))
    s = scheduler(ctx, enabled=lambda: True)

    assert await s.pass_once() == 0  # 09:59:30: loads its share, nothing due
    assert s.sleep_time() == 30.0  # sleeps until the fire time, not a polling interval
    clock.at = utc(2026, 1, 5, 9, 59, 59, 999_999)
    assert await s.pass_once() == 0
    clock.at = utc(2026, 1, 5, 10)
    assert await s.pass_once() == 1
    clock.at = utc(2026, 1, 5, 10, 0, 1)
    assert await s.pass_once() == 0  # the same fire time never again
    assert s.sleep_time() == REFRESH_S  # tomorrow's 10:00 is further than the refresh

    assert await fired(ctx, schedule_id) == [(utc(2026, 1, 5, 10), "FIRED")]
    assert s.fired == 1


async def test_a_master_that_may_not_fire_fires_nothing_and_does_not_spin(
    ctx: AppContext, clock: Clock
) -> None:
    schedule_id = await online_schedule(ctx, ScheduleSpec(cron="0 10 * * *"))
    may_fire = [True]
    s = scheduler(ctx, enabled=lambda: may_fire[0])
    await s.pass_once()
    may_fire[0] = False  # registry session SUSPENDED, or the master is between epochs

    clock.at = utc(2026, 1, 5, 10, 0, 5)
    assert await s.pass_once() == 0
    # The fire time is overdue, but the loop does not wake at 0 s over and over meanwhile.
    assert s.sleep_time() == REFRESH_S
    assert await fired(ctx, schedule_id) == []

    may_fire[0] = True  # the session is confirmed: the (on-time) fire happens now
    assert s.sleep_time() == 0.0
    assert await s.pass_once() == 1
    assert await fired(ctx, schedule_id) == [(utc(2026, 1, 5, 10), "FIRED")]


@pytest.mark.parametrize(
    ("catch_up", "hours"),
    [
        (CatchUp.NONE, [10]),  # the missed 01:00..09:00 skipped
        (CatchUp.LATEST, [9, 10]),
        (CatchUp.ALL, [7, 8, 9, 10]),  # the newest 3 (the cap) of the 9 missed
    ],
)
async def test_catch_up_after_downtime(
    ctx: AppContext, clock: Clock, catch_up: CatchUp, hours: list[int]
) -> None:
    clock.at = utc(2026, 1, 5, 0, 0, 30)
    spec = ScheduleSpec(cron="0 * * * *", catch_up=catch_up, catch_up_cap=3)
    schedule_id = await online_schedule(ctx, spec)

    clock.at = utc(2026, 1, 5, 10)  # every master was down from 00:00:30 until now
    s = scheduler(ctx, enabled=lambda: True)

    assert await s.pass_once() == len(hours)
    assert await fired(ctx, schedule_id) == [(utc(2026, 1, 5, h), "FIRED") for h in hours]
    clock.at = utc(2026, 1, 5, 10, 30)
    assert await s.pass_once() == 0


async def test_two_masters_that_both_own_a_schedule_start_one_run_per_fire_time(
    ctx: AppContext, clock: Clock
) -> None:
    schedule_id = await online_schedule(ctx, ScheduleSpec(cron="*/10 * * * *"))
    # For a moment both think the schedule is theirs (the share moved; one has not seen it yet).
    a = scheduler(ctx, enabled=lambda: True)
    b = scheduler(ctx, enabled=lambda: True)
    # A master whose slot does not hold the schedule never fires it.
    other = scheduler(ctx, slot=(schedule_id % 2 ^ 1, 2), enabled=lambda: True)
    for s in (a, b, other):
        await s.pass_once()

    for minute in (0, 10, 20):
        clock.at = utc(2026, 1, 5, 10, minute, 1)
        await a.pass_once()
        await b.pass_once()
        await other.pass_once()

    assert a.fired + b.fired == 3
    assert other.fired == 0
    assert await fired(ctx, schedule_id) == [(utc(2026, 1, 5, 10, m), "FIRED") for m in (0, 10, 20)]


# Daily crons across each zone's spring-forward and fall-back nights of 2026: a local time the
# zone skips is skipped (no run that day), one it repeats fires once, at its first occurrence.
# Per case: zone, cron, when it goes online and the fire times expected (UTC, 2026).
DST = {
    "berlin-spring-forward": (
        "Europe/Berlin", "30 2 * * *", "03-27 12:00", "03-28 01:30", "03-30 00:30", "03-31 00:30"
    ),
    "berlin-fall-back": (
        "Europe/Berlin", "30 2 * * *", "10-23 12:00", "10-24 00:30", "10-25 00:30", "10-26 01:30"
    ),
    "new-york-spring-forward": (
        "America/New_York", "30 2 * * *", "03-06 12:00", "03-07 07:30", "03-09 06:30", "03-10 06:30"
    ),
    "new-york-fall-back": (
        "America/New_York", "30 1 * * *", "10-30 12:00", "10-31 05:30", "11-01 05:30", "11-02 06:30"
    ),
}  # fmt: skip


def in_2026(text: str) -> datetime:
    return datetime.strptime(f"2026-{text}", "%Y-%m-%d %H:%M").replace(tzinfo=UTC)


@pytest.mark.parametrize("case", DST)
async def test_dst_nights(ctx: AppContext, clock: Clock, case: str) -> None:
    zone, cron, start, *fires = DST[case]
    expected = [in_2026(f) for f in fires]
    clock.at = in_2026(start)
    schedule_id = await online_schedule(ctx, ScheduleSpec(cron=cron, time_zone=zone))
    s = scheduler(ctx, enabled=lambda: True)
    await s.pass_once()

    for _ in expected:  # wakes exactly at each fire time the queue holds, as the loop sleeps
        earliest = s.queue.earliest()
        assert earliest is not None
        clock.at = earliest
        assert await s.pass_once() == 1
        # A second look a minute later (the repeated hour's second 01:30 or 02:30 is still to
        # come on a fall-back night) fires nothing more.
        clock.at = earliest + timedelta(minutes=61)
        assert await s.pass_once() == 0

    got = await fired(ctx, schedule_id)
    assert got == [(when, "FIRED") for when in expected]
    local = [when.astimezone(ZoneInfo(zone)).strftime("%m-%d %H:%M") for when in expected]
    assert len(set(local)) == len(local)


async def test_a_changed_cron_counts_from_the_change_and_fires_nothing_retroactively(
    ctx: AppContext, clock: Clock
) -> None:
    clock.at = utc(2026, 1, 5, 1)
    schedule_id = await online_schedule(ctx, ScheduleSpec(cron="0 2 * * *"))
    s = scheduler(ctx, enabled=lambda: True)
    await s.pass_once()
    clock.at = utc(2026, 1, 5, 2)
    assert await s.pass_once() == 1

    # At 10:00 the cron becomes 08:00: today's 08:00 was never a fire time of this schedule, so
    # it is not a missed one to catch up (catch-up LATEST would have fired it at once).
    clock.at = utc(2026, 1, 5, 10)
    spec = ScheduleSpec(cron="0 8 * * *", catch_up=CatchUp.LATEST)
    await transact(ctx, lambda tx: schedules.update(tx, schedule_id, spec, timedelta(seconds=1)))
    s.changed(schedule_id)
    assert await s.pass_once() == 0
    assert s.queue.earliest() == utc(2026, 1, 6, 8)

    clock.at = utc(2026, 1, 6, 8)
    assert await s.pass_once() == 1
    assert await fired(ctx, schedule_id) == [
        (utc(2026, 1, 5, 2), "FIRED"),
        (utc(2026, 1, 6, 8), "FIRED"),
    ]


async def test_a_change_through_a_master_whose_clock_is_behind_is_seen_by_the_refresh(
    ctx: AppContext, clock: Clock
) -> None:
    clock.at = utc(2026, 1, 5, 10)
    schedule_id = await online_schedule(ctx, ScheduleSpec(cron="0 * * * *"))
    owner = Scheduler(ctx, slot=lambda: (0, 1), enabled=lambda: True, refresh=5.0)
    await owner.pass_once()
    assert owner.queue.earliest() == utc(2026, 1, 5, 11)

    # Another master, its clock 20 s behind, takes a client's change at 10:00:10 (its 09:59:50).
    behind = Clock(utc(2026, 1, 5, 9, 59, 50))
    other = dataclasses.replace(ctx, clock=behind)
    spec = ScheduleSpec(cron="30 * * * *")
    await transact(other, lambda tx: schedules.update(tx, schedule_id, spec, timedelta(seconds=1)))

    clock.at = utc(2026, 1, 5, 10, 0, 20)  # the owner's next refresh reads it
    assert await owner.pass_once() == 0
    assert owner.queue.earliest() == utc(2026, 1, 5, 10, 30)


async def test_a_change_is_placed_once_though_each_refresh_reads_it_again(
    ctx: AppContext, clock: Clock
) -> None:
    placed: list[int] = []

    class Counting(Scheduler):
        def _place(self, records: Sequence[ScheduleRecord], now: datetime) -> None:
            placed.extend(r.id for r in records)
            super()._place(records, now)

    clock.at = utc(2026, 1, 5, 10)
    schedule_id = await online_schedule(ctx, ScheduleSpec(cron="0 * * * *"))
    s = Counting(ctx, slot=lambda: (0, 1), enabled=lambda: True, refresh=5.0)
    await s.pass_once()  # loads the share
    for second in (6, 12, 18):  # three refreshes within the 30 s look-back of the change
        clock.at = utc(2026, 1, 5, 10, 0, second)
        await s.pass_once()
    assert placed == [schedule_id]
    assert s.queue.earliest() == utc(2026, 1, 5, 11)
