"""A pytest run that is SIGKILLed leaves no process behind (:mod:`tests.lifeline`).

A pytest subprocess runs a small test file that uses the real fixtures and then sleeps: either
``cluster`` (tests/cluster/conftest.py) starting ZooKeeper, a master and a worker with a task
running on it, or ``harness`` (tests/integration/worker/conftest.py) running a task on a worker
inside pytest. Once it says all is up, every process descending from it is noted (with its start
time, so a reused pid is not mistaken for a survivor) along with their process groups; the pytest
process is SIGKILLed; within a bounded wait none of the noted processes and no member of their
groups may be alive: not the JVM, not the servers, not the tasks (process groups of their own,
one or two levels down), not the watchdog itself.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests import lifeline
from tests.e2e.conftest import REPO

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

UP_TIMEOUT_S = 150.0  # a JVM and two Python servers importing grpc on a loaded 2-core machine
GONE_TIMEOUT_S = 20.0

INNER_CLUSTER = """
import json
import os
import time
from pathlib import Path

import pytest

from dsched import Shell, TaskState, Workflow
from tests.e2e.conftest import wait_for_task


@pytest.mark.timeout(900)
def test_cluster_then_sleep(cluster):
    cluster.start(masters=1, workers=1)
    client = cluster.client()
    with Workflow("sleeper", project="lifeline") as wf:
        Shell("long", "sleep 1000")
    run = wf.run(client=client, wait=False)
    wait_for_task(client, run.id, "long", TaskState.RUNNING, timeout=60)
    (worker,) = cluster.workers()
    started = {
        "zookeeper": cluster.zk.pid,
        "members": [m.pid for m in cluster.members],
        "tasks": cluster.task_pids(worker),
    }
    Path(os.environ["LIFELINE_TEST_READY"]).write_text(json.dumps(started))
    time.sleep(900)
"""

# The task is a child of pytest itself here: once pytest is dead nothing leads to it but the
# worker's record of its process group under the session's temporary directory.
INNER_WORKER = """
import json
import os
import time
from pathlib import Path

import pytest


@pytest.mark.timeout(900)
async def test_worker_then_sleep(harness):
    worker = await harness.worker()
    await harness.dispatch(worker, harness.execution("sleep 1000"))
    await harness.master.wait_for(lambda m: len(m.applied) == 1)  # its RUNNING event
    started = {"tasks": [harness.master.received[0].event.pid]}
    Path(os.environ["LIFELINE_TEST_READY"]).write_text(json.dumps(started))
    time.sleep(900)
"""
SCENARIOS = {
    "cluster": (INNER_CLUSTER, ["tests.cluster.conftest"]),
    "worker-in-pytest": (INNER_WORKER, ["tests.integration.worker.conftest"]),
}


def descendants(root: int) -> dict[int, tuple[int, int]]:
    """Every live descendant of ``root``: pid -> (process group, start ticks)."""
    table = lifeline.processes()
    found: dict[int, tuple[int, int]] = {}
    parents = {root}
    while parents:
        children = {pid for pid, (ppid, _, _) in table.items() if ppid in parents} - set(found)
        for pid in children:
            found[pid] = (table[pid][1], table[pid][2])
        parents = children
    return found


def survivors(noted: dict[int, tuple[int, int]]) -> dict[int, str]:
    """The noted processes still alive (same start time), and anything alive in their groups."""
    table = lifeline.processes()
    groups = {pgid for pgid, _ in noted.values()}
    alive = {
        pid for pid, (_, started) in noted.items() if pid in table and table[pid][2] == started
    }
    alive |= {pid for pid, (_, pgid, _) in table.items() if pgid in groups}
    return {pid: _cmdline(pid) for pid in sorted(alive)}


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:200]
    except OSError:
        return "?"


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_a_killed_pytest_leaves_no_process_behind(tmp_path: Path, scenario: str) -> None:
    inner_test, fixtures = SCENARIOS[scenario]
    test_file = tmp_path / "test_inner.py"
    test_file.write_text(inner_test)
    ready, output = tmp_path / "ready.json", tmp_path / "inner.log"
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-c", "pyproject.toml"]
    argv += ["--rootdir", str(REPO), "-p", "tests.conftest"]
    for plugin in fixtures:
        argv += ["-p", plugin]
    argv += ["--basetemp", str(tmp_path / "inner-tmp"), "-s", str(test_file)]
    with output.open("wb") as out:
        inner = subprocess.Popen(
            argv,
            cwd=REPO,
            env={**os.environ, "LIFELINE_TEST_READY": str(ready)},
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # a group of its own: nothing of ours is in it
        )
    lifeline.guard(inner)
    try:
        deadline = time.monotonic() + UP_TIMEOUT_S
        while not ready.exists():
            assert inner.poll() is None, f"inner pytest ended:\n{output.read_text()[-4000:]}"
            assert time.monotonic() < deadline, f"no cluster:\n{output.read_text()[-4000:]}"
            time.sleep(0.1)
        started = json.loads(ready.read_text())
        noted = descendants(inner.pid)
        noted[inner.pid] = (inner.pid, lifeline.start_ticks(inner.pid) or 0)
        # What the fixtures started is all below the pytest process, the watchdog too.
        expected = {*started.get("members", []), *started["tasks"]}
        expected |= {started["zookeeper"]} if "zookeeper" in started else set()
        assert expected <= set(noted), (expected, sorted(noted))
        watchdogs = [pid for pid in noted if "lifeline.py" in _cmdline(pid)]
        assert len(watchdogs) == 1, {pid: _cmdline(pid) for pid in noted}
        print(
            f"\nbefore the kill: {len(noted)} processes in {len({g for g, _ in noted.values()})}"
            " process groups"
        )
        killed_at = time.monotonic()
        inner.send_signal(signal.SIGKILL)
        inner.wait(10)
        left = survivors(noted)
        while left and time.monotonic() - killed_at < GONE_TIMEOUT_S:
            time.sleep(0.1)
            left = survivors(noted)
        print(f"all gone {time.monotonic() - killed_at:.1f}s after the kill")
        assert not left, f"survived the killed pytest: {left}"
    finally:
        if inner.poll() is None:
            inner.kill()
            inner.wait(10)
