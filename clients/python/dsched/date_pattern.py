"""Date patterns in the Java ``SimpleDateFormat`` notation DolphinScheduler users write
(``yyyyMMdd``, ``yyyy-MM-dd HH:mm:ss``, ``'T'HH``), compiled once into a formatter.

A pattern is checked completely when it is compiled, which happens when a workflow is submitted
or a run is started, so that a typo is an error there and never a silently wrong value at 02:00.
The letters:

====== ====================================================== ==================
letter meaning                                                counts
====== ====================================================== ==================
y      calendar year (``yy``: its last two digits)            1-4
M      month: ``M`` 1-12, ``MM`` 01-12, ``MMM`` Jan, ``MMMM`` 1-4
       January
d      day of the month                                       1-2
H      hour 0-23;  ``k`` 1-24;  ``h`` 1-12;  ``K`` 0-11       1-2
m, s   minute, second                                         1-2
SSS    milliseconds                                           3 exactly
E      weekday: ``E``..``EEE`` Mon, ``EEEE`` Monday           1-4
u      ISO weekday number, 1 = Monday                         1
a      AM / PM                                                1
Z      UTC offset ``+0100``; ``X`` ``+01``, ``XX`` ``+0100``, 1; X 1-3; z 1-3
       ``XXX`` ``+01:00`` (``Z`` for UTC); ``z`` the zone's
       abbreviation (``CET``)
====== ====================================================== ==================

Text between single quotes is literal (``''`` is one quote); any character that is not an ASCII
letter is literal too. Names (months, weekdays, AM/PM) are English, whatever the server's locale.

Refused, with the position: every other ASCII letter, and these on purpose, because they are the
classic way to get a wrong date that looks right: ``Y`` (the week-based year, which differs from
``yyyy`` in the last days of December), ``D`` (day of the year, usually meant as ``dd``), ``w``
and ``W`` (week numbers whose rules depend on the locale: use ``year_week(...)``); a count a letter
does not have (``ddd``, ``S``), an unterminated quote, and a pattern with no letter at all (nothing
to format: almost certainly not what was meant).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache

MAX_PATTERN_LENGTH = 256

_MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")

_Field = Callable[[datetime], str]


class PatternError(ValueError):
    """A date pattern that cannot be compiled: ``reason`` at ``position`` (0-based) of
    ``pattern``."""

    def __init__(self, pattern: str, position: int, reason: str) -> None:
        super().__init__(f"date pattern {pattern!r} at position {position}: {reason}")
        self.pattern = pattern
        self.position = position
        self.reason = reason


@dataclass(frozen=True, slots=True)
class DatePattern:
    """A compiled pattern: :meth:`format` renders an aware datetime in its own zone."""

    text: str
    _parts: tuple[str | _Field, ...]

    def format(self, moment: datetime) -> str:
        return "".join(p if isinstance(p, str) else p(moment) for p in self._parts)


def _number(get: Callable[[datetime], int], width: int) -> _Field:
    return lambda t: f"{get(t):0{width}d}"


def _hour12(t: datetime) -> int:
    return t.hour % 12 or 12


def _offset(t: datetime, sep: str, minutes: bool, utc_z: bool) -> str:
    delta = t.utcoffset() or timedelta(0)
    if utc_z and not delta:
        return "Z"
    sign = "-" if delta < timedelta(0) else "+"
    total = abs(int(delta.total_seconds())) // 60
    hours, mins = divmod(total, 60)
    # The hour-only form cannot show a half-hour zone (India): it truncates, as Java does.
    return f"{sign}{hours:02d}{sep}{mins:02d}" if minutes else f"{sign}{hours:02d}"


def _year(count: int) -> _Field:
    if count == 2:
        return lambda t: f"{t.year % 100:02d}"
    return _number(lambda t: t.year, count)


def _month(count: int) -> _Field:
    if count == 3:
        return lambda t: _MONTHS[t.month - 1][:3]
    if count == 4:
        return lambda t: _MONTHS[t.month - 1]
    return _number(lambda t: t.month, count)


def _weekday(count: int) -> _Field:
    if count == 4:
        return lambda t: _WEEKDAYS[t.weekday()]
    return lambda t: _WEEKDAYS[t.weekday()][:3]


def _iso_offset(count: int) -> _Field:
    return lambda t: _offset(t, ":" if count == 3 else "", count > 1, True)


# letter -> (largest count, builder from the count); a count below the largest pads to it.
_FIELDS: dict[str, tuple[int, Callable[[int], _Field]]] = {
    "y": (4, _year),
    "M": (4, _month),
    "d": (2, lambda n: _number(lambda t: t.day, n)),
    "H": (2, lambda n: _number(lambda t: t.hour, n)),
    "k": (2, lambda n: _number(lambda t: t.hour or 24, n)),
    "h": (2, lambda n: _number(_hour12, n)),
    "K": (2, lambda n: _number(lambda t: t.hour % 12, n)),
    "m": (2, lambda n: _number(lambda t: t.minute, n)),
    "s": (2, lambda n: _number(lambda t: t.second, n)),
    "S": (3, lambda n: _number(lambda t: t.microsecond // 1000, 3)),
    "E": (4, _weekday),
    "u": (1, lambda n: _number(lambda t: t.isoweekday(), 1)),
    "a": (1, lambda n: lambda t: "AM" if t.hour < 12 else "PM"),
    "Z": (1, lambda n: lambda t: _offset(t, "", True, False)),
    "X": (3, _iso_offset),
    "z": (3, lambda n: lambda t: t.tzname() or ""),
}
_SMALLEST = {"S": 3}  # letters whose only count is their largest

_REFUSED = {
    "Y": "'Y' is the week-based year, which differs from the calendar year 'yyyy' around "
    "New Year; use 'yyyy' (or year_week(...) for weeks)",
    "D": "'D' is the day of the year; the day of the month is 'dd'",
    "w": "'w' is a locale-dependent week number; use year_week(...)",
    "W": "'W' is a locale-dependent week of the month; use week_first_day(...)",
}


@lru_cache(maxsize=1024)
def compile_pattern(text: str) -> DatePattern:
    """The compiled ``text``; raises :class:`PatternError` for anything the module refuses."""
    if not text:
        raise PatternError(text, 0, "empty date pattern")
    if len(text) > MAX_PATTERN_LENGTH:
        raise PatternError(text, MAX_PATTERN_LENGTH, f"longer than {MAX_PATTERN_LENGTH} characters")
    parts: list[str | _Field] = []
    literal: list[str] = []
    i, fields = 0, 0
    while i < len(text):
        char = text[i]
        if char == "'":
            i = _quoted(text, i, literal)
            continue
        if not ("a" <= char <= "z" or "A" <= char <= "Z"):
            literal.append(char)
            i += 1
            continue
        count = _run_length(text, i)
        if literal:
            parts.append("".join(literal))
            literal.clear()
        parts.append(_field(text, i, count))
        fields += 1
        i += count
    if literal:
        parts.append("".join(literal))
    if not fields:
        raise PatternError(text, 0, "no pattern letter (nothing of the date would be printed)")
    return DatePattern(text, tuple(parts))


def _run_length(text: str, start: int) -> int:
    end = start
    while end < len(text) and text[end] == text[start]:
        end += 1
    return end - start


def _quoted(text: str, start: int, literal: list[str]) -> int:
    """Appends the quoted text starting at ``start`` to ``literal``; returns the index after."""
    if text.startswith("''", start):
        literal.append("'")
        return start + 2
    i = start + 1
    while i < len(text):
        if text[i] == "'":
            if text.startswith("''", i):
                literal.append("'")
                i += 2
                continue
            return i + 1
        literal.append(text[i])
        i += 1
    raise PatternError(text, start, "unterminated quote")


def _field(text: str, at: int, count: int) -> _Field:
    letter = text[at]
    if letter in _REFUSED:
        raise PatternError(text, at, _REFUSED[letter])
    if letter not in _FIELDS:
        raise PatternError(text, at, f"unknown pattern letter {letter!r} (quote literal text)")
    largest, build = _FIELDS[letter]
    if not _SMALLEST.get(letter, 1) <= count <= largest:
        allowed = str(largest) if letter in _SMALLEST else f"1 to {largest}"
        raise PatternError(text, at, f"{letter * count!r}: {letter!r} takes {allowed} letters")
    return build(count)
