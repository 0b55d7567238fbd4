"""Backfills over the wire: a real master and worker, raw dsched.v1 stubs.

Order, parallelism (from the runs' recorded times), the lane behind other runs, pause, resume and
cancel, failed-only reprocessing, and hostile requests refused whole with nothing stored. Every
test checks that each date got exactly one run, with the date as its schedule time.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import grpc
import pytest
from google.protobuf import timestamp_pb2

from dsched.v1 import backfill_pb2 as bpb
from dsched.v1 import schedule_pb2 as spb
from tests.integration.api.conftest import (
    WAIT_S,
    Cluster,
    Gate,
    assert_invalid,
    enums,
    failure,
    online_workflow,
    pb,
    res,
    shell,
    snapshot,
    start,
    task_instances,
)

DAY = timedelta(days=1)
SPAWN_JITTER = timedelta(milliseconds=200)
D0 = datetime(2026, 1, 1, tzinfo=UTC)
FINISHED = {
    bpb.BACKFILL_STATE_SUCCEEDED,
    bpb.BACKFILL_STATE_FAILED,
    bpb.BACKFILL_STATE_CANCELLED,
}


def stamp(when: datetime) -> timestamp_pb2.Timestamp:
    out = timestamp_pb2.Timestamp()
    out.FromDatetime(when)
    return out


def days(n: int, first: datetime = D0) -> tuple[timestamp_pb2.Timestamp, timestamp_pb2.Timestamp]:
    return stamp(first), stamp(first + (n - 1) * DAY)


async def backfill(c: Cluster, workflow: str, n: int, **fields: Any) -> bpb.Backfill:
    first, last = days(n)
    request = bpb.CreateBackfillRequest(
        project="p", workflow=workflow, start_time=first, end_time=last, **fields
    )
    return (await c.stub.CreateBackfill(request)).backfill


async def finished(c: Cluster, backfill_id: int) -> bpb.Backfill:
    """Waits (bounded) for the backfill to end, woken by its runs' watches."""
    async with asyncio.timeout(WAIT_S):
        while True:
            got = (await c.stub.GetBackfill(bpb.GetBackfillRequest(id=backfill_id))).backfill
            if got.state in FINISHED:
                return got
            await asyncio.sleep(0.05)  # a test's wait on another process's progress


async def runs_of(c: Cluster, backfill_id: int) -> list[res.WorkflowInstance]:
    reply = await c.stub.ListWorkflowInstances(
        pb.ListWorkflowInstancesRequest(project="p", page_size=1000)
    )
    return sorted((i for i in reply.instances if i.backfill_id == backfill_id), key=lambda i: i.id)


def once_each(runs: list[res.WorkflowInstance], b: bpb.Backfill) -> None:
    """Each date of the backfill ran exactly once, as a BACKFILL run of that schedule time."""
    dates = Counter(r.schedule_time.ToDatetime() for r in runs)
    assert dates == Counter(d.ToDatetime() for d in b.dates)
    assert {r.trigger for r in runs} == {enums.RUN_TRIGGER_BACKFILL}


async def test_serial_ascending_runs_each_date_once_in_order(cluster: Cluster) -> None:
    await online_workflow(cluster, "p", "daily", [shell("t", "true")])
    created = await backfill(cluster, "daily", 4)
    assert created.state == bpb.BACKFILL_STATE_RUNNING
    assert [d.ToDatetime(tzinfo=UTC) for d in created.dates] == [D0 + i * DAY for i in range(4)]
    done = await finished(cluster, created.id)
    assert done.state == bpb.BACKFILL_STATE_SUCCEEDED
    assert (done.progress.succeeded, done.progress.pending) == (4, 0)
    runs = await runs_of(cluster, created.id)
    once_each(runs, done)
    assert [r.schedule_time.ToDatetime(tzinfo=UTC) for r in runs] == [
        D0 + i * DAY for i in range(4)
    ]
    for before, after in itertools.pairwise(runs):  # serial: one after another
        assert before.end_time.ToDatetime() <= after.submit_time.ToDatetime()


async def test_descending_order(cluster: Cluster) -> None:
    await online_workflow(cluster, "p", "daily", [shell("t", "true")])
    created = await backfill(cluster, "daily", 3, order=bpb.BACKFILL_ORDER_DESCENDING)
    done = await finished(cluster, created.id)
    runs = await runs_of(cluster, created.id)
    once_each(runs, done)
    assert [r.schedule_time.ToDatetime(tzinfo=UTC) for r in runs] == [
        D0 + 2 * DAY,
        D0 + DAY,
        D0,
    ]


async def test_parallel_3_never_runs_more_than_3_at_once(cluster: Cluster) -> None:
    await online_workflow(cluster, "p", "daily", [shell("t", "sleep 0.3")])
    created = await backfill(cluster, "daily", 9, parallelism=3)
    done = await finished(cluster, created.id)
    assert done.state == bpb.BACKFILL_STATE_SUCCEEDED
    runs = await runs_of(cluster, created.id)
    once_each(runs, done)
    spans = [(r.submit_time.ToDatetime(), r.end_time.ToDatetime()) for r in runs]
    peak = max(sum(1 for s, e in spans if s <= t < e) for t, _ in spans)
    assert peak == 3  # from the recorded times: 3 at once, never 4


async def test_a_failed_date_does_not_stop_the_others_and_failed_only_reruns_it(
    cluster: Cluster,
) -> None:
    # The run of 2026-01-02 fails: its time parameter says which date it runs.
    task = shell("t", '[ "$DT" != 20260102 ]', params={"DT": "$[yyyyMMdd]"})
    await online_workflow(cluster, "p", "daily", [task])
    first = await finished(cluster, (await backfill(cluster, "daily", 3, parallelism=2)).id)
    assert first.state == bpb.BACKFILL_STATE_FAILED
    assert (first.progress.succeeded, first.progress.failed) == (2, 1)
    again = await backfill(cluster, "daily", 3, reprocess=bpb.BACKFILL_REPROCESS_FAILED)
    assert [d.ToDatetime(tzinfo=UTC) for d in again.dates] == [D0 + DAY]
    await finished(cluster, again.id)
    assert len(await runs_of(cluster, again.id)) == 1
    missing = await backfill(cluster, "daily", 4, reprocess=bpb.BACKFILL_REPROCESS_MISSING)
    assert [d.ToDatetime(tzinfo=UTC) for d in missing.dates] == [D0 + 3 * DAY]


async def test_stop_at_a_failure_skips_the_pending_dates(cluster: Cluster) -> None:
    """With on_failure STOP, the dates not yet started when one fails are SKIPPED (an advance
    then reads every pending date, not only the next to start) and the counts say so."""
    task = shell("t", '[ "$DT" != 20260102 ]', params={"DT": "$[yyyyMMdd]"})
    await online_workflow(cluster, "p", "daily", [task])
    created = await backfill(cluster, "daily", 8, on_failure=bpb.BACKFILL_FAILURE_STOP)
    got = await finished(cluster, created.id)
    assert got.state == bpb.BACKFILL_STATE_FAILED
    p = got.progress
    assert (p.succeeded, p.failed, p.skipped, p.running, p.pending) == (1, 1, 6, 0, 0)
    assert len(await runs_of(cluster, created.id)) == 2  # serial: the skipped never ran


async def test_pause_resume_and_cancel(cluster: Cluster, gate: Gate) -> None:
    await online_workflow(cluster, "p", "daily", [shell("t", gate.wait)])
    created = await backfill(cluster, "daily", 5, parallelism=2)
    paused = (await cluster.stub.PauseBackfill(bpb.PauseBackfillRequest(id=created.id))).backfill
    assert paused.state == bpb.BACKFILL_STATE_PAUSED
    gate.open()  # the 2 runs under way finish; a paused backfill starts no more
    async with asyncio.timeout(WAIT_S):
        while (got := await _get(cluster, created.id)).progress.succeeded < 2:
            await asyncio.sleep(0.05)
    assert (got.progress.running, got.progress.pending) == (0, 3)
    assert len(await runs_of(cluster, created.id)) == 2
    again = await failure(cluster.stub.PauseBackfill(bpb.PauseBackfillRequest(id=created.id)))
    assert again.code == grpc.StatusCode.FAILED_PRECONDITION

    gate.path.unlink()  # the next runs wait at the gate again
    resumed = await cluster.stub.ResumeBackfill(bpb.ResumeBackfillRequest(id=created.id))
    assert resumed.backfill.progress.running == 2
    cancelled = await cluster.stub.CancelBackfill(bpb.CancelBackfillRequest(id=created.id))
    assert cancelled.backfill.state == bpb.BACKFILL_STATE_CANCELLED
    assert cancelled.backfill.progress.skipped == 1
    runs = await runs_of(cluster, created.id)
    assert len(runs) == 4  # the skipped date never got a run
    async with asyncio.timeout(WAIT_S):  # the 2 runs under way were stopped
        while {(await _instance(cluster, r.id)).state for r in runs[2:]} != {
            enums.WORKFLOW_INSTANCE_STATE_STOPPED
        }:
            await asyncio.sleep(0.05)


async def test_backfill_runs_queue_behind_a_manual_run(cluster: Cluster, gate: Gate) -> None:
    """Backfill runs wait in the backfill lane: a manual run started while 16 of them are under
    way (8 hold the worker's 8 slots at a gate, the rest wait for a slot) and 14 more dates are
    pending starts before every backfill task created after its own: none of those overtakes it
    (the ones created before it may go first: they were queued already)."""
    await online_workflow(cluster, "p", "daily", [shell("t", gate.wait)])
    await online_workflow(cluster, "p", "urgent", [shell("u", "true")])
    created = await backfill(cluster, "daily", 30, parallelism=16)
    async with asyncio.timeout(WAIT_S):
        while len(await runs_of(cluster, created.id)) < 16:
            await asyncio.sleep(0.05)
    urgent = await start(cluster, "p", "urgent")
    async with asyncio.timeout(WAIT_S):
        while not await task_instances(cluster, urgent.id):
            await asyncio.sleep(0.02)
    gate.open()
    done = await finished(cluster, created.id)
    assert done.state == bpb.BACKFILL_STATE_SUCCEEDED
    once_each(await runs_of(cluster, created.id), done)
    (u,) = await task_instances(cluster, urgent.id)
    tasks = [
        t for r in await runs_of(cluster, created.id) for t in await task_instances(cluster, r.id)
    ]
    later = [t for t in tasks if t.submit_time.ToDatetime() > u.submit_time.ToDatetime()]
    assert len(later) >= 14  # the dates not started when the manual run came
    overtook = [
        t.id for t in later if t.start_time.ToDatetime() < u.start_time.ToDatetime() - SPAWN_JITTER
    ]
    assert overtook == []


async def _get(c: Cluster, backfill_id: int) -> bpb.Backfill:
    return (await c.stub.GetBackfill(bpb.GetBackfillRequest(id=backfill_id))).backfill


async def _instance(c: Cluster, instance_id: int) -> res.WorkflowInstance:
    reply = await c.stub.GetWorkflowInstance(pb.GetWorkflowInstanceRequest(id=instance_id))
    return reply.instance


def _request(**fields: Any) -> bpb.CreateBackfillRequest:
    base: dict[str, Any] = {"project": "p", "workflow": "daily"}
    if "dates" not in fields:
        base["start_time"], base["end_time"] = days(3)
    return bpb.CreateBackfillRequest(**{**base, **fields})


HOSTILE = [
    (
        "100 years of a minutely cron",
        _request(cron="* * * * *", end_time=stamp(D0 + 36500 * DAY)),
        "end_time",
    ),
    ("end before start", _request(start_time=stamp(D0), end_time=stamp(D0 - DAY)), "end_time"),
    ("8 fields", _request(cron="0 0 * * * * * *"), "cron"),
    ("minute 61", _request(cron="61 * * * *"), "cron"),
    ("never fires", _request(cron="0 0 31 2 *"), "cron"),
    ("unknown time zone", _request(time_zone="Mars/Olympus"), "time_zone"),
    ("a path as time zone", _request(time_zone="../../etc/passwd"), "time_zone"),
    ("parallelism 1e6", _request(parallelism=1_000_000), "parallelism"),
    ("negative parallelism", _request(parallelism=-1), "parallelism"),
    ("dates and a range", _request(dates=[stamp(D0)], start_time=stamp(D0)), "dates"),
    (
        "no end",
        bpb.CreateBackfillRequest(project="p", workflow="daily", start_time=stamp(D0)),
        "end_time",
    ),
    ("year 10000", _request(end_time=timestamp_pb2.Timestamp(seconds=253_402_300_800)), "end_time"),
    ("too many dates", _request(dates=[stamp(D0 + i * DAY) for i in range(1001)]), "dates"),
    ("unknown order", _request(order=7), "order"),
]


@pytest.mark.parametrize(("request_", "field"), [pytest.param(r, f, id=i) for i, r, f in HOSTILE])
async def test_hostile_requests_are_refused_whole(
    cluster: Cluster, request_: bpb.CreateBackfillRequest, field: str
) -> None:
    await online_workflow(cluster, "p", "daily", [shell("t", "true")])
    before = await snapshot(cluster)
    got = await failure(cluster.stub.CreateBackfill(request_))
    assert got.code == grpc.StatusCode.INVALID_ARGUMENT
    assert_invalid(got, field)
    assert await snapshot(cluster) == before
    listed = await cluster.stub.ListBackfills(bpb.ListBackfillsRequest())
    assert list(listed.backfills) == []


async def test_duplicate_dates_merge(cluster: Cluster) -> None:
    await online_workflow(cluster, "p", "daily", [shell("t", "true")])
    dates = [stamp(D0 + DAY), stamp(D0), stamp(D0 + DAY)]
    created = (await cluster.stub.CreateBackfill(_request(dates=dates))).backfill
    assert [d.ToDatetime(tzinfo=UTC) for d in created.dates] == [D0, D0 + DAY]
    once_each(await runs_of(cluster, (await finished(cluster, created.id)).id), created)


async def test_an_offline_workflow_is_a_failed_precondition(cluster: Cluster) -> None:
    await online_workflow(cluster, "p", "daily", [shell("t", "true")])
    await cluster.stub.SetWorkflowReleaseState(
        pb.SetWorkflowReleaseStateRequest(
            project="p", name="daily", release_state=enums.RELEASE_STATE_OFFLINE
        )
    )
    got = await failure(cluster.stub.CreateBackfill(_request()))
    assert got.code == grpc.StatusCode.FAILED_PRECONDITION


async def test_scheduled_runs_are_not_starved_by_a_50_date_backfill(
    cluster: Cluster, gate: Gate
) -> None:
    """A schedule firing every second while a 50-date backfill (PARALLEL 16, on a worker of 8
    slots) keeps the worker full: every scheduled run starts before any backfill task created
    after it, and within a few seconds of its fire time."""
    await online_workflow(cluster, "p", "daily", [shell("t", "sleep 0.5")])
    await online_workflow(cluster, "p", "tick", [shell("u", "true")])
    created = await backfill(cluster, "daily", 50, parallelism=16)
    tick = (
        await cluster.stub.CreateSchedule(
            spb.CreateScheduleRequest(
                schedule=spb.Schedule(project="p", workflow="tick", cron="* * * * * *")
            )
        )
    ).schedule
    await cluster.stub.SetScheduleState(spb.SetScheduleStateRequest(id=tick.id, online=True))
    done = await finished(cluster, created.id)
    await cluster.stub.SetScheduleState(spb.SetScheduleStateRequest(id=tick.id, online=False))
    assert done.state == bpb.BACKFILL_STATE_SUCCEEDED
    reply = await cluster.stub.ListWorkflowInstances(
        pb.ListWorkflowInstancesRequest(project="p", workflow="tick", page_size=1000)
    )
    scheduled = [i for i in reply.instances if i.state == enums.WORKFLOW_INSTANCE_STATE_SUCCEEDED]
    assert len(scheduled) >= 3
    tasks = [
        t for r in await runs_of(cluster, created.id) for t in await task_instances(cluster, r.id)
    ]
    for run in scheduled:
        (u,) = await task_instances(cluster, run.id)
        # Sent in one batch, a scheduled task and a later backfill one start on the worker side
        # by side (their spawns run in threads): overtaking means by more than that jitter.
        overtook = [
            t.id
            for t in tasks
            if t.submit_time.ToDatetime() > u.submit_time.ToDatetime()
            and t.start_time.ToDatetime() < u.start_time.ToDatetime() - SPAWN_JITTER
        ]
        assert overtook == [], f"scheduled run {run.id} overtaken by backfill tasks {overtook}"
        late = u.start_time.ToDatetime() - run.schedule_time.ToDatetime()
        assert late < timedelta(seconds=5), f"scheduled run {run.id} started {late} late"


async def test_a_range_without_a_cron_follows_the_workflows_schedule(cluster: Cluster) -> None:
    await online_workflow(cluster, "p", "daily", [shell("t", "true")])
    await cluster.stub.CreateSchedule(
        spb.CreateScheduleRequest(
            schedule=spb.Schedule(
                project="p", workflow="daily", cron="0 6 * * *", time_zone="Europe/Berlin"
            )
        )
    )
    created = await backfill(cluster, "daily", 3, order=bpb.BACKFILL_ORDER_ASCENDING)
    assert (created.cron, created.time_zone) == ("0 6 * * *", "Europe/Berlin")
    berlin = ZoneInfo("Europe/Berlin")
    # 2026-01-01 00:00 UTC .. 2026-01-03 00:00 UTC holds the 06:00 (05:00 UTC) of Jan 1 and 2
    assert [d.ToDatetime(tzinfo=UTC).astimezone(berlin).hour for d in created.dates] == [6, 6]
    once_each(await runs_of(cluster, (await finished(cluster, created.id)).id), created)
