"""``deploy/local-cluster/up``, ``status`` and ``down``, as the README tells users to run them, on a
private run directory and free ports: ZooKeeper, two masters and three workers come up, run a
workflow across the workers, and all go away again; then come up again at once on the same ports
(whose closed connections still linger in TIME_WAIT) and go away again."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from dsched import Client, Shell, Workflow, WorkflowState
from tests import lifeline
from tests.conftest import free_port
from tests.e2e.conftest import DSCHED, REPO, alive, clean_env, cli, parse_table
from tests.zk import four_letter_word

SCRIPTS = REPO / "deploy" / "local-cluster"
READY_RE = re.compile(
    r"dsched (master|worker) is up: address (\S+), (?:cluster address (\S+), )?.*pid (\d+)$"
)


def script(name: str, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    """Runs ``deploy/local-cluster/NAME``. The servers it starts detach from it (sessions of their
    own): the lifeline knows them by the pid files, and the script itself as its parent."""
    lifeline.watch_pidfiles(Path(env["DSCHED_CLUSTER_DIR"]) / "pids")
    with subprocess.Popen(
        [str(SCRIPTS / name)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        stdin=subprocess.DEVNULL,
    ) as proc:
        lifeline.guard(proc)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def time_wait_ports(ports: set[int]) -> set[int]:
    """The ``ports`` that have a connection of this host in TIME_WAIT on their side (read from
    /proc/net/tcp*: state 06)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            port = int(local.rsplit(":", 1)[1], 16)
            if state == "06" and port in ports:
                found.add(port)
    return found


def up_and_check(
    env: dict[str, str], expected: list[str], cluster_address: str
) -> tuple[list[int], dict[str, str]]:
    """Runs ``up``; asserts every member came up at its address, the first master's cluster
    listener at ``cluster_address`` and the second's on some other port; returns the pids and the
    masters' cluster listeners."""
    up = script("up", env, timeout=120)
    assert up.returncode == 0, up.stdout + up.stderr
    ready = [m for line in up.stdout.splitlines() if (m := READY_RE.search(line))]
    assert [m[2] for m in ready] == expected
    assert f"--server {expected[0]} cluster" in up.stdout
    listeners = {m[2]: m[3] for m in ready if m[1] == "master"}
    assert listeners[expected[0]] == cluster_address
    assert listeners[expected[1]] not in (None, *expected, cluster_address)
    return [int(m[4]) for m in ready], listeners


def check_down(
    down: subprocess.CompletedProcess[str], env: dict[str, str], pids: list[int], run_dir: Path
) -> None:
    """Asserts that ``down`` stopped every member cleanly and that all are gone."""
    assert down.returncode == 0, down.stdout + down.stderr
    assert down.stdout.count(" stopped (pid ") == 6
    assert not [pid for pid in pids if alive(pid)]
    for name in ("master", "worker"):
        for log in run_dir.glob(f"{name}-*/dsched.log"):
            text = log.read_text()
            assert f"dsched {name}: stopped" in text and "Traceback" not in text, text[-3000:]
    assert script("status", env, timeout=60).returncode == 1


@pytest.mark.timeout(300)
def test_up_run_status_down(tmp_path: Path, pg_url: str) -> None:
    zk_port = free_port()
    masters, workers = [free_port() for _ in range(2)], [free_port() for _ in range(3)]
    cluster_address = f"127.0.0.1:{free_port()}"
    env = clean_env(
        DSCHED_CLUSTER_DIR=str(tmp_path / "cluster"),
        DSCHED_CLUSTER_ZK_PORT=str(zk_port),
        # The first master's cluster listener on a given port, the second's on any free one.
        DSCHED_CLUSTER_MASTER_PORTS=f"{masters[0]}:{cluster_address.split(':')[1]} {masters[1]}",
        DSCHED_CLUSTER_WORKER_PORTS=" ".join(map(str, workers)),
        DSCHED_CLUSTER_DB_URL=pg_url,
        DSCHED_BIN=str(DSCHED),
        # Inherited by the servers: never BUSY for CPU on a loaded 2-core machine (a BUSY master
        # stops claiming, a BUSY worker receives nothing), as in tests/cluster.
        DSCHED_CPU_THRESHOLD="1",
    )
    expected = [f"127.0.0.1:{p}" for p in masters + workers]
    pids: list[int] = []
    try:
        pids, listeners = up_and_check(env, expected, cluster_address)
        assert four_letter_word(zk_port, "ruok") == "imok"

        listed = cli(f"127.0.0.1:{masters[1]}", "cluster")
        rows = parse_table(listed.stdout)
        assert sorted((r["ROLE"], r["ADDRESS"], r["CLUSTER"]) for r in rows) == sorted(
            [("MASTER", a, listeners[a]) for a in expected[:2]]
            + [("WORKER", a, "-") for a in expected[2:]]
        )
        with Client.connect(f"127.0.0.1:{masters[0]}") as client:
            with Workflow("spread", project="e2e-local-cluster") as wf:
                Shell("a", "echo a") >> [Shell(f"b{n}", "sleep 0.2") for n in range(6)]
            run = wf.run(client=client, wait=True, timeout=60)
            assert run.state is WorkflowState.SUCCEEDED
            hosts = {t.host for t in client.iter_task_instances(run.id)}
            assert hosts <= set(expected[2:]) and hosts

        status = script("status", env, timeout=60)
        assert status.returncode == 0, status.stdout + status.stderr
        assert status.stdout.count(" running") == 6
        assert all(listener in status.stdout for listener in listeners.values())
    finally:
        down = script("down", env, timeout=240)
    check_down(down, env, pids, tmp_path / "cluster")

    # At once on the same ports: the servers' sides of the connections they closed linger in
    # TIME_WAIT (ZooKeeper's at least), which must not make up think the ports are taken.
    lingering = time_wait_ports({zk_port, *masters, *workers})
    print(f"\nports with connections in TIME_WAIT before the second up: {sorted(lingering)}")
    assert lingering, "no TIME_WAIT left by down: this test no longer tests what it says"
    pids = []
    try:
        pids, _ = up_and_check(env, expected, cluster_address)
        assert four_letter_word(zk_port, "ruok") == "imok"
        listed = cli(f"127.0.0.1:{masters[0]}", "cluster")
        assert listed.returncode == 0, listed.stdout + listed.stderr
        assert len(parse_table(listed.stdout)) == 5, listed.stdout
    finally:
        down = script("down", env, timeout=240)
    check_down(down, env, pids, tmp_path / "cluster")
