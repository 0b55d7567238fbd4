"""The DEPENDENT task's windows, item results, AND/OR and verdicts, at calendar boundaries."""

from __future__ import annotations

import itertools
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from dsched.dependency import DATE_VALUES, PREVIOUS_CYCLE, Cycle, DependencyFailure, Relation
from dsched_server.core.dependent import (
    Candidate,
    DependencyError,
    Interval,
    Result,
    Verdict,
    combine,
    item_result,
    pick,
    verdict,
    windows,
)

BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")


def at(text: str, zone: ZoneInfo = BERLIN) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=zone)


def days(cycle: Cycle, value: str, when: str, zone: ZoneInfo = BERLIN) -> list[date]:
    """The local days a day/week/month window covers (each interval must be exactly one day)."""
    found = []
    for interval in windows(cycle, value, at(when, zone), zone):
        start = interval.start.astimezone(zone)
        assert (start.hour, start.minute) == (0, 0)
        assert interval.end.astimezone(zone) == datetime.combine(
            start.date() + timedelta(days=1), datetime.min.time(), zone
        )
        found.append(start.date())
    return found


def d(text: str) -> date:
    return date.fromisoformat(text)


def span(first: str, last: str) -> list[date]:
    a, b = d(first), d(last)
    return [a + timedelta(days=n) for n in range((b - a).days + 1)]


DAY_TABLE = [
    # (value, schedule time, expected local days)
    ("today", "2026-03-01 02:00", [d("2026-03-01")]),
    ("last1Days", "2026-03-01 02:00", [d("2026-02-28")]),
    ("last1Days", "2028-03-01 02:00", [d("2028-02-29")]),  # leap year
    ("last1Days", "2027-01-01 00:00", [d("2026-12-31")]),  # year boundary at midnight
    ("last2Days", "2027-01-01 23:59", span("2026-12-30", "2026-12-31")),
    ("last3Days", "2026-03-02 10:00", span("2026-02-27", "2026-03-01")),
    ("last7Days", "2027-01-03 02:00", span("2026-12-27", "2027-01-02")),
]

WEEK_TABLE = [
    # 2026-01-01 is a Thursday; 2027-01-04 a Monday
    ("thisWeek", "2026-01-01 02:00", span("2025-12-29", "2026-01-01")),
    ("thisWeek", "2027-01-04 02:00", [d("2027-01-04")]),
    ("thisWeek", "2027-01-03 23:00", span("2026-12-28", "2027-01-03")),  # Sunday ends the week
    ("lastWeek", "2026-01-01 02:00", span("2025-12-22", "2025-12-28")),
    ("lastWeek", "2027-01-04 00:00", span("2026-12-28", "2027-01-03")),
    ("lastMonday", "2026-01-01 02:00", [d("2025-12-22")]),
    ("lastSunday", "2026-01-01 02:00", [d("2025-12-28")]),
    ("lastThursday", "2026-03-02 02:00", [d("2026-02-26")]),
]

MONTH_TABLE = [
    ("thisMonth", "2026-03-03 02:00", span("2026-03-01", "2026-03-03")),
    ("thisMonth", "2026-03-01 00:00", [d("2026-03-01")]),
    ("thisMonthBegin", "2026-12-31 23:00", [d("2026-12-01")]),
    ("thisMonthEnd", "2028-02-10 02:00", [d("2028-02-29")]),
    ("thisMonthEnd", "2026-12-10 02:00", [d("2026-12-31")]),
    ("lastMonth", "2026-03-15 02:00", span("2026-02-01", "2026-02-28")),
    ("lastMonth", "2027-01-01 00:00", span("2026-12-01", "2026-12-31")),
    ("lastMonthBegin", "2027-01-31 02:00", [d("2026-12-01")]),
    ("lastMonthEnd", "2028-03-01 02:00", [d("2028-02-29")]),
    ("lastMonthEnd", "2026-05-31 02:00", [d("2026-04-30")]),
]


@pytest.mark.parametrize(("value", "when", "expected"), DAY_TABLE)
def test_day_windows(value: str, when: str, expected: list[date]) -> None:
    assert days(Cycle.DAY, value, when) == expected


@pytest.mark.parametrize(("value", "when", "expected"), WEEK_TABLE)
def test_week_windows(value: str, when: str, expected: list[date]) -> None:
    assert days(Cycle.WEEK, value, when) == expected


@pytest.mark.parametrize(("value", "when", "expected"), MONTH_TABLE)
def test_month_windows(value: str, when: str, expected: list[date]) -> None:
    assert days(Cycle.MONTH, value, when) == expected


class TestDaylightSaving:
    def test_a_spring_forward_day_is_23_hours(self) -> None:
        # Berlin: 2026-03-29 02:00 -> 03:00
        (window,) = windows(Cycle.DAY, "last1Days", at("2026-03-30 02:00"), BERLIN)
        assert window.end - window.start == timedelta(hours=23)

    def test_a_fall_back_day_is_25_hours(self) -> None:
        # New York: 2026-11-01 02:00 -> 01:00
        (window,) = windows(Cycle.DAY, "today", at("2026-11-01 12:00", NEW_YORK), NEW_YORK)
        assert window.end - window.start == timedelta(hours=25)

    def test_the_days_of_a_week_across_dst_are_contiguous(self) -> None:
        intervals = windows(Cycle.WEEK, "lastWeek", at("2026-04-01 02:00"), BERLIN)
        assert len(intervals) == 7
        for before, after in itertools.pairwise(intervals):
            assert before.end == after.start

    def test_hours_back_across_fall_back_count_the_repeated_hour(self) -> None:
        # New York 2026-11-01: 01:00-02:00 happens twice; at 02:30 (EST) the last 2 hours are
        # the second 01:00 hour (EST) and the first one (EDT).
        now = datetime(2026, 11, 1, 2, 30, tzinfo=NEW_YORK)
        intervals = windows(Cycle.HOUR, "last2Hours", now, NEW_YORK)
        assert [i.start.astimezone(NEW_YORK).hour for i in intervals] == [1, 1]
        assert intervals[1].start - intervals[0].start == timedelta(hours=1)

    def test_hours_back_across_spring_forward_skip_the_missing_hour(self) -> None:
        now = datetime(2026, 3, 8, 3, 30, tzinfo=NEW_YORK)  # 02:00-03:00 does not exist
        intervals = windows(Cycle.HOUR, "last2Hours", now, NEW_YORK)
        assert [i.start.astimezone(NEW_YORK).hour for i in intervals] == [0, 1]


class TestHourWindows:
    def test_current_hour(self) -> None:
        (window,) = windows(Cycle.HOUR, "currentHour", at("2026-06-01 10:42"), BERLIN)
        assert window == Interval(at("2026-06-01 10:00"), at("2026-06-01 11:00"))

    def test_last_hours_are_whole_hours_before_the_current_one(self) -> None:
        intervals = windows(Cycle.HOUR, "last3Hours", at("2027-01-01 01:15"), BERLIN)
        starts = [i.start.astimezone(BERLIN) for i in intervals]
        assert starts == [at("2026-12-31 22:00"), at("2026-12-31 23:00"), at("2027-01-01 00:00")]

    @pytest.mark.parametrize("when", ["2026-06-01 00:10", "2026-06-01 13:00", "2026-06-01 23:59"])
    def test_last_24_hours_is_01_00_yesterday_to_01_00_today(self, when: str) -> None:
        intervals = windows(Cycle.HOUR, "last24Hours", at(when), BERLIN)
        assert len(intervals) == 24
        assert intervals[0].start == at("2026-05-31 01:00")
        assert intervals[-1].end == at("2026-06-01 01:00")

    def test_a_half_hour_zone_cuts_local_hours(self) -> None:
        kolkata = ZoneInfo("Asia/Kolkata")
        (window,) = windows(Cycle.HOUR, "last1Hour", at("2026-06-01 10:42", kolkata), kolkata)
        assert window.start == at("2026-06-01 09:00", kolkata)


class TestValidation:
    def test_a_value_of_another_cycle_is_refused(self) -> None:
        with pytest.raises(DependencyError) as caught:
            windows(Cycle.DAY, "lastWeek", at("2026-06-01 10:00"), BERLIN)
        assert caught.value.field == "date_value"

    def test_a_naive_schedule_time_is_refused(self) -> None:
        with pytest.raises(DependencyError):
            windows(Cycle.DAY, "today", datetime(2026, 6, 1), BERLIN)

    def test_every_previous_cycle_window_ends_before_the_schedule_time(self) -> None:
        when = at("2026-03-04 00:30")
        for cycle, values in DATE_VALUES.items():
            for value in values:
                if value in PREVIOUS_CYCLE:
                    assert windows(cycle, value, when, BERLIN)[-1].end <= when, value


def run(instance_id: int, when: datetime | None, result: Result, start: datetime) -> Candidate:
    return Candidate(instance_id=instance_id, schedule_time=when, start_time=start, result=result)


T0 = datetime(2026, 6, 1, 2, tzinfo=UTC)
DAY_1 = Interval(T0, T0 + timedelta(days=1))
DAY_2 = Interval(T0 + timedelta(days=1), T0 + timedelta(days=2))


class TestItems:
    def test_the_newest_run_in_the_interval_speaks(self) -> None:
        older = run(1, T0, Result.FAILED, T0)
        newer = run(7, T0, Result.SUCCESS, T0 + timedelta(hours=3))
        assert pick([newer, older], DAY_1) == newer

    def test_a_manual_run_counts_by_its_start_time(self) -> None:
        manual = run(3, None, Result.SUCCESS, T0 + timedelta(hours=1))
        assert pick([manual], DAY_1) == manual
        assert pick([manual], DAY_2) is None

    def test_every_interval_must_succeed(self) -> None:
        ok = run(1, T0, Result.SUCCESS, T0)
        assert item_result([ok], [DAY_1]) is Result.SUCCESS
        assert item_result([ok], [DAY_1, DAY_2]) is Result.WAITING

    def test_waiting_then_succeeded_when_the_upstream_finishes(self) -> None:
        running = run(1, T0, Result.WAITING, T0)
        assert item_result([running], [DAY_1]) is Result.WAITING
        done = run(1, T0, Result.SUCCESS, T0)
        assert item_result([done], [DAY_1]) is Result.SUCCESS

    def test_a_failure_fails_the_item_even_if_another_day_waits(self) -> None:
        failed = run(1, T0, Result.FAILED, T0)
        assert item_result([failed], [DAY_1, DAY_2]) is Result.FAILED


S, W, F = Result.SUCCESS, Result.WAITING, Result.FAILED


@pytest.mark.parametrize(
    ("relation", "results", "expected"),
    [
        (Relation.AND, [S, S], S),
        (Relation.AND, [S, W], W),
        (Relation.AND, [W, F], F),
        (Relation.AND, [], S),
        (Relation.OR, [F, S], S),
        (Relation.OR, [F, W], W),
        (Relation.OR, [F, F], F),
        (Relation.OR, [], F),
    ],
)
def test_combine(relation: Relation, results: list[Result], expected: Result) -> None:
    assert combine(relation, results) is expected


def test_groups_nest() -> None:
    # (a AND b) OR (c AND d), with a failed and c, d succeeded
    group_1 = combine(Relation.AND, [F, S])
    group_2 = combine(Relation.AND, [S, S])
    assert combine(Relation.OR, [group_1, group_2]) is S


class TestVerdict:
    limit = timedelta(minutes=10)

    def test_success_succeeds(self) -> None:
        assert verdict(S, DependencyFailure.FAIL, waited=timedelta(), failure_wait=self.limit) is (
            Verdict.SUCCEED
        )

    def test_waiting_waits(self) -> None:
        waited = timedelta(days=9)
        assert verdict(W, DependencyFailure.FAIL, waited=waited, failure_wait=self.limit) is (
            Verdict.WAIT
        )

    def test_fail_now(self) -> None:
        assert verdict(F, DependencyFailure.FAIL, waited=timedelta(), failure_wait=self.limit) is (
            Verdict.FAIL
        )

    def test_keep_waiting_until_the_limit(self) -> None:
        wait = DependencyFailure.WAIT
        early = verdict(F, wait, waited=timedelta(minutes=9), failure_wait=self.limit)
        late = verdict(F, wait, waited=timedelta(minutes=10), failure_wait=self.limit)
        assert (early, late) == (Verdict.WAIT, Verdict.FAIL)
