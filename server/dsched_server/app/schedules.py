"""Schedules: create, update, delete, put online or offline, preview (README "Schedules";
``core/schedule.py`` decides, ``store/schedules.py`` keeps, ``app/firing.py`` fires them).
"""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from dsched.errors import FailedPrecondition, FieldViolation, InvalidArgument
from dsched.options import ReleaseState
from dsched_server.app.transaction import Transaction
from dsched_server.core.cron import Cron, CronError, compile_cron
from dsched_server.core.schedule import (
    ScheduleRecord,
    ScheduleSpec,
    next_fire,
)
from dsched_server.store import definitions
from dsched_server.store import schedules as store

HORIZON = timedelta(days=5 * 365)  # a schedule must fire within this from now
INTERVAL_SAMPLE = 20  # consecutive fire times whose gaps are checked against the minimum


def check(spec: ScheduleSpec, now: datetime, min_interval: timedelta, field: str) -> Cron:
    """The compiled cron of a spec that can be honoured; INVALID_ARGUMENT naming the field
    (``<field>.cron``, ``.end_time``) otherwise: a cron that does not parse, never fires within
    5 years (from now or its start) or fires more often than ``min_interval``, an end before the
    start, or a window with no fire time left in it. The time zone is checked by the API."""
    bad: list[FieldViolation] = []
    cron: Cron | None = None
    try:
        cron = compile_cron(spec.cron)
    except CronError as err:
        bad.append(FieldViolation(f"{field}.cron", str(err)))
    w = spec.window
    if w.start is not None and w.end is not None and w.end < w.start:
        bad.append(FieldViolation(f"{field}.end_time", "is before start_time"))
    if cron is not None and not bad:
        zone = ZoneInfo(spec.time_zone)
        start = max(now, w.start) if w.start is not None else now
        upcoming = list(itertools.islice(cron.fire_times(start, zone), INTERVAL_SAMPLE))
        if not upcoming or upcoming[0] - start > HORIZON:
            bad.append(FieldViolation(f"{field}.cron", "never fires within 5 years"))
        elif w.end is not None and upcoming[0] > w.end:
            # An online schedule that can never fire again looks alive and does nothing.
            bad.append(
                FieldViolation(
                    f"{field}.end_time",
                    f"no fire time between {start:%Y-%m-%d %H:%M:%S} UTC and end_time "
                    f"(the next is {upcoming[0]:%Y-%m-%d %H:%M:%S} UTC)",
                )
            )
        gaps = [b - a for a, b in itertools.pairwise(upcoming)]
        if gaps and min(gaps) < min_interval:
            bad.append(
                FieldViolation(
                    f"{field}.cron",
                    f"fires {min(gaps).total_seconds():g} s apart; this master's minimum "
                    f"interval is {min_interval.total_seconds():g} s",
                )
            )
    if bad:
        raise InvalidArgument("the schedule cannot be honoured", violations=bad)
    assert cron is not None
    return cron


async def create(
    tx: Transaction, project: str, workflow: str, spec: ScheduleSpec, min_interval: timedelta
) -> ScheduleRecord:
    check(spec, tx.now, min_interval, "schedule")
    record = await definitions.get_workflow(tx.conn, project, workflow)
    schedule_id = await store.create(tx.conn, record, spec, tx.now)
    return await store.get(tx.conn, schedule_id)


async def update(
    tx: Transaction, schedule_id: int, spec: ScheduleSpec, min_interval: timedelta
) -> ScheduleRecord:
    cron = check(spec, tx.now, min_interval, "schedule")
    await store.lock(tx.conn, schedule_id)
    current = await store.get(tx.conn, schedule_id)
    upcoming = _next(cron, spec, tx.now) if current.online else None
    # New fire times count from now, as when going online: the old spec's last fire time would
    # make the new cron's times since then look missed, and catch-up would fire them at once.
    retimed = _timing(current.spec) != _timing(spec)
    counts_from = tx.now if current.online and retimed else None
    await store.update_spec(tx.conn, schedule_id, spec, upcoming, tx.now, counts_from)
    return await store.get(tx.conn, schedule_id)


def _timing(spec: ScheduleSpec) -> tuple[object, ...]:
    """What decides a schedule's fire times (not what its runs do)."""
    return (" ".join(spec.cron.split()), spec.time_zone, spec.window)


async def set_online(tx: Transaction, schedule_id: int, online: bool) -> ScheduleRecord:
    await store.lock(tx.conn, schedule_id)
    current = await store.get(tx.conn, schedule_id)
    upcoming = None
    if online:
        workflow = await definitions.get_workflow(tx.conn, current.project, current.workflow)
        if workflow.release_state is not ReleaseState.ONLINE:
            raise FailedPrecondition(
                f"workflow {current.project}/{current.workflow} is OFFLINE; put it online "
                "before its schedule",
                reason="WORKFLOW_OFFLINE",
                metadata={"project": current.project, "workflow": current.workflow},
            )
        upcoming = _next(compile_cron(current.spec.cron), current.spec, tx.now)
    await store.set_online(tx.conn, schedule_id, online, upcoming, tx.now)
    return await store.get(tx.conn, schedule_id)


async def delete(tx: Transaction, schedule_id: int) -> None:
    await store.delete_schedule(tx.conn, schedule_id)


def preview(cron: Cron, spec: ScheduleSpec, now: datetime, count: int) -> list[datetime]:
    out: list[datetime] = []
    after = now
    while len(out) < count:
        upcoming = next_fire(cron, ZoneInfo(spec.time_zone), after, spec.window)
        if upcoming is None:
            break
        out.append(upcoming)
        after = upcoming
    return out


def _next(cron: Cron, spec: ScheduleSpec, now: datetime) -> datetime | None:
    return next_fire(cron, ZoneInfo(spec.time_zone), now, spec.window)
