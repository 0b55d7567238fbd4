"""Cron expressions and their fire times in a time zone, by wall clock.

Five fields (minute hour day-of-month month day-of-week), or six with seconds first, as croniter
reads them. Fire times are the wall-clock times of the zone that match, in order; then:

* a wall time that does not exist (the hour skipped when clocks spring forward) is **skipped**,
  not moved to the next valid instant (croniter would fire a 02:30 job at 03:00 that night);
* a wall time that occurs twice (the hour repeated when clocks fall back) fires **once**, at its
  first occurrence (croniter would fire it twice).

So a daily 02:30 job in Europe/Berlin does not run on the last Sunday of March and runs once on
the last Sunday of October. Times are returned as aware UTC datetimes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo

from croniter import CroniterBadDateError, croniter

MAX_LENGTH = 256
# How far ahead a fire is looked for before the cron is taken never to fire (31 February).
HORIZON_YEARS = 5


class CronError(ValueError):
    """An expression that cannot be used, with the reason."""


@dataclass(frozen=True, slots=True)
class Cron:
    expr: str
    seconds: bool  # six fields, seconds first

    def fire_times(self, after: datetime, zone: ZoneInfo) -> Iterator[datetime]:
        """The fire times strictly after ``after`` (aware), ascending, endless unless the cron
        stops matching within :data:`HORIZON_YEARS` of the last one."""
        wall = after.astimezone(zone).replace(tzinfo=None)
        it = croniter(
            self.expr,
            wall,
            second_at_beginning=self.seconds,
            max_years_between_matches=HORIZON_YEARS,
        )
        while True:
            try:
                candidate: datetime = it.get_next(datetime)
            except CroniterBadDateError:
                return
            instant = _instant(candidate, zone)
            if instant is not None and instant > after:
                yield instant

    def fires_before(self, before: datetime, zone: ZoneInfo) -> Iterator[datetime]:
        """The fire times at or before ``before``, newest first (the same rules)."""
        wall = before.astimezone(zone).replace(tzinfo=None) + timedelta(microseconds=1)
        it = croniter(
            self.expr,
            wall,
            second_at_beginning=self.seconds,
            max_years_between_matches=HORIZON_YEARS,
            is_prev=True,
        )
        while True:
            try:
                candidate: datetime = it.get_prev(datetime)
            except CroniterBadDateError:
                return
            instant = _instant(candidate, zone)
            if instant is not None and instant <= before:
                yield instant


def _instant(wall: datetime, zone: ZoneInfo) -> datetime | None:
    """The first instant showing ``wall`` in ``zone``, or None if the zone skips it."""
    first = wall.replace(tzinfo=zone, fold=0).astimezone(UTC)
    if first.astimezone(zone).replace(tzinfo=None) != wall:
        return None  # in a spring-forward gap
    return first


# Cached by expression: the scheduler compiles every changed schedule's cron on each refresh
# (10,000 schedules that just fired: each of them, every 5 s for 30 s), most of them sharing a
# few expressions; the check computes a fire time with croniter, which dominated the idle CPU.
@lru_cache(maxsize=4096)
def compile_cron(expr: str) -> Cron:
    """Checks ``expr``; raises :class:`CronError` saying what is wrong."""
    text = " ".join(expr.split())
    if not text or len(expr) > MAX_LENGTH:
        raise CronError(f"a cron expression of 5 or 6 fields, at most {MAX_LENGTH} characters")
    fields = text.split(" ")
    if len(fields) not in (5, 6):
        raise CronError(
            f"{len(fields)} fields: a cron has 5 (minute hour day month weekday) "
            "or 6 (with seconds first)"
        )
    seconds = len(fields) == 6
    if not croniter.is_valid(text, second_at_beginning=seconds):
        raise CronError(f"{text!r} is not a valid cron expression")
    cron = Cron(text, seconds)
    start = datetime(2000, 1, 1, tzinfo=UTC)
    if next(cron.fire_times(start, ZoneInfo("UTC")), None) is None:
        raise CronError(f"{text!r} never fires")
    return cron
