"""What ``app/schedules.check`` refuses before anything is stored, field by field (pure: no store,
the instant given)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from dsched.errors import InvalidArgument
from dsched_server.app.schedules import check
from dsched_server.core.schedule import ScheduleSpec, Window

NOW = datetime(2026, 11, 28, 12, tzinfo=UTC)
MINUTE = timedelta(minutes=1)


def at(year: int, month: int, day: int, hour: int, minute: int) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=UTC)


def refused(spec: ScheduleSpec, min_interval: timedelta = MINUTE) -> dict[str, str]:
    with pytest.raises(InvalidArgument) as err:
        check(spec, NOW, min_interval, "schedule")
    return {v.field: v.description for v in err.value.violations}


@pytest.mark.parametrize(
    ("spec", "field", "says"),
    [
        (ScheduleSpec(cron="61 * * * *"), "schedule.cron", "not a valid cron"),
        (ScheduleSpec(cron="0 0 0 * * * * *"), "schedule.cron", "8 fields"),
        (ScheduleSpec(cron="0 0 30 2 *"), "schedule.cron", "never fires"),
        (ScheduleSpec(cron="*/20 * * * * *"), "schedule.cron", "20 s apart"),
        (
            ScheduleSpec(cron="0 2 * * *", window=Window(NOW, NOW - MINUTE)),
            "schedule.end_time",
            "before start_time",
        ),
        (
            ScheduleSpec(cron="0 2 * * *", window=Window(end=NOW - timedelta(days=400))),
            "schedule.end_time",
            "no fire time between 2026-11-28 12:00:00 UTC and end_time",
        ),
        (  # the window is in the future but holds no fire time: 00:01 to 00:59, hourly
            ScheduleSpec(
                cron="0 * * * *", window=Window(at(2030, 1, 1, 0, 1), at(2030, 1, 1, 0, 59))
            ),
            "schedule.end_time",
            "the next is 2030-01-01 01:00:00 UTC",
        ),
    ],
)
def test_refused_with_the_field(spec: ScheduleSpec, field: str, says: str) -> None:
    violations = refused(spec)
    assert list(violations) == [field]
    assert says in violations[field]


@pytest.mark.parametrize(
    "spec",
    [
        ScheduleSpec(cron="0 2 * * *", time_zone="Europe/Berlin"),
        ScheduleSpec(cron="*/2 * * * * *"),  # at the 1 s minimum
        # A window that holds one fire time, at its very end.
        ScheduleSpec(cron="0 * * * *", window=Window(at(2030, 1, 1, 0, 1), at(2030, 1, 1, 1, 0))),
        ScheduleSpec(cron="0 0 29 2 *"),  # leap days: the next is 2028-02-29, within 5 years
    ],
)
def test_accepted(spec: ScheduleSpec) -> None:
    assert check(spec, NOW, timedelta(seconds=1), "schedule").expr == " ".join(spec.cron.split())
