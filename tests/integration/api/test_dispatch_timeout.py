"""A run asking for a worker group nobody serves waits visibly, saying why (no worker ever
registered, its workers left, all BUSY), and with a dispatch timeout the task ends FAILED with that
reason; user retries apply as to any failure. A bad timeout is refused and stores nothing."""

from __future__ import annotations

import grpc
import pytest
from google.protobuf import duration_pb2

from dsched.v1 import enums_pb2 as T
from dsched_server.heartbeat import Thresholds
from tests.integration.api.conftest import (
    Cluster,
    assert_invalid,
    extra_worker,
    failure,
    online_workflow,
    pb,
    run_to_end,
    shell,
    snapshot,
    start,
    task_instances,
)
from tests.integration.api.listing import DEFAULT_RECEIVE_LIMIT, list_everything


def seconds(value: float) -> duration_pb2.Duration:
    d = duration_pb2.Duration()
    d.FromNanoseconds(int(value * 1e9))
    return d


async def run_failing_for_lack_of_a_worker(c: Cluster, group: str, **start_fields: object) -> str:
    """Starts a one-task run on ``group`` with a short dispatch timeout; returns the task's
    reason once the run is FAILED."""
    await online_workflow(c, "p", f"on-{group}", [shell("t", "true", worker_group=group)])
    run = await start(c, "p", f"on-{group}", dispatch_timeout=seconds(0.5), **start_fields)
    done = await run_to_end(c, run.id)
    assert done.state == T.WORKFLOW_INSTANCE_STATE_FAILED
    (task,) = await task_instances(c, run.id, superseded=True)
    assert task.state == T.TASK_INSTANCE_STATE_FAILED and not task.host
    failed = [e for e in done.events if e.task_state == T.TASK_INSTANCE_STATE_FAILED]
    assert [e.message for e in failed] == [task.state_reason]
    return task.state_reason


async def test_a_group_nobody_ever_served_fails_after_the_dispatch_timeout(
    cluster: Cluster,
) -> None:
    reason = await run_failing_for_lack_of_a_worker(cluster, "gpu")
    assert reason.startswith("no worker took it within the dispatch timeout (0:00:00.500000): ")
    assert "no live worker in group 'gpu', and none has registered since this master" in reason
    assert "(groups with live workers: 'default')" in reason  # a misspelt group is easy to spot
    listed = await list_everything(cluster.address)
    assert listed.largest < DEFAULT_RECEIVE_LIMIT


async def test_a_group_whose_workers_left_says_so(cluster: Cluster) -> None:
    async with extra_worker(cluster, "gpu"):
        pass
    assert not cluster.master.workers.has_group("gpu")
    reason = await run_failing_for_lack_of_a_worker(cluster, "gpu")
    assert "no live worker in group 'gpu' (its workers left)" in reason


async def test_a_group_whose_workers_are_all_busy_says_so(cluster: Cluster) -> None:
    always_busy = Thresholds(cpu=1.0, memory=0.0, disk=1.0)  # any memory use is over 0
    async with extra_worker(cluster, "busy", always_busy):
        reason = await run_failing_for_lack_of_a_worker(cluster, "busy")
    assert "every live worker in group 'busy' is BUSY" in reason


async def test_user_retries_apply_to_a_dispatch_timeout(cluster: Cluster) -> None:
    task = shell("t", "true", worker_group="gpu", retries=1)
    await online_workflow(cluster, "p", "retried", [task])
    run = await start(cluster, "p", "retried", dispatch_timeout=seconds(0.3))
    done = await run_to_end(cluster, run.id)
    assert done.state == T.WORKFLOW_INSTANCE_STATE_FAILED
    attempts = await task_instances(cluster, run.id, superseded=True)
    assert [(t.attempt, t.state) for t in attempts] == [
        (1, T.TASK_INSTANCE_STATE_FAILED),
        (2, T.TASK_INSTANCE_STATE_FAILED),
    ]


async def test_a_task_that_gets_a_worker_in_time_runs(cluster: Cluster) -> None:
    await online_workflow(cluster, "p", "fine", [shell("t", "true")])
    run = await start(cluster, "p", "fine", dispatch_timeout=seconds(30))
    done = await run_to_end(cluster, run.id)
    assert done.state == T.WORKFLOW_INSTANCE_STATE_SUCCEEDED


@pytest.mark.parametrize(
    "bad",
    [
        duration_pb2.Duration(seconds=-1),
        duration_pb2.Duration(nanos=-5),
        duration_pb2.Duration(seconds=8 * 86400),
    ],
    ids=["negative", "negative nanos", "over 7 days"],
)
async def test_a_bad_dispatch_timeout_is_invalid_and_stores_nothing(
    cluster: Cluster, bad: duration_pb2.Duration
) -> None:
    await online_workflow(cluster, "p", "w", [shell("t", "true")])
    before = await snapshot(cluster)
    got = await failure(
        cluster.stub.StartWorkflow(
            pb.StartWorkflowRequest(project="p", workflow="w", dispatch_timeout=bad)
        )
    )
    assert got.code == grpc.StatusCode.INVALID_ARGUMENT
    assert_invalid(got, "dispatch_timeout")
    assert await snapshot(cluster) == before
