"""Time parameters through the API (issue 10): hostile ``$[...]`` and ``${system....}`` values
refused with INVALID_ARGUMENT and the parameter's field wherever a value enters (a definition's
global and local parameters, an update, a run's start parameters) with nothing stored, and the
values a real task receives, on a real master and worker over gRPC with real bash processes, on
every supported metadata database."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.timestamp_pb2 import Timestamp

from dsched.v1 import backfill_pb2 as bpb
from tests.integration.api.conftest import (
    FAILED,
    SUCCEEDED,
    WAIT_S,
    Cluster,
    assert_invalid,
    enums,
    failure,
    instance,
    online_workflow,
    pb,
    run_to_end,
    shell,
    snapshot,
    start,
    start_cluster,
    task_instances,
    workflow,
)

pytestmark = pytest.mark.timeout(300)

PROJECT = "p"
HOSTILE = [
    ("$[yyyyMMDD]", "day of the year"),
    ("$[YYYY-MM-dd]", "week-based year"),
    ("$[yyyyMMdd-1/0]", "division by zero"),
    ("$[yyyyMMdd-1/(1-1)]", "division by zero"),
    ("$[yyyyMMdd", "without its ']'"),
    ("x $[yyyy'MM]", "unterminated quote"),
    ("$[yyyy$[MM]]", "do not nest"),
    ("$[yyyy[MM]]", "do not nest"),
    ("$[yyyyMMdd-" + "(" * 40 + "1" + ")" * 40 + "]", "nested deeper"),
    ("$[yyyyMMdd-" + "-" * 40 + "1]", "nested deeper"),
    ("$[yyyyMMdd-" + "(" * 30000 + "1" + ")" * 30000 + "]", "longer than 256"),
    ("$[" + "add_months(" * 8 + "yyyy" + ",1)" * 8 + "]", "unknown pattern letter 'o'"),
    ("$[yyyyMMdd+99999999]", "beyond"),
    ("$[yyyyMMdd+999999999*999999999*999999999]", "beyond"),
    ("$[add_months(yyyyMMdd,1/2)]", "whole number"),
    ("$[year_week(yyyy-MM-dd,9)]", "1 (Monday) to 7"),
    ("$[eval(yyyy)]", "unknown pattern letter 'e'"),
    ("$[__import__(yyyy)]", "unknown function '__import__'"),
    ("$[1+2]", "no pattern letter"),
    ("$[]", "empty"),
    ("${system.biz.dat}", "unknown built-in"),
]


def ids(case: tuple[str, str]) -> str:
    return case[1].replace(" ", "-")[:30]


async def attempt_everywhere(c: Cluster, value: str, fragment: str) -> None:
    """The value as a global, a local, an updated global and a start parameter: each refused
    with INVALID_ARGUMENT naming that parameter only."""
    bad = {"BAD": value}
    calls: dict[str, Awaitable[Any]] = {
        "workflow.params['BAD']": c.stub.CreateWorkflow(
            pb.CreateWorkflowRequest(
                workflow=workflow(PROJECT, "new", [shell("t", "true")], params=bad)
            )
        ),
        "workflow.tasks[0].params['BAD']": c.stub.CreateWorkflow(
            pb.CreateWorkflowRequest(
                workflow=workflow(PROJECT, "new", [shell("t", "true", params=bad)])
            )
        ),
        "params['BAD']": c.stub.StartWorkflow(
            pb.StartWorkflowRequest(project=PROJECT, workflow="probe", params=bad)
        ),
    }
    for field_path, call in calls.items():
        got = await failure(call)
        reason = "INVALID_ARGUMENT" if field_path == "params['BAD']" else "INVALID_WORKFLOW"
        assert_invalid(got, field_path, reason=reason, contains=fragment)
        assert got.fields == [field_path], got
        assert len(got.describe(field_path)) < 1024  # a hostile value is not echoed back


async def probe(c: Cluster, dump: Path) -> None:
    """An online workflow whose task writes the parameters it received."""
    params = {
        "DT": "$[yyyyMMdd-1]",
        "HOUR_AGO": "$[yyyy-MM-dd HH:mm:ss-1/24]",
        "DAY_BACK": "$[yyyyMMddHHmmss-1]",
        "WEEK": "$[year_week(yyyy-MM-dd)]",
        "MONTH_END": "$[month_last_day(yyyyMMdd,-1)]",
        "ESCAPED": "$$[yyyy]",
        "SH_REF": "${HOME}",
    }
    local = {
        "WHO": "${system.project.name}/${system.workflow.definition.name}/"
        "${system.task.definition.name}"
    }
    script = f"env -0 > '{dump}'"
    await online_workflow(c, PROJECT, "probe", [shell("show", script, params=local)], params=params)


def read_env(path: Path) -> dict[str, str]:
    return dict(e.decode().split("=", 1) for e in path.read_bytes().split(b"\0") if e)


async def test_hostile_values_are_refused_and_nothing_is_stored(
    cluster: Cluster, tmp_path: Path
) -> None:
    await probe(cluster, tmp_path / "env")
    before = await snapshot(cluster)
    for value, fragment in HOSTILE:
        await attempt_everywhere(cluster, value, fragment)
    # An update of the existing definition: refused too, its version unchanged.
    await cluster.stub.SetWorkflowReleaseState(
        pb.SetWorkflowReleaseStateRequest(
            project=PROJECT, name="probe", release_state=enums.RELEASE_STATE_OFFLINE
        )
    )
    offline = await snapshot(cluster)
    for value, fragment in HOSTILE:
        wf = workflow(PROJECT, "probe", [shell("show", "true")], params={"BAD": value})
        got = await failure(cluster.stub.UpdateWorkflow(pb.UpdateWorkflowRequest(workflow=wf)))
        assert_invalid(got, "workflow.params['BAD']", reason="INVALID_WORKFLOW", contains=fragment)
    assert await snapshot(cluster) == offline
    assert before.instances == offline.instances == []
    assert before.rows == offline.rows


async def test_a_task_receives_the_expanded_values(db_url: str, tmp_path: Path) -> None:
    async with start_cluster(db_url, tmp_path) as cluster:
        dump = tmp_path / "env"
        await probe(cluster, dump)
        await attempt_everywhere(cluster, "$[yyyyMMDD]", "day of the year")  # on each database
        inst = await start(
            cluster, PROJECT, "probe", params={"BIZ": "${system.biz.date}", "ID": "id-$[yyyy]"}
        )
        assert (await run_to_end(cluster, inst.id)).state == SUCCEEDED
        submitted = (await instance(cluster, inst.id)).submit_time.ToDatetime(tzinfo=UTC)
        day = submitted.date()
        env = read_env(dump)
        yesterday = (day - timedelta(days=1)).strftime("%Y%m%d")
        iso = day.isocalendar()
        month_end = day.replace(day=1) - timedelta(days=1)
        assert {k: env[k] for k in ("DT", "BIZ", "WEEK", "MONTH_END", "ESCAPED", "WHO", "ID")} == {
            "DT": yesterday,
            "BIZ": yesterday,
            "WEEK": f"{iso.year}-{iso.week:02d}",
            "MONTH_END": month_end.strftime("%Y%m%d"),
            "ESCAPED": "$[yyyy]",
            "WHO": f"{PROJECT}/probe/show",
            "ID": f"id-{day.year}",
        }
        hour_ago = submitted.replace(microsecond=0) - timedelta(hours=1)
        assert env["HOUR_AGO"] == hour_ago.strftime("%Y-%m-%d %H:%M:%S")
        assert env["SH_REF"] == "${HOME}"  # text for the task, not dsched's


async def run_at(c: Cluster, moment: datetime, zone: str = "", **params: str) -> tuple[int, int]:
    """A run of the probe with its schedule time (and zone) given; its id and final state."""
    stamp = Timestamp()
    stamp.FromDatetime(moment)
    inst = await start(c, PROJECT, "probe", schedule_time=stamp, time_zone=zone, params=params)
    return inst.id, (await run_to_end(c, inst.id)).state


async def test_the_schedule_time_and_zone_given_to_a_run_decide_its_values(
    cluster: Cluster, tmp_path: Path
) -> None:
    dump = tmp_path / "env"
    await probe(cluster, dump)
    # 00:30 in New York the night after the fall-back change; DolphinScheduler's 24-hour day
    # would print 20241103013000 for DAY_BACK.
    fall_back = datetime(2024, 11, 4, 5, 30, tzinfo=UTC)
    _, state = await run_at(
        cluster, fall_back, "America/New_York", BIZ="${system.biz.date}", NOW="${system.datetime}"
    )
    assert state == SUCCEEDED
    env = read_env(dump)
    assert {
        k: env[k] for k in ("DT", "BIZ", "NOW", "DAY_BACK", "HOUR_AGO", "WEEK", "MONTH_END")
    } == {
        "DT": "20241103",
        "BIZ": "20241103",
        "NOW": "20241104003000",
        "DAY_BACK": "20241103003000",
        "HOUR_AGO": "2024-11-03 23:30:00",
        "WEEK": "2024-45",
        "MONTH_END": "20241031",
    }
    # The week of 2024-12-30 belongs to 2025 (DolphinScheduler: 2024-01).
    _, state = await run_at(cluster, datetime(2024, 12, 30, 12, tzinfo=UTC), "Europe/Berlin")
    assert state == SUCCEEDED
    env = read_env(dump)
    assert (env["DT"], env["WEEK"]) == ("20241229", "2025-01")


async def test_a_value_beyond_the_calendar_fails_its_task_before_it_runs(
    cluster: Cluster, tmp_path: Path
) -> None:
    dump = tmp_path / "env"
    await probe(cluster, dump)
    last_day = datetime(9999, 12, 31, 12, tzinfo=UTC)
    instance_id, state = await run_at(cluster, last_day, NEXT="$[yyyyMMdd+1]")
    assert state == FAILED
    [attempt] = await task_instances(cluster, instance_id, superseded=True)
    assert "a parameter cannot be expanded" in attempt.state_reason
    assert "outside the years 1-9999" in attempt.state_reason
    assert not dump.exists()  # the task never ran


async def test_values_too_large_once_expanded_are_refused_or_fail_their_task(
    cluster: Cluster, tmp_path: Path
) -> None:
    """A value within the limits as written that outgrows them expanded (README "Limits"): a
    StartWorkflow is refused with REQUEST_TOO_LARGE naming the parameter and nothing stored; a
    backfill's run, which no client starts, fails its task saying so before it runs."""
    ran = tmp_path / "ran"
    name = "w" * 64  # the longest name: each reference below grows from 34 to 64 characters
    grows = "${system.workflow.definition.name}" * 1900  # 64,600 bytes; 121,600 expanded
    await online_workflow(
        cluster, PROJECT, name, [shell("t", f"touch {ran}")], params={"BIG": grows}
    )
    await online_workflow(cluster, PROJECT, "v" * 64, [shell("t", f"touch {ran}")])
    before = await snapshot(cluster)
    got = await failure(start(cluster, PROJECT, name))
    assert_invalid(got, "workflow.params['BIG']", reason="REQUEST_TOO_LARGE", contains="expanded")
    got = await failure(start(cluster, PROJECT, "v" * 64, params={"X": grows}))
    assert_invalid(got, "params['X']", reason="REQUEST_TOO_LARGE", contains="expanded")
    assert got.fields == ["params['X']"]
    assert await snapshot(cluster) == before

    day = Timestamp()
    day.FromDatetime(datetime(2026, 1, 1, tzinfo=UTC))
    await cluster.stub.CreateBackfill(
        bpb.CreateBackfillRequest(project=PROJECT, workflow=name, dates=[day])
    )
    async with asyncio.timeout(WAIT_S):
        while True:
            listed = await cluster.stub.ListWorkflowInstances(
                pb.ListWorkflowInstancesRequest(project=PROJECT, workflow=name)
            )
            if listed.instances and listed.instances[0].state == FAILED:
                break
            await asyncio.sleep(0.1)  # a test's wait for the run to end
    [attempt] = await task_instances(cluster, listed.instances[0].id, superseded=True)
    assert "too large once expanded" in attempt.state_reason
    assert "121600 bytes" in attempt.state_reason
    assert not ran.exists()  # the task never ran
