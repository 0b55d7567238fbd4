"""Every request is bounded and every answer fits a client with default settings (4 MiB).

The issue's reproductions (80 parameters of 64 KiB; 40 tasks with 255 KiB scripts) are refused
before anything is stored. Definitions, instances and task instances at the limits are accepted,
and every List RPC pages through them (several pages where needed) with no answer over 4 MiB.
"""

from __future__ import annotations

import pytest

from dsched.spec import MAX_DEFINITION_BYTES, MAX_PARAMS_BYTES, MAX_SCRIPTS_BYTES
from dsched.v1 import enums_pb2
from dsched_server.api.pages import PAGE_BYTES
from tests.integration.api.conftest import (
    Cluster,
    assert_invalid,
    failure,
    online_workflow,
    pb,
    res,
    run_to_end,
    shell,
    snapshot,
    start,
    task_instances,
    workflow,
)
from tests.integration.api.listing import DEFAULT_RECEIVE_LIMIT, list_everything

KIB = 1024
MIB = 1024 * KIB


@pytest.fixture
async def seeded(cluster: Cluster) -> Cluster:
    await online_workflow(cluster, "p", "w", [shell("a", "echo a")])
    return cluster


def big_script(size: int) -> str:
    """A script of ``size`` bytes that runs quickly: one comment line, then ``true``."""
    return "#" + "x" * (size - len("#\ntrue")) + "\ntrue"


def wide(n: int) -> str:
    return "\U0001f600" * (n // 4)  # n bytes of 4-byte characters


TOO_LARGE = [
    pytest.param(
        workflow(
            "p", "params", [shell("a", "true")], params={f"p{i}": "v" * 64 * KIB for i in range(80)}
        ),
        "workflow.params",
        id="80 parameters of 64 KiB",
    ),
    pytest.param(
        workflow("p", "scripts", [shell(f"t{i}", big_script(255 * KIB)) for i in range(40)]),
        "workflow.tasks",
        id="40 scripts of 255 KiB",
    ),
    pytest.param(
        workflow(
            "p",
            "local",
            [
                shell(f"t{i}", "true", params={f"p{j}": "v" * 60 * KIB for j in range(2)})
                for i in range(3)
            ],
        ),
        "workflow.params",
        id="local parameters of all tasks together",
    ),
    pytest.param(
        workflow(
            "p",
            "described",
            [shell(f"t{i}", "true", description=wide(4 * KIB)) for i in range(600)],
        ),
        "workflow",
        id="2.3 MiB of descriptions",
    ),
]


@pytest.mark.parametrize(("wf", "field"), TOO_LARGE)
async def test_an_oversized_definition_is_refused_and_nothing_is_stored(
    seeded: Cluster, wf: res.Workflow, field: str
) -> None:
    before = await snapshot(seeded)
    got = await failure(seeded.stub.CreateWorkflow(pb.CreateWorkflowRequest(workflow=wf)))
    assert_invalid(got, field, reason="DEFINITION_TOO_LARGE", contains="at most")
    update = pb.UpdateWorkflowRequest(workflow=_renamed(wf, "w"))
    await seeded.stub.SetWorkflowReleaseState(
        pb.SetWorkflowReleaseStateRequest(
            project="p", name="w", release_state=enums_pb2.RELEASE_STATE_OFFLINE
        )
    )
    before = await snapshot(seeded)
    got = await failure(seeded.stub.UpdateWorkflow(update))
    assert_invalid(got, field, reason="DEFINITION_TOO_LARGE")
    assert await snapshot(seeded) == before
    listed = await list_everything(seeded.address)
    assert listed.counts()["versions"] == 1
    assert listed.largest < DEFAULT_RECEIVE_LIMIT


def _renamed(wf: res.Workflow, name: str) -> res.Workflow:
    copy = res.Workflow()
    copy.CopyFrom(wf)
    copy.name = name
    return copy


async def test_oversized_start_parameters_are_refused_and_nothing_is_stored(
    seeded: Cluster,
) -> None:
    before = await snapshot(seeded)
    params = {f"p{i}": "v" * 60 * KIB for i in range(5)}
    got = await failure(
        seeded.stub.StartWorkflow(pb.StartWorkflowRequest(project="p", workflow="w", params=params))
    )
    assert_invalid(got, "params", reason="REQUEST_TOO_LARGE", contains=str(MAX_PARAMS_BYTES))
    assert await snapshot(seeded) == before


def near_limit(name: str, n_tasks: int = 4) -> res.Workflow:
    """A definition close to every limit: scripts, parameters and the encoded size."""
    script = MAX_SCRIPTS_BYTES // n_tasks - 64
    return workflow(
        "p",
        name,
        [shell(f"t{i}", big_script(script), description=wide(1000)) for i in range(n_tasks)],
        params={f"g{i}": "v" * (MAX_PARAMS_BYTES // 4 - 8) for i in range(4)},
        description=wide(1000),
    )


@pytest.mark.timeout(240)
async def test_every_list_pages_through_answers_at_the_limits(seeded: Cluster) -> None:
    for i in range(6):
        await online_workflow(
            seeded, "p", f"big{i}", near_limit(f"big{i}").tasks, params=near_limit(f"big{i}").params
        )
    # Start parameters at the limit, and tasks whose OUT parameters fill theirs.
    start_params = {f"s{i}": "v" * (MAX_PARAMS_BYTES // 4 - 8) for i in range(4)}
    out = "".join(
        f"echo '${{setValue(o{j}='$(head -c 61440 /dev/zero | tr '\\0' o)')}}'; " for j in range(4)
    )
    await online_workflow(seeded, "p", "outs", [shell(f"t{i}", out) for i in range(16)])
    runs = [await start(seeded, "p", "outs", params=start_params) for _ in range(2)]
    runs += [
        await start(seeded, "p", f"big{i % 6}", params=start_params, dry_run=True)
        for i in range(12)
    ]
    for run in runs:
        done = await run_to_end(seeded, run.id)
        assert done.state == enums_pb2.WORKFLOW_INSTANCE_STATE_SUCCEEDED, done.events[-1]
    tis = await task_instances(seeded, runs[0].id)
    assert all(len(t.out_params) == 4 for t in tis)

    listed = await list_everything(seeded.address)
    assert listed.largest < DEFAULT_RECEIVE_LIMIT
    assert listed.counts() == {
        "projects": 1,
        "workflows": 8,
        "versions": 8,
        "instances": 14,
        "task_instances": 16 * 2 + 4 * 12,
    }
    # 6 definitions of ~1.3 MiB and 14 instances of over 256 KiB cannot share one page.
    assert listed.pages["ListWorkflows"] >= 3
    assert listed.pages["ListWorkflowInstances"] >= 2
    assert listed.pages["ListTaskInstances"] > len(runs)


def test_the_largest_definition_fits_a_page_by_arithmetic() -> None:
    assert MAX_DEFINITION_BYTES + 64 + 5 + 600 < PAGE_BYTES < DEFAULT_RECEIVE_LIMIT - 8 * KIB


def set_values(prefix: str, count: int) -> str:
    """A script that sets ``count`` OUT parameters of 60 KiB each."""
    return "".join(
        f"echo '${{setValue({prefix}{j}='$(head -c 61440 /dev/zero | tr '\\0' x)')}}'; "
        for j in range(count)
    )


async def test_out_parameters_that_would_overfill_the_var_pool_fail_their_task(
    seeded: Cluster,
) -> None:
    tasks = [shell("a", set_values("a", 4)), shell("b", set_values("b", 2), ["a"])]
    await online_workflow(seeded, "p", "pool", tasks)
    run = await start(seeded, "p", "pool")
    done = await run_to_end(seeded, run.id)
    assert done.state == enums_pb2.WORKFLOW_INSTANCE_STATE_FAILED
    a, b = sorted(await task_instances(seeded, run.id), key=lambda t: t.task_name)
    assert a.state == enums_pb2.TASK_INSTANCE_STATE_SUCCEEDED and len(a.out_params) == 4
    assert b.state == enums_pb2.TASK_INSTANCE_STATE_FAILED
    assert "var pool" in b.state_reason and str(MAX_PARAMS_BYTES) in b.state_reason
    assert b.exit_code == 0 and dict(b.out_params) == {}
    got = await seeded.stub.GetWorkflowInstance(pb.GetWorkflowInstanceRequest(id=run.id))
    assert sorted(got.instance.var_pool) == ["a0", "a1", "a2", "a3"]
