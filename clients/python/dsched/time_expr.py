"""Time expressions, the text between ``$[`` and ``]`` in a parameter value: DolphinScheduler's
notation, parsed by hand (never ``eval``) when a workflow is submitted or a run started, evaluated
against the run's schedule time in the workflow's time zone when a task is dispatched.

The forms (``P`` is a date pattern, :mod:`dsched.date_pattern`; ``N`` an integer
expression of ``+ - * /`` and parentheses):

- ``P`` the schedule time; ``P+N`` / ``P-N`` shifted by N **days**, where N may be a fraction:
  ``$[yyyyMMdd-1]`` (yesterday), ``$[yyyy-MM-dd+7*1]`` (in a week), ``$[HHmmss-1/24]`` (an hour
  ago), ``$[HHmmss-1/24/60]`` (a minute ago).
- ``add_months(P, N)`` N months later, the day clamped to the month's length (Jan 31 + 1 ->
  Feb 28 or 29).
- ``this_day(P)`` the schedule day; ``last_day(P)`` the day before.
- ``week_first_day(P, N)`` / ``week_last_day(P, N)`` the Monday / the Sunday of the schedule
  time's Monday-to-Sunday week, N weeks later (N may be left out: 0).
- ``month_first_day(P, N)`` / ``month_last_day(P, N)`` the first / last day of the month N months
  later (N may be left out: 0).
- ``year_week(P)`` / ``year_week(P, D)`` the week of the year as ``2024-05`` (``P`` has a ``-``)
  or ``202405`` (it has none: P only chooses the separator), with weeks starting on weekday D
  (1 = Monday, the default, ... 7 = Sunday) and week 1 the first week with at least four days
  in the new year; with D = 1 that is the ISO 8601 week.
- DolphinScheduler's older helpers, N in **days**: ``month_begin(P, N)`` / ``month_end(P, N)``
  the first / last day of the month plus N days, ``week_begin(P, N)`` / ``week_end(P, N)`` the
  Monday / Sunday of the week plus N days.
- ``timestamp(E)`` the Unix time in whole seconds of any expression E above whose pattern is
  ``yyyyMMddHHmmss`` (``timestamp(yyyyMMddHHmmss-1)``); DolphinScheduler formats E and parses it
  back with that pattern, so no other works there either, and here it is refused.

The rules, where dsched deliberately differs from DolphinScheduler (whose behaviour is in
parentheses):

1. **Day arithmetic is calendar arithmetic on the local wall clock.** The whole-day part of N
   moves the local date by that many calendar days and keeps the local time; a day is a calendar
   day, not 24 hours (DolphinScheduler adds N*1440 minutes, so across a daylight-saving change
   ``$[yyyyMMdd-1]`` at 00:30 can print the day before yesterday). The fractional part of N (the
   remainder after truncating toward zero, same sign) is then added as an exact duration, truncated
   toward zero to the microsecond: ``-1/24`` is exactly one hour earlier on the absolute time
   line, even across a change (DolphinScheduler truncates to whole minutes at every step).
   ``add_months`` and the week/month helpers move by calendar days and months the same way.
   When the resulting local wall time does not exist (it falls in a spring-forward gap) it moves
   forward by the length of the gap (02:30 -> 03:30); when it occurs twice (fall-back) the
   earlier of the two instants is taken.
2. **All of it happens in the workflow's time zone** (DolphinScheduler's helpers use the
   server's default zone), so the same run gives the same values on every master.
3. **``year_week`` prints the year the week belongs to** (DolphinScheduler prints the calendar
   year, so 2024-12-30, a Monday in ISO week 1 of 2025, came out as ``2024-01``; dsched prints
   ``2025-01``).
4. **N is exact arithmetic with the usual precedence** (DolphinScheduler's ``1+1/24`` is 2/24
   days, and ``yyyyMMdd-1+2`` is the pattern ``yyyyMMdd-1`` shifted by 2 days; here they are
   25 hours and +1 day). The offset is the whole tail from the first ``+`` or ``-`` that is
   followed, after optional spaces and signs, by a digit or ``(``; a pattern that needs such
   text literally quotes it. N for months, weeks and the weekday must come out whole
   (DolphinScheduler truncates ``3/2`` months to 1 silently); a weekday outside 1-7 is refused
   (DolphinScheduler uses Monday).
5. **Everything that can be checked is checked at definition time**: the pattern, the syntax,
   division by zero, offsets beyond what the calendar can hold (more than
   :data:`MAX_DAYS` days, :data:`MAX_MONTHS` months or :data:`MAX_WEEKS` weeks), nesting deeper than
   :data:`MAX_DEPTH`, a body longer than :data:`MAX_LENGTH`. A result outside the years 1-9999
   (only possible for a schedule time near those ends) is an error at evaluation, never a crash.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from fractions import Fraction
from functools import lru_cache
from zoneinfo import ZoneInfo

from dsched.date_pattern import DatePattern, PatternError, compile_pattern

MAX_LENGTH = 256
MAX_DEPTH = 16
MAX_DIGITS = 9
MAX_DAYS = 366_000  # about 1,000 years
MAX_MONTHS = 12_000
MAX_WEEKS = 52_300
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class TimeExprError(ValueError):
    """An expression that cannot be parsed or evaluated: ``reason`` at ``position`` (0-based) of
    ``text``."""

    def __init__(self, text: str, position: int, reason: str) -> None:
        super().__init__(f"{text!r} at position {position}: {reason}")
        self.text = text
        self.position = position
        self.reason = reason

    def within(self, text: str, offset: int) -> TimeExprError:
        """The same error located in ``text``, of which this error's text starts at ``offset``."""
        return TimeExprError(text, offset + self.position, self.reason)


@dataclass(frozen=True, slots=True)
class TimeExpr:
    """A compiled expression; :meth:`evaluate` renders it for one schedule time."""

    text: str
    pattern: DatePattern
    move: Callable[[datetime], datetime]
    week_day: int = 0  # year_week only: the first day of the week, 1 = Monday
    epoch: bool = False  # timestamp(...): Unix seconds instead of the pattern

    def evaluate(self, schedule_time: datetime, zone: ZoneInfo) -> str:
        """The value for ``schedule_time`` (aware) in ``zone``."""
        if schedule_time.tzinfo is None:
            raise TypeError("the schedule time must be timezone-aware")
        try:
            local = schedule_time.astimezone(zone)
            if self.week_day:
                return _year_week(local.date(), self.week_day, "-" in self.pattern.text)
            if self.epoch:
                return str((self.move(local) - _EPOCH) // timedelta(seconds=1))
            return self.pattern.format(self.move(local))
        except (OverflowError, ValueError) as exc:
            raise TimeExprError(self.text, 0, "the result is outside the years 1-9999") from exc


# ------------------------------------------------------------------------------ calendar moves


def resolve(wall: datetime, zone: ZoneInfo) -> datetime:
    """The instant of the naive local ``wall`` time in ``zone`` (rule 1: a time in a gap moves
    forward by the gap, an ambiguous one is the earlier instant)."""
    return wall.replace(tzinfo=zone, fold=0).astimezone(UTC).astimezone(zone)


def shift_days(local: datetime, days: int) -> datetime:
    """``local`` moved by ``days`` calendar days, wall time kept."""
    if not days:
        return local  # itself: resolving again would turn the second 01:30 into the first
    zone = _zone(local)
    return resolve(local.replace(tzinfo=None) + timedelta(days=days), zone)


def shift_months(local: datetime, months: int, day: Callable[[int, int], int]) -> datetime:
    """``local`` moved by ``months`` months onto the day ``day(year, month)``, wall time kept."""
    index = local.year * 12 + local.month - 1 + months
    year, month = divmod(index, 12)
    wall = local.replace(tzinfo=None, year=year, month=month + 1, day=day(year, month + 1))
    if wall == local.replace(tzinfo=None):
        return local  # as in shift_days
    return resolve(wall, _zone(local))


def shift(local: datetime, days: Fraction) -> datetime:
    """``local`` moved by ``days`` (rule 1: whole calendar days, then the exact remainder)."""
    whole = int(days)  # toward zero
    moved = shift_days(local, whole) if whole else local
    micros = int((days - whole) * 86_400_000_000)
    if not micros:
        return moved
    return (moved.astimezone(UTC) + timedelta(microseconds=micros)).astimezone(_zone(local))


def _zone(local: datetime) -> ZoneInfo:
    assert isinstance(local.tzinfo, ZoneInfo)  # evaluate() converts into a ZoneInfo first
    return local.tzinfo


def _same_day(local: datetime) -> Callable[[int, int], int]:
    return lambda year, month: min(local.day, calendar.monthrange(year, month)[1])


def _first(year: int, month: int) -> int:
    return 1


def _last(year: int, month: int) -> int:
    return calendar.monthrange(year, month)[1]


def _year_week(day: date, week_day: int, hyphen: bool) -> str:
    start = day - timedelta(days=(day.weekday() - (week_day - 1)) % 7)
    fourth = start + timedelta(days=3)  # the week belongs to the year holding 4+ of its days
    week = (fourth - date(fourth.year, 1, 1)).days // 7 + 1
    return f"{fourth.year}{'-' if hyphen else ''}{week:02d}"


# ------------------------------------------------------------------------------ functions

Mover = Callable[[int], Callable[[datetime], datetime]]

_FUNCTIONS: dict[str, tuple[int, str, Mover]] = {
    # name -> (largest |N|, its unit, N -> move)
    "add_months": (MAX_MONTHS, "months", lambda n: lambda t: shift_months(t, n, _same_day(t))),
    "this_day": (0, "", lambda n: lambda t: t),
    "last_day": (0, "", lambda n: lambda t: shift_days(t, -1)),
    "week_first_day": (MAX_WEEKS, "weeks", lambda n: lambda t: shift_days(t, 7 * n - t.weekday())),
    "week_last_day": (
        MAX_WEEKS,
        "weeks",
        lambda n: lambda t: shift_days(t, 7 * n + 6 - t.weekday()),
    ),
    "month_first_day": (MAX_MONTHS, "months", lambda n: lambda t: shift_months(t, n, _first)),
    "month_last_day": (MAX_MONTHS, "months", lambda n: lambda t: shift_months(t, n, _last)),
    "year_week": (7, "", lambda n: lambda t: t),
    # DolphinScheduler's older helpers, N in days from the first/last day of the month or week
    "month_begin": (
        MAX_DAYS,
        "days",
        lambda n: lambda t: shift_days(shift_months(t, 0, _first), n),
    ),
    "month_end": (MAX_DAYS, "days", lambda n: lambda t: shift_days(shift_months(t, 0, _last), n)),
    "week_begin": (MAX_DAYS, "days", lambda n: lambda t: shift_days(t, n - t.weekday())),
    "week_end": (MAX_DAYS, "days", lambda n: lambda t: shift_days(t, n + 6 - t.weekday())),
    "timestamp": (0, "", lambda n: lambda t: t),  # compiled by _compile_timestamp
}
_REQUIRED_N = {"add_months", "month_begin", "month_end", "week_begin", "week_end"}
_NO_N = {"this_day", "last_day"}
_TIMESTAMP_PATTERN = "yyyyMMddHHmmss"

_CALL = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*\(")


@lru_cache(maxsize=4096)
def compile_expr(text: str) -> TimeExpr:
    """The compiled expression ``text`` (without ``$[`` ``]``); raises :class:`TimeExprError`."""
    if len(text) > MAX_LENGTH:
        raise TimeExprError(text, MAX_LENGTH, f"longer than {MAX_LENGTH} characters")
    call = _CALL.match(text)
    if call and (call.group(1) in _FUNCTIONS or "_" in call.group(1)):
        return _compile_call(text, call.group(1), call.end())
    pattern, days = _split_offset(text, 0, len(text))
    if days is not None:
        _check_range(text, _offset_start(text, 0, len(text)) or 0, days, MAX_DAYS, "days")
    step = days or Fraction(0)
    return TimeExpr(text, pattern, lambda t: shift(t, step) if step else t)


def _compile_call(text: str, name: str, start: int) -> TimeExpr:
    if name not in _FUNCTIONS:
        known = ", ".join(sorted(_FUNCTIONS))
        raise TimeExprError(text, text.index(name), f"unknown function {name!r} (known: {known})")
    close = _closing(text, start)
    if name == "timestamp":
        return _compile_timestamp(text, start, close)
    comma = _top_level_comma(text, start, close)
    end_pattern = close if comma is None else comma
    pattern, offset = _split_offset(text, start, end_pattern, strip=True)
    if offset is not None:
        raise TimeExprError(text, start, f"{name}(...) takes a pattern without an offset")
    limit, unit, mover = _FUNCTIONS[name]
    n = 0
    if comma is None and name in _REQUIRED_N:
        raise TimeExprError(text, close, f"{name}(pattern, N) needs N")
    if comma is not None:
        if name in _NO_N:
            raise TimeExprError(text, comma, f"{name}(pattern) takes no N")
        n = _whole(text, comma + 1, close, name)
    if name == "year_week":
        if comma is not None and not 1 <= n <= 7:
            raise TimeExprError(text, comma + 1, "the first day of the week is 1 (Monday) to 7")
        return TimeExpr(text, pattern, mover(0), n or 1)
    _check_range(text, (comma or 0) + 1, Fraction(n), limit, unit)
    return TimeExpr(text, pattern, mover(n))


def _compile_timestamp(text: str, start: int, close: int) -> TimeExpr:
    """``timestamp(E)``: the Unix time in seconds of expression E, whose pattern must be
    ``yyyyMMddHHmmss`` (DolphinScheduler formats E and parses the text back with that pattern,
    so no other pattern works there either)."""
    inner_text = text[start:close].strip(" ")
    offset = text.index(inner_text, start) if inner_text else start
    call = _CALL.match(inner_text)
    if call and call.group(1) in ("timestamp", "year_week"):
        raise TimeExprError(text, offset, "timestamp(...) takes a date expression")
    try:
        inner = compile_expr(inner_text)
    except TimeExprError as exc:
        raise exc.within(text, offset) from None
    if inner.pattern.text != _TIMESTAMP_PATTERN:
        raise TimeExprError(
            text, offset, f"timestamp(...) takes an expression in the pattern {_TIMESTAMP_PATTERN}"
        )
    return TimeExpr(text, inner.pattern, inner.move, epoch=True)


def _closing(text: str, start: int) -> int:
    """The index of the ``)`` closing the call opened before ``start``: outside quotes, and
    nothing but spaces after it."""
    depth, i, quoted = 1, start, False
    while i < len(text):
        char = text[i]
        if char == "'":
            quoted = not quoted
        elif not quoted and char == "(":
            depth += 1
        elif not quoted and char == ")":
            depth -= 1
            if depth == 0:
                if text[i + 1 :].strip():
                    raise TimeExprError(text, i + 1, "unexpected text after the function call")
                return i
        i += 1
    raise TimeExprError(text, start - 1, "unbalanced '(': missing ')'")


def _top_level_comma(text: str, start: int, end: int) -> int | None:
    depth, quoted, found = 0, False, None
    for i in range(start, end):
        char = text[i]
        if char == "'":
            quoted = not quoted
        elif quoted:
            continue
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "," and depth == 0:
            if found is not None:
                raise TimeExprError(text, i, "too many arguments (pattern and N at most)")
            found = i
    return found


# ------------------------------------------------------------------------------ pattern+offset


def _split_offset(
    text: str, start: int, end: int, *, strip: bool = False
) -> tuple[DatePattern, Fraction | None]:
    """The pattern in ``text[start:end]`` and its day offset, if it has one (rule 4)."""
    sign = _offset_start(text, start, end)
    head_end = end if sign is None else sign
    head_start = start
    if strip or sign is not None:
        while head_end > head_start and text[head_end - 1] == " ":
            head_end -= 1
    if strip:
        while head_start < head_end and text[head_start] == " ":
            head_start += 1
    try:
        pattern = compile_pattern(text[head_start:head_end])
    except PatternError as exc:
        raise TimeExprError(text, head_start + exc.position, exc.reason) from exc
    if sign is None:
        return pattern, None
    return pattern, _Arithmetic(text, sign, end).parse()


def _offset_start(text: str, start: int, end: int) -> int | None:
    quoted = False
    for i in range(start, end):
        char = text[i]
        if char == "'":
            quoted = not quoted
        elif not quoted and char in "+-":
            rest = text[i + 1 : end].lstrip(" +-")
            if rest[:1].isdigit() or rest[:1] == "(":
                return i
    return None


def _whole(text: str, start: int, end: int, name: str) -> int:
    value = _Arithmetic(text, start, end).parse()
    if value.denominator != 1:
        raise TimeExprError(text, start, f"N of {name}(...) must be a whole number, not {value}")
    return int(value)


def _check_range(text: str, at: int, value: Fraction, limit: int, unit: str) -> None:
    if abs(value) > limit:
        raise TimeExprError(text, at, f"offset of {value} {unit} is beyond ±{limit}")


class _Arithmetic:
    """A recursive-descent parser of ``text[start:end]`` as an integer expression with
    ``+ - * /`` (exact: ``/`` gives a fraction), unary signs and parentheses, nested at most
    :data:`MAX_DEPTH` deep."""

    def __init__(self, text: str, start: int, end: int) -> None:
        self.text, self.pos, self.end = text, start, end

    def parse(self) -> Fraction:
        self._skip()
        if self.pos >= self.end:
            raise TimeExprError(self.text, self.pos, "missing number")
        value = self._sum(0)
        if self.pos < self.end:
            raise TimeExprError(self.text, self.pos, f"unexpected {self.text[self.pos]!r}")
        return value

    def _skip(self) -> None:
        while self.pos < self.end and self.text[self.pos] == " ":
            self.pos += 1

    def _peek(self) -> str:
        self._skip()
        return self.text[self.pos] if self.pos < self.end else ""

    def _sum(self, depth: int) -> Fraction:
        value = self._product(depth)
        while (op := self._peek()) in ("+", "-"):
            self.pos += 1
            right = self._product(depth)
            value = value + right if op == "+" else value - right
        return value

    def _product(self, depth: int) -> Fraction:
        value = self._unary(depth)
        while (op := self._peek()) in ("*", "/"):
            at = self.pos
            self.pos += 1
            right = self._unary(depth)
            if op == "*":
                value *= right
            elif right == 0:
                raise TimeExprError(self.text, at, "division by zero")
            else:
                value /= right
        return value

    def _unary(self, depth: int) -> Fraction:
        if depth > MAX_DEPTH:
            raise TimeExprError(self.text, self.pos, f"nested deeper than {MAX_DEPTH}")
        op = self._peek()
        if op in ("+", "-"):
            self.pos += 1
            value = self._unary(depth + 1)
            return -value if op == "-" else value
        if op == "(":
            opened = self.pos
            self.pos += 1
            value = self._sum(depth + 1)
            if self._peek() != ")":
                raise TimeExprError(self.text, opened, "unbalanced '(': missing ')'")
            self.pos += 1
            return value
        return self._number()

    def _number(self) -> Fraction:
        begin = self.pos
        while self.pos < self.end and self.text[self.pos].isdigit():
            self.pos += 1
        digits = self.text[begin : self.pos]
        if not digits or not digits.isascii():
            found = repr(self.text[begin]) if begin < self.end else "the end"
            raise TimeExprError(self.text, begin, f"expected a number, found {found}")
        if len(digits) > MAX_DIGITS:
            raise TimeExprError(self.text, begin, f"number longer than {MAX_DIGITS} digits")
        return Fraction(int(digits))
