"""The DEPENDENT task's pure logic: date windows relative to the schedule time, the result of one
dependency item, AND/OR groups, and the verdict (succeed, fail, keep waiting).

Windows follow DolphinScheduler's date values, so a DolphinScheduler user's dependency means the
same here. Each value maps to a list of intervals (half-open ``[start, end)``, aware datetimes);
the item holds when every interval has a successful run of the target. Days, weeks and months are
calendar periods in the workflow's time zone (a day across a daylight-saving change is 23 or 25
hours long, never a 24-hour slice that slips by an hour); hours are exact hours on the time line
(counted back from the start of the schedule time's local hour, so an autumn hour that repeats
counts twice). Weeks start on Monday.

The catalogue of date values per cycle is the SDK's (``dsched.dependency``), which validates
definitions on both sides.

``last24Hours`` is DolphinScheduler's own window, whatever the schedule time's hour: the 24 hours
from 01:00 yesterday to 01:00 today. ``thisWeek`` and ``thisMonth`` run up to and including the
schedule time's day.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from zoneinfo import ZoneInfo

from dsched.dependency import (
    WEEKDAYS,
    Cycle,
    DependencyFailure,
    DependencyItem,
    DependentSpec,
    Relation,
    date_value_violation,
)

HOUR = timedelta(hours=1)


class Result(enum.Enum):
    SUCCESS = "success"
    WAITING = "waiting"
    FAILED = "failed"


class DependencyError(ValueError):
    """A dependency that cannot be evaluated; ``field`` names the item's field at fault."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True, slots=True)
class Interval:
    """Both ends in UTC: Python compares and subtracts two datetimes of the *same* zone by their
    wall clocks, which across a daylight-saving change is off by the shift."""

    start: datetime  # inclusive
    end: datetime  # exclusive

    def __contains__(self, when: datetime) -> bool:
        return self.start <= when.astimezone(UTC) < self.end


def check_date_value(cycle: Cycle, date_value: str) -> None:
    bad = date_value_violation("date_value", cycle, date_value)
    if bad is not None:
        raise DependencyError("date_value", bad.description)


def windows(
    cycle: Cycle, date_value: str, schedule_time: datetime, zone: ZoneInfo
) -> list[Interval]:
    """The intervals ``date_value`` covers for a run whose schedule time is ``schedule_time``."""
    check_date_value(cycle, date_value)
    if schedule_time.tzinfo is None:
        raise DependencyError("schedule_time", "the schedule time must carry a time zone")
    local = schedule_time.astimezone(zone)
    if cycle is Cycle.HOUR:
        return _hours(date_value, local)
    day = local.date()
    return [_day(d, zone) for d in _days(date_value, day)]


def _hours(date_value: str, local: datetime) -> list[Interval]:
    # Counted back on the time line from the start of the local hour: an hour is always 60
    # minutes, and in every zone with whole- or half-hour offsets each step lands on a local
    # hour boundary again.
    top = local.replace(minute=0, second=0, microsecond=0).astimezone(UTC)
    if date_value == "currentHour":
        return [Interval(top, top + HOUR)]
    if date_value == "last24Hours":
        end = _day(local.date(), local.tzinfo).start + HOUR
        return [Interval(end - n * HOUR, end - (n - 1) * HOUR) for n in range(24, 0, -1)]
    count = int(date_value.removeprefix("last").removesuffix("Hours").removesuffix("Hour"))
    return [Interval(top - n * HOUR, top - (n - 1) * HOUR) for n in range(count, 0, -1)]


def _days(date_value: str, day: date) -> list[date]:
    one = timedelta(days=1)
    monday = day - timedelta(days=day.weekday())
    first_of_month = day.replace(day=1)
    last_month_end = first_of_month - one
    if date_value == "today":
        return [day]
    if date_value.endswith("Days"):
        count = int(date_value.removeprefix("last").removesuffix("Days"))
        return [day - n * one for n in range(count, 0, -1)]
    if date_value == "thisWeek":
        return _span(monday, day)
    if date_value == "lastWeek":
        return _span(monday - 7 * one, monday - one)
    if date_value.removeprefix("last") in WEEKDAYS:
        return [monday - 7 * one + WEEKDAYS.index(date_value.removeprefix("last")) * one]
    if date_value == "thisMonth":
        return _span(first_of_month, day)
    if date_value == "thisMonthBegin":
        return [first_of_month]
    if date_value == "thisMonthEnd":
        next_first = (first_of_month + 32 * one).replace(day=1)
        return [next_first - one]
    if date_value == "lastMonth":
        return _span(last_month_end.replace(day=1), last_month_end)
    if date_value == "lastMonthBegin":
        return [last_month_end.replace(day=1)]
    return [last_month_end]  # lastMonthEnd: check_date_value admitted nothing else


def _span(first: date, last: date) -> list[date]:
    return [first + timedelta(days=n) for n in range((last - first).days + 1)]


def _day(day: date, zone: tzinfo | None) -> Interval:
    # Midnight exists in every zone dsched knows except a few historical ones where a DST change
    # happened at midnight; fold=0 then picks the instant after the gap, which is the day's start.
    start = datetime.combine(day, time(), zone).astimezone(UTC)
    end = datetime.combine(day + timedelta(days=1), time(), zone).astimezone(UTC)
    return Interval(start, end)


@dataclass(frozen=True, slots=True)
class Candidate:
    """A run of the target workflow (or the target task's instance in that run)."""

    instance_id: int
    schedule_time: datetime | None  # None: a manual run from before schedule times existed
    start_time: datetime
    result: Result  # SUCCESS, FAILED, or WAITING while it has not finished


def pick(candidates: Iterable[Candidate], interval: Interval) -> Candidate | None:
    """The run that speaks for ``interval``: of those whose schedule time (or, lacking one, start
    time) falls in it, the newest (highest id), as DolphinScheduler takes it."""
    best: Candidate | None = None
    for c in candidates:
        when = c.schedule_time if c.schedule_time is not None else c.start_time
        if when in interval and (best is None or c.instance_id > best.instance_id):
            best = c
    return best


def item_result(candidates: Sequence[Candidate], intervals: Sequence[Interval]) -> Result:
    """One dependency item: every interval needs a successful run; a failed one fails the item at
    once, a missing or unfinished one keeps it waiting."""
    results = []
    for interval in intervals:
        found = pick(candidates, interval)
        results.append(Result.WAITING if found is None else found.result)
    return combine(Relation.AND, results)


def combine(relation: Relation, results: Iterable[Result]) -> Result:
    """AND: a failure fails, else a wait waits, else success. OR: a success succeeds, else a
    wait waits, else failure. An empty group succeeds under AND and fails under OR."""
    seen = set(results)
    if relation is Relation.AND:
        if Result.FAILED in seen:
            return Result.FAILED
        return Result.WAITING if Result.WAITING in seen else Result.SUCCESS
    if Result.SUCCESS in seen:
        return Result.SUCCESS
    return Result.WAITING if Result.WAITING in seen else Result.FAILED


class Verdict(enum.Enum):
    SUCCEED = "succeed"
    FAIL = "fail"
    WAIT = "wait"


def verdict(
    result: Result, on_failure: DependencyFailure, *, waited: timedelta, failure_wait: timedelta
) -> Verdict:
    """What the task does with the combined ``result`` after ``waited`` since it started."""
    if result is Result.SUCCESS:
        return Verdict.SUCCEED
    if result is Result.WAITING:
        return Verdict.WAIT
    if on_failure is DependencyFailure.WAIT and waited < failure_wait:
        return Verdict.WAIT
    return Verdict.FAIL


@dataclass(frozen=True, slots=True)
class Judgement:
    result: Result
    detail: str  # what holds the task up (or failed it); empty on success


def judge(
    spec: DependentSpec,
    found: Mapping[DependencyItem, Sequence[Candidate] | None],
    schedule_time: datetime,
    zone: ZoneInfo,
) -> Judgement:
    """The whole task: each item judged over its windows, items combined within their group,
    groups combined by the task's relation. ``found`` holds each item's runs; None: no such workflow
    (which fails the item: waiting for a workflow that does not exist would wait for ever)."""
    groups: list[Result] = []
    detail = ""
    for group in spec.groups:
        results: list[Result] = []
        for item in group.items:
            runs = found.get(item)
            if runs is None:
                result = Result.FAILED
            else:
                periods = windows(item.cycle, item.date_value, schedule_time, zone)
                result = item_result(runs, periods)
            results.append(result)
            if result is not Result.SUCCESS and not detail:
                detail = _describe(item, result, runs is None)
        groups.append(combine(group.relation, results))
    overall = combine(spec.relation, groups)
    return Judgement(overall, "" if overall is Result.SUCCESS else detail)


def _describe(item: DependencyItem, result: Result, missing: bool) -> str:
    target = f"{item.project}/{item.workflow}" + (f" task {item.task}" if item.task else "")
    if missing:
        return f"{target}: no such workflow"
    if result is Result.WAITING:
        return f"waiting for {target} to succeed for {item.date_value}"
    return f"{target} did not succeed for {item.date_value}"
