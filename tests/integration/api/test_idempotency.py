"""request_id: a repeated request returns the first answer and does the work once."""

from __future__ import annotations

import asyncio

import grpc

from tests.integration.api.conftest import (
    SUCCEEDED,
    Cluster,
    Gate,
    assert_status,
    chain,
    create_project,
    enums,
    failure,
    online_workflow,
    pb,
    res,
    row_counts,
    run_to_end,
    shell,
    snapshot,
    still_serves,
    task_instances,
    task_is,
    watch_until,
    workflow,
)


async def test_start_workflow_twice_with_one_request_id_starts_once(cluster: Cluster) -> None:
    await online_workflow(cluster, "p", "w", chain("a"))
    request = pb.StartWorkflowRequest(project="p", workflow="w", request_id="start-1")
    first = await cluster.stub.StartWorkflow(request)
    seen = await run_to_end(cluster, first.instance.id)
    assert seen.events[-1].workflow_state == SUCCEEDED
    again = await cluster.stub.StartWorkflow(request)
    assert again == first  # the first answer, byte for byte (still SUBMITTED)
    listed = await cluster.stub.ListWorkflowInstances(pb.ListWorkflowInstancesRequest())
    assert [i.id for i in listed.instances] == [first.instance.id]
    counts = await row_counts(cluster)
    assert (counts["workflow_instances"], counts["commands"]) == (1, 0)
    # A different id is a different run.
    other = await cluster.stub.StartWorkflow(
        pb.StartWorkflowRequest(project="p", workflow="w", request_id="start-2")
    )
    assert other.instance.id != first.instance.id
    await run_to_end(cluster, other.instance.id)


async def test_concurrent_starts_with_one_request_id_store_one_instance(cluster: Cluster) -> None:
    await online_workflow(cluster, "p", "w", chain("a"))
    request = pb.StartWorkflowRequest(project="p", workflow="w", request_id="burst")
    answers = await asyncio.gather(*(cluster.stub.StartWorkflow(request) for _ in range(8)))
    assert {a.instance.id for a in answers} == {answers[0].instance.id}
    await run_to_end(cluster, answers[0].instance.id)
    counts = await row_counts(cluster)
    assert counts["workflow_instances"] == 1
    assert len(await task_instances(cluster, answers[0].instance.id)) == 1


async def test_create_project_twice_with_one_request_id(cluster: Cluster) -> None:
    request = pb.CreateProjectRequest(
        project=res.Project(name="p", description="d"), request_id="mk-p"
    )
    first = await cluster.stub.CreateProject(request)
    second = await cluster.stub.CreateProject(request)
    assert second == first
    # Without the id the same request is a duplicate.
    dup = await failure(
        cluster.stub.CreateProject(pb.CreateProjectRequest(project=request.project))
    )
    assert_status(dup, grpc.StatusCode.ALREADY_EXISTS, "ALREADY_EXISTS")
    listed = await cluster.stub.ListProjects(pb.ListProjectsRequest())
    assert [p.name for p in listed.projects] == ["p"]


async def test_request_id_reused_for_another_method_is_refused(cluster: Cluster) -> None:
    await cluster.stub.CreateProject(
        pb.CreateProjectRequest(project=res.Project(name="p"), request_id="shared")
    )
    before = await snapshot(cluster)
    got = await failure(
        cluster.stub.CreateWorkflow(
            pb.CreateWorkflowRequest(workflow=workflow("p", "w", chain("a")), request_id="shared")
        )
    )
    assert_status(got, grpc.StatusCode.FAILED_PRECONDITION, "REQUEST_ID_REUSED")
    assert got.metadata == {"request_id": "shared", "method": "CreateProject"}
    assert await snapshot(cluster) == before
    await still_serves(cluster)


async def test_request_id_reused_on_a_control_rpc_is_refused(cluster: Cluster) -> None:
    await online_workflow(cluster, "p", "w", chain("a"))
    started = await cluster.stub.StartWorkflow(
        pb.StartWorkflowRequest(project="p", workflow="w", request_id="one")
    )
    await run_to_end(cluster, started.instance.id)
    got = await failure(
        cluster.stub.RerunWorkflowInstance(
            pb.RerunWorkflowInstanceRequest(id=started.instance.id, request_id="one")
        )
    )
    assert_status(got, grpc.StatusCode.FAILED_PRECONDITION, "REQUEST_ID_REUSED")
    state = await cluster.stub.GetWorkflowInstance(
        pb.GetWorkflowInstanceRequest(id=started.instance.id)
    )
    assert state.instance.state == SUCCEEDED and state.instance.run_times == 1


async def test_repeated_rerun_and_force_success_answer_once(cluster: Cluster) -> None:
    await online_workflow(cluster, "p", "w", [shell("a", "exit 4")])
    started = await cluster.stub.StartWorkflow(pb.StartWorkflowRequest(project="p", workflow="w"))
    first = await run_to_end(cluster, started.instance.id)
    failed_ti = (await task_instances(cluster, started.instance.id))[0]

    rerun = pb.RerunWorkflowInstanceRequest(id=started.instance.id, request_id="rerun-1")
    answer = await cluster.stub.RerunWorkflowInstance(rerun)
    second = await run_to_end(cluster, started.instance.id, after=first.cursor)
    assert await cluster.stub.RerunWorkflowInstance(rerun) == answer
    # Repeating it did not start a third run.
    after = await cluster.stub.GetWorkflowInstance(
        pb.GetWorkflowInstanceRequest(id=started.instance.id)
    )
    assert after.instance.run_times == 2
    superseded = await task_instances(cluster, started.instance.id, superseded=True)
    assert [t.attempt for t in superseded] == [1, 2]

    current = (await task_instances(cluster, started.instance.id))[0]
    assert current.id != failed_ti.id
    force = pb.ForceTaskInstanceSuccessRequest(id=current.id, request_id="force-1")
    forced = await cluster.stub.ForceTaskInstanceSuccess(force)
    assert forced.instance.state == SUCCEEDED
    assert await cluster.stub.ForceTaskInstanceSuccess(force) == forced
    events = await run_to_end(cluster, started.instance.id, after=second.cursor)
    assert len([e for e in events.events if e.task_name]) == 1  # one FORCED_SUCCESS event


async def test_create_project_with_a_request_id_after_it_exists(cluster: Cluster) -> None:
    await create_project(cluster, "p")
    got = await failure(
        cluster.stub.CreateProject(
            pb.CreateProjectRequest(project=res.Project(name="p"), request_id="late")
        )
    )
    assert_status(got, grpc.StatusCode.ALREADY_EXISTS, "ALREADY_EXISTS")
    # A failed request stores no answer: the id is still free for another method.
    await cluster.stub.CreateWorkflow(
        pb.CreateWorkflowRequest(workflow=workflow("p", "w", chain("a")), request_id="late")
    )


async def test_update_and_delete_repeated_with_one_request_id(cluster: Cluster) -> None:
    await create_project(cluster, "p")
    await cluster.stub.CreateWorkflow(
        pb.CreateWorkflowRequest(workflow=workflow("p", "w", chain("a")))
    )
    update = pb.UpdateWorkflowRequest(workflow=workflow("p", "w", chain("a", "b")), request_id="u")
    first = await cluster.stub.UpdateWorkflow(update)
    assert await cluster.stub.UpdateWorkflow(update) == first
    versions = await cluster.stub.ListWorkflowVersions(
        pb.ListWorkflowVersionsRequest(project="p", name="w")
    )
    assert [v.version for v in versions.versions] == [2, 1]  # not 3

    delete = pb.DeleteWorkflowRequest(project="p", name="w", request_id="d")
    await cluster.stub.DeleteWorkflow(delete)
    await cluster.stub.DeleteWorkflow(delete)  # the first answer, not NOT_FOUND
    plain = await failure(
        cluster.stub.DeleteWorkflow(pb.DeleteWorkflowRequest(project="p", name="w"))
    )
    assert_status(plain, grpc.StatusCode.NOT_FOUND, "NOT_FOUND")


async def test_pause_repeated_with_one_request_id(cluster: Cluster, gate: Gate) -> None:
    await online_workflow(cluster, "p", "w", [shell("a", gate.wait), shell("b", "true", ["a"])])
    started = await cluster.stub.StartWorkflow(pb.StartWorkflowRequest(project="p", workflow="w"))
    head = await watch_until(
        cluster, started.instance.id, task_is("a", enums.TASK_INSTANCE_STATE_RUNNING)
    )
    pause = pb.PauseWorkflowInstanceRequest(id=started.instance.id, request_id="pause-1")
    first = await cluster.stub.PauseWorkflowInstance(pause)
    gate.open()
    paused = await run_to_end(cluster, started.instance.id, after=head.cursor)
    assert paused.events[-1].workflow_state == enums.WORKFLOW_INSTANCE_STATE_PAUSED
    # Repeating the request answers as the first time, although pausing again is illegal now.
    assert await cluster.stub.PauseWorkflowInstance(pause) == first
