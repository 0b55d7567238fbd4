"""Java-style date patterns: every letter and count, literals, quoting, and every refusal with
its position."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from dsched.date_pattern import MAX_PATTERN_LENGTH, PatternError, compile_pattern

BERLIN = ZoneInfo("Europe/Berlin")
# A Tuesday in winter time (CET, +01:00).
MOMENT = datetime(2024, 3, 5, 7, 8, 9, 123456, tzinfo=BERLIN)


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("yyyyMMdd", "20240305"),
        ("yyyyMMddHHmmss", "20240305070809"),
        ("yyyy-MM-dd HH:mm:ss", "2024-03-05 07:08:09"),
        ("yyyy/MM/dd", "2024/03/05"),
        ("yy", "24"),
        ("y", "2024"),
        ("yyy", "2024"),
        ("M", "3"),
        ("MM", "03"),
        ("MMM", "Mar"),
        ("MMMM", "March"),
        ("d", "5"),
        ("dd", "05"),
        ("H", "7"),
        ("HH", "07"),
        ("h", "7"),
        ("hh", "07"),
        ("k", "7"),
        ("K", "7"),
        ("m", "8"),
        ("mm", "08"),
        ("s", "9"),
        ("ss", "09"),
        ("SSS", "123"),
        ("HHmmss.SSS", "070809.123"),
        ("E", "Tue"),
        ("EEE", "Tue"),
        ("EEEE", "Tuesday"),
        ("u", "2"),
        ("a", "AM"),
        ("Z", "+0100"),
        ("X", "+01"),
        ("XX", "+0100"),
        ("XXX", "+01:00"),
        ("z", "CET"),
        ("yyyy-MM-dd'T'HH:mm:ssXXX", "2024-03-05T07:08:09+01:00"),
        ("h 'o''clock'", "7 o'clock"),
        ("''yyyy''", "'2024'"),
        ("'week' u", "week 2"),
        ("'[yyyy]' yyyy", "[yyyy] 2024"),
        ("yyyy年MM月dd日", "2024年03月05日"),
        ("yyyy_MM_dd", "2024_03_05"),
    ],
)
def test_each_letter_count_and_literal(pattern: str, expected: str) -> None:
    assert compile_pattern(pattern).format(MOMENT) == expected


@pytest.mark.parametrize(
    ("hour", "expected"),
    [
        (0, "00 24 12 0 AM"),
        (1, "01 01 01 1 AM"),
        (11, "11 11 11 11 AM"),
        (12, "12 12 12 0 PM"),
        (13, "13 13 01 1 PM"),
        (23, "23 23 11 11 PM"),
    ],
)
def test_the_four_hour_letters_around_midnight_and_noon(hour: int, expected: str) -> None:
    moment = datetime(2024, 1, 1, hour, tzinfo=UTC)
    assert compile_pattern("HH kk hh K a").format(moment) == expected


@pytest.mark.parametrize(
    ("zone", "expected"),
    [
        ("UTC", "Z Z Z +0000"),
        ("America/St_Johns", "-03 -0330 -03:30 -0330"),  # a half-hour zone west of UTC
        ("Asia/Kolkata", "+05 +0530 +05:30 +0530"),
        ("America/New_York", "-05 -0500 -05:00 -0500"),
    ],
)
def test_utc_offsets(zone: str, expected: str) -> None:
    moment = datetime(2024, 1, 15, 12, tzinfo=UTC).astimezone(ZoneInfo(zone))
    assert compile_pattern("X XX XXX Z").format(moment) == expected


def test_daylight_saving_time_shows_in_the_offset_and_the_abbreviation() -> None:
    summer = datetime(2024, 7, 1, 12, tzinfo=BERLIN)
    assert compile_pattern("XXX z").format(summer) == "+02:00 CEST"


def test_small_years_are_padded() -> None:
    moment = datetime(5, 6, 7, tzinfo=UTC)
    assert compile_pattern("yyyy yy y").format(moment) == "0005 05 5"


@pytest.mark.parametrize(
    ("pattern", "position", "fragment"),
    [
        ("", 0, "empty"),
        ("YYYYMMdd", 0, "week-based year"),
        ("yyyyMMDD", 6, "day of the year"),
        ("yyyy-ww", 5, "year_week"),
        ("yyyy-MM W", 8, "week_first_day"),
        ("yyyyMMddq", 8, "unknown pattern letter 'q'"),
        ("yyyy-MM-dd T HH", 11, "unknown pattern letter 'T'"),
        ("G yyyy", 0, "unknown pattern letter 'G'"),
        ("ddd", 0, "'d' takes 1 to 2 letters"),
        ("yyyyy", 0, "'y' takes 1 to 4 letters"),
        ("MMMMM", 0, "'M' takes 1 to 4 letters"),
        ("HHmmss.S", 7, "'S' takes 3 letters"),
        ("HHmmss.SSSS", 7, "'S' takes 3 letters"),
        ("zzzz", 0, "'z' takes 1 to 3 letters"),
        ("yyyy'MM", 4, "unterminated quote"),
        ("'", 0, "unterminated quote"),
        ("---", 0, "no pattern letter"),
        ("'yyyy'", 0, "no pattern letter"),
        ("y" * (MAX_PATTERN_LENGTH + 1), MAX_PATTERN_LENGTH, "longer than"),
    ],
)
def test_refusals_name_the_position(pattern: str, position: int, fragment: str) -> None:
    with pytest.raises(PatternError) as caught:
        compile_pattern(pattern)
    assert caught.value.position == position
    assert fragment in caught.value.reason
    assert caught.value.pattern == pattern
    assert f"at position {position}" in str(caught.value)


def test_a_pattern_is_compiled_once() -> None:
    assert compile_pattern("yyyyMMdd") is compile_pattern("yyyyMMdd")
