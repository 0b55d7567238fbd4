"""A task whose worker group has no usable worker waits, visibly, and runs once one registers."""

from __future__ import annotations

from dsched.v1 import enums_pb2 as T
from tests.integration.api.conftest import (
    Cluster,
    extra_worker,
    online_workflow,
    run_to_end,
    shell,
    start,
    task_instances,
    watch_until,
)


async def test_a_task_without_a_worker_in_its_group_waits_with_a_reason_then_runs(
    cluster: Cluster,
) -> None:
    tasks = [shell("here", "echo here"), shell("gpu", "echo gpu", ["here"], worker_group="gpu")]
    await online_workflow(cluster, "p", "needs-gpu", tasks)
    started = await start(cluster, "p", "needs-gpu")

    seen = await watch_until(cluster, started.id, lambda e: e.kind == T.INSTANCE_EVENT_KIND_WAITING)
    (waiting,) = [e for e in seen.events if e.kind == T.INSTANCE_EVENT_KIND_WAITING]
    assert waiting.task_name == "gpu"
    assert "no live worker in group 'gpu'" in waiting.message
    gpu = next(t for t in await task_instances(cluster, started.id) if t.task_name == "gpu")
    assert gpu.state == T.TASK_INSTANCE_STATE_SUBMITTED
    assert "no live worker in group 'gpu'" in gpu.state_reason

    async with extra_worker(cluster, "gpu") as worker:
        done = await run_to_end(cluster, started.id)
        assert done.state == T.WORKFLOW_INSTANCE_STATE_SUCCEEDED
    tis = await task_instances(cluster, started.id)
    gpu = next(t for t in tis if t.task_name == "gpu")
    assert (gpu.host, gpu.attempt, gpu.state_reason) == (worker.address, 1, "")
    assert (
        len([e for e in done.events if e.kind == T.INSTANCE_EVENT_KIND_WAITING]) == 1
    )  # said once, not per retry
