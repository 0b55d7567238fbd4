"""MasterService runs: start, pause/resume, stop, rerun, recover, execute-from-task, force success,
and the instance and task instance queries, on a real master and worker."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import grpc
import pytest
from google.protobuf import timestamp_pb2

from tests.integration.api.conftest import (
    FAILED,
    SUCCEEDED,
    Cluster,
    Gate,
    assert_status,
    chain,
    enums,
    failure,
    instance,
    online_workflow,
    pb,
    run_to_end,
    seconds,
    shell,
    start,
    task_instances,
    task_is,
    watch_until,
    workflow_is,
)

T = enums


async def test_start_runs_a_shell_dag_to_success(cluster: Cluster) -> None:
    tasks = [
        shell("a", "echo a"),
        shell("b", 'echo "b sees $greeting"', ["a"]),
        shell("c", "echo c", ["a"]),
        shell("d", "echo d", ["b", "c"]),
    ]
    wf = await online_workflow(cluster, "p", "diamond", tasks, params={"greeting": "hello"})
    started = await start(
        cluster, "p", "diamond", params={"run": "1"}, priority=T.PRIORITY_HIGH, request_id="r-1"
    )
    assert started.id > 0
    assert started.state == T.WORKFLOW_INSTANCE_STATE_SUBMITTED
    assert (started.project, started.workflow) == ("p", "diamond")
    assert (started.workflow_code, started.workflow_version) == (wf.code, 1)
    assert started.command_type == T.COMMAND_TYPE_START
    assert dict(started.params) == {"run": "1"}
    assert started.priority == T.PRIORITY_HIGH
    assert started.failure_strategy == T.FAILURE_STRATEGY_CONTINUE
    assert started.task_depend_type == T.TASK_DEPEND_TYPE_TASK_POST
    assert not started.HasField("end_time")

    seen = await run_to_end(cluster, started.id)
    assert seen.events[-1].workflow_state == SUCCEEDED
    # d ran last: it waits for both of its upstream tasks.
    finished = [e.task_name for e in seen.events if e.task_state == T.TASK_INSTANCE_STATE_SUCCEEDED]
    assert sorted(finished) == ["a", "b", "c", "d"]
    assert finished[0] == "a" and finished[-1] == "d"

    done = await instance(cluster, started.id)
    assert done.state == SUCCEEDED
    assert done.host == cluster.address
    assert done.HasField("start_time") and done.HasField("end_time")
    assert done.run_times == 1
    tis = await task_instances(cluster, started.id)
    assert tis[0].task_name == "a" and len(tis) == 4
    for ti in tis:
        assert ti.state == T.TASK_INSTANCE_STATE_SUCCEEDED
        assert ti.valid and ti.attempt == 1 and ti.exit_code == 0
        assert ti.host == cluster.worker.address
        assert ti.workflow_instance_id == started.id
        assert ti.pid > 0 and ti.log_path
    one = await cluster.stub.GetTaskInstance(pb.GetTaskInstanceRequest(id=tis[1].id))
    assert one.task_instance == tis[1]


async def test_out_params_reach_the_var_pool(cluster: Cluster) -> None:
    tasks = [
        shell("produce", "echo '${setValue(answer=42)}'"),
        shell("consume", 'test "$answer" = 42', ["produce"]),
    ]
    await online_workflow(cluster, "p", "vars", tasks)
    started = await start(cluster, "p", "vars")
    seen = await run_to_end(cluster, started.id)
    assert seen.events[-1].workflow_state == SUCCEEDED
    done = await instance(cluster, started.id)
    assert done.var_pool["answer"] == "42"
    produce = [t for t in await task_instances(cluster, started.id) if t.task_name == "produce"]
    assert dict(produce[0].out_params) == {"answer": "42"}


async def test_pause_then_resume(cluster: Cluster, gate: Gate) -> None:
    tasks = [shell("a", gate.wait), shell("b", "echo b", ["a"])]
    await online_workflow(cluster, "p", "pausable", tasks)
    started = await start(cluster, "p", "pausable")
    running = await watch_until(cluster, started.id, task_is("a", T.TASK_INSTANCE_STATE_RUNNING))

    paused = await cluster.stub.PauseWorkflowInstance(
        pb.PauseWorkflowInstanceRequest(id=started.id)
    )
    assert paused.instance.state in (
        T.WORKFLOW_INSTANCE_STATE_READY_PAUSE,
        T.WORKFLOW_INSTANCE_STATE_PAUSED,
    )
    gate.open()  # a finishes; b must not start
    seen = await run_to_end(cluster, started.id, after=running.cursor)
    assert seen.events[-1].workflow_state == T.WORKFLOW_INSTANCE_STATE_PAUSED
    assert T.TASK_INSTANCE_STATE_SUCCEEDED in seen.task_states("a")
    assert T.TASK_INSTANCE_STATE_RUNNING not in seen.task_states("b")
    assert (await instance(cluster, started.id)).state == T.WORKFLOW_INSTANCE_STATE_PAUSED

    # A paused instance cannot be paused again.
    again = await failure(
        cluster.stub.PauseWorkflowInstance(pb.PauseWorkflowInstanceRequest(id=started.id))
    )
    assert_status(again, grpc.StatusCode.FAILED_PRECONDITION, "ILLEGAL_TRANSITION")

    resumed = await cluster.stub.ResumeWorkflowInstance(
        pb.ResumeWorkflowInstanceRequest(id=started.id)
    )
    assert resumed.instance.state == T.WORKFLOW_INSTANCE_STATE_SUBMITTED
    assert resumed.instance.command_type == T.COMMAND_TYPE_RESUME
    assert not resumed.instance.HasField("end_time")
    after = await run_to_end(cluster, started.id, after=seen.cursor)
    assert after.events[-1].workflow_state == SUCCEEDED
    assert after.task_states("b")[-1] == T.TASK_INSTANCE_STATE_SUCCEEDED
    assert "a" not in {e.task_name for e in after.events}  # a is not run again
    tis = await task_instances(cluster, started.id)
    assert sorted((t.task_name, t.attempt) for t in tis) == [("a", 1), ("b", 1)]


async def test_stop_kills_running_tasks_then_recover_failed(
    cluster: Cluster, tmp_path: Path
) -> None:
    ok = tmp_path / "ok"
    # The first run blocks (until killed); once `ok` exists the task succeeds at once.
    tasks = [shell("slow", f"[ -e '{ok}' ] || sleep 120"), shell("after", "echo after", ["slow"])]
    await online_workflow(cluster, "p", "stoppable", tasks)
    started = await start(cluster, "p", "stoppable")
    running = await watch_until(cluster, started.id, task_is("slow", T.TASK_INSTANCE_STATE_RUNNING))
    stopped = await cluster.stub.StopWorkflowInstance(pb.StopWorkflowInstanceRequest(id=started.id))
    assert stopped.instance.state in (
        T.WORKFLOW_INSTANCE_STATE_READY_STOP,
        T.WORKFLOW_INSTANCE_STATE_STOPPED,
    )
    seen = await run_to_end(cluster, started.id, after=running.cursor)
    assert seen.events[-1].workflow_state == T.WORKFLOW_INSTANCE_STATE_STOPPED
    assert seen.task_states("slow")[-1] == T.TASK_INSTANCE_STATE_KILLED
    killed = await task_instances(cluster, started.id)
    assert [(t.task_name, t.state) for t in killed] == [("slow", T.TASK_INSTANCE_STATE_KILLED)]

    ok.touch()
    recovered = await cluster.stub.RecoverFailedWorkflowInstance(
        pb.RecoverFailedWorkflowInstanceRequest(id=started.id)
    )
    assert recovered.instance.state == T.WORKFLOW_INSTANCE_STATE_SUBMITTED
    assert recovered.instance.command_type == T.COMMAND_TYPE_RECOVER_FAILED
    assert not recovered.instance.HasField("end_time")  # not terminal any more
    final = await run_to_end(cluster, started.id, after=seen.cursor)
    assert final.events[-1].workflow_state == SUCCEEDED
    current = await task_instances(cluster, started.id)
    assert sorted((t.task_name, t.attempt, t.state) for t in current) == [
        ("after", 1, T.TASK_INSTANCE_STATE_SUCCEEDED),
        ("slow", 2, T.TASK_INSTANCE_STATE_SUCCEEDED),
    ]
    everything = await task_instances(cluster, started.id, superseded=True)
    old = [t for t in everything if not t.valid]
    assert [(t.task_name, t.attempt, t.state) for t in old] == [
        ("slow", 1, T.TASK_INSTANCE_STATE_KILLED)
    ]


async def test_stop_a_paused_instance_in_the_store(cluster: Cluster, gate: Gate) -> None:
    await online_workflow(cluster, "p", "w", [shell("a", gate.wait), shell("b", "true", ["a"])])
    started = await start(cluster, "p", "w")
    running = await watch_until(cluster, started.id, task_is("a", T.TASK_INSTANCE_STATE_RUNNING))
    await cluster.stub.PauseWorkflowInstance(pb.PauseWorkflowInstanceRequest(id=started.id))
    gate.open()
    paused = await run_to_end(cluster, started.id, after=running.cursor)
    assert paused.events[-1].workflow_state == T.WORKFLOW_INSTANCE_STATE_PAUSED
    stopped = await cluster.stub.StopWorkflowInstance(pb.StopWorkflowInstanceRequest(id=started.id))
    assert stopped.instance.state == T.WORKFLOW_INSTANCE_STATE_STOPPED
    assert stopped.instance.HasField("end_time")
    after = await run_to_end(cluster, started.id, after=paused.cursor)
    assert after.workflow_states() == [T.WORKFLOW_INSTANCE_STATE_STOPPED]


async def test_failure_then_recover_failed_reruns_only_what_failed(
    cluster: Cluster, tmp_path: Path
) -> None:
    ok = tmp_path / "ok"
    tasks = [
        shell("first", "echo first"),
        shell("flaky", f"[ -e '{ok}' ] || exit 3", ["first"]),
        shell("last", "echo last", ["flaky"]),
    ]
    await online_workflow(cluster, "p", "flaky", tasks)
    started = await start(cluster, "p", "flaky")
    seen = await run_to_end(cluster, started.id)
    assert seen.events[-1].workflow_state == FAILED
    failed = await instance(cluster, started.id)
    assert failed.state == FAILED and failed.HasField("end_time")
    by_name = {t.task_name: t for t in await task_instances(cluster, started.id)}
    assert by_name["flaky"].state == T.TASK_INSTANCE_STATE_FAILED
    assert by_name["flaky"].exit_code == 3
    assert "last" not in by_name  # its upstream failed, so it never ran

    ok.touch()
    await cluster.stub.RecoverFailedWorkflowInstance(
        pb.RecoverFailedWorkflowInstanceRequest(id=started.id)
    )
    final = await run_to_end(cluster, started.id, after=seen.cursor)
    assert final.events[-1].workflow_state == SUCCEEDED
    assert "first" not in {e.task_name for e in final.events}
    current = {t.task_name: t for t in await task_instances(cluster, started.id)}
    assert (current["first"].attempt, current["flaky"].attempt, current["last"].attempt) == (
        1,
        2,
        1,
    )


async def test_rerun_runs_every_task_again(cluster: Cluster) -> None:
    await online_workflow(cluster, "p", "w", chain("a", "b"))
    started = await start(cluster, "p", "w")
    first = await run_to_end(cluster, started.id)
    rerun = await cluster.stub.RerunWorkflowInstance(pb.RerunWorkflowInstanceRequest(id=started.id))
    assert rerun.instance.state == T.WORKFLOW_INSTANCE_STATE_SUBMITTED
    assert rerun.instance.command_type == T.COMMAND_TYPE_RERUN
    assert not rerun.instance.HasField("end_time")  # not terminal any more
    second = await run_to_end(cluster, started.id, after=first.cursor)
    assert second.events[-1].workflow_state == SUCCEEDED
    assert {e.task_name for e in second.events if e.task_name} == {"a", "b"}
    done = await instance(cluster, started.id)
    assert done.run_times == 2
    assert done.command_type == T.COMMAND_TYPE_RERUN
    assert done.HasField("end_time") and done.end_time.ToDatetime() >= done.start_time.ToDatetime()

    current = await task_instances(cluster, started.id)
    assert sorted((t.task_name, t.attempt) for t in current) == [("a", 2), ("b", 2)]
    assert all(t.valid for t in current)
    everything = await task_instances(cluster, started.id, superseded=True)
    assert sorted((t.task_name, t.attempt, t.valid) for t in everything) == [
        ("a", 1, False),
        ("a", 2, True),
        ("b", 1, False),
        ("b", 2, True),
    ]
    # Creation order: both first attempts before both second attempts.
    assert [t.attempt for t in everything] == [1, 1, 2, 2]


async def test_execute_from_task_only_and_post(cluster: Cluster) -> None:
    await online_workflow(cluster, "p", "w", chain("a", "b", "c"))
    started = await start(cluster, "p", "w")
    seen = await run_to_end(cluster, started.id)

    only = await cluster.stub.ExecuteFromTask(
        pb.ExecuteFromTaskRequest(
            id=started.id, start_tasks=["b"], task_depend_type=T.TASK_DEPEND_TYPE_TASK_ONLY
        )
    )
    assert only.instance.command_type == T.COMMAND_TYPE_EXECUTE_FROM_TASK
    assert not only.instance.HasField("end_time")  # not terminal any more
    seen = await run_to_end(cluster, started.id, after=seen.cursor)
    assert seen.events[-1].workflow_state == SUCCEEDED
    assert {e.task_name for e in seen.events if e.task_name} == {"b"}

    await cluster.stub.ExecuteFromTask(pb.ExecuteFromTaskRequest(id=started.id, start_tasks=["b"]))
    seen = await run_to_end(cluster, started.id, after=seen.cursor)
    assert seen.events[-1].workflow_state == SUCCEEDED
    assert {e.task_name for e in seen.events if e.task_name} == {"b", "c"}  # TASK_POST default
    attempts = {t.task_name: t.attempt for t in await task_instances(cluster, started.id)}
    assert attempts == {"a": 1, "b": 3, "c": 2}


async def test_force_success_of_the_only_failure_succeeds_the_instance(cluster: Cluster) -> None:
    await online_workflow(cluster, "p", "w", [shell("a", "true"), shell("b", "exit 1", ["a"])])
    started = await start(cluster, "p", "w")
    seen = await run_to_end(cluster, started.id)
    assert seen.events[-1].workflow_state == FAILED
    by_name = {t.task_name: t for t in await task_instances(cluster, started.id)}

    refused = await failure(
        cluster.stub.ForceTaskInstanceSuccess(
            pb.ForceTaskInstanceSuccessRequest(id=by_name["a"].id)
        )
    )
    assert_status(refused, grpc.StatusCode.FAILED_PRECONDITION, "ILLEGAL_TRANSITION")

    forced = await cluster.stub.ForceTaskInstanceSuccess(
        pb.ForceTaskInstanceSuccessRequest(id=by_name["b"].id)
    )
    assert forced.task_instance.state == T.TASK_INSTANCE_STATE_FORCED_SUCCESS
    assert forced.instance.state == SUCCEEDED
    after = await run_to_end(cluster, started.id, after=seen.cursor)
    assert [(e.task_name, e.task_state) for e in after.events[:1]] == [
        ("b", T.TASK_INSTANCE_STATE_FORCED_SUCCESS)
    ]
    assert after.workflow_states() == [SUCCEEDED]
    got = await cluster.stub.GetTaskInstance(pb.GetTaskInstanceRequest(id=by_name["b"].id))
    assert got.task_instance.state == T.TASK_INSTANCE_STATE_FORCED_SUCCESS


async def test_list_instances_filters_and_pages(cluster: Cluster) -> None:
    await online_workflow(cluster, "p", "good", chain("a"))
    await online_workflow(cluster, "p", "bad", [shell("a", "exit 2")])
    await online_workflow(cluster, "q", "good", chain("a"))
    before = datetime.now(UTC) - timedelta(seconds=1)
    ids = {}
    for key, (project, name) in enumerate(
        [("p", "good"), ("p", "bad"), ("q", "good"), ("p", "good")]
    ):
        inst = await start(cluster, project, name)
        await run_to_end(cluster, inst.id)
        ids[key] = inst.id
    stub = cluster.stub

    everything = await stub.ListWorkflowInstances(pb.ListWorkflowInstancesRequest())
    assert [i.id for i in everything.instances] == sorted(ids.values(), reverse=True)

    by_project = await stub.ListWorkflowInstances(pb.ListWorkflowInstancesRequest(project="p"))
    assert [i.id for i in by_project.instances] == [ids[3], ids[1], ids[0]]
    by_workflow = await stub.ListWorkflowInstances(
        pb.ListWorkflowInstancesRequest(project="p", workflow="good")
    )
    assert [i.id for i in by_workflow.instances] == [ids[3], ids[0]]
    by_state = await stub.ListWorkflowInstances(pb.ListWorkflowInstancesRequest(states=[FAILED]))
    assert [i.id for i in by_state.instances] == [ids[1]]
    two_states = await stub.ListWorkflowInstances(
        pb.ListWorkflowInstancesRequest(project="q", states=[FAILED, SUCCEEDED])
    )
    assert [i.id for i in two_states.instances] == [ids[2]]

    stamp = timestamp_pb2.Timestamp()
    stamp.FromDatetime(before)
    recent = await stub.ListWorkflowInstances(
        pb.ListWorkflowInstancesRequest(submitted_after=stamp)
    )
    assert len(recent.instances) == 4
    stamp.FromDatetime(datetime.now(UTC) + timedelta(hours=1))
    future = await stub.ListWorkflowInstances(
        pb.ListWorkflowInstancesRequest(submitted_after=stamp)
    )
    assert list(future.instances) == []

    page = await stub.ListWorkflowInstances(pb.ListWorkflowInstancesRequest(page_size=3))
    assert len(page.instances) == 3 and page.next_page_token
    rest = await stub.ListWorkflowInstances(
        pb.ListWorkflowInstancesRequest(page_size=3, page_token=page.next_page_token)
    )
    assert [i.id for i in [*page.instances, *rest.instances]] == [
        i.id for i in everything.instances
    ]
    assert not rest.next_page_token


async def test_task_instances_page_in_creation_order(cluster: Cluster) -> None:
    await online_workflow(cluster, "p", "w", chain("a", "b", "c", "d", "e"))
    started = await start(cluster, "p", "w")
    await run_to_end(cluster, started.id)
    names: list[str] = []
    token = ""
    while True:
        reply = await cluster.stub.ListTaskInstances(
            pb.ListTaskInstancesRequest(
                workflow_instance_id=started.id, page_size=2, page_token=token
            )
        )
        assert len(reply.task_instances) <= 2
        names.extend(t.task_name for t in reply.task_instances)
        token = reply.next_page_token
        if not token:
            break
    assert names == ["a", "b", "c", "d", "e"]


async def test_pause_of_a_finished_instance_is_refused(cluster: Cluster) -> None:
    await online_workflow(cluster, "p", "w", chain("a"))
    started = await start(cluster, "p", "w")
    await run_to_end(cluster, started.id)
    for call in (
        cluster.stub.PauseWorkflowInstance(pb.PauseWorkflowInstanceRequest(id=started.id)),
        cluster.stub.ResumeWorkflowInstance(pb.ResumeWorkflowInstanceRequest(id=started.id)),
        cluster.stub.RecoverFailedWorkflowInstance(
            pb.RecoverFailedWorkflowInstanceRequest(id=started.id)
        ),
        cluster.stub.StopWorkflowInstance(pb.StopWorkflowInstanceRequest(id=started.id)),
    ):
        got = await failure(call)
        assert_status(got, grpc.StatusCode.FAILED_PRECONDITION, "ILLEGAL_TRANSITION")
    assert (await instance(cluster, started.id)).state == SUCCEEDED


async def test_start_refuses_an_offline_workflow(cluster: Cluster) -> None:
    await online_workflow(cluster, "p", "w", chain("a"))
    await cluster.stub.SetWorkflowReleaseState(
        pb.SetWorkflowReleaseStateRequest(
            project="p", name="w", release_state=T.RELEASE_STATE_OFFLINE
        )
    )
    got = await failure(start(cluster, "p", "w"))
    assert_status(got, grpc.StatusCode.FAILED_PRECONDITION, "WORKFLOW_OFFLINE")
    assert got.metadata == {"project": "p", "workflow": "w"}
    listed = await cluster.stub.ListWorkflowInstances(pb.ListWorkflowInstancesRequest())
    assert list(listed.instances) == []


async def test_delete_workflow_with_a_running_instance_is_refused(
    cluster: Cluster, gate: Gate
) -> None:
    await online_workflow(cluster, "p", "w", [shell("a", gate.wait)])
    started = await start(cluster, "p", "w")
    running = await watch_until(cluster, started.id, workflow_is(T.WORKFLOW_INSTANCE_STATE_RUNNING))
    await cluster.stub.SetWorkflowReleaseState(
        pb.SetWorkflowReleaseStateRequest(
            project="p", name="w", release_state=T.RELEASE_STATE_OFFLINE
        )
    )
    got = await failure(
        cluster.stub.DeleteWorkflow(pb.DeleteWorkflowRequest(project="p", name="w"))
    )
    assert_status(got, grpc.StatusCode.FAILED_PRECONDITION, "WORKFLOW_HAS_RUNNING_INSTANCES")
    gate.open()
    seen = await run_to_end(cluster, started.id, after=running.cursor)
    assert seen.events[-1].workflow_state == SUCCEEDED
    await cluster.stub.DeleteWorkflow(pb.DeleteWorkflowRequest(project="p", name="w"))
    gone = await failure(
        cluster.stub.GetWorkflowInstance(pb.GetWorkflowInstanceRequest(id=started.id))
    )
    assert_status(gone, grpc.StatusCode.NOT_FOUND, "NOT_FOUND")


@pytest.mark.parametrize(
    ("control", "final"),
    [
        pytest.param("stop", T.WORKFLOW_INSTANCE_STATE_STOPPED, id="stop"),
        pytest.param("pause", T.WORKFLOW_INSTANCE_STATE_PAUSED, id="pause"),
    ],
)
async def test_control_of_an_instance_whose_task_waits_for_its_delay(
    cluster: Cluster, control: str, final: int
) -> None:
    await online_workflow(cluster, "p", "w", [shell("later", "true", delay=seconds(3600))])
    started = await start(cluster, "p", "w")
    head = await watch_until(
        cluster, started.id, task_is("later", T.TASK_INSTANCE_STATE_DELAY_EXECUTION)
    )
    if control == "stop":
        await cluster.stub.StopWorkflowInstance(pb.StopWorkflowInstanceRequest(id=started.id))
    else:
        await cluster.stub.PauseWorkflowInstance(pb.PauseWorkflowInstanceRequest(id=started.id))
    await watch_until(cluster, started.id, workflow_is(final), after=head.cursor)
    # The event log says the instance is terminal; the instance must say so too.
    assert (await instance(cluster, started.id)).state == final


async def test_start_tasks_scope(cluster: Cluster) -> None:
    tasks = [shell("a", "true"), shell("b", "true", ["a"]), shell("c", "true", ["b"])]
    await online_workflow(cluster, "p", "w", tasks)

    async def ran(**fields: object) -> set[str]:
        inst = await start(cluster, "p", "w", **fields)
        seen = await run_to_end(cluster, inst.id)
        assert seen.events[-1].workflow_state == SUCCEEDED
        return {t.task_name for t in await task_instances(cluster, inst.id)}

    assert await ran(start_tasks=["b"]) == {"b", "c"}  # TASK_POST by default
    assert await ran(start_tasks=["b"], task_depend_type=T.TASK_DEPEND_TYPE_TASK_ONLY) == {"b"}
    assert await ran(start_tasks=["b"], task_depend_type=T.TASK_DEPEND_TYPE_TASK_PRE) == {"a", "b"}


async def test_dry_run_succeeds_without_running_tasks(cluster: Cluster, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    await online_workflow(cluster, "p", "w", [shell("a", f"touch '{marker}'; exit 1")])
    inst = await start(cluster, "p", "w", dry_run=True)
    assert inst.dry_run
    seen = await run_to_end(cluster, inst.id)
    assert seen.events[-1].workflow_state == SUCCEEDED
    assert not marker.exists()


async def test_failure_strategy_end_kills_the_rest(cluster: Cluster, gate: Gate) -> None:
    # `slow` waits for a gate that never opens; `bad` fails; END kills `slow`.
    tasks = [shell("slow", gate.wait), shell("bad", "exit 9")]
    await online_workflow(cluster, "p", "w", tasks)
    inst = await start(cluster, "p", "w", failure_strategy=T.FAILURE_STRATEGY_END)
    assert inst.failure_strategy == T.FAILURE_STRATEGY_END
    seen = await run_to_end(cluster, inst.id)
    assert seen.events[-1].workflow_state == FAILED
    states = {t.task_name: t.state for t in await task_instances(cluster, inst.id)}
    assert states == {"slow": T.TASK_INSTANCE_STATE_KILLED, "bad": T.TASK_INSTANCE_STATE_FAILED}


async def test_a_retried_attempt_is_superseded(cluster: Cluster, tmp_path: Path) -> None:
    marker = tmp_path / "tried"
    script = f"[ -e '{marker}' ] || {{ touch '{marker}'; exit 5; }}"
    await online_workflow(cluster, "p", "w", [shell("flaky", script, retries=1)])
    inst = await start(cluster, "p", "w")
    seen = await run_to_end(cluster, inst.id)
    assert seen.events[-1].workflow_state == SUCCEEDED
    assert enums.INSTANCE_EVENT_KIND_RETRY_SCHEDULED in {e.kind for e in seen.events}
    [current] = await task_instances(cluster, inst.id)
    assert (current.attempt, current.retry_times, current.state) == (
        2,
        1,
        T.TASK_INSTANCE_STATE_SUCCEEDED,
    )
    both = await task_instances(cluster, inst.id, superseded=True)
    assert [(t.attempt, t.valid, t.state, t.exit_code) for t in both] == [
        (1, False, T.TASK_INSTANCE_STATE_FAILED, 5),
        (2, True, T.TASK_INSTANCE_STATE_SUCCEEDED, 0),
    ]


async def test_startup_params_override_global_params(cluster: Cluster) -> None:
    script = 'echo "#{setValue(seen=$who-$where)}"'
    tasks = [shell("a", script, params={"where": "task"})]
    await online_workflow(cluster, "p", "w", tasks, params={"who": "global", "where": "global"})
    default = await start(cluster, "p", "w")
    await run_to_end(cluster, default.id)
    assert (await instance(cluster, default.id)).var_pool["seen"] == "global-task"
    override = await start(cluster, "p", "w", params={"who": "startup", "where": "startup"})
    await run_to_end(cluster, override.id)
    assert (await instance(cluster, override.id)).var_pool["seen"] == "startup-startup"


async def test_stop_while_a_pause_is_pending(cluster: Cluster, gate: Gate) -> None:
    await online_workflow(cluster, "p", "w", [shell("a", gate.wait), shell("b", "true", ["a"])])
    started = await start(cluster, "p", "w")
    head = await watch_until(cluster, started.id, task_is("a", T.TASK_INSTANCE_STATE_RUNNING))
    paused = await cluster.stub.PauseWorkflowInstance(
        pb.PauseWorkflowInstanceRequest(id=started.id)
    )
    assert paused.instance.state == T.WORKFLOW_INSTANCE_STATE_READY_PAUSE  # a still runs
    stopped = await cluster.stub.StopWorkflowInstance(pb.StopWorkflowInstanceRequest(id=started.id))
    assert stopped.instance.state in (
        T.WORKFLOW_INSTANCE_STATE_READY_STOP,
        T.WORKFLOW_INSTANCE_STATE_STOPPED,
    )
    seen = await run_to_end(cluster, started.id, after=head.cursor)
    assert seen.events[-1].workflow_state == T.WORKFLOW_INSTANCE_STATE_STOPPED
    assert seen.workflow_states()[:2] == [
        T.WORKFLOW_INSTANCE_STATE_READY_PAUSE,
        T.WORKFLOW_INSTANCE_STATE_READY_STOP,
    ]
    assert seen.task_states("a")[-1] == T.TASK_INSTANCE_STATE_KILLED
    assert (await instance(cluster, started.id)).state == T.WORKFLOW_INSTANCE_STATE_STOPPED


async def test_force_success_needs_a_finished_instance(cluster: Cluster, gate: Gate) -> None:
    await online_workflow(cluster, "p", "w", [shell("bad", "exit 1"), shell("slow", gate.wait)])
    started = await start(cluster, "p", "w")
    head = await watch_until(cluster, started.id, task_is("bad", T.TASK_INSTANCE_STATE_FAILED))
    bad = head.task_instance_id("bad")
    got = await failure(
        cluster.stub.ForceTaskInstanceSuccess(pb.ForceTaskInstanceSuccessRequest(id=bad))
    )
    assert_status(got, grpc.StatusCode.FAILED_PRECONDITION, "INSTANCE_NOT_FINISHED")
    resumed = await failure(
        cluster.stub.ResumeWorkflowInstance(pb.ResumeWorkflowInstanceRequest(id=started.id))
    )
    assert_status(resumed, grpc.StatusCode.FAILED_PRECONDITION, "ILLEGAL_TRANSITION")
    gate.open()
    seen = await run_to_end(cluster, started.id, after=head.cursor)
    assert seen.events[-1].workflow_state == FAILED  # CONTINUE: slow finished, bad failed
    forced = await cluster.stub.ForceTaskInstanceSuccess(pb.ForceTaskInstanceSuccessRequest(id=bad))
    assert forced.instance.state == SUCCEEDED
