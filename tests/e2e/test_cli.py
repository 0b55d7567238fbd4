"""The ``dsched`` CLI against a real server: logs (whole and followed), tables, and its errors."""

from __future__ import annotations

import queue
import re
import subprocess
import threading
import time
from pathlib import Path

import pytest

from dsched import Client, NotFound, Shell, TaskState, Workflow, WorkflowState
from tests import lifeline
from tests.conftest import free_port
from tests.e2e.conftest import (
    DSCHED,
    REPO,
    Standalone,
    clean_env,
    cli,
    parse_table,
    wait_done,
    wait_for_file_sh,
    wait_for_task,
)

TICKS = 5


def test_logs_and_logs_follow(
    server: Standalone, client: Client, project: str, tmp_path: Path
) -> None:
    release = tmp_path / "release"
    # One tick, then the task waits for the test: the first line is seen while it surely runs.
    ticker = (
        f'echo "tick 1"\n{wait_for_file_sh(release)}'
        f'for i in $(seq 2 {TICKS}); do echo "tick $i"; sleep 0.2; done\n'
    )
    with Workflow("ticker", project=project) as wf:
        Shell("ticker", ticker)
    run = wf.run(client=client, wait=False)
    running = wait_for_task(client, run.id, "ticker", TaskState.RUNNING)
    ti = running.task_instance_id

    follow = subprocess.Popen(
        [str(DSCHED), "--server", server.address, "logs", "-f", str(ti)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=clean_env(),
        cwd=REPO,
    )
    lifeline.guard(follow)
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        assert follow.stdout is not None
        for line in follow.stdout:
            lines.put(line)
        lines.put(None)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        # The first tick arrives while the task still runs: the log is streamed, not dumped.
        seen: list[str] = []
        deadline = time.monotonic() + 15
        while not any(line.startswith("tick 1") for line in seen):
            line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            assert line is not None, f"logs -f ended before the first tick: {seen}"
            seen.append(line)
        assert client.get_task_instance(ti).state is TaskState.RUNNING
        release.touch()
        code = follow.wait(timeout=30)
        after = client.get_task_instance(ti)
    finally:
        if follow.poll() is None:
            follow.kill()
            follow.wait()
        reader.join(5)
        assert follow.stdout is not None and follow.stderr is not None
        err = follow.stderr.read()
        follow.stdout.close()
        follow.stderr.close()
    assert code == 0, err
    # It ended by itself, once the task had finished.
    assert after.state is TaskState.SUCCEEDED
    while (line := lines.get(timeout=5)) is not None:
        seen.append(line)
    followed = "".join(seen)
    assert [ln for ln in followed.splitlines() if ln.startswith("tick")] == [
        f"tick {i}" for i in range(1, TICKS + 1)
    ]
    assert re.search(r"\[dsched\] finished at \S+: SUCCEEDED exit code 0", followed), followed

    # Without -f: the same bytes, at once.
    whole = cli(server, "logs", str(ti))
    assert whole.returncode == 0, whole.stderr
    assert whole.stdout == followed
    assert wait_done(client, run.id).state is WorkflowState.SUCCEEDED


def test_instances_cluster_workflows_and_info_tables(
    server: Standalone, client: Client, project: str
) -> None:
    with Workflow("good", project=project) as good:
        Shell("ok", "true")
    with Workflow("bad", project=project) as bad:
        Shell("no", "false")
    ok_run = good.run(client=client, timeout=60)
    bad_run = bad.run(client=client, timeout=60)

    listed = cli(server, "instances", "--project", project)
    assert listed.returncode == 0, listed.stderr
    rows = parse_table(listed.stdout)
    assert [(r["ID"], r["WORKFLOW"], r["STATE"]) for r in rows] == [  # newest first
        (str(bad_run.id), f"{project}/bad", "FAILED"),
        (str(ok_run.id), f"{project}/good", "SUCCEEDED"),
    ]
    assert all(r["VERSION"] == "1" and r["END"] != "-" for r in rows)
    failed = cli(server, "instances", "--project", project, "--state", "failed")
    assert [r["ID"] for r in parse_table(failed.stdout)] == [str(bad_run.id)]
    limited = cli(server, "instances", "--project", project, "--limit", "1")
    assert [r["ID"] for r in parse_table(limited.stdout)] == [str(bad_run.id)]

    cluster = cli(server, "cluster")
    assert cluster.returncode == 0, cluster.stderr
    members = parse_table(cluster.stdout)
    assert [m["ROLE"] for m in members] == ["MASTER", "WORKER"]
    master, worker = members
    assert master["ADDRESS"] == server.address
    assert worker["GROUP"] == "default"
    assert worker["STATUS"] in ("NORMAL", "BUSY")
    assert re.fullmatch(r"\d+/\d+", worker["SLOTS"]) and "EPOCH" not in worker
    assert master["CLUSTER"] == server.cluster_address and worker["CLUSTER"] == "-"
    assert 0.0 <= float(worker["WEIGHT"]) <= 100.0 and master["WEIGHT"] == "-"
    assert int(worker["QUEUED"]) >= 0 and master["QUEUED"] == "-"
    assert float(worker["LOAD"]) >= 0.0 and worker["DISK"].endswith("%")
    assert re.fullmatch(r"[\d.]+(ms|s)|\d+m\d\ds|\d+h\d\dm", worker["UPTIME"])

    workflows = cli(server, "workflows", "--project", project)
    assert workflows.returncode == 0, workflows.stderr
    assert [(w["NAME"], w["RELEASE"], w["TASKS"]) for w in parse_table(workflows.stdout)] == [
        ("bad", "ONLINE", "1"),
        ("good", "ONLINE", "1"),
    ]

    info = cli(server, "info")
    assert info.returncode == 0, info.stderr
    fields = dict(re.findall(r"^(\w+):\s+(.*)$", info.stdout, re.M))
    assert fields["address"] == server.address and fields["role"] == "MASTER"
    assert "epoch" not in fields  # a fencing token: never in a client answer
    assert fields["started"] != "-"


def test_cli_errors_have_exit_codes_and_clear_messages(
    server: Standalone, client: Client, project: str
) -> None:
    missing = 987_654_321
    for args, message in [
        (("show", str(missing)), f"workflow instance {missing} not found"),
        (("stop", str(missing)), f"workflow instance {missing} not found"),
        (("rerun", str(missing)), f"workflow instance {missing} not found"),
        (("logs", str(missing)), f"task instance {missing} not found"),
        (("run", "nope", "--project", project), "not found"),
    ]:
        result = cli(server, *args)
        assert result.returncode == 1, (args, result.stdout, result.stderr)
        assert result.stderr.startswith("error: ") and message in result.stderr, result.stderr
        assert "Traceback" not in result.stderr

    # An illegal transition names the state it found.
    with Workflow("done", project=project) as wf:
        Shell("ok", "true")
    done = wf.run(client=client, timeout=60)
    resumed = cli(server, "resume", str(done.id))
    assert resumed.returncode == 1
    assert "SUCCEEDED" in resumed.stderr and "PAUSED" in resumed.stderr, resumed.stderr

    # Bad input is exit code 2.
    bad_param = cli(server, "run", "done", "--project", project, "--param", "no-equals-sign")
    assert bad_param.returncode == 2 and "NAME=VALUE" in bad_param.stderr


CYCLE = """
from dsched import Shell, Workflow

with Workflow("cyclic") as wf:
    a, b, c = Shell("a", "true"), Shell("b", "true"), Shell("c", "true")
    a >> b >> c >> a
"""


def test_submit_rejects_a_cycle_before_any_rpc(
    server: Standalone, client: Client, project: str, tmp_path: Path
) -> None:
    flow = tmp_path / "cyclic.py"
    flow.write_text(CYCLE)
    # Nobody listens there: had the CLI sent anything, it would fail with UNAVAILABLE (exit 1).
    nowhere = f"127.0.0.1:{free_port()}"
    for address in (nowhere, server.address):
        result = cli(address, "--project", project, "submit", str(flow))
        assert result.returncode == 2, (address, result.stdout, result.stderr)
        assert result.stderr.startswith("error: workflow 'cyclic' is invalid"), result.stderr
        violation = re.search(r"^  (workflow\.tasks\[\d+\]\.\S+): (.*)$", result.stderr, re.M)
        assert violation, result.stderr
        assert re.search(r"cycle: ([abc] -> ){3}[abc]", violation.group(2)), violation.group(2)
        assert result.stdout == ""
    # Nothing reached the real server either: not even the project.
    with pytest.raises(NotFound):
        client.get_project(project)
