"""Cron fire times by wall clock: a skipped local time is skipped, a repeated one fires once."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from dsched_server.core.cron import CronError, compile_cron

BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")


def local(times: list[datetime], zone: ZoneInfo) -> list[str]:
    return [t.astimezone(zone).strftime("%m-%d %H:%M %Z") for t in times]


def fires(expr: str, after: datetime, zone: ZoneInfo, n: int) -> list[datetime]:
    return list(itertools.islice(compile_cron(expr).fire_times(after, zone), n))


def test_spring_forward_skips_the_missing_time_in_berlin() -> None:
    got = fires("30 2 * * *", datetime(2026, 3, 27, tzinfo=UTC), BERLIN, 3)
    assert local(got, BERLIN) == ["03-27 02:30 CET", "03-28 02:30 CET", "03-30 02:30 CEST"]


def test_fall_back_fires_once_in_new_york() -> None:
    got = fires("30 1 * * *", datetime(2026, 10, 31, 12, tzinfo=UTC), NEW_YORK, 3)
    assert local(got, NEW_YORK) == ["11-01 01:30 EDT", "11-02 01:30 EST", "11-03 01:30 EST"]


def test_an_hourly_cron_across_fall_back_fires_each_wall_time_once() -> None:
    got = fires("0 * * * *", datetime(2026, 11, 1, 4, tzinfo=UTC), NEW_YORK, 4)  # 00:00 EDT
    assert local(got, NEW_YORK) == [
        "11-01 01:00 EDT",
        "11-01 02:00 EST",
        "11-01 03:00 EST",
        "11-01 04:00 EST",
    ]
    assert got[1] - got[0] == timedelta(hours=2)  # 01:00 EDT to 02:00 EST


def test_an_hourly_cron_across_spring_forward_in_berlin() -> None:
    got = fires("0 * * * *", datetime(2026, 3, 29, 0, 30, tzinfo=UTC), BERLIN, 3)  # 01:30 CET
    assert local(got, BERLIN) == ["03-29 03:00 CEST", "03-29 04:00 CEST", "03-29 05:00 CEST"]


def test_six_fields_have_seconds_first() -> None:
    got = fires("*/20 * * * * *", datetime(2026, 1, 1, tzinfo=UTC), ZoneInfo("UTC"), 3)
    assert [t.second for t in got] == [20, 40, 0]


def test_fire_times_are_strictly_after_the_start() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    assert fires("0 0 * * *", start, ZoneInfo("UTC"), 1) == [datetime(2026, 1, 2, tzinfo=UTC)]


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        ("", "5 or 6 fields"),
        ("* * * *", "4 fields"),
        ("0 0 * * * * * *", "8 fields"),
        ("61 * * * *", "not a valid"),
        ("* 24 * * *", "not a valid"),
        ("* * 32 * *", "not a valid"),
        ("* * * 13 *", "not a valid"),
        ("0 0 31 2 *", "never fires"),
        ("0 0 30 2 *", "never fires"),
        ("x" * 300, "at most 256"),
    ],
)
def test_refused(expr: str, message: str) -> None:
    with pytest.raises(CronError, match=message):
        compile_cron(expr)
