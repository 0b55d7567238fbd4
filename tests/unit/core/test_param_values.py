"""Templates in parameter values and the built-ins: ``${system.biz.date}`` always equals
``$[yyyyMMdd-1]``, every refusal is located in the value, escapes and unknown references."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsched.templates import BIZ_CURDATE, BIZ_DATE, DATETIME, params_errors, value_error
from dsched.templates import BUILTIN_NAMES as NAMES
from dsched.time_expr import TimeExprError
from dsched_server.core.builtin_params import RunIdentity, builtin_params, date_params
from dsched_server.core.param_values import (
    ExpandedTooLarge,
    expand_params,
    expand_value,
    expanded_params,
)

NEW_YORK = ZoneInfo("America/New_York")
BERLIN = ZoneInfo("Europe/Berlin")
IDENTITY = RunIdentity(
    workflow_instance_id=41,
    task_instance_id=7,
    task_name="load",
    workflow_name="daily sales",
    workflow_code=3,
    project_name="shop",
    project_code=2,
)
WHEN = datetime(2024, 3, 11, 4, 30, tzinfo=UTC)  # 00:30 EDT in New York, 05:30 CET in Berlin


def expand(value: str, zone: ZoneInfo = NEW_YORK, when: datetime = WHEN) -> str:
    return expand_value(
        value, schedule_time=when, zone=zone, builtins=builtin_params(when, zone, IDENTITY)
    )


def test_the_builtins_of_one_attempt() -> None:
    assert builtin_params(WHEN, NEW_YORK, IDENTITY) == {
        "system.biz.date": "20240310",
        "system.biz.curdate": "20240311",
        "system.datetime": "20240311003000",
        "system.workflow.instance.id": "41",
        "system.task.instance.id": "7",
        "system.task.definition.name": "load",
        "system.workflow.definition.name": "daily sales",
        "system.workflow.definition.code": "3",
        "system.project.name": "shop",
        "system.project.code": "2",
    }
    assert set(builtin_params(WHEN, NEW_YORK, IDENTITY)) == NAMES


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("plain", "plain"),
        ("", ""),
        ("$[yyyyMMdd]", "20240311"),
        ("dt=$[yyyyMMdd-1]/hour=$[HH]", "dt=20240310/hour=00"),
        ("${system.biz.date}", "20240310"),
        ("${system.biz.curdate}-${system.datetime}", "20240311-20240311003000"),
        ("s3://b/${system.project.name}/${system.workflow.instance.id}", "s3://b/shop/41"),
        ("$[add_months(yyyy-MM,-1)] $[year_week(yyyyMMdd)]", "2024-02 202411"),
        ("$[yyyy'-W'ww']'", None),  # refused: see test_refusals
        ("cost: $5", "cost: $5"),
        ("$", "$"),
        ("$$", "$$"),
        ("a$b", "a$b"),
        ("${HOME}/x", "${HOME}/x"),  # not dsched's: text for the task
        ("${other.param}", "${other.param}"),
        ("${system}", "${system}"),
        ("${ system.biz.date }", "${ system.biz.date }"),
        ("$$[yyyyMMdd]", "$[yyyyMMdd]"),
        ("$${system.biz.date}", "${system.biz.date}"),
        ("$$$[yyyy]", "$$[yyyy]"),  # a "$", then the escape "$$["
        ("$[yyyy']'MM]", "2024]03"),
        ("[$[yyyy]]", "[2024]"),
        ("$[yyyy]$[MM]$[dd]", "20240311"),
    ],
)
def test_expansion(value: str, expected: str | None) -> None:
    if expected is None:
        assert value_error(value) is not None
    else:
        assert value_error(value) is None
        assert expand(value) == expected


def test_the_zone_decides_the_day() -> None:
    assert expand("$[yyyyMMdd HH:mm] ${system.biz.date}", BERLIN) == "20240311 05:30 20240310"


@pytest.mark.parametrize(
    ("value", "position", "fragment"),
    [
        ("$[yyyyMMDD]", 8, "day of the year"),
        ("x $[yyyyMMdd-1/0]", 14, "division by zero"),
        ("$[yyyyMMdd", 0, "without its ']'"),
        ("ok $[yyyy] then $[MM", 16, "without its ']'"),
        ("$[yyyy'MM]", 0, "unterminated quote"),
        ("$[yyyy$[MM]]", 7, "do not nest"),
        ("$[yy[yy]]", 4, "do not nest"),
        ("$[]", 2, "empty"),
        ("$[1+2]", 2, "no pattern letter"),
        ("${system.biz.dat}", 2, "unknown built-in 'system.biz.dat'"),
        ("a ${system.task.execute.path}", 4, "unknown built-in"),
        ("$[add_months(yyyyMMdd,1/2)]", 22, "whole number"),
        ("$[" + "y" * 300 + "]", 258, "longer than"),
    ],
)
def test_refusals_are_located_in_the_value(value: str, position: int, fragment: str) -> None:
    error = value_error(value)
    assert error is not None
    assert (error.text, error.position) == (value, position)
    assert fragment in error.reason


def test_params_errors_names_the_parameters() -> None:
    errors = params_errors({"A": "$[yyyyMMdd]", "B": "$[yyyyMMDD]", "C": "x", "D": "${system.x}"})
    assert sorted(errors) == ["B", "D"]
    assert all(isinstance(e, TimeExprError) for e in errors.values())


def test_expand_params_expands_every_value() -> None:
    got = expand_params(
        {"DT": "$[yyyyMMdd-1]", "RAW": "x"},
        schedule_time=WHEN,
        zone=NEW_YORK,
        builtins=builtin_params(WHEN, NEW_YORK, IDENTITY),
    )
    assert got == {"DT": "20240310", "RAW": "x"}


def test_an_evaluation_beyond_the_calendar_is_located_in_the_value() -> None:
    when = datetime(9999, 12, 31, 12, tzinfo=UTC)
    with pytest.raises(TimeExprError) as caught:
        expand_value("d=$[yyyyMMdd+1]", schedule_time=when, zone=ZoneInfo("UTC"), builtins={})
    assert (caught.value.text, caught.value.position) == ("d=$[yyyyMMdd+1]", 4)


ZONES = [NEW_YORK, BERLIN, ZoneInfo("America/Sao_Paulo"), ZoneInfo("Asia/Tokyo"), ZoneInfo("UTC")]


@given(
    st.datetimes(min_value=datetime(1970, 1, 1), max_value=datetime(2100, 12, 31)),
    st.sampled_from(ZONES),
)
def test_biz_date_is_always_the_day_before_and_equals_the_expression(
    naive: datetime, zone: ZoneInfo
) -> None:
    when = naive.replace(tzinfo=UTC)
    local = when.astimezone(zone)
    dates = date_params(when, zone)
    assert dates[BIZ_DATE] == (local.date() - timedelta(days=1)).strftime("%Y%m%d")
    assert dates[BIZ_DATE] == expand("$[yyyyMMdd-1]", zone, when)
    assert dates[BIZ_CURDATE] == local.strftime("%Y%m%d") == expand("$[yyyyMMdd]", zone, when)
    assert dates[DATETIME] == local.strftime("%Y%m%d%H%M%S")


def test_biz_date_over_every_hour_of_two_dst_years() -> None:
    # A deterministic sweep next to the property: every hour of 2024-2025 in both zones.
    start = datetime(2024, 1, 1, tzinfo=UTC)
    for zone in (NEW_YORK, BERLIN):
        for hour in range(0, 2 * 366 * 24):
            when = start + timedelta(hours=hour, minutes=30)
            local = when.astimezone(zone)
            expected = (local.date() - timedelta(days=1)).strftime("%Y%m%d")
            assert (
                date_params(when, zone)[BIZ_DATE] == expected == expand("$[yyyyMMdd-1]", zone, when)
            )


def _expanded(levels: dict[str, dict[str, str]]) -> dict[str, str]:
    return expanded_params(
        schedule_time=WHEN, zone=NEW_YORK, identity=IDENTITY, levels=levels, var_pool={}
    )


def test_values_that_outgrow_the_limits_once_expanded_are_refused_with_their_level() -> None:
    # '$[y-y-y-y-y-y-y-y]' (18 characters) prints 2024-2024-... (39): it more than doubles.
    years = "$[y-y-y-y-y-y-y-y]"
    grows = years * 3640  # 65,520 bytes written, 141,960 expanded
    empty: dict[str, str] = {}
    with pytest.raises(ExpandedTooLarge) as one:
        _expanded({"global": empty, "local": {"BIG": grows}, "startup": empty})
    assert (one.value.level, one.value.name) == ("local", "BIG")
    assert one.value.reason == "is 141960 bytes expanded; at most 65536"
    # Values each within 64 KiB expanded (39,975 bytes), over 256 KiB together.
    six = {f"V{i}": years * 1025 for i in range(6)}
    with pytest.raises(ExpandedTooLarge) as total:
        _expanded({"global": empty, "local": empty, "startup": {**six, "X": "x" * 30_000}})
    assert (total.value.level, total.value.name) == ("startup", "")
    assert "the startup parameters total 269863 bytes expanded" in total.value.reason
    # Within the limits: the levels merged as task_params merges them.
    merged = _expanded({"global": {"A": "$[yyyy]"}, "local": {"A": "x"}, "startup": empty})
    assert merged["A"] == "x"


def test_expanded_params_fill_in_builtins_in_any_level_and_keep_plain_values() -> None:
    empty: dict[str, str] = {}
    plain = {"global": {"A": "a"}, "local": {"B": "b"}, "startup": empty}
    assert _expanded(plain) == {"A": "a", "B": "b"}
    assert _expanded({"global": empty, "local": empty, "startup": empty}) == {}
    templated = {**plain, "startup": {"C": "${system.biz.date}/${system.task.instance.id}"}}
    assert _expanded(templated) == {"A": "a", "B": "b", "C": "20240310/7"}
