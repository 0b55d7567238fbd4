"""The ``dsched`` command, run as a process against the fake master: output and exit codes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from dsched.v1 import enums_pb2
from tests import lifeline
from tests.integration.sdk.conftest import Fake

DSCHED = Path(sys.executable).parent / "dsched"

ETL = """
from dsched import Shell, Workflow

with Workflow("etl", description="demo") as wf:
    Shell("extract", "echo extracting\\necho rows=3") >> Shell("load", "echo loading")

if __name__ == "__main__":
    raise SystemExit("only `dsched submit` should load this file")
"""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("DSCHED_SERVER", None)
    return env


def cli(fake: Fake, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [str(DSCHED), "--server", fake.address, "--project", "demo", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=30, env=_env())


def _file(tmp_path: Path, text: str, name: str = "flow.py") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


@pytest.fixture
def submitted(fake: Fake, tmp_path: Path) -> Fake:
    result = cli(fake, "submit", _file(tmp_path, ETL))
    assert result.returncode == 0, result.stderr
    return fake


def test_submit_prints_name_and_version(fake: Fake, tmp_path: Path) -> None:
    path = _file(tmp_path, ETL)
    first = cli(fake, "submit", path)
    assert first.returncode == 0, first.stderr
    assert first.stdout.split() == ["demo/etl", "version", "1", "ONLINE"]
    changed = _file(tmp_path, ETL.replace("echo loading", "echo loading v2"), "changed.py")
    assert cli(fake, "submit", path).stdout.split()[2] == "1"
    assert cli(fake, "submit", changed).stdout.split()[2] == "2"


def test_submit_rejects_an_invalid_workflow_offline(fake: Fake, tmp_path: Path) -> None:
    bad = ETL.replace('Shell("load", "echo loading")', 'Shell("load", "")')
    result = cli(fake, "submit", _file(tmp_path, bad))
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert lines[0] == "error: workflow 'etl' is invalid"
    assert lines[1] == "  workflow.tasks[1].shell.script: must not be empty"
    assert "Traceback" not in result.stderr
    assert fake.master.requests == []


def test_submit_of_a_file_without_workflows(fake: Fake, tmp_path: Path) -> None:
    result = cli(fake, "submit", _file(tmp_path, "x = 1\n"))
    assert result.returncode == 2
    assert "defines no workflow" in result.stderr


def test_run_wait_logs_follows_states_and_logs(submitted: Fake) -> None:
    result = cli(submitted, "run", "etl", "--param", "dt=2024-01-01", "--wait", "--logs")
    assert result.returncode == 0, result.stderr
    out = result.stdout.splitlines()
    assert out[0].split() == ["instance", "1", "demo/etl", "v1", "SUBMITTED"]
    assert "extract | extracting" in out and "extract | rows=3" in out
    assert "load | loading" in out
    events = [line.split()[1:3] for line in out[1:-1] if "|" not in line]
    assert events == [
        ["workflow", "SUBMITTED"],
        ["workflow", "RUNNING"],
        ["extract", "RUNNING"],
        ["extract", "SUCCEEDED"],
        ["load", "RUNNING"],
        ["load", "SUCCEEDED"],
        ["workflow", "SUCCEEDED"],
    ]
    assert out[-1].startswith("instance 1 SUCCEEDED in ")
    (start,) = submitted.master.seen("StartWorkflow")
    assert dict(start.params) == {"dt": "2024-01-01"}


def test_run_of_a_failing_workflow_exits_1(fake: Fake, tmp_path: Path) -> None:
    failing = ETL.replace("echo loading", "echo loading\\nexit 1")
    assert cli(fake, "submit", _file(tmp_path, failing)).returncode == 0
    result = cli(fake, "run", "etl", "--wait")
    assert result.returncode == 1
    assert result.stdout.splitlines()[-1].startswith("instance 1 FAILED")
    assert "(task load failed)" in result.stdout


def test_run_without_wait_prints_the_instance(submitted: Fake) -> None:
    result = cli(
        submitted,
        "run",
        "etl",
        "--start-task",
        "load",
        "--depend-type",
        "pre",
        "--failure-strategy",
        "end",
        "--priority",
        "high",
        "--worker-group",
        "gpu",
        "--dry-run",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("instance 1 ")
    (start,) = submitted.master.seen("StartWorkflow")
    assert list(start.start_tasks) == ["load"] and start.dry_run
    assert start.worker_group == "gpu"


def test_run_errors(submitted: Fake) -> None:
    missing = cli(submitted, "run", "nope")
    assert missing.returncode == 1
    assert missing.stderr == "error: workflow 'nope' not found\n"
    bad_param = cli(submitted, "run", "etl", "--param", "novalue")
    assert bad_param.returncode == 2
    assert "--param expects NAME=VALUE" in bad_param.stderr


def test_instances_show_and_logs(submitted: Fake) -> None:
    assert cli(submitted, "run", "etl", "--wait").returncode == 0
    table = cli(submitted, "instances", "--state", "succeeded", "--limit", "5").stdout.splitlines()
    assert table[0].split() == [
        *("ID", "WORKFLOW", "VERSION", "STATE", "TRIGGER", "SCHEDULED", "START", "END", "DURATION")
    ]
    assert table[1].split()[:5] == ["1", "demo/etl", "1", "SUCCEEDED", "MANUAL"]
    assert cli(submitted, "instances", "--state", "failed").stdout.splitlines()[1:] == []

    shown = cli(submitted, "show", "1").stdout
    assert "state:     SUCCEEDED" in shown
    assert "trigger:   MANUAL\n" in shown
    rows = [line.split() for line in shown.split("\n\n")[1].splitlines()]
    assert rows[0][:5] == ["ID", "TASK", "TYPE", "ATTEMPT", "STATE"]
    assert [r[1:5] for r in rows[1:]] == [
        ["extract", "SHELL", "1", "SUCCEEDED"],
        ["load", "SHELL", "1", "SUCCEEDED"],
    ]
    task_id = rows[1][0]
    assert rows[1][-2:] == ["0", "-"]  # the exit code, then no Spark application

    assert cli(submitted, "logs", task_id).stdout == "extracting\nrows=3\n"
    assert cli(submitted, "logs", task_id, "-f").stdout == "extracting\nrows=3\n"


def test_control_commands(submitted: Fake) -> None:
    assert cli(submitted, "run", "etl", "--wait").returncode == 0
    refused = cli(submitted, "pause", "1")
    assert refused.returncode == 1
    assert refused.stderr == "error: instance 1 is SUCCEEDED\n"
    rerun = cli(submitted, "rerun", "1")
    assert (rerun.returncode, rerun.stdout) == (0, "instance 1  SUBMITTED\n")
    stopped = cli(submitted, "stop", "1")
    assert stopped.stdout == "instance 1  STOPPED\n"
    assert cli(submitted, "recover", "1").stdout == "instance 1  SUBMITTED\n"


def test_a_pending_control_is_an_error_that_says_it_will_still_be_applied(
    submitted: Fake,
) -> None:
    submitted.world.auto_run = False
    started = cli(submitted, "run", "etl")
    assert started.returncode == 0, started.stderr
    submitted.world.set_state(1, enums_pb2.WORKFLOW_INSTANCE_STATE_RUNNING)
    submitted.world.controls_pending = True
    for action in ("pause", "stop"):
        result = cli(submitted, action, "1")
        assert (result.returncode, result.stdout) == (1, "")
        assert result.stderr.startswith(
            f"error: the {action} of instance 1 is recorded but not applied yet (the instance "
            "is RUNNING): the master driving it applies it once it can"
        ), result.stderr


def test_workflows_cluster_info(submitted: Fake) -> None:
    workflows = cli(submitted, "workflows").stdout.splitlines()
    assert workflows[0].split() == ["NAME", "VERSION", "RELEASE", "TASKS", "UPDATED"]
    assert workflows[1].split()[:4] == ["etl", "1", "ONLINE", "2"]
    cluster = cli(submitted, "cluster").stdout.splitlines()
    assert cluster[0].split() == [
        *("ROLE", "ADDRESS", "GROUP", "STATUS", "CPU", "MEM", "LOAD", "DISK", "SLOTS"),
        *("QUEUED", "WEIGHT", "CLUSTER", "UPTIME"),
    ]
    worker = ["WORKER", "10.0.0.2:5679", "default", "NORMAL", "25%", "50%", "0.00", "0%", "2/8"]
    assert cluster[2].split() == [*worker, "3", "42.5", "-", "1h02m"]  # workers: no listener
    master = cluster[1].split()
    assert (master[2], master[9], master[10]) == ("-", "-", "-")  # no group, backlog, weight
    assert master[11] == "10.0.0.1:5680"  # where its workers report
    info = cli(submitted, "info").stdout
    assert "version: 0.1.0-fake" in info and "role:    MASTER" in info
    assert "metrics: commands_claimed=5 stale_events=2" in info


def test_server_from_the_environment(fake: Fake) -> None:
    env = _env() | {"DSCHED_SERVER": fake.address}
    result = subprocess.run(
        [str(DSCHED), "info"], capture_output=True, text=True, timeout=30, env=env
    )
    assert result.returncode == 0, result.stderr
    assert fake.master.seen("GetServerInfo")


def test_unreachable_server(fake: Fake) -> None:
    result = subprocess.run(
        [str(DSCHED), "--server", "127.0.0.1:1", "info"],
        capture_output=True,
        text=True,
        timeout=30,
        env=_env(),
    )
    assert result.returncode == 1
    assert result.stderr.startswith("error: cannot reach the dsched server at 127.0.0.1:1")


def _interruptible() -> None:
    """In the child before exec: SIGINT at its default and unblocked. Dispositions set to "ignore"
    and blocked signals survive exec, and Python installs its KeyboardInterrupt handler only over
    the default; what earlier tests left in this pytest process must not make Ctrl-C a no-op."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_exits_130_without_traceback(fake: Fake, tmp_path: Path) -> None:
    endless = ETL.replace("echo loading", "sleep 1000")
    assert cli(fake, "submit", _file(tmp_path, endless)).returncode == 0
    cmd = [str(DSCHED), "--server", fake.address, "--project", "demo", "run", "etl", "--wait"]
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
        preexec_fn=_interruptible,
    )
    lifeline.guard(proc)
    assert proc.stdout is not None
    try:
        lines = [proc.stdout.readline() for _ in range(6)]  # header + 5 events, then it waits
        if not lines[-1]:  # EOF: the CLI ended before it was interrupted; say why
            _, err = proc.communicate(timeout=20)
            raise AssertionError(f"the CLI exited {proc.returncode} early: {lines} {err!r}")
        assert lines[-1].split()[1:3] == ["load", "RUNNING"], lines
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=10)  # reaped here, not by a later test's garbage collection
    assert proc.returncode == 130
    assert "Traceback" not in err


def test_cleanup_sends_the_age_and_kinds_and_prints_the_tallies(fake: Fake) -> None:
    result = cli(fake, "cleanup", "--older-than", "30d", "--dry-run")
    assert result.returncode == 0, result.stderr
    (request,) = fake.master.seen("CleanUpHistory")
    assert request.older_than.seconds == 30 * 86400 and request.dry_run and request.request_id
    assert list(request.kinds) == [
        enums_pb2.HISTORY_KIND_REQUEST_IDS,
        enums_pb2.HISTORY_KIND_EVENTS,
    ]
    header, request_ids, events, *rest = result.stdout.splitlines()
    assert header.split() == ["KIND", "WOULD", "DELETE", "OLDEST", "NEWEST"]
    assert request_ids.split()[:2] == ["request_ids", "10"]
    assert events.split()[:2] == ["events", "20"]
    assert rest == ["dry run: nothing was deleted"]

    result = cli(fake, "cleanup", "--older-than", "12h", "--what", "instances")
    assert result.returncode == 0, result.stderr
    request = fake.master.seen("CleanUpHistory")[-1]
    assert request.older_than.seconds == 12 * 3600 and not request.dry_run
    assert list(request.kinds) == [enums_pb2.HISTORY_KIND_INSTANCES]
    assert result.stdout.splitlines()[1].split()[:2] == ["instances", "0"]


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--older-than", "30"], "--older-than"),
        (["--older-than", "1d", "--what", "logs"], "--what"),
    ],
)
def test_cleanup_refuses_bad_input_before_calling(fake: Fake, args: list[str], field: str) -> None:
    result = cli(fake, "cleanup", *args)
    assert result.returncode == 2
    assert field in result.stderr
    assert fake.master.seen("CleanUpHistory") == []
