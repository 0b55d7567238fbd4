"""MasterService happy paths for projects and versioned workflow definitions, on the wire."""

from __future__ import annotations

import grpc

from tests.integration.api.conftest import (
    Cluster,
    assert_status,
    chain,
    create_project,
    enums,
    failure,
    pb,
    res,
    seconds,
    shell,
    workflow,
)


async def test_project_create_get_delete(cluster: Cluster) -> None:
    stub = cluster.stub
    created = await stub.CreateProject(
        pb.CreateProjectRequest(project=res.Project(name="etl", description="nightly loads"))
    )
    assert created.project.name == "etl"
    assert created.project.description == "nightly loads"
    assert created.project.HasField("create_time")
    assert created.project.create_time == created.project.update_time

    got = await stub.GetProject(pb.GetProjectRequest(name="etl"))
    assert got.project == created.project

    await stub.DeleteProject(pb.DeleteProjectRequest(name="etl"))
    gone = await failure(stub.GetProject(pb.GetProjectRequest(name="etl")))
    assert_status(gone, grpc.StatusCode.NOT_FOUND, "NOT_FOUND")
    assert gone.metadata == {"project": "etl"}


async def test_projects_page_by_name(cluster: Cluster) -> None:
    names = [f"p{i:02d}" for i in range(7)]
    for name in reversed(names):  # created out of order: listing sorts by name
        await create_project(cluster, name)
    seen: list[str] = []
    token = ""
    pages = 0
    while True:
        reply = await cluster.stub.ListProjects(
            pb.ListProjectsRequest(page_size=3, page_token=token)
        )
        pages += 1
        assert len(reply.projects) <= 3
        seen.extend(p.name for p in reply.projects)
        token = reply.next_page_token
        if not token:
            break
    assert seen == names
    assert pages == 3
    # The default page holds all seven (default 50); a page size over the cap is clamped, not
    # rejected.
    default = await cluster.stub.ListProjects(pb.ListProjectsRequest())
    assert [p.name for p in default.projects] == names and not default.next_page_token
    huge = await cluster.stub.ListProjects(pb.ListProjectsRequest(page_size=1_000_000))
    assert len(huge.projects) == 7


async def test_workflow_versions_and_release_cycle(cluster: Cluster) -> None:
    stub = cluster.stub
    await create_project(cluster, "etl")
    v1_tasks = [
        shell(
            "extract",
            "echo extract",
            priority=enums.PRIORITY_HIGH,
            retries=2,
            retry_interval=seconds(5),
            timeout=seconds(600),
            timeout_strategy=enums.TIMEOUT_STRATEGY_WARN_FAIL,
            params={"region": "eu"},
        ),
        shell("load", "echo load", ["extract"]),
    ]
    created = await stub.CreateWorkflow(
        pb.CreateWorkflowRequest(
            workflow=workflow(
                "etl", "daily", v1_tasks, description="v1", params={"day": "2024-01-01"}
            )
        )
    )
    wf1 = created.workflow
    assert (wf1.version, wf1.release_state) == (1, enums.RELEASE_STATE_OFFLINE)
    assert wf1.code > 0
    assert [t.name for t in wf1.tasks] == ["extract", "load"]
    assert list(wf1.tasks[1].upstream_tasks) == ["extract"]
    extract = wf1.tasks[0]
    assert extract.priority == enums.PRIORITY_HIGH
    assert (extract.retries, extract.retry_interval.seconds, extract.timeout.seconds) == (2, 5, 600)
    assert extract.timeout_strategy == enums.TIMEOUT_STRATEGY_WARN_FAIL
    assert dict(extract.params) == {"region": "eu"}
    assert dict(wf1.params) == {"day": "2024-01-01"}

    v2_tasks = chain("extract", "transform", "load")
    updated = await stub.UpdateWorkflow(
        pb.UpdateWorkflowRequest(workflow=workflow("etl", "daily", v2_tasks, description="v2"))
    )
    wf2 = updated.workflow
    assert (wf2.code, wf2.version, wf2.description) == (wf1.code, 2, "v2")
    assert [t.name for t in wf2.tasks] == ["extract", "transform", "load"]

    current = await stub.GetWorkflow(pb.GetWorkflowRequest(project="etl", name="daily"))
    assert current.workflow == wf2
    first = await stub.GetWorkflow(pb.GetWorkflowRequest(project="etl", name="daily", version=1))
    assert first.workflow.version == 1
    assert first.workflow.tasks == wf1.tasks
    assert first.workflow.description == "v1"

    versions = await stub.ListWorkflowVersions(
        pb.ListWorkflowVersionsRequest(project="etl", name="daily")
    )
    assert [(v.version, v.description, v.task_count) for v in versions.versions] == [
        (2, "v2", 3),
        (1, "v1", 2),
    ]
    paged = await stub.ListWorkflowVersions(
        pb.ListWorkflowVersionsRequest(project="etl", name="daily", page_size=1)
    )
    assert [v.version for v in paged.versions] == [2] and paged.next_page_token
    rest = await stub.ListWorkflowVersions(
        pb.ListWorkflowVersionsRequest(
            project="etl", name="daily", page_size=1, page_token=paged.next_page_token
        )
    )
    assert [v.version for v in rest.versions] == [1] and not rest.next_page_token

    online = await stub.SetWorkflowReleaseState(
        pb.SetWorkflowReleaseStateRequest(
            project="etl", name="daily", release_state=enums.RELEASE_STATE_ONLINE
        )
    )
    assert online.workflow.release_state == enums.RELEASE_STATE_ONLINE
    assert online.workflow.version == 2

    # ONLINE workflows are frozen: no update, no delete.
    refused = await failure(
        stub.UpdateWorkflow(pb.UpdateWorkflowRequest(workflow=workflow("etl", "daily", v1_tasks)))
    )
    assert_status(refused, grpc.StatusCode.FAILED_PRECONDITION, "WORKFLOW_ONLINE")
    refused = await failure(
        stub.DeleteWorkflow(pb.DeleteWorkflowRequest(project="etl", name="daily"))
    )
    assert_status(refused, grpc.StatusCode.FAILED_PRECONDITION, "WORKFLOW_ONLINE")
    # A project with workflows cannot be deleted.
    refused = await failure(stub.DeleteProject(pb.DeleteProjectRequest(name="etl")))
    assert_status(refused, grpc.StatusCode.FAILED_PRECONDITION, "PROJECT_NOT_EMPTY")

    offline = await stub.SetWorkflowReleaseState(
        pb.SetWorkflowReleaseStateRequest(
            project="etl", name="daily", release_state=enums.RELEASE_STATE_OFFLINE
        )
    )
    assert offline.workflow.release_state == enums.RELEASE_STATE_OFFLINE
    await stub.DeleteWorkflow(pb.DeleteWorkflowRequest(project="etl", name="daily"))
    gone = await failure(stub.GetWorkflow(pb.GetWorkflowRequest(project="etl", name="daily")))
    assert_status(gone, grpc.StatusCode.NOT_FOUND, "NOT_FOUND")
    await stub.DeleteProject(pb.DeleteProjectRequest(name="etl"))


async def test_list_workflows_current_versions_by_name(cluster: Cluster) -> None:
    stub = cluster.stub
    await create_project(cluster, "a")
    await create_project(cluster, "b")
    for name in ("zeta", "alpha", "mid"):
        await stub.CreateWorkflow(
            pb.CreateWorkflowRequest(workflow=workflow("a", name, chain("t")))
        )
    await stub.CreateWorkflow(pb.CreateWorkflowRequest(workflow=workflow("b", "other", chain("t"))))
    await stub.UpdateWorkflow(
        pb.UpdateWorkflowRequest(workflow=workflow("a", "mid", chain("t", "u")))
    )

    first = await stub.ListWorkflows(pb.ListWorkflowsRequest(project="a", page_size=2))
    assert [w.name for w in first.workflows] == ["alpha", "mid"]
    assert first.workflows[1].version == 2 and len(first.workflows[1].tasks) == 2
    second = await stub.ListWorkflows(
        pb.ListWorkflowsRequest(project="a", page_size=2, page_token=first.next_page_token)
    )
    assert [w.name for w in second.workflows] == ["zeta"] and not second.next_page_token
    assert all(w.project == "a" for w in [*first.workflows, *second.workflows])

    missing = await failure(stub.ListWorkflows(pb.ListWorkflowsRequest(project="nope")))
    assert_status(missing, grpc.StatusCode.NOT_FOUND, "NOT_FOUND")


async def test_get_workflow_unknown_version_is_not_found(cluster: Cluster) -> None:
    await create_project(cluster, "p")
    await cluster.stub.CreateWorkflow(
        pb.CreateWorkflowRequest(workflow=workflow("p", "w", chain("t")))
    )
    got = await failure(
        cluster.stub.GetWorkflow(pb.GetWorkflowRequest(project="p", name="w", version=9))
    )
    assert_status(got, grpc.StatusCode.NOT_FOUND, "VERSION_NOT_FOUND")
    assert got.metadata["version"] == "9"


async def test_server_assigned_fields_are_ignored_on_input(cluster: Cluster) -> None:
    await create_project(cluster, "p")
    given = workflow(
        "p", "w", chain("a"), code=777, version=9, release_state=enums.RELEASE_STATE_ONLINE
    )
    given.create_time.FromSeconds(1)
    stored = (await cluster.stub.CreateWorkflow(pb.CreateWorkflowRequest(workflow=given))).workflow
    assert stored.code != 777
    assert (stored.version, stored.release_state) == (1, enums.RELEASE_STATE_OFFLINE)
    assert stored.create_time.seconds > 1
    started = await failure(
        cluster.stub.StartWorkflow(pb.StartWorkflowRequest(project="p", workflow="w"))
    )
    assert_status(started, grpc.StatusCode.FAILED_PRECONDITION, "WORKFLOW_OFFLINE")
