"""A run for a worker group that no worker serves, through the CLI of a real standalone: ``dsched
show`` says why its task waits; ``--dispatch-timeout`` (or the server's ``dispatch_timeout``) ends
the wait with the task FAILED and that reason."""

from __future__ import annotations

from pathlib import Path

from dsched import Client, InstanceEventKind, Shell, TaskState, Workflow, WorkflowState
from tests.e2e.conftest import (
    Standalone,
    clean_env,
    cli,
    instance_id_from_run,
    start_standalone,
)

NEVER_REGISTERED = "no live worker in group 'gpu', and none has registered since this master"


def _submit(client: Client, project: str) -> None:
    with Workflow("needs-gpu", project=project) as wf:
        Shell("train", "true", worker_group="gpu")
    wf.submit(client)


def test_show_says_why_a_task_waits(server: Standalone, client: Client, project: str) -> None:
    _submit(client, project)
    started = cli(server, "--project", project, "run", "needs-gpu", "--dispatch-timeout", "0")
    assert started.returncode == 0, started.stderr
    instance_id = instance_id_from_run(started.stdout)
    for event in client.watch_instance(instance_id, keep_open=True):
        if event.kind is InstanceEventKind.WAITING:
            break
    shown = cli(server, "show", str(instance_id))
    assert shown.returncode == 0, shown.stderr
    table, reasons = shown.stdout.split("\n\n")[1:3]
    assert "SUBMITTED" in table
    (line,) = reasons.strip().splitlines()
    assert line.startswith(f"{event.task_instance_id} train: waiting for a worker: ")
    assert NEVER_REGISTERED in line
    assert cli(server, "stop", str(instance_id)).returncode == 0
    assert client.wait(instance_id, timeout=30).state is WorkflowState.STOPPED


def test_the_dispatch_timeout_fails_the_task_with_the_reason(
    server: Standalone, client: Client, project: str
) -> None:
    _submit(client, project)
    ran = cli(server, "--project", project, "run", "needs-gpu", "--dispatch-timeout", "1", "--wait")
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert "no worker took it within the dispatch timeout (0:00:01)" in ran.stdout
    instance_id = instance_id_from_run(ran.stdout)
    shown = cli(server, "show", str(instance_id)).stdout
    assert "state:     FAILED" in shown
    assert NEVER_REGISTERED in shown.split("\n\n")[2]


def test_the_server_default_dispatch_timeout(tmp_path: Path, project: str) -> None:
    env = clean_env(DSCHED_LOG_LEVEL="INFO", DSCHED_CPU_THRESHOLD="1", DSCHED_DISPATCH_TIMEOUT="1")
    server = start_standalone(tmp_path / "standalone", env=env)
    try:
        with Client.connect(server.address) as client:
            _submit(client, project)
            ran = cli(server, "--project", project, "run", "needs-gpu", "--wait")
            assert ran.returncode == 1, ran.stdout + ran.stderr
            instance_id = instance_id_from_run(ran.stdout)
            (task,) = client.iter_task_instances(instance_id)
            assert task.state is TaskState.FAILED
            assert task.state_reason.startswith(
                "no worker took it within the dispatch timeout (0:00:01): "
            )
    finally:
        server.assert_clean_stop()
