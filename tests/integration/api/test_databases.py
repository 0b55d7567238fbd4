"""A smoke run of the API on every supported metadata database (``db_url``: SQLite, PostgreSQL,
MariaDB): definitions, a run to success, idempotent starts under concurrency, a rejected request
that changes nothing, and a rerun."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc

from tests.integration.api.conftest import (
    SUCCEEDED,
    assert_invalid,
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
    start_cluster,
    task_instances,
    workflow,
)


async def test_create_start_finish(db_url: str, tmp_path: Path) -> None:
    async with start_cluster(db_url, tmp_path) as cluster:
        await create_project(cluster, "smoke")
        dup = await failure(create_project(cluster, "smoke"))
        assert_status(dup, grpc.StatusCode.ALREADY_EXISTS, "ALREADY_EXISTS")
        tasks = [
            shell("a", "echo '${setValue(n=1)}'"),
            shell("b", 'test "$n" = 1', ["a"]),
            shell("c", "echo c", ["a"]),
        ]
        wf = await online_workflow(cluster, "smoke", "dag", tasks)
        assert (wf.version, wf.release_state) == (1, enums.RELEASE_STATE_ONLINE)

        request = pb.StartWorkflowRequest(project="smoke", workflow="dag", request_id="smoke-1")
        answers = await asyncio.gather(*(cluster.stub.StartWorkflow(request) for _ in range(4)))
        instance_id = answers[0].instance.id
        assert {a.instance.id for a in answers} == {instance_id}

        seen = await run_to_end(cluster, instance_id)
        assert seen.events[-1].workflow_state == SUCCEEDED
        sequences = [e.sequence for e in seen.events]
        assert sequences == sorted(set(sequences))
        done = await cluster.stub.GetWorkflowInstance(pb.GetWorkflowInstanceRequest(id=instance_id))
        assert done.instance.state == SUCCEEDED
        assert done.instance.var_pool["n"] == "1"
        tis = await task_instances(cluster, instance_id)
        assert sorted(t.task_name for t in tis) == ["a", "b", "c"]
        assert all(t.state == enums.TASK_INSTANCE_STATE_SUCCEEDED for t in tis)
        listed = await cluster.stub.ListWorkflowInstances(
            pb.ListWorkflowInstancesRequest(project="smoke", workflow="dag", states=[SUCCEEDED])
        )
        assert [i.id for i in listed.instances] == [instance_id]
        counts = await row_counts(cluster)
        assert (counts["workflow_instances"], counts["task_instances"]) == (1, 3)

        before = await snapshot(cluster)
        cyclic = workflow("smoke", "loop", [shell("x", "true", ["y"]), shell("y", "true", ["x"])])
        got = await failure(cluster.stub.CreateWorkflow(pb.CreateWorkflowRequest(workflow=cyclic)))
        assert_invalid(got, "workflow.tasks[1].upstream_tasks", reason="CYCLE_DETECTED")
        assert await snapshot(cluster) == before

        await cluster.stub.RerunWorkflowInstance(pb.RerunWorkflowInstanceRequest(id=instance_id))
        again = await run_to_end(cluster, instance_id, after=seen.cursor)
        assert again.events[-1].workflow_state == SUCCEEDED
        everything = await task_instances(cluster, instance_id, superseded=True)
        assert sorted((t.task_name, t.attempt, t.valid) for t in everything) == [
            ("a", 1, False),
            ("a", 2, True),
            ("b", 1, False),
            ("b", 2, True),
            ("c", 1, False),
            ("c", 2, True),
        ]

        # Deleting the (offline) workflow takes its finished instances with it.
        await cluster.stub.SetWorkflowReleaseState(
            pb.SetWorkflowReleaseStateRequest(
                project="smoke", name="dag", release_state=enums.RELEASE_STATE_OFFLINE
            )
        )
        await cluster.stub.DeleteWorkflow(pb.DeleteWorkflowRequest(project="smoke", name="dag"))
        gone = await failure(
            cluster.stub.GetWorkflowInstance(pb.GetWorkflowInstanceRequest(id=instance_id))
        )
        assert_status(gone, grpc.StatusCode.NOT_FOUND, "NOT_FOUND")
        await cluster.stub.DeleteProject(pb.DeleteProjectRequest(name="smoke"))
        counts = await row_counts(cluster)
        assert {k: v for k, v in counts.items() if v and k != "request_log"} == {}


async def test_concurrent_repeats_get_the_first_answer(db_url: str, tmp_path: Path) -> None:
    # On PostgreSQL and MariaDB the repeats really interleave (SQLite runs each one through).
    async with start_cluster(db_url, tmp_path) as cluster:
        create = pb.CreateProjectRequest(project=res.Project(name="p"), request_id="mk-p")
        created = await asyncio.gather(*(cluster.stub.CreateProject(create) for _ in range(6)))
        assert len({c.SerializeToString() for c in created}) == 1

        define = pb.CreateWorkflowRequest(
            workflow=workflow("p", "w", chain("a")), request_id="mk-w"
        )
        defined = await asyncio.gather(*(cluster.stub.CreateWorkflow(define) for _ in range(6)))
        assert len({d.SerializeToString() for d in defined}) == 1

        delete = pb.DeleteWorkflowRequest(project="p", name="w", request_id="rm-w")
        await asyncio.gather(*(cluster.stub.DeleteWorkflow(delete) for _ in range(6)))

        counts = await row_counts(cluster)
        assert (counts["projects"], counts["workflows"]) == (1, 0)
        assert counts["request_log"] == 3
