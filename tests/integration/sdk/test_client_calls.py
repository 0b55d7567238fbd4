"""The client's calls against the fake master: typed results, options on the wire, pagination."""

from __future__ import annotations

from datetime import timedelta

import pytest

import dsched
from dsched import Client, Shell, Workflow
from dsched.v1 import enums_pb2
from tests.integration.sdk.conftest import Fake


def _etl(project: str = "demo", script: str = "echo hi") -> Workflow:
    with Workflow("etl", project=project, params={"dt": "2024-01-01"}) as wf:
        Shell("extract", script, retries=2, retry_interval=5) >> Shell("load", "echo load")
    return wf


def test_submit_creates_project_and_workflow_then_goes_online(fake: Fake, client: Client) -> None:
    info = _etl().submit(client)
    assert (info.project, info.name, info.version) == ("demo", "etl", 1)
    assert info.release_state is dsched.ReleaseState.ONLINE
    assert info.spec == _etl().to_spec()
    assert [p.name for p in client.iter_projects()] == ["demo"]


def test_resubmitting_unchanged_keeps_the_version(fake: Fake, client: Client) -> None:
    _etl().submit(client)
    again = _etl().submit(client)
    assert again.version == 1
    assert fake.master.seen("UpdateWorkflow") == []


def test_changed_workflow_goes_offline_updates_and_back_online(fake: Fake, client: Client) -> None:
    _etl().submit(client)
    info = _etl(script="echo changed").submit(client)
    assert info.version == 2 and info.online
    states = [r.release_state for r in fake.master.seen("SetWorkflowReleaseState")]
    online, offline = enums_pb2.RELEASE_STATE_ONLINE, enums_pb2.RELEASE_STATE_OFFLINE
    assert states == [online, offline, online]
    versions = [v.version for v in client.iter_workflow_versions("demo", "etl")]
    assert versions == [2, 1]


def test_run_waits_for_the_final_state(fake: Fake, client: Client) -> None:
    final = _etl().run(client=client, params={"n": 3}, priority="high")
    assert final.state is dsched.WorkflowState.SUCCEEDED
    assert final.terminal and final.duration is not None
    (start,) = fake.master.seen("StartWorkflow")
    assert start.params == {"n": "3"}
    assert start.priority == enums_pb2.PRIORITY_HIGH
    assert start.failure_strategy == enums_pb2.FAILURE_STRATEGY_UNSPECIFIED  # server default


def test_start_workflow_sends_every_option(fake: Fake, client: Client) -> None:
    _etl().submit(client)
    instance = client.start_workflow(
        "demo",
        "etl",
        start_tasks=["load"],
        task_depend_type="task_pre",
        failure_strategy=dsched.FailureStrategy.END,
        priority="LOWEST",
        worker_group="gpu",
        dry_run=True,
        request_id="r-1",
    )
    (req,) = fake.master.seen("StartWorkflow")
    assert list(req.start_tasks) == ["load"]
    assert req.task_depend_type == enums_pb2.TASK_DEPEND_TYPE_TASK_PRE
    assert req.failure_strategy == enums_pb2.FAILURE_STRATEGY_END
    assert req.priority == enums_pb2.PRIORITY_LOWEST
    assert (req.worker_group, req.dry_run, req.request_id) == ("gpu", True, "r-1")
    assert instance.dry_run and instance.worker_group == "gpu"
    assert instance.task_depend_type is dsched.TaskDependType.TASK_PRE


def test_bad_option_name_fails_before_the_call(fake: Fake, client: Client) -> None:
    with pytest.raises(dsched.InvalidArgument, match="priority must be one of"):
        client.start_workflow("demo", "etl", priority="urgent")
    assert fake.master.seen("StartWorkflow") == []


def test_offline_workflow_cannot_start(fake: Fake, client: Client) -> None:
    info = _etl().submit(client)
    client.set_release_state(info.project, info.name, "offline")
    with pytest.raises(dsched.FailedPrecondition) as caught:
        client.start_workflow("demo", "etl")
    assert caught.value.reason == "WORKFLOW_NOT_ONLINE"
    assert caught.value.metadata == {"workflow": "etl"}


def test_iter_instances_walks_every_page(fake: Fake, client: Client) -> None:
    fake.world.auto_run = False
    _etl().submit(client)
    started = [client.start_workflow("demo", "etl").id for _ in range(7)]
    found = [i.id for i in client.iter_instances(project="demo", page_size=3)]
    assert found == sorted(started, reverse=True)
    tokens = [r.page_token for r in fake.master.seen("ListWorkflowInstances")]
    assert tokens == ["", "3", "6"]
    page = client.list_instances(project="demo", page_size=5)
    assert len(page.items) == 5 and not page.last


def test_instance_filters_reach_the_server(fake: Fake, client: Client) -> None:
    _etl().submit(client)
    final = client.wait(client.start_workflow("demo", "etl").id, timeout=10)
    found = list(client.iter_instances(project="demo", workflow="etl", states=["succeeded"]))
    assert [i.id for i in found] == [final.id]
    req = fake.master.seen("ListWorkflowInstances")[-1]
    assert list(req.states) == [enums_pb2.WORKFLOW_INSTANCE_STATE_SUCCEEDED]
    assert list(client.iter_instances(project="demo", states=[dsched.WorkflowState.FAILED])) == []


def test_control_calls_return_the_new_state(fake: Fake, client: Client) -> None:
    fake.world.auto_run = False
    _etl().submit(client)
    instance = client.start_workflow("demo", "etl")
    fake.world.set_state(instance.id, enums_pb2.WORKFLOW_INSTANCE_STATE_RUNNING)
    paused = client.pause_instance(instance.id)
    assert paused.state is dsched.WorkflowState.READY_PAUSE
    stopped = client.stop_instance(instance.id)
    assert stopped.state is dsched.WorkflowState.STOPPED
    with pytest.raises(dsched.IllegalTransition) as caught:
        client.pause_instance(instance.id)
    assert caught.value.metadata == {"instance": str(instance.id), "state": "STOPPED"}
    assert client.recover_failed_instance(instance.id).state is dsched.WorkflowState.SUBMITTED


def test_a_pending_control_raises_control_pending_with_the_instance_and_request_id(
    fake: Fake, client: Client
) -> None:
    fake.world.auto_run = False
    _etl().submit(client)
    instance = client.start_workflow("demo", "etl")
    fake.world.set_state(instance.id, enums_pb2.WORKFLOW_INSTANCE_STATE_RUNNING)
    fake.world.controls_pending = True
    with pytest.raises(dsched.ControlPending) as caught:
        client.stop_instance(instance.id, request_id="stop-7")
    err = caught.value
    assert (err.code, err.reason, err.request_id) == (
        "DEADLINE_EXCEEDED",
        "CONTROL_PENDING",
        "stop-7",
    )
    assert err.instance.id == instance.id and err.instance.state is dsched.WorkflowState.RUNNING
    assert err.metadata == {
        "instance": str(instance.id),
        "state": "RUNNING",
        "request_id": "stop-7",
    }
    assert fake.master.seen("StopWorkflowInstance")[-1].request_id == "stop-7"


def test_task_instances_and_force_success(fake: Fake, client: Client) -> None:
    final = _etl(script="echo boom\nexit 1").run(client=client, timeout=10)
    assert final.state is dsched.WorkflowState.FAILED
    assert final.state_reason == "task extract failed"
    (task,) = client.iter_task_instances(final.id, page_size=1)
    assert task.task_name == "extract" and task.state is dsched.TaskState.FAILED
    assert task.exit_code == 1 and task.duration is not None
    assert client.get_task_instance(task.id) == task
    forced, _ = client.force_task_success(task.id)
    assert forced.state is dsched.TaskState.FORCED_SUCCESS


def test_cluster_members_and_server_info(fake: Fake, client: Client) -> None:
    master, worker = client.cluster_members()
    assert master.role is dsched.ServerRole.MASTER and worker.group == "default"
    assert worker.status is dsched.ServerStatus.NORMAL
    assert (worker.slots_in_use, worker.slots_total, worker.cpu_usage) == (2, 8, 0.25)
    assert worker.queued == 3
    assert (worker.weight, master.weight) == (42.5, 0.0)
    assert worker.start_time is not None and worker.report_time is not None
    assert worker.report_time - worker.start_time >= timedelta(seconds=3723)
    assert [m.address for m in client.cluster_members(role="worker")] == ["10.0.0.2:5679"]
    info = client.server_info()
    assert (info.version, info.api_version) == ("0.1.0-fake", "dsched.v1")
    assert info.role is dsched.ServerRole.MASTER and info.start_time is not None
    assert info.counters == {"stale_events": 2, "commands_claimed": 5}


def test_list_workflows_and_delete(fake: Fake, client: Client) -> None:
    _etl().submit(client)
    (listed,) = client.iter_workflows("demo")
    assert listed.name == "etl" and len(listed.spec.tasks) == 2
    client.delete_workflow("demo", "etl")
    with pytest.raises(dsched.NotFound):
        client.get_workflow("demo", "etl")
