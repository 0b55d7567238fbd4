"""Errors of any size arrive as themselves: a request with thousands of violations is answered
INVALID_ARGUMENT (not RESOURCE_EXHAUSTED from an oversized trailer) to a client with default
settings, with the first violations, the count of the rest, and nothing stored."""

from __future__ import annotations

import asyncio

import pytest

import dsched
from dsched.errors import MAX_VIOLATIONS, OMITTED_KEY
from dsched.spec import MAX_TASKS, ShellSpec, TaskSpec, WorkflowSpec
from tests.integration.api.conftest import (
    Cluster,
    Failure,
    assert_invalid,
    failure,
    online_workflow,
    pb,
    res,
    shell,
    snapshot,
    still_serves,
    workflow,
)
from tests.integration.api.listing import DEFAULT_RECEIVE_LIMIT, list_everything


def cycle(n: int) -> list[res.TaskDefinition]:
    return [shell(f"t{i}", "echo", [f"t{(i - 1) % n}"]) for i in range(n)]


def bad_names(n: int) -> list[res.TaskDefinition]:
    # Each name breaks the grammar and is long, wide (4-byte characters) and quoted back.
    return [shell(f"-{i}" + "\U0001f600" * 60, "echo") for i in range(n)]


def bad_upstreams(n: int) -> list[res.TaskDefinition]:
    return [shell(f"t{i}", "echo", [f"missing{i}-" + "x" * 60]) for i in range(n)]


def assert_bounded(got: Failure, total: int) -> None:
    """At most MAX_VIOLATIONS violations arrived, and they plus the omitted count are all."""
    assert 0 < len(got.violations) <= MAX_VIOLATIONS, got.violations
    assert len(got.violations) + int(got.metadata[OMITTED_KEY]) == total, got.metadata


@pytest.fixture
async def seeded(cluster: Cluster) -> Cluster:
    await online_workflow(cluster, "p", "w", [shell("a", "echo a")])
    return cluster


async def test_a_2000_task_cycle_is_invalid_argument(seeded: Cluster) -> None:
    before = await snapshot(seeded)
    wf = workflow("p", "cyc", cycle(MAX_TASKS))
    got = await failure(seeded.stub.CreateWorkflow(pb.CreateWorkflowRequest(workflow=wf)))
    assert_invalid(got, "workflow.tasks[1].upstream_tasks", reason="CYCLE_DETECTED")
    assert got.describe("workflow.tasks[1].upstream_tasks").startswith("cycle: t0 -> t1 -> ")
    assert len(got.describe("workflow.tasks[1].upstream_tasks").encode()) <= 256
    assert await snapshot(seeded) == before
    await still_serves(seeded)


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (bad_names, "workflow.tasks[0].name"),
        (bad_upstreams, "workflow.tasks[0].upstream_tasks"),
    ],
    ids=["bad names", "unknown upstreams"],
)
async def test_2000_violations_arrive_bounded_and_counted(
    seeded: Cluster, make: object, field: str
) -> None:
    before = await snapshot(seeded)
    wf = workflow("p", "bad", make(MAX_TASKS))  # type: ignore[operator]
    got = await failure(seeded.stub.CreateWorkflow(pb.CreateWorkflowRequest(workflow=wf)))
    assert_invalid(got, field, reason="INVALID_WORKFLOW")
    assert_bounded(got, MAX_TASKS)
    assert len(got.message.encode()) <= 512
    assert await snapshot(seeded) == before
    listed = await list_everything(seeded.address)
    assert listed.counts()["workflows"] == 1
    assert listed.largest < DEFAULT_RECEIVE_LIMIT


async def test_many_bad_start_parameters_arrive_bounded(seeded: Cluster) -> None:
    before = await snapshot(seeded)
    params = {f"{i}bad" + "é" * 100: "v" for i in range(200)}
    request = pb.StartWorkflowRequest(project="p", workflow="w", params=params)
    got = await failure(seeded.stub.StartWorkflow(request))
    assert got.reason == "INVALID_PARAMETER_NAME"
    assert_bounded(got, 200)
    assert all(f.startswith("params[") for f in got.fields)
    assert await snapshot(seeded) == before


async def test_the_sdk_reports_the_count_of_the_rest(seeded: Cluster) -> None:
    tasks = tuple(TaskSpec(name=f"-{i}", kind=ShellSpec(script="echo")) for i in range(MAX_TASKS))
    spec = WorkflowSpec(project="p", name="bad", tasks=tasks)
    with dsched.Client.connect(seeded.address) as client:
        try:
            # No local validation on this path: the server's answer. A thread, because the
            # synchronous SDK would block the loop the server runs on.
            await asyncio.to_thread(client.create_workflow, spec)
        except dsched.InvalidWorkflow as err:
            # The server sends what fits its details budget (here 18 of the 20 it keeps).
            assert 10 <= len(err.violations) <= MAX_VIOLATIONS
            assert len(err.violations) + err.omitted_violations == MAX_TASKS
            assert OMITTED_KEY not in err.metadata
            text = str(err)
            assert text.startswith("workflow 'bad' is invalid (workflow.tasks[0].name: ")
            assert text.endswith(f"; and {err.omitted_violations} more)")
            assert text.count("workflow 'bad' is invalid") == 1
        else:
            raise AssertionError("the invalid workflow was accepted")
