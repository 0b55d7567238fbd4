"""DEPENDENT tasks over the wire: a real master and worker, raw dsched.v1 stubs.

A report workflow waits for an upstream workflow's run of today; the upstream is held by a gate
file, so the DEPENDENT is seen waiting (on the master, with no worker process for it) before the
upstream is let go. Bad dependencies are refused with the field named and nothing stored.
"""

from __future__ import annotations

import grpc
import pytest

from dsched.v1 import dependent_pb2
from tests.integration.api.conftest import (
    Cluster,
    Gate,
    assert_invalid,
    enums,
    failure,
    online_workflow,
    pb,
    res,
    run_to_end,
    shell,
    snapshot,
    start,
    task_instances,
    watch_until,
    workflow,
)

dep = dependent_pb2


def waits_for(*items: dependent_pb2.DependencyItem, **fields: object) -> res.TaskDefinition:
    return res.TaskDefinition(
        name="wait",
        dependent=dep.DependentTask(
            groups=[dep.DependencyGroup(items=list(items))],
            check_interval={"seconds": 3600},  # only a wake-up can end the wait in time
            **fields,  # type: ignore[arg-type]
        ),
    )


def item(
    workflow_name: str,
    date_value: str = "today",
    *,
    project: str = "p",
    cycle: int = dep.DEPENDENCY_CYCLE_DAY,
    task: str = "",
) -> dep.DependencyItem:
    return dep.DependencyItem(
        project=project,
        workflow=workflow_name,
        task=task,
        cycle=cycle,  # type: ignore[arg-type]  # hostile numbers too
        date_value=date_value,
    )


async def test_a_dependent_waits_on_the_master_then_succeeds(cluster: Cluster, gate: Gate) -> None:
    await online_workflow(cluster, "p", "upstream", [shell("load", gate.wait)])
    await online_workflow(
        cluster, "p", "report", [waits_for(item("upstream")), shell("publish", "true", ["wait"])]
    )
    upstream = await start(cluster, "p", "upstream")
    report = await start(cluster, "p", "report")
    watched = await watch_until(
        cluster,
        report.id,
        lambda e: e.task_name == "wait" and "waiting for p/upstream" in e.message,
    )
    states = [s for s in watched.task_states("wait") if s]  # a WAITING event carries none
    assert states[-1] == enums.TASK_INSTANCE_STATE_RUNNING
    (wait,) = await task_instances(cluster, report.id)
    assert wait.host == "" and wait.pid == 0  # evaluated on the master, no process

    gate.open()
    assert (await run_to_end(cluster, upstream.id)).state == enums.WORKFLOW_INSTANCE_STATE_SUCCEEDED
    done = await run_to_end(cluster, report.id)
    assert done.state == enums.WORKFLOW_INSTANCE_STATE_SUCCEEDED
    assert done.task_states("publish")[-1] == enums.TASK_INSTANCE_STATE_SUCCEEDED


async def test_a_dependent_reads_back_as_it_was_written(cluster: Cluster) -> None:
    task = waits_for(
        item("upstream", "lastMonthEnd", cycle=dep.DEPENDENCY_CYCLE_MONTH, task="load"),
        relation=dep.DEPENDENCY_RELATION_OR,
        on_failure=dep.DEPENDENCY_FAILURE_WAIT,
        failure_wait={"seconds": 600},
    )
    await online_workflow(cluster, "p", "report", [task])
    got = await cluster.stub.GetWorkflow(pb.GetWorkflowRequest(project="p", name="report"))
    task.dependent.groups[0].relation = dep.DEPENDENCY_RELATION_AND  # defaults are rendered
    assert got.workflow.tasks[0].dependent == task.dependent


BAD = [
    ("self today", item("report"), "workflow.tasks[0].dependent.groups[0].items[0].workflow"),
    (
        "value of another cycle",
        item("up", "lastWeek"),
        "workflow.tasks[0].dependent.groups[0].items[0].date_value",
    ),
    (
        "no cycle",
        item("up", cycle=dep.DEPENDENCY_CYCLE_UNSPECIFIED),
        "workflow.tasks[0].dependent.groups[0].items[0].cycle",
    ),
    (
        "unknown cycle number",
        item("up", cycle=42),
        "workflow.tasks[0].dependent.groups[0].items[0].cycle",
    ),
    (
        "bad project name",
        item("up", project=""),
        "workflow.tasks[0].dependent.groups[0].items[0].project",
    ),
]


@pytest.mark.parametrize(("bad", "field"), [pytest.param(b, f, id=i) for i, b, f in BAD])
async def test_bad_dependencies_are_refused_and_change_nothing(
    cluster: Cluster, bad: dep.DependencyItem, field: str
) -> None:
    before = await snapshot(cluster)
    request = pb.CreateWorkflowRequest(workflow=workflow("p", "report", [waits_for(bad)]))
    got = await failure(cluster.stub.CreateWorkflow(request))
    assert got.code == grpc.StatusCode.INVALID_ARGUMENT
    assert_invalid(got, field, reason="INVALID_WORKFLOW")
    assert await snapshot(cluster) == before


async def test_check_interval_out_of_range_is_refused(cluster: Cluster) -> None:
    task = waits_for(item("up"))
    task.dependent.check_interval.seconds = 0
    got = await failure(
        cluster.stub.CreateWorkflow(pb.CreateWorkflowRequest(workflow=workflow("p", "r", [task])))
    )
    assert_invalid(got, "workflow.tasks[0].dependent.check_interval", reason="INVALID_WORKFLOW")
