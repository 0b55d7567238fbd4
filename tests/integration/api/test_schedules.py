"""Schedules over the wire: a real master and worker, raw dsched.v1 stubs.

Firing (every 2 seconds, exactly one run per fire time, each with its fire time as its schedule
time), online and offline, preview, the overlap policies, and hostile schedules refused with the
field named and nothing stored.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import Counter
from collections.abc import Awaitable
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import grpc
import pytest
from google.protobuf import timestamp_pb2
from sqlalchemy.exc import IntegrityError

from dsched.options import RunTrigger
from dsched.v1 import schedule_pb2 as spb
from dsched_server.app import runs as app_runs
from dsched_server.app.transaction import Transaction
from dsched_server.core.records import RunOptions
from dsched_server.store import definitions
from dsched_server.store import schedules as schedule_store
from dsched_server.store.instances import RunTime
from tests.integration.api.conftest import (
    WAIT_S,
    Cluster,
    assert_invalid,
    assert_status,
    enums,
    failure,
    online_workflow,
    pb,
    res,
    shell,
    snapshot,
    start_cluster,
    watch_to_end,
)


def schedule(workflow: str = "tick", cron: str = "*/2 * * * * *", **fields: Any) -> spb.Schedule:
    return spb.Schedule(project="p", workflow=workflow, cron=cron, **fields)


async def create(c: Cluster, **fields: Any) -> spb.Schedule:
    reply = await c.stub.CreateSchedule(spb.CreateScheduleRequest(schedule=schedule(**fields)))
    return reply.schedule


async def online(c: Cluster, schedule_id: int, on: bool = True) -> spb.Schedule:
    reply = await c.stub.SetScheduleState(spb.SetScheduleStateRequest(id=schedule_id, online=on))
    return reply.schedule


async def scheduled_runs(c: Cluster) -> list[res.WorkflowInstance]:
    reply = await c.stub.ListWorkflowInstances(
        pb.ListWorkflowInstancesRequest(project="p", page_size=1000)
    )
    return [i for i in reply.instances if i.trigger == enums.RUN_TRIGGER_SCHEDULE]


async def until_runs(c: Cluster, n: int) -> list[res.WorkflowInstance]:
    async with asyncio.timeout(WAIT_S):
        while len(runs := await scheduled_runs(c)) < n:
            await asyncio.sleep(0.1)  # a test's wait for fire times to pass
    return runs


async def test_a_schedule_fires_once_per_fire_time(cluster: Cluster) -> None:
    await online_workflow(cluster, "p", "tick", [shell("t", "true")])
    created = await create(cluster)
    assert not created.online and not created.HasField("next_fire_time")
    put = await online(cluster, created.id)
    assert put.online and put.HasField("next_fire_time")
    runs = await until_runs(cluster, 3)
    await online(cluster, created.id, on=False)
    times = [r.schedule_time.ToDatetime(tzinfo=UTC) for r in await scheduled_runs(cluster)]
    assert Counter(times).most_common(1)[0][1] == 1  # one run per fire time
    assert all(t.second % 2 == 0 and t.microsecond == 0 for t in times)
    assert {r.schedule_id for r in runs} == {created.id}  # each names the schedule that fired it
    lateness = [
        (r.submit_time.ToDatetime(tzinfo=UTC) - r.schedule_time.ToDatetime(tzinfo=UTC))
        for r in runs
    ]
    assert max(lateness) < timedelta(seconds=2)  # on time, not caught up later
    got = await cluster.stub.GetSchedule(spb.GetScheduleRequest(id=created.id))
    assert got.schedule.last_fire_time.ToDatetime(tzinfo=UTC) >= max(times)


async def test_offline_stops_firing(cluster: Cluster) -> None:
    await online_workflow(cluster, "p", "tick", [shell("t", "true")])
    created = await create(cluster)
    await online(cluster, created.id)
    await until_runs(cluster, 1)
    await online(cluster, created.id, on=False)
    before = len(await scheduled_runs(cluster))
    await asyncio.sleep(2.5)  # more than one fire interval: nothing may fire
    assert len(await scheduled_runs(cluster)) <= before + 1  # one may have been under way


async def test_overlap_skip(cluster: Cluster, tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    await online_workflow(cluster, "p", "slow", [shell("t", _wait_for(gate))])
    skip = await create(
        cluster, workflow="slow", cron="* * * * * *", overlap=spb.SCHEDULE_OVERLAP_SKIP
    )
    await online(cluster, skip.id)
    await until_runs(cluster, 1)
    await asyncio.sleep(2.2)  # two more fire times pass while the first run waits at the gate
    await online(cluster, skip.id, on=False)
    assert len(await scheduled_runs(cluster)) == 1  # skipped, not started
    async with cluster.master.db.read() as conn:
        states = Counter(state for _, state, _ in await schedule_store.fires(conn, skip.id))
    assert states["FIRED"] == 1 and states["SKIPPED"] >= 2


async def test_overlap_queue(cluster: Cluster, tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    await online_workflow(cluster, "p", "slow", [shell("t", _wait_for(gate))])
    queue = await create(
        cluster, workflow="slow", cron="* * * * * *", overlap=spb.SCHEDULE_OVERLAP_QUEUE
    )
    await online(cluster, queue.id)
    await until_runs(cluster, 1)
    await asyncio.sleep(2.2)  # fire times queue behind the run at the gate
    await online(cluster, queue.id, on=False)
    assert len(await scheduled_runs(cluster)) == 1
    gate.touch()  # the run ends: the queued fire times start, one after another
    runs = await until_runs(cluster, 3)
    times = sorted(r.schedule_time.ToDatetime(tzinfo=UTC) for r in runs)
    assert len(set(times)) == len(times)  # each queued fire time once


async def test_preview_skips_and_merges_dst(cluster: Cluster) -> None:
    reply = await cluster.stub.PreviewSchedule(
        spb.PreviewScheduleRequest(cron="30 2 * * 0", time_zone="Europe/Berlin", count=100)
    )
    berlin = ZoneInfo("Europe/Berlin")
    days = [t.ToDatetime(tzinfo=UTC).astimezone(berlin).date() for t in reply.fire_times]
    assert len(days) == 100
    assert all(b > a for a, b in itertools.pairwise(days))
    assert date(2027, 3, 28) not in days  # 02:30 does not exist that Sunday
    assert days.count(date(2027, 10, 31)) == 1  # and exists twice that one: fired once


async def test_a_cron_below_the_masters_minimum_is_refused(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'dsched.db'}"
    async with start_cluster(url, tmp_path, min_schedule_interval=60.0) as c:
        await online_workflow(c, "p", "tick", [shell("t", "true")])
        request = spb.CreateScheduleRequest(schedule=schedule(cron="*/30 * * * * *"))
        got = await failure(c.stub.CreateSchedule(request))
        assert_invalid(got, "schedule.cron", contains="minimum interval is 60 s")


def _wait_for(gate: Path) -> str:
    return f"until [ -e '{gate}' ]; do sleep 0.05; done"


async def test_online_needs_an_online_workflow(cluster: Cluster) -> None:
    await online_workflow(cluster, "p", "tick", [shell("t", "true")])
    await cluster.stub.SetWorkflowReleaseState(
        pb.SetWorkflowReleaseStateRequest(
            project="p", name="tick", release_state=enums.RELEASE_STATE_OFFLINE
        )
    )
    created = await create(cluster)
    got = await failure(
        cluster.stub.SetScheduleState(spb.SetScheduleStateRequest(id=created.id, online=True))
    )
    assert_status(got, grpc.StatusCode.FAILED_PRECONDITION, "WORKFLOW_OFFLINE")


def stamp(when: datetime) -> timestamp_pb2.Timestamp:
    out = timestamp_pb2.Timestamp()
    out.FromDatetime(when)
    return out


HOSTILE = [
    ("minute 61", schedule(cron="61 * * * *"), "schedule.cron"),
    ("day 32", schedule(cron="0 0 32 * *"), "schedule.cron"),
    ("8 fields", schedule(cron="0 0 0 * * * * *"), "schedule.cron"),
    ("never fires", schedule(cron="0 0 30 2 *"), "schedule.cron"),
    (
        "unknown time zone",
        schedule(cron="0 2 * * *", time_zone="Europe/Atlantis"),
        "schedule.time_zone",
    ),
    (
        "end before start",
        schedule(
            cron="0 2 * * *",
            start_time=stamp(datetime(2027, 1, 1, tzinfo=UTC)),
            end_time=stamp(datetime(2026, 1, 1, tzinfo=UTC)),
        ),
        "schedule.end_time",
    ),
    (
        "window already ended",
        schedule(cron="0 2 * * *", end_time=stamp(datetime(2020, 1, 1, tzinfo=UTC))),
        "schedule.end_time",
    ),
    (
        "no fire time in the window",
        schedule(
            cron="0 * * * *",
            start_time=stamp(datetime(2030, 1, 1, 0, 1, tzinfo=UTC)),
            end_time=stamp(datetime(2030, 1, 1, 0, 59, tzinfo=UTC)),
        ),
        "schedule.end_time",
    ),
    ("bad catch-up", schedule(cron="0 2 * * *", catch_up=9), "schedule.catch_up"),
    ("cap 10^6", schedule(cron="0 2 * * *", catch_up_cap=1_000_000), "schedule.catch_up_cap"),
    ("bad workflow name", schedule(workflow="a/b", cron="0 2 * * *"), "schedule.workflow"),
]


@pytest.mark.parametrize(("bad", "field"), [pytest.param(b, f, id=i) for i, b, f in HOSTILE])
async def test_hostile_schedules_are_refused(
    cluster: Cluster, bad: spb.Schedule, field: str
) -> None:
    await online_workflow(cluster, "p", "tick", [shell("t", "true")])
    before = await snapshot(cluster)
    got = await failure(cluster.stub.CreateSchedule(spb.CreateScheduleRequest(schedule=bad)))
    assert_invalid(got, field)
    assert await snapshot(cluster) == before
    listed = await cluster.stub.ListSchedules(spb.ListSchedulesRequest())
    assert list(listed.schedules) == []


async def test_every_database_refuses_hostile_schedules_and_fires_each_time_once(
    db_url: str, tmp_path: Path
) -> None:
    """On SQLite, PostgreSQL and MariaDB: every hostile schedule refused with its field and
    nothing stored; a schedule every 2 s fires each fire time once; and a second fire of a fire
    time already fired (what a master whose share just moved would write) fails on the unique
    key with the run written in its transaction rolled back with it."""
    async with start_cluster(db_url, tmp_path) as c:
        await online_workflow(c, "p", "tick", [shell("t", "true")])
        before = await snapshot(c)
        for _, bad, field in HOSTILE:
            got = await failure(c.stub.CreateSchedule(spb.CreateScheduleRequest(schedule=bad)))
            assert_invalid(got, field)
        assert await snapshot(c) == before
        assert list((await c.stub.ListSchedules(spb.ListSchedulesRequest())).schedules) == []

        created = await create(c)
        await online(c, created.id)
        await until_runs(c, 3)
        await online(c, created.id, on=False)
        async with c.master.db.read() as conn:
            fires = await schedule_store.fires(conn, created.id)
        times = [aware(when) for when, _, _ in fires]
        assert len(set(times)) == len(times) >= 3
        runs = {r.id: r for r in await scheduled_runs(c)}
        assert [runs[i].schedule_time.ToDatetime(tzinfo=UTC) for _, _, i in fires if i] == times

        for run_id in runs:  # the last fire's run may still be going: the snapshot must hold still
            await watch_to_end(c, run_id)
        before = await snapshot(c)
        with pytest.raises(IntegrityError):
            async with c.master.db.transaction() as conn:
                tx = Transaction(conn, datetime.now(UTC))
                workflow = await definitions.get_workflow(conn, "p", "tick")
                when = RunTime(
                    schedule_time=times[0], trigger=RunTrigger.SCHEDULE, schedule_id=created.id
                )
                instance_id = await app_runs.create(tx, workflow, RunOptions(), when)
                await schedule_store.add_fire(
                    conn, created.id, times[0], schedule_store.FIRED, instance_id, tx.now
                )
        assert await snapshot(c) == before  # no second run of that fire time


def aware(when: datetime) -> datetime:
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


async def test_delete_stops_firing_is_idempotent_and_then_not_found(cluster: Cluster) -> None:
    await online_workflow(cluster, "p", "tick", [shell("t", "true")])
    created = await create(cluster)
    await online(cluster, created.id)
    await until_runs(cluster, 1)

    delete = spb.DeleteScheduleRequest(id=created.id, request_id="delete-1")
    await cluster.stub.DeleteSchedule(delete)
    await cluster.stub.DeleteSchedule(delete)  # a retry of the same request: the same answer
    fired = len(await scheduled_runs(cluster))
    calls: list[Awaitable[Any]] = [
        cluster.stub.GetSchedule(spb.GetScheduleRequest(id=created.id)),
        cluster.stub.DeleteSchedule(spb.DeleteScheduleRequest(id=created.id)),
        cluster.stub.SetScheduleState(spb.SetScheduleStateRequest(id=created.id, online=True)),
        cluster.stub.UpdateSchedule(
            spb.UpdateScheduleRequest(schedule=schedule(cron="0 2 * * *", id=created.id))
        ),
        cluster.stub.PreviewSchedule(spb.PreviewScheduleRequest(id=created.id)),
    ]
    for call in calls:
        got = await failure(call)
        assert_status(got, grpc.StatusCode.NOT_FOUND, "NOT_FOUND")
        assert got.metadata["schedule"] == str(created.id)

    await asyncio.sleep(2.5)  # more than one fire interval: nothing may fire
    runs = await scheduled_runs(cluster)
    assert len(runs) <= fired + 1  # one may have been under way at the delete
    assert {r.schedule_id for r in runs} == {created.id}  # the runs keep naming it
    async with cluster.master.db.read() as conn:
        assert await schedule_store.fires(conn, created.id) == []
