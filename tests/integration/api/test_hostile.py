"""Hostile and wrong input: each request is rejected with the right status and rich details, nothing
is persisted, and the server keeps serving.

Every case runs against a seeded master (a project, an ONLINE and an OFFLINE workflow, one finished
instance) and compares what the API lists and the store's row counts before and after the call.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import grpc
import pytest
from google.protobuf import timestamp_pb2
from grpc import aio

from dsched.v1 import log_service_pb2
from tests.integration.api.conftest import (
    WAIT_S,
    Cluster,
    Failure,
    assert_invalid,
    assert_status,
    chain,
    decode,
    enums,
    failure,
    online_workflow,
    pb,
    res,
    run_to_end,
    seconds,
    shell,
    snapshot,
    start,
    still_serves,
    stream_failure,
    task_instances,
    workflow,
)

LONG_NAME = "n" * 65
LONG_REQUEST_ID = "r" * 129
UNKNOWN_ID = 987_654


@dataclass(frozen=True)
class Seed:
    instance_id: int
    task_instance_id: int


@pytest.fixture
async def seed(cluster: Cluster) -> Seed:
    await online_workflow(cluster, "p", "w", chain("a", "b"))
    await cluster.stub.CreateWorkflow(
        pb.CreateWorkflowRequest(workflow=workflow("p", "draft", chain("x")))
    )
    inst = await start(cluster, "p", "w")
    await run_to_end(cluster, inst.id)
    tis = await task_instances(cluster, inst.id)
    return Seed(instance_id=inst.id, task_instance_id=tis[0].id)


Call = Callable[[Cluster, Seed], Awaitable[Failure]]


def create_wf(*tasks: res.TaskDefinition, name: str = "new", **fields: Any) -> Call:
    wf = workflow("p", name, tasks, **fields)
    return lambda c, s: failure(c.stub.CreateWorkflow(pb.CreateWorkflowRequest(workflow=wf)))


def start_wf(**fields: Any) -> Call:
    request = pb.StartWorkflowRequest(project="p", workflow="w", **fields)
    return lambda c, s: failure(c.stub.StartWorkflow(request))


def unknown(number: int) -> Any:
    """An enum field given as a bare number, e.g. one the contract does not define (the typed
    stubs admit only known members, the wire admits any number)."""
    return number


def token(key: object) -> str:
    """A page token in the server's own encoding, carrying a key of the wrong type."""
    return base64.urlsafe_b64encode(json.dumps({"k": key}).encode()).decode()


def bad_timestamp(**fields: int) -> timestamp_pb2.Timestamp:
    return timestamp_pb2.Timestamp(**fields)


def t(name: str, *upstream: str, **fields: Any) -> res.TaskDefinition:
    return shell(name, f"echo {name}", upstream, **fields)


# (id, call, field path, reason, text the description must contain)
INVALID: list[tuple[str, Call, str, str, str]] = [
    # ---- DAG shape
    (
        "cycle",
        create_wf(t("a", "c"), t("b", "a"), t("c", "b")),
        "workflow.tasks[1].upstream_tasks",
        "CYCLE_DETECTED",
        "cycle: a -> b -> c -> a",
    ),
    (
        "two-task cycle",
        create_wf(t("root"), t("x", "root", "y"), t("y", "x")),
        "workflow.tasks[2].upstream_tasks",
        "CYCLE_DETECTED",
        "cycle",
    ),
    (
        "self edge",
        create_wf(t("a"), t("b", "b")),
        "workflow.tasks[1].upstream_tasks",
        "INVALID_WORKFLOW",
        "depends on itself",
    ),
    (
        "duplicate task names",
        create_wf(t("a"), t("a")),
        "workflow.tasks[1].name",
        "INVALID_WORKFLOW",
        "duplicate",
    ),
    (
        "unknown upstream",
        create_wf(t("a"), t("b", "ghost")),
        "workflow.tasks[1].upstream_tasks",
        "INVALID_WORKFLOW",
        "ghost",
    ),
    (
        "duplicate upstream",
        create_wf(t("a"), t("b", "a", "a")),
        "workflow.tasks[1].upstream_tasks",
        "INVALID_WORKFLOW",
        "twice",
    ),
    ("empty workflow", create_wf(), "workflow.tasks", "INVALID_WORKFLOW", "at least one"),
    (
        "oversized dag",
        create_wf(*(t(f"t{i}") for i in range(2001))),
        "workflow.tasks",
        "INVALID_WORKFLOW",
        "more than 2000",
    ),
    (
        "task without a kind",
        create_wf(res.TaskDefinition(name="a")),
        "workflow.tasks[0].kind",
        "INVALID_WORKFLOW",
        "",
    ),
    (
        "blank script",
        create_wf(shell("a", "  \n ")),
        "workflow.tasks[0].shell.script",
        "INVALID_WORKFLOW",
        "empty",
    ),
    (
        "script over 256 KiB",
        create_wf(shell("a", "#" * (256 * 1024 + 1))),
        "workflow.tasks[0].shell.script",
        "INVALID_WORKFLOW",
        "256 KiB",
    ),
    # ---- names and text
    (
        "65-char workflow name",
        create_wf(t("a"), name=LONG_NAME),
        "workflow.name",
        "INVALID_WORKFLOW",
        "64",
    ),
    (
        "65-char task name",
        create_wf(t(LONG_NAME)),
        "workflow.tasks[0].name",
        "INVALID_WORKFLOW",
        "64",
    ),
    (
        "trailing space in workflow name",
        create_wf(t("a"), name="my flow "),
        "workflow.name",
        "INVALID_WORKFLOW",
        "",
    ),
    (
        "newline after workflow name",
        create_wf(t("a"), name="w2\n"),
        "workflow.name",
        "INVALID_WORKFLOW",
        "",
    ),
    (
        "control char in task name",
        create_wf(t("a\x07")),
        "workflow.tasks[0].name",
        "INVALID_WORKFLOW",
        "",
    ),
    (
        "escape in workflow description",
        create_wf(t("a"), description="red \x1b[31m"),
        "workflow.description",
        "INVALID_WORKFLOW",
        "control characters",
    ),
    (
        "C1 control in task description",
        create_wf(t("a", description="csi \x9b")),
        "workflow.tasks[0].description",
        "INVALID_WORKFLOW",
        "control characters",
    ),
    (
        "65-char project name",
        lambda c, s: failure(
            c.stub.CreateProject(pb.CreateProjectRequest(project=res.Project(name=LONG_NAME)))
        ),
        "project.name",
        "INVALID_ARGUMENT",
        "64",
    ),
    (
        "slash in project name",
        lambda c, s: failure(
            c.stub.CreateProject(pb.CreateProjectRequest(project=res.Project(name="my/project")))
        ),
        "project.name",
        "INVALID_ARGUMENT",
        "",
    ),
    (
        "NUL in project description",
        lambda c, s: failure(
            c.stub.CreateProject(
                pb.CreateProjectRequest(project=res.Project(name="q", description="a\x00b"))
            )
        ),
        "project.description",
        "INVALID_ARGUMENT",
        "control characters",
    ),
    (
        "65-char name in GetProject",
        lambda c, s: failure(c.stub.GetProject(pb.GetProjectRequest(name=LONG_NAME))),
        "name",
        "INVALID_ARGUMENT",
        "",
    ),
    # ---- numbers and durations
    (
        "negative retries",
        create_wf(t("a", retries=-1)),
        "workflow.tasks[0].retries",
        "INVALID_WORKFLOW",
        "",
    ),
    (
        "too many retries",
        create_wf(t("a", retries=101)),
        "workflow.tasks[0].retries",
        "INVALID_WORKFLOW",
        "",
    ),
    (
        "negative timeout",
        create_wf(t("a", timeout=seconds(-5))),
        "workflow.tasks[0].timeout",
        "INVALID_WORKFLOW",
        "negative",
    ),
    (
        "negative retry interval",
        create_wf(t("a", retry_interval=seconds(-1))),
        "workflow.tasks[0].retry_interval",
        "INVALID_WORKFLOW",
        "negative",
    ),
    (
        "negative delay",
        create_wf(t("a", delay=seconds(-1))),
        "workflow.tasks[0].delay",
        "INVALID_WORKFLOW",
        "negative",
    ),
    # ---- unknown enum numbers
    (
        "task priority 99",
        create_wf(t("a", priority=99)),
        "workflow.tasks[0].priority",
        "INVALID_WORKFLOW",
        "99",
    ),
    (
        "timeout_strategy 42",
        create_wf(t("a", timeout_strategy=42)),
        "workflow.tasks[0].timeout_strategy",
        "INVALID_WORKFLOW",
        "42",
    ),
    (
        "failure_strategy 7",
        start_wf(failure_strategy=7),
        "failure_strategy",
        "INVALID_ARGUMENT",
        "7",
    ),
    (
        "task_depend_type 9",
        start_wf(task_depend_type=9),
        "task_depend_type",
        "INVALID_ARGUMENT",
        "9",
    ),
    ("run priority 99", start_wf(priority=99), "priority", "INVALID_ARGUMENT", "99"),
    (
        "release_state 5",
        lambda c, s: failure(
            c.stub.SetWorkflowReleaseState(
                pb.SetWorkflowReleaseStateRequest(
                    project="p", name="draft", release_state=unknown(5)
                )
            )
        ),
        "release_state",
        "INVALID_ARGUMENT",
        "",
    ),
    (
        "release_state unspecified",
        lambda c, s: failure(
            c.stub.SetWorkflowReleaseState(
                pb.SetWorkflowReleaseStateRequest(project="p", name="w", release_state=unknown(0))
            )
        ),
        "release_state",
        "INVALID_ARGUMENT",
        "",
    ),
    (
        "states filter 77",
        lambda c, s: failure(
            c.stub.ListWorkflowInstances(
                pb.ListWorkflowInstancesRequest(states=[unknown(8), unknown(77)])
            )
        ),
        "states[1]",
        "INVALID_ARGUMENT",
        "77",
    ),
    (
        "cluster role 9",
        lambda c, s: failure(
            c.stub.ListClusterMembers(pb.ListClusterMembersRequest(role=unknown(9)))
        ),
        "role",
        "INVALID_ARGUMENT",
        "9",
    ),
    (
        "ExecuteFromTask task_depend_type 9",
        lambda c, s: failure(
            c.stub.ExecuteFromTask(
                pb.ExecuteFromTaskRequest(
                    id=s.instance_id, start_tasks=["a"], task_depend_type=unknown(9)
                )
            )
        ),
        "task_depend_type",
        "INVALID_ARGUMENT",
        "9",
    ),
    # ---- ids
    (
        "GetWorkflowInstance id 0",
        lambda c, s: failure(c.stub.GetWorkflowInstance(pb.GetWorkflowInstanceRequest(id=0))),
        "id",
        "INVALID_ARGUMENT",
        "positive",
    ),
    (
        "GetWorkflowInstance id -1",
        lambda c, s: failure(c.stub.GetWorkflowInstance(pb.GetWorkflowInstanceRequest(id=-1))),
        "id",
        "INVALID_ARGUMENT",
        "positive",
    ),
    (
        "GetTaskInstance id 0",
        lambda c, s: failure(c.stub.GetTaskInstance(pb.GetTaskInstanceRequest(id=0))),
        "id",
        "INVALID_ARGUMENT",
        "",
    ),
    (
        "ListTaskInstances id -3",
        lambda c, s: failure(
            c.stub.ListTaskInstances(pb.ListTaskInstancesRequest(workflow_instance_id=-3))
        ),
        "workflow_instance_id",
        "INVALID_ARGUMENT",
        "",
    ),
    (
        "PauseWorkflowInstance id 0",
        lambda c, s: failure(c.stub.PauseWorkflowInstance(pb.PauseWorkflowInstanceRequest(id=0))),
        "id",
        "INVALID_ARGUMENT",
        "",
    ),
    (
        "StopWorkflowInstance id -7",
        lambda c, s: failure(c.stub.StopWorkflowInstance(pb.StopWorkflowInstanceRequest(id=-7))),
        "id",
        "INVALID_ARGUMENT",
        "",
    ),
    (
        "ResumeWorkflowInstance id 0",
        lambda c, s: failure(c.stub.ResumeWorkflowInstance(pb.ResumeWorkflowInstanceRequest(id=0))),
        "id",
        "INVALID_ARGUMENT",
        "",
    ),
    (
        "RerunWorkflowInstance id 0",
        lambda c, s: failure(c.stub.RerunWorkflowInstance(pb.RerunWorkflowInstanceRequest(id=0))),
        "id",
        "INVALID_ARGUMENT",
        "",
    ),
    (
        "RecoverFailedWorkflowInstance id 0",
        lambda c, s: failure(
            c.stub.RecoverFailedWorkflowInstance(pb.RecoverFailedWorkflowInstanceRequest(id=0))
        ),
        "id",
        "INVALID_ARGUMENT",
        "",
    ),
    (
        "ExecuteFromTask id 0",
        lambda c, s: failure(
            c.stub.ExecuteFromTask(pb.ExecuteFromTaskRequest(id=0, start_tasks=["a"]))
        ),
        "id",
        "INVALID_ARGUMENT",
        "",
    ),
    (
        "ForceTaskInstanceSuccess id 0",
        lambda c, s: failure(
            c.stub.ForceTaskInstanceSuccess(pb.ForceTaskInstanceSuccessRequest(id=0))
        ),
        "id",
        "INVALID_ARGUMENT",
        "",
    ),
    (
        "WatchWorkflowInstance id 0",
        lambda c, s: stream_failure(
            c.stub.WatchWorkflowInstance(pb.WatchWorkflowInstanceRequest(id=0))
        ),
        "id",
        "INVALID_ARGUMENT",
        "",
    ),
    (
        "WatchWorkflowInstance after_sequence -1",
        lambda c, s: stream_failure(
            c.stub.WatchWorkflowInstance(
                pb.WatchWorkflowInstanceRequest(id=s.instance_id, after_sequence=-1)
            )
        ),
        "after_sequence",
        "INVALID_ARGUMENT",
        "",
    ),
    (
        "ReadTaskLog id 0",
        lambda c, s: failure(
            c.logs.ReadTaskLog(log_service_pb2.ReadTaskLogRequest(task_instance_id=0))
        ),
        "task_instance_id",
        "INVALID_ARGUMENT",
        "",
    ),
    (
        "ReadTaskLog offset -1",
        lambda c, s: failure(
            c.logs.ReadTaskLog(
                log_service_pb2.ReadTaskLogRequest(task_instance_id=s.task_instance_id, offset=-1)
            )
        ),
        "offset",
        "INVALID_ARGUMENT",
        "",
    ),
    (
        "TailTaskLog id -1",
        lambda c, s: stream_failure(
            c.logs.TailTaskLog(log_service_pb2.TailTaskLogRequest(task_instance_id=-1))
        ),
        "task_instance_id",
        "INVALID_ARGUMENT",
        "",
    ),
    (
        "GetWorkflow version -1",
        lambda c, s: failure(
            c.stub.GetWorkflow(pb.GetWorkflowRequest(project="p", name="w", version=-1))
        ),
        "version",
        "INVALID_ARGUMENT",
        "",
    ),
    # ---- paging
    (
        "ListProjects page_size -1",
        lambda c, s: failure(c.stub.ListProjects(pb.ListProjectsRequest(page_size=-1))),
        "page_size",
        "INVALID_ARGUMENT",
        "negative",
    ),
    (
        "ListWorkflows page_size -1",
        lambda c, s: failure(
            c.stub.ListWorkflows(pb.ListWorkflowsRequest(project="p", page_size=-1))
        ),
        "page_size",
        "INVALID_ARGUMENT",
        "negative",
    ),
    (
        "ListWorkflowVersions page_size -1",
        lambda c, s: failure(
            c.stub.ListWorkflowVersions(
                pb.ListWorkflowVersionsRequest(project="p", name="w", page_size=-1)
            )
        ),
        "page_size",
        "INVALID_ARGUMENT",
        "negative",
    ),
    (
        "ListWorkflowInstances page_size -1",
        lambda c, s: failure(
            c.stub.ListWorkflowInstances(pb.ListWorkflowInstancesRequest(page_size=-1))
        ),
        "page_size",
        "INVALID_ARGUMENT",
        "negative",
    ),
    (
        "ListTaskInstances page_size -1",
        lambda c, s: failure(
            c.stub.ListTaskInstances(
                pb.ListTaskInstancesRequest(workflow_instance_id=s.instance_id, page_size=-1)
            )
        ),
        "page_size",
        "INVALID_ARGUMENT",
        "negative",
    ),
    (
        "ListProjects garbage page_token",
        lambda c, s: failure(c.stub.ListProjects(pb.ListProjectsRequest(page_token="!!!"))),
        "page_token",
        "INVALID_PAGE_TOKEN",
        "",
    ),
    (
        "ListWorkflows non-base64 page_token",
        lambda c, s: failure(
            c.stub.ListWorkflows(pb.ListWorkflowsRequest(project="p", page_token="é✓"))
        ),
        "page_token",
        "INVALID_PAGE_TOKEN",
        "",
    ),
    (
        "ListWorkflowInstances garbage page_token",
        lambda c, s: failure(
            c.stub.ListWorkflowInstances(pb.ListWorkflowInstancesRequest(page_token="xyz"))
        ),
        "page_token",
        "INVALID_PAGE_TOKEN",
        "",
    ),
    (
        "ListTaskInstances garbage page_token",
        lambda c, s: failure(
            c.stub.ListTaskInstances(
                pb.ListTaskInstancesRequest(workflow_instance_id=s.instance_id, page_token="%%")
            )
        ),
        "page_token",
        "INVALID_PAGE_TOKEN",
        "",
    ),
    (
        "ListWorkflowVersions garbage page_token",
        lambda c, s: failure(
            c.stub.ListWorkflowVersions(
                pb.ListWorkflowVersionsRequest(project="p", name="w", page_token="e30=")
            )
        ),
        "page_token",
        "INVALID_PAGE_TOKEN",
        "",
    ),
    (
        "submitted_after out of range",
        lambda c, s: failure(
            c.stub.ListWorkflowInstances(
                pb.ListWorkflowInstancesRequest(submitted_after=bad_timestamp(seconds=10**13))
            )
        ),
        "submitted_after",
        "INVALID_ARGUMENT",
        "valid timestamp",
    ),
    (
        "submitted_after negative nanos",
        lambda c, s: failure(
            c.stub.ListWorkflowInstances(
                pb.ListWorkflowInstancesRequest(submitted_after=bad_timestamp(seconds=1, nanos=-1))
            )
        ),
        "submitted_after",
        "INVALID_ARGUMENT",
        "valid timestamp",
    ),
    (
        "workflow filter without project",
        lambda c, s: failure(
            c.stub.ListWorkflowInstances(pb.ListWorkflowInstancesRequest(workflow="w"))
        ),
        "project",
        "INVALID_ARGUMENT",
        "",
    ),
    # ---- request ids
    (
        "CreateProject request_id 129 chars",
        lambda c, s: failure(
            c.stub.CreateProject(
                pb.CreateProjectRequest(
                    project=res.Project(name="fresh"), request_id=LONG_REQUEST_ID
                )
            )
        ),
        "request_id",
        "INVALID_ARGUMENT",
        "128",
    ),
    (
        "CreateWorkflow request_id 129 chars",
        lambda c, s: failure(
            c.stub.CreateWorkflow(
                pb.CreateWorkflowRequest(
                    workflow=workflow("p", "fresh", chain("a")), request_id=LONG_REQUEST_ID
                )
            )
        ),
        "request_id",
        "INVALID_WORKFLOW",
        "128",
    ),
    (
        "StartWorkflow request_id 129 chars",
        start_wf(request_id=LONG_REQUEST_ID),
        "request_id",
        "INVALID_ARGUMENT",
        "128",
    ),
    (
        "StartWorkflow request_id with controls",
        start_wf(request_id="id\x1b"),
        "request_id",
        "INVALID_ARGUMENT",
        "",
    ),
    (
        "RerunWorkflowInstance request_id 129 chars",
        lambda c, s: failure(
            c.stub.RerunWorkflowInstance(
                pb.RerunWorkflowInstanceRequest(id=s.instance_id, request_id=LONG_REQUEST_ID)
            )
        ),
        "request_id",
        "INVALID_ARGUMENT",
        "128",
    ),
    (
        "DeleteWorkflow request_id 129 chars",
        lambda c, s: failure(
            c.stub.DeleteWorkflow(
                pb.DeleteWorkflowRequest(project="p", name="draft", request_id=LONG_REQUEST_ID)
            )
        ),
        "request_id",
        "INVALID_ARGUMENT",
        "128",
    ),
    # ---- start options
    (
        "unknown start task",
        start_wf(start_tasks=["a", "ghost"]),
        "start_tasks[1]",
        "INVALID_ARGUMENT",
        "ghost",
    ),
    (
        "duplicate start task",
        start_wf(start_tasks=["a", "a"]),
        "start_tasks[1]",
        "INVALID_ARGUMENT",
        "twice",
    ),
    (
        "bad start task name",
        start_wf(start_tasks=["a b"]),
        "start_tasks[0]",
        "INVALID_ARGUMENT",
        "",
    ),
    (
        "bad worker group",
        start_wf(worker_group="no such/group"),
        "worker_group",
        "INVALID_ARGUMENT",
        "",
    ),
    (
        "param name with dash",
        start_wf(params={"bad-name": "x"}),
        "params['bad-name']",
        "INVALID_PARAMETER_NAME",
        "identifier",
    ),
    (
        "param name with digit first",
        start_wf(params={"1x": "x"}),
        "params['1x']",
        "INVALID_PARAMETER_NAME",
        "identifier",
    ),
    (
        "param name reserved",
        start_wf(params={"DSCHED_X": "x"}),
        "params['DSCHED_X']",
        "RESERVED_PARAMETER_NAME",
        "reserved",
    ),
    (
        "param value with NUL",
        start_wf(params={"ok": "a\x00b"}),
        "params['ok']",
        "INVALID_ARGUMENT",
        "NUL",
    ),
    (
        "workflow param name with space",
        create_wf(t("a"), params={"has space": "x"}),
        "workflow.params['has space']",
        "INVALID_PARAMETER_NAME",
        "identifier",
    ),
    (
        "task param name with $",
        create_wf(t("a", params={"$x": "1"})),
        "workflow.tasks[0].params['$x']",
        "INVALID_PARAMETER_NAME",
        "identifier",
    ),
    (
        "ExecuteFromTask unknown start task",
        lambda c, s: failure(
            c.stub.ExecuteFromTask(pb.ExecuteFromTaskRequest(id=s.instance_id, start_tasks=["zz"]))
        ),
        "start_tasks[0]",
        "INVALID_ARGUMENT",
        "zz",
    ),
    (
        "ExecuteFromTask no start task",
        lambda c, s: failure(c.stub.ExecuteFromTask(pb.ExecuteFromTaskRequest(id=s.instance_id))),
        "start_tasks",
        "INVALID_ARGUMENT",
        "",
    ),
    (
        "UpdateWorkflow with a cycle",
        lambda c, s: failure(
            c.stub.UpdateWorkflow(
                pb.UpdateWorkflowRequest(
                    workflow=workflow("p", "draft", [t("x", "x2"), t("x2", "x")])
                )
            )
        ),
        "workflow.tasks[1].upstream_tasks",
        "CYCLE_DETECTED",
        "cycle",
    ),
]


@pytest.mark.parametrize(
    ("call", "field_path", "reason", "contains"),
    [pytest.param(*case[1:], id=case[0]) for case in INVALID],
)
async def test_invalid_input_is_rejected_and_changes_nothing(
    cluster: Cluster, seed: Seed, call: Call, field_path: str, reason: str, contains: str
) -> None:
    before = await snapshot(cluster)
    got = await call(cluster, seed)
    assert_invalid(got, field_path, reason=reason, contains=contains)
    assert field_path in got.message  # the message names the field too (for humans and logs)
    assert await snapshot(cluster) == before
    await still_serves(cluster)


async def test_all_violations_of_one_request_arrive_together(cluster: Cluster, seed: Seed) -> None:
    wf = workflow(
        "p",
        "many/bad",
        [t("a", retries=-1, priority=99), t("a"), t("c", "ghost")],
        description="\x07",
    )
    before = await snapshot(cluster)
    got = await failure(cluster.stub.CreateWorkflow(pb.CreateWorkflowRequest(workflow=wf)))
    assert_invalid(got, "workflow.name", reason="INVALID_WORKFLOW")
    assert set(got.fields) >= {
        "workflow.name",
        "workflow.description",
        "workflow.tasks[0].retries",
        "workflow.tasks[0].priority",
        "workflow.tasks[1].name",
        "workflow.tasks[2].upstream_tasks",
    }
    assert got.metadata == {"project": "p", "workflow": "many/bad"}
    assert await snapshot(cluster) == before


# (id, call, code, reason)
REFUSED: list[tuple[str, Call, grpc.StatusCode, str]] = [
    # ---- NOT_FOUND
    (
        "GetProject",
        lambda c, s: failure(c.stub.GetProject(pb.GetProjectRequest(name="ghost"))),
        grpc.StatusCode.NOT_FOUND,
        "NOT_FOUND",
    ),
    (
        "DeleteProject",
        lambda c, s: failure(c.stub.DeleteProject(pb.DeleteProjectRequest(name="ghost"))),
        grpc.StatusCode.NOT_FOUND,
        "NOT_FOUND",
    ),
    (
        "CreateWorkflow in an unknown project",
        lambda c, s: failure(
            c.stub.CreateWorkflow(
                pb.CreateWorkflowRequest(workflow=workflow("ghost", "w", chain("a")))
            )
        ),
        grpc.StatusCode.NOT_FOUND,
        "NOT_FOUND",
    ),
    (
        "UpdateWorkflow",
        lambda c, s: failure(
            c.stub.UpdateWorkflow(
                pb.UpdateWorkflowRequest(workflow=workflow("p", "ghost", chain("a")))
            )
        ),
        grpc.StatusCode.NOT_FOUND,
        "NOT_FOUND",
    ),
    (
        "GetWorkflow",
        lambda c, s: failure(c.stub.GetWorkflow(pb.GetWorkflowRequest(project="p", name="ghost"))),
        grpc.StatusCode.NOT_FOUND,
        "NOT_FOUND",
    ),
    (
        "GetWorkflow version",
        lambda c, s: failure(
            c.stub.GetWorkflow(pb.GetWorkflowRequest(project="p", name="w", version=2))
        ),
        grpc.StatusCode.NOT_FOUND,
        "VERSION_NOT_FOUND",
    ),
    (
        "ListWorkflowVersions",
        lambda c, s: failure(
            c.stub.ListWorkflowVersions(pb.ListWorkflowVersionsRequest(project="p", name="ghost"))
        ),
        grpc.StatusCode.NOT_FOUND,
        "NOT_FOUND",
    ),
    (
        "SetWorkflowReleaseState",
        lambda c, s: failure(
            c.stub.SetWorkflowReleaseState(
                pb.SetWorkflowReleaseStateRequest(
                    project="p", name="ghost", release_state=enums.RELEASE_STATE_ONLINE
                )
            )
        ),
        grpc.StatusCode.NOT_FOUND,
        "NOT_FOUND",
    ),
    (
        "DeleteWorkflow",
        lambda c, s: failure(
            c.stub.DeleteWorkflow(pb.DeleteWorkflowRequest(project="p", name="ghost"))
        ),
        grpc.StatusCode.NOT_FOUND,
        "NOT_FOUND",
    ),
    (
        "StartWorkflow unknown workflow",
        lambda c, s: failure(
            c.stub.StartWorkflow(pb.StartWorkflowRequest(project="p", workflow="ghost"))
        ),
        grpc.StatusCode.NOT_FOUND,
        "NOT_FOUND",
    ),
    (
        "StartWorkflow unknown project",
        lambda c, s: failure(
            c.stub.StartWorkflow(pb.StartWorkflowRequest(project="ghost", workflow="w"))
        ),
        grpc.StatusCode.NOT_FOUND,
        "NOT_FOUND",
    ),
    (
        "GetWorkflowInstance",
        lambda c, s: failure(
            c.stub.GetWorkflowInstance(pb.GetWorkflowInstanceRequest(id=UNKNOWN_ID))
        ),
        grpc.StatusCode.NOT_FOUND,
        "NOT_FOUND",
    ),
    (
        "PauseWorkflowInstance",
        lambda c, s: failure(
            c.stub.PauseWorkflowInstance(pb.PauseWorkflowInstanceRequest(id=UNKNOWN_ID))
        ),
        grpc.StatusCode.NOT_FOUND,
        "NOT_FOUND",
    ),
    (
        "StopWorkflowInstance",
        lambda c, s: failure(
            c.stub.StopWorkflowInstance(pb.StopWorkflowInstanceRequest(id=UNKNOWN_ID))
        ),
        grpc.StatusCode.NOT_FOUND,
        "NOT_FOUND",
    ),
    (
        "ResumeWorkflowInstance",
        lambda c, s: failure(
            c.stub.ResumeWorkflowInstance(pb.ResumeWorkflowInstanceRequest(id=UNKNOWN_ID))
        ),
        grpc.StatusCode.NOT_FOUND,
        "NOT_FOUND",
    ),
    (
        "RerunWorkflowInstance",
        lambda c, s: failure(
            c.stub.RerunWorkflowInstance(pb.RerunWorkflowInstanceRequest(id=UNKNOWN_ID))
        ),
        grpc.StatusCode.NOT_FOUND,
        "NOT_FOUND",
    ),
    (
        "RecoverFailedWorkflowInstance",
        lambda c, s: failure(
            c.stub.RecoverFailedWorkflowInstance(
                pb.RecoverFailedWorkflowInstanceRequest(id=UNKNOWN_ID)
            )
        ),
        grpc.StatusCode.NOT_FOUND,
        "NOT_FOUND",
    ),
    (
        "ExecuteFromTask",
        lambda c, s: failure(
            c.stub.ExecuteFromTask(pb.ExecuteFromTaskRequest(id=UNKNOWN_ID, start_tasks=["a"]))
        ),
        grpc.StatusCode.NOT_FOUND,
        "NOT_FOUND",
    ),
    (
        "ListTaskInstances",
        lambda c, s: failure(
            c.stub.ListTaskInstances(pb.ListTaskInstancesRequest(workflow_instance_id=UNKNOWN_ID))
        ),
        grpc.StatusCode.NOT_FOUND,
        "NOT_FOUND",
    ),
    (
        "GetTaskInstance",
        lambda c, s: failure(c.stub.GetTaskInstance(pb.GetTaskInstanceRequest(id=UNKNOWN_ID))),
        grpc.StatusCode.NOT_FOUND,
        "NOT_FOUND",
    ),
    (
        "ForceTaskInstanceSuccess",
        lambda c, s: failure(
            c.stub.ForceTaskInstanceSuccess(pb.ForceTaskInstanceSuccessRequest(id=UNKNOWN_ID))
        ),
        grpc.StatusCode.NOT_FOUND,
        "NOT_FOUND",
    ),
    (
        "WatchWorkflowInstance",
        lambda c, s: stream_failure(
            c.stub.WatchWorkflowInstance(pb.WatchWorkflowInstanceRequest(id=UNKNOWN_ID))
        ),
        grpc.StatusCode.NOT_FOUND,
        "NOT_FOUND",
    ),
    # ---- ALREADY_EXISTS
    (
        "duplicate project",
        lambda c, s: failure(
            c.stub.CreateProject(pb.CreateProjectRequest(project=res.Project(name="p")))
        ),
        grpc.StatusCode.ALREADY_EXISTS,
        "ALREADY_EXISTS",
    ),
    (
        "duplicate workflow",
        lambda c, s: failure(
            c.stub.CreateWorkflow(
                pb.CreateWorkflowRequest(workflow=workflow("p", "draft", chain("q")))
            )
        ),
        grpc.StatusCode.ALREADY_EXISTS,
        "ALREADY_EXISTS",
    ),
    # ---- FAILED_PRECONDITION
    (
        "start an OFFLINE workflow",
        lambda c, s: failure(
            c.stub.StartWorkflow(pb.StartWorkflowRequest(project="p", workflow="draft"))
        ),
        grpc.StatusCode.FAILED_PRECONDITION,
        "WORKFLOW_OFFLINE",
    ),
    (
        "update an ONLINE workflow",
        lambda c, s: failure(
            c.stub.UpdateWorkflow(pb.UpdateWorkflowRequest(workflow=workflow("p", "w", chain("z"))))
        ),
        grpc.StatusCode.FAILED_PRECONDITION,
        "WORKFLOW_ONLINE",
    ),
    (
        "delete an ONLINE workflow",
        lambda c, s: failure(
            c.stub.DeleteWorkflow(pb.DeleteWorkflowRequest(project="p", name="w"))
        ),
        grpc.StatusCode.FAILED_PRECONDITION,
        "WORKFLOW_ONLINE",
    ),
    (
        "delete a project with workflows",
        lambda c, s: failure(c.stub.DeleteProject(pb.DeleteProjectRequest(name="p"))),
        grpc.StatusCode.FAILED_PRECONDITION,
        "PROJECT_NOT_EMPTY",
    ),
    (
        "pause a finished instance",
        lambda c, s: failure(
            c.stub.PauseWorkflowInstance(pb.PauseWorkflowInstanceRequest(id=s.instance_id))
        ),
        grpc.StatusCode.FAILED_PRECONDITION,
        "ILLEGAL_TRANSITION",
    ),
    (
        "resume a finished instance",
        lambda c, s: failure(
            c.stub.ResumeWorkflowInstance(pb.ResumeWorkflowInstanceRequest(id=s.instance_id))
        ),
        grpc.StatusCode.FAILED_PRECONDITION,
        "ILLEGAL_TRANSITION",
    ),
    (
        "recover a succeeded instance",
        lambda c, s: failure(
            c.stub.RecoverFailedWorkflowInstance(
                pb.RecoverFailedWorkflowInstanceRequest(id=s.instance_id)
            )
        ),
        grpc.StatusCode.FAILED_PRECONDITION,
        "ILLEGAL_TRANSITION",
    ),
    (
        "force success on a SUCCEEDED task",
        lambda c, s: failure(
            c.stub.ForceTaskInstanceSuccess(
                pb.ForceTaskInstanceSuccessRequest(id=s.task_instance_id)
            )
        ),
        grpc.StatusCode.FAILED_PRECONDITION,
        "ILLEGAL_TRANSITION",
    ),
]


@pytest.mark.parametrize(
    ("call", "code", "reason"), [pytest.param(*case[1:], id=case[0]) for case in REFUSED]
)
async def test_refused_requests_change_nothing(
    cluster: Cluster, seed: Seed, call: Call, code: grpc.StatusCode, reason: str
) -> None:
    before = await snapshot(cluster)
    got = await call(cluster, seed)
    assert_status(got, code, reason)
    assert got.violations == ()
    assert got.metadata  # every refusal names what it is about
    assert await snapshot(cluster) == before
    await still_serves(cluster)


FORGED: list[tuple[str, Call]] = [
    (
        "instances",
        lambda c, s: failure(
            c.stub.ListWorkflowInstances(pb.ListWorkflowInstancesRequest(page_token=token("x")))
        ),
    ),
    (
        "task instances",
        lambda c, s: failure(
            c.stub.ListTaskInstances(
                pb.ListTaskInstancesRequest(
                    workflow_instance_id=s.instance_id, page_token=token({"a": 1})
                )
            )
        ),
    ),
    (
        "versions",
        lambda c, s: failure(
            c.stub.ListWorkflowVersions(
                pb.ListWorkflowVersionsRequest(project="p", name="w", page_token=token([1]))
            )
        ),
    ),
]


@pytest.mark.parametrize("call", [pytest.param(c, id=name) for name, c in FORGED])
async def test_forged_page_token_is_invalid_argument(
    cluster: Cluster, seed: Seed, call: Call
) -> None:
    got = await call(cluster, seed)
    await still_serves(cluster)
    assert_invalid(got, "page_token", reason="INVALID_PAGE_TOKEN")


UNDECODABLE = [
    pytest.param(b"\x0a\x05\x0a\x03\xff\xfe\xfd", id="bad utf-8 in project.name"),
    pytest.param(b"\xff\xff\xff", id="corrupt wire format"),
    pytest.param(b"\x0a\x05ab", id="truncated"),
]


async def _send_raw(cluster: Cluster, data: bytes) -> aio.AioRpcError:
    raw = cluster.channel.unary_unary(
        "/dsched.v1.MasterService/CreateProject",
        request_serializer=bytes,
        response_deserializer=bytes,
    )
    try:
        await raw(data, timeout=WAIT_S)
    except aio.AioRpcError as err:
        return err
    raise AssertionError("undecodable bytes were accepted")


@pytest.mark.parametrize("data", UNDECODABLE)
async def test_undecodable_request_bytes_change_nothing(
    cluster: Cluster, seed: Seed, data: bytes
) -> None:
    before = await snapshot(cluster)
    err = await _send_raw(cluster, data)
    assert err.code() != grpc.StatusCode.OK
    assert await snapshot(cluster) == before
    await still_serves(cluster)


@pytest.mark.parametrize("data", UNDECODABLE[:1])
async def test_undecodable_request_bytes_are_invalid_argument(
    cluster: Cluster, data: bytes
) -> None:
    err = await _send_raw(cluster, data)
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert decode(err).domain == "dsched"


async def test_a_request_over_the_size_limit_is_refused(cluster: Cluster, seed: Seed) -> None:
    before = await snapshot(cluster)
    huge = workflow("p", "huge", [shell("a", "x" * (17 << 20))])  # the server takes 16 MiB
    try:
        await cluster.stub.CreateWorkflow(pb.CreateWorkflowRequest(workflow=huge), timeout=WAIT_S)
    except aio.AioRpcError as err:
        assert err.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    else:
        raise AssertionError("a 17 MiB request was accepted")
    assert await snapshot(cluster) == before
    await still_serves(cluster)
