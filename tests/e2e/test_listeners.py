"""``dsched standalone``'s two listeners: clients connect to the master's client listener, the
embedded worker reports to its cluster listener on loopback, and a client cannot reach or discover
the cluster service on the client port (the ``dsched master`` processes are checked in
test_cluster_processes)."""

from __future__ import annotations

from dsched import Client, Shell, TaskState, Workflow, WorkflowState
from tests.e2e.conftest import Standalone, eventually, wait_for_file_sh
from tests.listeners import assert_cannot_report, assert_listeners_split


def test_standalone_serves_workers_on_loopback_only(server: Standalone) -> None:
    host, _, port = server.cluster_address.rpartition(":")
    assert host == "127.0.0.1" and int(port) not in (0, server.port)
    assert_listeners_split(server.address, server.cluster_address)


def test_a_client_cannot_forge_a_running_tasks_result(
    server: Standalone, client: Client, project: str
) -> None:
    release = server.data_dir / f"release-{project}"
    with Workflow("held", project=project) as wf:
        Shell("t", wait_for_file_sh(release))
    run = wf.run(client=client, wait=False)

    def running() -> bool:
        tasks = list(client.iter_task_instances(run.id))
        return bool(tasks) and tasks[0].state is TaskState.RUNNING

    eventually(running, timeout=30, what="the task to run")
    [task] = client.iter_task_instances(run.id)
    assert_cannot_report(server.address, task.id, run.id)
    assert client.get_task_instance(task.id).state is TaskState.RUNNING
    release.touch()
    final = client.wait(run.id, timeout=60)
    assert final.state is WorkflowState.SUCCEEDED
    [done] = client.iter_task_instances(run.id)
    assert (done.id, done.state) == (task.id, TaskState.SUCCEEDED)
