"""The ``$[...]`` evaluator, table-driven: month ends, leap days, year and ISO-week boundaries,
week starts, daylight-saving changes in America/New_York and Europe/Berlin, every function and
every refusal. Expected values are worked out by hand from the calendar (module rules in
``dsched.time_expr``); DolphinScheduler's differing answers are noted where they
differ."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsched.time_expr import (
    MAX_DAYS,
    MAX_DEPTH,
    MAX_LENGTH,
    MAX_MONTHS,
    TimeExprError,
    compile_expr,
)

NEW_YORK = ZoneInfo("America/New_York")
BERLIN = ZoneInfo("Europe/Berlin")
UTC_ZONE = ZoneInfo("UTC")


def ev(expr: str, when: datetime, zone: ZoneInfo = UTC_ZONE) -> str:
    return compile_expr(expr).evaluate(when, zone)


def at(text: str, zone: ZoneInfo = UTC_ZONE, fold: int = 0) -> datetime:
    """A local wall time in ``zone`` (``fold=1``: the second of an ambiguous pair)."""
    return datetime.fromisoformat(text).replace(tzinfo=zone, fold=fold)


# ------------------------------------------------------------------------------ day offsets

DAY_OFFSETS = [
    # (expression, schedule time (UTC), expected)
    ("yyyyMMdd", "2024-08-26 02:00", "20240826"),
    ("yyyyMMdd-1", "2024-08-26 02:00", "20240825"),
    ("yyyyMMdd+1", "2024-08-26 02:00", "20240827"),
    ("yyyy-MM-dd-1", "2024-08-26 02:00", "2024-08-25"),
    ("yyyy-MM-dd+7*1", "2024-08-26 02:00", "2024-09-02"),
    ("yyyy-MM-dd-7*2", "2024-08-26 02:00", "2024-08-12"),
    ("yyyyMMdd - 1", "2024-08-26 02:00", "20240825"),
    ("yyyyMMdd+(1+2)*2", "2024-08-26 02:00", "20240901"),
    ("yyyyMMdd-1+2", "2024-08-26 02:00", "20240827"),  # DS: pattern "yyyyMMdd-1", +2 days
    ("yyyyMMdd+-1", "2024-08-26 02:00", "20240825"),
    # month ends, leap days, year boundaries
    ("yyyyMMdd+1", "2024-02-28 10:00", "20240229"),
    ("yyyyMMdd+1", "2023-02-28 10:00", "20230301"),
    ("yyyyMMdd+1", "2024-02-29 10:00", "20240301"),
    ("yyyyMMdd-1", "2024-03-01 10:00", "20240229"),
    ("yyyyMMdd-1", "2023-03-01 10:00", "20230228"),
    ("yyyyMMdd-1", "2100-03-01 10:00", "21000228"),  # 2100 is not a leap year
    ("yyyyMMdd-1", "2000-03-01 10:00", "20000229"),  # 2000 is
    ("yyyyMMdd-1", "2024-05-01 10:00", "20240430"),
    ("yyyyMMdd+1", "2024-04-30 10:00", "20240501"),
    ("yyyyMMdd-1", "2025-01-01 00:00", "20241231"),
    ("yyyyMMdd+1", "2024-12-31 23:59", "20250101"),
    ("yyyyMMdd+366", "2024-01-01 00:00", "20250101"),
    ("yyyyMMdd-365", "2025-01-01 00:00", "20240102"),
    # hours, minutes, seconds: fractions of a day
    ("HHmmss-1/24", "2024-08-26 10:20:30", "092030"),
    ("HHmmss+1/24", "2024-08-26 23:20:30", "002030"),
    ("yyyyMMddHH+1/24", "2024-12-31 23:00", "2025010100"),
    ("HHmm-1/24/60", "2024-08-26 10:00", "0959"),
    ("HHmm-30/24/60", "2024-08-26 10:00", "0930"),
    ("HHmmss+1/24/60/60", "2024-08-26 10:00:59", "100100"),
    ("HHmmss.SSS+1/86400000", "2024-08-26 10:00:00", "100000.001"),
    ("yyyyMMddHHmm+1+1/24", "2024-06-01 10:00", "202406021100"),  # DS: 2/24 days
    ("yyyyMMddHHmm+3/2", "2024-06-01 10:00", "202406022200"),
    ("yyyyMMddHHmm-3/2", "2024-06-01 10:00", "202405302200"),
    # a fraction that is no whole microsecond is truncated toward zero
    ("HHmmss.SSS+1/7", "2024-08-26 00:00", "032542.857"),
    ("HHmmss.SSS-1/7", "2024-08-26 00:00", "203417.142"),
]


@pytest.mark.parametrize(("expr", "when", "expected"), DAY_OFFSETS)
def test_day_offsets(expr: str, when: str, expected: str) -> None:
    assert ev(expr, at(when)) == expected


# ------------------------------------------------------------------------------ functions

FUNCTIONS = [
    # DolphinScheduler's documented examples
    ("this_day(yyyy-MM-dd)", "2022-08-26", "2022-08-26"),
    ("last_day(yyyy-MM-dd)", "2022-08-26", "2022-08-25"),
    ("year_week(yyyy-MM-dd)", "2022-08-26", "2022-34"),
    ("year_week(yyyy-MM-dd,5)", "2022-08-26", "2022-35"),
    ("month_first_day(yyyy-MM-dd,-1)", "2022-08-26", "2022-07-01"),
    ("month_last_day(yyyy-MM-dd,-1)", "2022-08-28", "2022-07-31"),
    ("week_first_day(yyyy-MM-dd,-1)", "2022-08-26", "2022-08-15"),
    ("week_last_day(yyyy-MM-dd,-1)", "2022-08-26", "2022-08-21"),
    # add_months: the day clamped to the month's length
    ("add_months(yyyyMMdd,1)", "2024-01-31", "20240229"),
    ("add_months(yyyyMMdd,1)", "2023-01-31", "20230228"),
    ("add_months(yyyyMMdd,-1)", "2024-03-31", "20240229"),
    ("add_months(yyyyMMdd,-1)", "2024-01-15", "20231215"),
    ("add_months(yyyyMMdd,1)", "2024-12-15", "20250115"),
    ("add_months(yyyyMMdd,12*1)", "2024-02-29", "20250228"),
    ("add_months(yyyyMMdd,-12*4)", "2024-02-29", "20200229"),
    ("add_months(yyyyMMdd, 0)", "2024-02-29", "20240229"),
    ("add_months(yyyyMMddHHmm,1)", "2024-05-31 13:45", "202406301345"),
    ("add_months( yyyy-MM-dd , -(2*6) )", "2024-05-31", "2023-05-31"),
    # this_day, last_day
    ("last_day(yyyyMMdd)", "2024-03-01", "20240229"),
    ("last_day(yyyyMMdd)", "2025-01-01", "20241231"),
    ("this_day(yyyyMMddHHmmss)", "2024-03-01 04:05:06", "20240301040506"),
    # month_first_day, month_last_day, the N left out meaning 0
    ("month_first_day(yyyyMMdd)", "2024-02-29", "20240201"),
    ("month_last_day(yyyyMMdd)", "2024-02-10", "20240229"),
    ("month_last_day(yyyyMMdd)", "2023-02-10", "20230228"),
    ("month_last_day(yyyyMMdd)", "2100-02-10", "21000228"),
    ("month_last_day(yyyyMMdd)", "2000-02-10", "20000229"),
    ("month_last_day(yyyyMMdd,1)", "2024-01-31", "20240229"),
    ("month_last_day(yyyyMMdd,-1)", "2025-01-15", "20241231"),
    ("month_first_day(yyyyMMdd,1)", "2024-12-31", "20250101"),
    ("month_first_day(yyyyMMdd,-12)", "2024-01-31", "20230101"),
    ("month_last_day(yyyyMMdd,2)", "2024-12-31", "20250228"),
    ("month_first_day(yyyyMMddHH,0)", "2024-06-15 07:00", "2024060107"),
    # weeks run Monday to Sunday
    ("week_first_day(yyyy-MM-dd)", "2022-08-22", "2022-08-22"),  # a Monday
    ("week_first_day(yyyy-MM-dd)", "2022-08-28", "2022-08-22"),  # a Sunday
    ("week_last_day(yyyy-MM-dd)", "2022-08-22", "2022-08-28"),
    ("week_last_day(yyyy-MM-dd)", "2022-08-28", "2022-08-28"),
    ("week_first_day(yyyy-MM-dd)", "2025-01-01", "2024-12-30"),
    ("week_last_day(yyyy-MM-dd)", "2024-12-30", "2025-01-05"),
    ("week_first_day(yyyy-MM-dd,1)", "2024-12-25", "2024-12-30"),
    ("week_last_day(yyyy-MM-dd,-1)", "2024-03-06", "2024-03-03"),
    ("week_first_day(yyyy-MM-dd,-1)", "2024-03-03", "2024-02-19"),
    # DolphinScheduler's older helpers: N in days
    ("month_begin(yyyy-MM-dd,0)", "2024-02-29", "2024-02-01"),
    ("month_begin(yyyyMMdd,-1)", "2024-03-15", "20240229"),
    ("month_begin(yyyyMMdd,14)", "2024-03-15", "20240315"),
    ("month_end(yyyyMMdd,0)", "2024-02-10", "20240229"),
    ("month_end(yyyyMMdd,1)", "2024-02-10", "20240301"),
    ("month_end(yyyyMMdd,-1)", "2023-02-10", "20230227"),
    ("week_begin(yyyy-MM-dd,0)", "2022-08-26", "2022-08-22"),
    ("week_begin(yyyy-MM-dd,-1)", "2022-08-26", "2022-08-21"),
    ("week_end(yyyy-MM-dd,0)", "2022-08-26", "2022-08-28"),
    ("week_end(yyyy-MM-dd,1)", "2022-08-26", "2022-08-29"),
    # timestamp: Unix seconds of an expression in yyyyMMddHHmmss
    ("timestamp(yyyyMMddHHmmss)", "2024-01-01 00:00", "1704067200"),
    ("timestamp(yyyyMMddHHmmss-1)", "2024-01-02 00:00", "1704067200"),
    ("timestamp( yyyyMMddHHmmss-1/24/60/60 )", "2024-01-01 00:00:01", "1704067200"),
    ("timestamp(add_months(yyyyMMddHHmmss,1))", "2024-01-01 00:00", "1706745600"),
    ("timestamp(month_first_day(yyyyMMddHHmmss,1))", "2024-01-31 00:00", "1706745600"),
    ("timestamp(yyyyMMddHHmmss)", "2024-01-01 00:00:00.999999", "1704067200"),
    ("timestamp(yyyyMMddHHmmss)", "1969-12-31 23:59:59.5", "-1"),
]


@pytest.mark.parametrize(("expr", "when", "expected"), FUNCTIONS)
def test_functions(expr: str, when: str, expected: str) -> None:
    assert ev(expr, at(when)) == expected


YEAR_WEEKS = [
    # ISO weeks (weeks start on Monday, week 1 holds four days of the new year)
    ("year_week(yyyy-MM-dd)", "2024-12-29", "2024-52"),
    ("year_week(yyyy-MM-dd)", "2024-12-30", "2025-01"),  # DS: 2024-01 (the calendar year)
    ("year_week(yyyyMMdd)", "2024-12-31", "202501"),  # DS: 202401
    ("year_week(yyyy-MM-dd)", "2025-01-01", "2025-01"),
    ("year_week(yyyy-MM-dd)", "2020-12-31", "2020-53"),
    ("year_week(yyyy-MM-dd)", "2021-01-01", "2020-53"),  # DS: 2021-53
    ("year_week(yyyy-MM-dd)", "2021-01-03", "2020-53"),
    ("year_week(yyyy-MM-dd)", "2021-01-04", "2021-01"),
    ("year_week(yyyy-MM-dd)", "2022-01-02", "2021-52"),
    ("year_week(yyyy-MM-dd)", "2022-01-03", "2022-01"),
    ("year_week(yyyy-MM-dd)", "2026-01-01", "2026-01"),  # a Thursday: week 1
    ("year_week(yyyy-MM-dd)", "2027-01-01", "2026-53"),  # a Friday: last year's week 53
    ("year_week(yyyy-MM-dd)", "2024-02-29", "2024-09"),
    ("year_week(yyyy-MM-dd,1)", "2024-02-29", "2024-09"),
    # configured week starts
    ("year_week(yyyy-MM-dd,7)", "2023-01-01", "2023-01"),  # a Sunday, weeks from Sunday
    ("year_week(yyyy-MM-dd,7)", "2022-12-31", "2022-52"),
    ("year_week(yyyy-MM-dd,1)", "2023-01-01", "2022-52"),  # the same Sunday, ISO
    ("year_week(yyyy-MM-dd,2)", "2024-12-30", "2024-52"),  # Monday ends a Tue-Mon week
    ("year_week(yyyy-MM-dd,2)", "2024-12-31", "2025-01"),
    ("year_week(yyyy-MM-dd,3+4)", "2023-01-01", "2023-01"),
]


@pytest.mark.parametrize(("expr", "when", "expected"), YEAR_WEEKS)
def test_year_week_prints_the_year_of_the_week(expr: str, when: str, expected: str) -> None:
    assert ev(expr, at(when)) == expected


@given(st.dates(min_value=date(1600, 1, 1), max_value=date(2400, 12, 31)))
def test_year_week_with_monday_is_the_iso_week(day: date) -> None:
    iso = day.isocalendar()
    when = datetime(day.year, day.month, day.day, 12, tzinfo=UTC)
    assert ev("year_week(yyyy-MM-dd)", when) == f"{iso.year}-{iso.week:02d}"


# ------------------------------------------------------------------------------ time zones, DST

DST = [
    # (expression, local schedule time, fold, zone, expected)
    # an hour back across the spring-forward gap is one real hour
    ("yyyyMMddHHmmss-1/24", "2024-03-10 03:30", 0, NEW_YORK, "20240310013000"),
    ("yyyyMMddHHmmss-1/24", "2024-03-31 03:30", 0, BERLIN, "20240331013000"),
    ("yyyyMMddHHmmss+1/24", "2024-03-10 01:30", 0, NEW_YORK, "20240310033000"),
    ("HH:mm XXX-1/24", "2024-03-31 03:00", 0, BERLIN, "01:00 +01:00"),
    # ... and across fall-back: the repeated hour is seen twice
    ("HH:mm XXX-1/24", "2024-11-03 01:30", 1, NEW_YORK, "01:30 -04:00"),
    ("HH:mm XXX+1/24", "2024-11-03 00:30", 0, NEW_YORK, "01:30 -04:00"),
    ("HH:mm XXX+2/24", "2024-11-03 00:30", 0, NEW_YORK, "01:30 -05:00"),
    ("HH:mm XXX-1/24", "2024-10-27 02:30", 1, BERLIN, "02:30 +02:00"),
    # a day back is a calendar day: 00:30 after the change stays 00:30
    ("yyyyMMdd-1", "2024-11-04 00:30", 0, NEW_YORK, "20241103"),
    ("yyyyMMddHHmmss-1", "2024-11-04 00:30", 0, NEW_YORK, "20241103003000"),  # DS: ...013000
    ("yyyyMMddHHmmss-1", "2024-10-28 00:30", 0, BERLIN, "20241027003000"),  # DS: ...013000
    ("yyyyMMdd-1", "2024-03-11 00:30", 0, NEW_YORK, "20240310"),  # DS: 20240309
    ("yyyyMMdd-1", "2024-04-01 00:30", 0, BERLIN, "20240331"),  # DS: 20240330
    ("yyyyMMddHHmmss+1", "2024-03-09 23:30", 0, NEW_YORK, "20240310233000"),
    ("yyyyMMddHHmmss-7", "2024-03-17 00:30", 0, NEW_YORK, "20240310003000"),
    # landing in the gap moves forward by the gap; landing twice takes the earlier instant
    ("yyyyMMddHHmmss-1", "2024-03-11 02:30", 0, NEW_YORK, "20240310033000"),
    ("yyyyMMddHHmmss-1", "2024-04-01 02:30", 0, BERLIN, "20240331033000"),
    ("yyyyMMddHHmmss XXX-1", "2024-11-04 01:30", 0, NEW_YORK, "20241103013000 -04:00"),
    ("yyyyMMddHHmmss XXX+1", "2024-10-26 02:30", 0, BERLIN, "20241027023000 +02:00"),
    ("add_months(yyyyMMddHHmm,1)", "2024-02-10 02:30", 0, NEW_YORK, "202403100330"),
    ("last_day(yyyyMMddHHmm XXX)", "2024-11-04 01:15", 0, NEW_YORK, "202411030115 -04:00"),
    ("week_first_day(yyyyMMddHHmm)", "2024-03-13 02:30", 0, BERLIN, "202403110230"),
    ("this_day(yyyyMMddHHmm XXX)", "2024-11-03 01:30", 1, NEW_YORK, "202411030130 -05:00"),
    ("timestamp(yyyyMMddHHmmss-1)", "2024-03-11 00:30", 0, NEW_YORK, "1710048600"),  # 05:30Z
    # a move that lands on the same wall time keeps the instant (the second 01:30 stays second)
    ("yyyyMMddHHmm XXX+0", "2024-11-03 01:30", 1, NEW_YORK, "202411030130 -05:00"),
    ("add_months(yyyyMMddHHmm XXX,0)", "2024-11-03 01:30", 1, NEW_YORK, "202411030130 -05:00"),
    ("month_first_day(HHmm XXX)", "2024-11-01 01:30", 0, NEW_YORK, "0130 -04:00"),
    ("week_last_day(yyyyMMddHHmm XXX)", "2024-11-03 01:30", 1, NEW_YORK, "202411030130 -05:00"),
    ("week_last_day(yyyyMMddHHmm XXX)", "2024-10-28 01:30", 0, NEW_YORK, "202411030130 -04:00"),
]


@pytest.mark.parametrize(("expr", "when", "fold", "zone", "expected"), DST)
def test_daylight_saving_changes(
    expr: str, when: str, fold: int, zone: ZoneInfo, expected: str
) -> None:
    schedule_time = at(when, zone, fold).astimezone(UTC)  # as the store holds it
    assert ev(expr, schedule_time, zone) == expected


@pytest.mark.parametrize(
    ("zone", "expected"),
    [
        ("Asia/Tokyo", "20240602 08:30"),
        ("America/Los_Angeles", "20240601 16:30"),
        ("UTC", "20240601 23:30"),
        ("Pacific/Kiritimati", "20240602 13:30"),
    ],
)
def test_the_workflow_zone_not_the_server_zone_decides(zone: str, expected: str) -> None:
    schedule_time = datetime(2024, 6, 1, 23, 30, tzinfo=UTC)
    assert ev("yyyyMMdd HH:mm", schedule_time, ZoneInfo(zone)) == expected


ZONES = [NEW_YORK, BERLIN, ZoneInfo("Australia/Lord_Howe"), ZoneInfo("Asia/Kolkata"), UTC_ZONE]


@given(
    st.datetimes(min_value=datetime(1970, 1, 1), max_value=datetime(2100, 12, 31)),
    st.sampled_from(ZONES),
    st.integers(min_value=-400, max_value=400),
)
def test_whole_days_move_the_local_date_by_exactly_that_many_days(
    naive: datetime, zone: ZoneInfo, days: int
) -> None:
    schedule_time = naive.replace(tzinfo=UTC)
    local = schedule_time.astimezone(zone)
    expected = (local.date() + timedelta(days=days)).strftime("%Y%m%d")
    assert ev(f"yyyyMMdd{days:+d}", schedule_time, zone) == expected


@given(
    st.datetimes(min_value=datetime(1970, 1, 1), max_value=datetime(2100, 12, 31)),
    st.sampled_from(ZONES),
    st.integers(min_value=-23, max_value=23),
)
def test_fractions_of_a_day_are_exact_durations(
    naive: datetime, zone: ZoneInfo, hours: int
) -> None:
    schedule_time = naive.replace(tzinfo=UTC, microsecond=0)
    expected = schedule_time + timedelta(hours=hours)
    got = ev(f"yyyy-MM-dd HH:mm:ss XXX{hours:+d}/24", schedule_time, zone)
    assert datetime.strptime(got, "%Y-%m-%d %H:%M:%S %z") == expected


def test_a_naive_schedule_time_is_a_programming_error() -> None:
    with pytest.raises(TypeError):
        ev("yyyyMMdd", datetime(2024, 1, 1))


# ------------------------------------------------------------------------------ refusals


@pytest.mark.parametrize(
    ("expr", "position", "fragment"),
    [
        ("YYYYMMdd-1", 0, "week-based year"),
        ("yyyyMMDD", 6, "day of the year"),
        ("yyyyMMdd-1/0", 10, "division by zero"),
        ("yyyyMMdd-1/(2-2)", 10, "division by zero"),
        ("yyyyMMdd-(1", 9, "unbalanced '('"),
        ("yyyyMMdd-1)", 10, "unexpected ')'"),
        ("yyyyMMdd-1x", 10, "unexpected 'x'"),
        ("yyyyMMdd-1 2", 11, "unexpected '2'"),
        ("yyyyMMdd-1*", 11, "expected a number"),
        ("yyyyMMdd-1**2", 11, "expected a number"),
        ("yyyyMMdd-" + "(" * (MAX_DEPTH + 2) + "1" + ")" * (MAX_DEPTH + 2), 25, "nested deeper"),
        ("yyyyMMdd-" + "-" * (MAX_DEPTH + 2) + "1", 25, "nested deeper"),
        ("yyyyMMdd+1234567890", 9, "longer than 9 digits"),
        (f"yyyyMMdd+{MAX_DAYS + 1}", 8, "beyond"),
        ("yyyyMMdd-999999999*999999999", 8, "beyond"),
        ("1+2", 0, "no pattern letter"),
        ("", 0, "empty"),
        ("'abc-1", 0, "unterminated quote"),
        ("foo_bar(yyyy)", 0, "unknown function 'foo_bar'"),
        ("timestamp_x(yyyy)", 0, "unknown function"),
        ("add_months(yyyyMMdd)", 19, "needs N"),
        ("add_months(yyyyMMdd,1", 10, "missing ')'"),
        ("add_months(yyyyMMdd,1) x", 22, "after the function call"),
        ("add_months(yyyyMMdd,1,2)", 21, "too many arguments"),
        ("add_months(yyyyMMdd,3/2)", 20, "whole number"),
        ("add_months(yyyyMMdd-1,1)", 11, "without an offset"),
        ("add_months(yyyyMMDD,1)", 17, "day of the year"),
        (f"add_months(yyyyMMdd,{MAX_MONTHS + 1})", 20, "beyond"),
        ("add_months(,1)", 11, "empty"),
        ("this_day(yyyyMMdd,1)", 17, "takes no N"),
        ("last_day(yyyyMMdd,-1)", 17, "takes no N"),
        ("week_first_day(yyyyMMdd,1/2)", 24, "whole number"),
        ("year_week(yyyy-MM-dd,0)", 21, "1 (Monday) to 7"),
        ("year_week(yyyy-MM-dd,8)", 21, "1 (Monday) to 7"),
        ("year_week(yyyy-MM-dd,-1)", 21, "1 (Monday) to 7"),
        ("y" * (MAX_LENGTH + 1), MAX_LENGTH, "longer than"),
        ("month_begin(yyyyMMdd)", 20, "needs N"),
        ("week_end(yyyyMMdd,1/2)", 18, "whole number"),
        (f"month_end(yyyyMMdd,{MAX_DAYS + 1})", 19, f"beyond ±{MAX_DAYS}"),
        ("timestamp(yyyyMMdd-1)", 10, "pattern yyyyMMddHHmmss"),
        ("timestamp(yyyyMMddHHmmss-1/0)", 26, "division by zero"),
        ("timestamp(timestamp(yyyyMMddHHmmss))", 10, "takes a date expression"),
        ("timestamp(year_week(yyyyMMddHHmmss))", 10, "takes a date expression"),
        ("timestamp()", 10, "empty"),
        ("timestamp(yyyyMMddHHmmss", 9, "missing ')'"),
    ],
)
def test_refusals_name_the_position(expr: str, position: int, fragment: str) -> None:
    with pytest.raises(TimeExprError) as caught:
        compile_expr(expr)
    assert (caught.value.position, caught.value.text) == (position, expr)
    assert fragment in caught.value.reason


@pytest.mark.parametrize(
    ("expr", "when"),
    [
        ("yyyyMMdd+1", datetime(9999, 12, 31, 12, tzinfo=UTC)),
        ("yyyyMMdd-1", datetime(1, 1, 1, 12, tzinfo=UTC)),
        ("yyyyMMdd+366000", datetime(9000, 1, 1, tzinfo=UTC)),
        ("add_months(yyyyMMdd,-12000)", datetime(999, 1, 1, tzinfo=UTC)),
        ("week_last_day(yyyyMMdd)", datetime(9999, 12, 31, tzinfo=UTC)),
        ("HHmm+1/24", datetime(9999, 12, 31, 23, 30, tzinfo=UTC)),
    ],
)
def test_a_result_beyond_the_calendar_is_an_error_not_a_crash(expr: str, when: datetime) -> None:
    with pytest.raises(TimeExprError) as caught:
        ev(expr, when)
    assert "outside the years 1-9999" in caught.value.reason


def test_an_expression_is_compiled_once() -> None:
    assert compile_expr("yyyyMMdd-1") is compile_expr("yyyyMMdd-1")
