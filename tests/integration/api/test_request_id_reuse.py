"""A request_id names one request: repeated with the same request it returns the first answer; with
a different request it is refused (FAILED_PRECONDITION, REQUEST_ID_REUSED) and changes nothing.
Checked on every mutating RPC that takes a request_id."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import grpc
import pytest

from tests.integration.api.conftest import (
    Cluster,
    Gate,
    assert_status,
    chain,
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
    task_is,
    watch_until,
    workflow,
)
from tests.integration.api.listing import DEFAULT_RECEIVE_LIMIT, list_everything

RID = "the-one-id"


@dataclass
class World:
    """Two of everything a mutation needs, so that the second request is valid on its own."""

    done: list[int]  # finished (SUCCEEDED) instances of p/w
    failed: list[int]  # FAILED instances of p/fails
    failed_task: list[int]  # their failed task instances
    running: list[int]  # instances waiting on the gate


@pytest.fixture
async def world(cluster: Cluster, gate: Gate) -> World:
    await online_workflow(cluster, "p", "w", chain("a", "b"))
    await online_workflow(cluster, "p", "fails", [shell("x", "exit 3")])
    await online_workflow(cluster, "p", "slow", [shell("g", gate.wait)])
    for name in ("draft", "draft2"):
        await cluster.stub.CreateWorkflow(
            pb.CreateWorkflowRequest(workflow=workflow("p", name, chain("a")))
        )
    for name in ("empty1", "empty2"):
        await cluster.stub.CreateProject(pb.CreateProjectRequest(project=res.Project(name=name)))
    done = [(await start(cluster, "p", "w")).id for _ in range(2)]
    failed = [(await start(cluster, "p", "fails")).id for _ in range(2)]
    for instance_id in done + failed:
        await run_to_end(cluster, instance_id)
    failed_task = [(await task_instances(cluster, i))[0].id for i in failed]
    running = [(await start(cluster, "p", "slow")).id for _ in range(2)]
    for instance_id in running:
        await watch_until(cluster, instance_id, task_is("g", enums.TASK_INSTANCE_STATE_RUNNING))
    return World(done, failed, failed_task, running)


Call = Callable[[Cluster, World, str], Awaitable[Any]]

# (RPC, the first request, a different request that would be valid on its own)
CASES: list[tuple[str, Call, Call]] = [
    (
        "CreateProject",
        lambda c, w, r: c.stub.CreateProject(
            pb.CreateProjectRequest(project=res.Project(name="n1"), request_id=r)
        ),
        lambda c, w, r: c.stub.CreateProject(
            pb.CreateProjectRequest(project=res.Project(name="n2"), request_id=r)
        ),
    ),
    (
        "DeleteProject",
        lambda c, w, r: c.stub.DeleteProject(pb.DeleteProjectRequest(name="empty1", request_id=r)),
        lambda c, w, r: c.stub.DeleteProject(pb.DeleteProjectRequest(name="empty2", request_id=r)),
    ),
    (
        "CreateWorkflow",
        lambda c, w, r: c.stub.CreateWorkflow(
            pb.CreateWorkflowRequest(workflow=workflow("p", "n", chain("a")), request_id=r)
        ),
        lambda c, w, r: c.stub.CreateWorkflow(
            pb.CreateWorkflowRequest(workflow=workflow("p", "n", chain("a", "b")), request_id=r)
        ),
    ),
    (
        "UpdateWorkflow",
        lambda c, w, r: c.stub.UpdateWorkflow(
            pb.UpdateWorkflowRequest(workflow=workflow("p", "draft", chain("a", "b")), request_id=r)
        ),
        lambda c, w, r: c.stub.UpdateWorkflow(
            pb.UpdateWorkflowRequest(workflow=workflow("p", "draft", chain("a", "c")), request_id=r)
        ),
    ),
    (
        "DeleteWorkflow",
        lambda c, w, r: c.stub.DeleteWorkflow(
            pb.DeleteWorkflowRequest(project="p", name="draft", request_id=r)
        ),
        lambda c, w, r: c.stub.DeleteWorkflow(
            pb.DeleteWorkflowRequest(project="p", name="draft2", request_id=r)
        ),
    ),
    (
        "SetWorkflowReleaseState",
        lambda c, w, r: c.stub.SetWorkflowReleaseState(
            pb.SetWorkflowReleaseStateRequest(
                project="p", name="draft", release_state=enums.RELEASE_STATE_ONLINE, request_id=r
            )
        ),
        lambda c, w, r: c.stub.SetWorkflowReleaseState(
            pb.SetWorkflowReleaseStateRequest(
                project="p", name="draft2", release_state=enums.RELEASE_STATE_ONLINE, request_id=r
            )
        ),
    ),
    (
        "StartWorkflow",
        lambda c, w, r: c.stub.StartWorkflow(
            pb.StartWorkflowRequest(
                project="p", workflow="w", params={"x": "1", "y": "2"}, request_id=r
            )
        ),
        lambda c, w, r: c.stub.StartWorkflow(
            pb.StartWorkflowRequest(
                project="p", workflow="w", params={"x": "2", "y": "2"}, request_id=r
            )
        ),
    ),
    (
        "PauseWorkflowInstance",
        lambda c, w, r: c.stub.PauseWorkflowInstance(
            pb.PauseWorkflowInstanceRequest(id=w.running[0], request_id=r)
        ),
        lambda c, w, r: c.stub.PauseWorkflowInstance(
            pb.PauseWorkflowInstanceRequest(id=w.running[1], request_id=r)
        ),
    ),
    (
        "StopWorkflowInstance",
        lambda c, w, r: c.stub.StopWorkflowInstance(
            pb.StopWorkflowInstanceRequest(id=w.running[0], request_id=r)
        ),
        lambda c, w, r: c.stub.StopWorkflowInstance(
            pb.StopWorkflowInstanceRequest(id=w.running[1], request_id=r)
        ),
    ),
    (
        "RerunWorkflowInstance",
        lambda c, w, r: c.stub.RerunWorkflowInstance(
            pb.RerunWorkflowInstanceRequest(id=w.done[0], request_id=r)
        ),
        lambda c, w, r: c.stub.RerunWorkflowInstance(
            pb.RerunWorkflowInstanceRequest(id=w.done[1], request_id=r)
        ),
    ),
    (
        "RecoverFailedWorkflowInstance",
        lambda c, w, r: c.stub.RecoverFailedWorkflowInstance(
            pb.RecoverFailedWorkflowInstanceRequest(id=w.failed[0], request_id=r)
        ),
        lambda c, w, r: c.stub.RecoverFailedWorkflowInstance(
            pb.RecoverFailedWorkflowInstanceRequest(id=w.failed[1], request_id=r)
        ),
    ),
    (
        "ExecuteFromTask",
        lambda c, w, r: c.stub.ExecuteFromTask(
            pb.ExecuteFromTaskRequest(id=w.done[0], start_tasks=["b"], request_id=r)
        ),
        lambda c, w, r: c.stub.ExecuteFromTask(
            pb.ExecuteFromTaskRequest(id=w.done[0], start_tasks=["a"], request_id=r)
        ),
    ),
    (
        "ForceTaskInstanceSuccess",
        lambda c, w, r: c.stub.ForceTaskInstanceSuccess(
            pb.ForceTaskInstanceSuccessRequest(id=w.failed_task[0], request_id=r)
        ),
        lambda c, w, r: c.stub.ForceTaskInstanceSuccess(
            pb.ForceTaskInstanceSuccessRequest(id=w.failed_task[1], request_id=r)
        ),
    ),
]


async def settled(c: Cluster, answer: Any) -> None:
    """Waits until the instance the first request set in motion (a start, rerun, recovery or
    stop) is terminal, so that the snapshot compares only what the refused request could change.
    A paused one waits on the gate and does not move."""
    instance = getattr(answer, "instance", None)
    if instance is not None and instance.state != enums.WORKFLOW_INSTANCE_STATE_READY_PAUSE:
        await run_to_end(c, instance.id)


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("first", "other"), [pytest.param(f, o, id=n) for n, f, o in CASES])
async def test_a_request_id_answers_its_own_request_and_refuses_another(
    cluster: Cluster, world: World, gate: Gate, first: Call, other: Call
) -> None:
    answer = await first(cluster, world, RID)
    await settled(cluster, answer)
    before = await snapshot(cluster)
    got = await failure(other(cluster, world, RID))
    assert_status(got, grpc.StatusCode.FAILED_PRECONDITION, "REQUEST_ID_REUSED")
    assert got.metadata["request_id"] == RID
    assert got.violations == ()
    assert await snapshot(cluster) == before
    again = await first(cluster, world, RID)
    assert again == answer  # the same request still gets the first answer
    listed = await list_everything(cluster.address)
    assert listed.largest < DEFAULT_RECEIVE_LIMIT
    gate.open()


async def test_the_order_of_a_map_does_not_make_another_request(cluster: Cluster) -> None:
    await online_workflow(cluster, "p", "w", chain("a"))
    forward = pb.StartWorkflowRequest(project="p", workflow="w", request_id=RID)
    for key in ("a", "b", "c"):
        forward.params[key] = key
    backward = pb.StartWorkflowRequest(project="p", workflow="w", request_id=RID)
    for key in ("c", "b", "a"):
        backward.params[key] = key
    first = await cluster.stub.StartWorkflow(forward)
    assert await cluster.stub.StartWorkflow(backward) == first
    await run_to_end(cluster, first.instance.id)
