"""SIGTERM while tasks run: the standalone shuts down gracefully within ``shutdown_timeout``.

The worker gives running tasks what the shutdown timeout leaves (about 16 s of the default 30) to
finish, then kills their process groups; a task that ends in time completes normally (exit 0), one
that does not is killed and reported as abandoned (exit 3), and in both cases nothing is left
running after the process exited. A second signal exits at once; the deadline holds even when the
event loop is stuck. Master and worker processes with ZooKeeper or the database gone:
tests/cluster/test_shutdown.py.
"""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dsched import Client, Shell, TaskState, Workflow
from tests import lifeline
from tests.e2e.conftest import (
    Ledger,
    Standalone,
    assert_all_gone,
    clean_env,
    eventually,
    read_pids,
    server_errors,
    spawner,
    start_standalone,
    wait_for_task,
)

SHUTDOWN_TIMEOUT_S = 30.0  # the default
MARGIN_S = 3.0  # signal delivery, the exit itself, a loaded machine
AT_ONCE_S = 2.0


def standalone_with_a_long_task(
    tmp_path: Path, env: dict[str, str] | None = None
) -> tuple[Standalone, list[int]]:
    """A standalone running a task that sleeps for ever (with children); the task's pids, its
    process group leader last."""
    pid_file = tmp_path / "pids"
    server = start_standalone(tmp_path / "data", env=env)
    with Client.connect(server.address) as client:
        with Workflow("long", project="e2e-sigterm") as wf:
            Shell("long", spawner(pid_file))
        run = wf.run(client=client, wait=False)
        wait_for_task(client, run.id, "long", TaskState.RUNNING)
        return server, read_pids(pid_file, count=4)


def test_sigterm_lets_a_short_task_finish(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger")
    server = start_standalone(tmp_path / "data")
    with Client.connect(server.address) as client:
        with Workflow("short", project="e2e-sigterm") as wf:
            Shell("short", f"touch {tmp_path}/started; sleep 2; {ledger.append()}")
        run = wf.run(client=client, wait=False)
        wait_for_task(client, run.id, "short", TaskState.RUNNING)
    took = server.assert_clean_stop()
    print(f"\nSIGTERM to exit with a 2 s task running: {took:.1f}s")
    assert [(e.task, e.attempt) for e in ledger.entries()] == [("short", 1)]
    assert took < 15, f"shutdown took {took:.1f}s for a task of 2 s"
    assert "dsched standalone: shutting down" in server.output()
    assert not server_errors(server.output()), server.output()[-4000:]


@pytest.mark.timeout(120)
def test_sigterm_with_a_long_task_exits_within_the_shutdown_timeout(tmp_path: Path) -> None:
    server, pids = standalone_with_a_long_task(tmp_path)
    code, took = server.terminate()
    print(f"\nSIGTERM to exit with a 1000 s task running: {took:.1f}s")
    out = server.output()
    assert took < SHUTDOWN_TIMEOUT_S + MARGIN_S, out[-4000:]
    # The task did not fit in the budget: it was killed, which the stop reports as abandoned.
    assert code == 3, out[-4000:]
    assert "shutdown abandoned: task attempt " in out and " killed: its master runs it again" in out
    assert "dsched standalone: stopped, abandoned: task attempt " in out
    assert not server_errors(out), out[-4000:]
    # The task did not outlive its worker.
    assert_all_gone(pids, pgid=pids[-1], timeout=10)


def test_a_second_signal_exits_at_once_and_kills_the_tasks(tmp_path: Path) -> None:
    server, pids = standalone_with_a_long_task(tmp_path)
    server.proc.send_signal(signal.SIGTERM)
    eventually(lambda: "shutting down" in server.output(), what="the stop to begin")
    # The task would get most of the 30 s; the second signal ends the stop instead.
    sent = time.monotonic()
    server.proc.send_signal(signal.SIGINT)
    code = server.wait(AT_ONCE_S + MARGIN_S + 10)
    took = time.monotonic() - sent
    out = server.output()
    assert code == 128 + signal.SIGINT, out[-4000:]
    assert took < AT_ONCE_S + MARGIN_S, out[-4000:]
    assert "dsched standalone: SIGINT again: exiting at once" in out
    # Killed before the exit: nothing runs on unsupervised (the restart would kill it too late).
    assert_all_gone(pids, pgid=pids[-1], timeout=AT_ONCE_S)


def test_a_locked_database_is_abandoned_within_the_bound(tmp_path: Path) -> None:
    """The standalone's SQLite file held locked by another process: the stop reports what it
    abandoned and the process exits in time.

    Which step meets the lock first is a race: the hand-over fails at once ("database is
    locked"), or the master's failover of its stopping worker's task comes first and waits in
    SQLite's busy handler on the loop's thread, and the shutdown budget ends the process (1 run
    in 3 to 10 here). Either way the exit is bounded and reported as abandoned (status 3)."""
    env = clean_env(DSCHED_LOG_LEVEL="INFO", DSCHED_CPU_THRESHOLD="1", DSCHED_SHUTDOWN_TIMEOUT="5")
    server, pids = standalone_with_a_long_task(tmp_path, env)
    lock = sqlite3.connect(tmp_path / "data" / "dsched.db", timeout=30)
    try:
        lock.execute("BEGIN IMMEDIATE")  # the write lock, held while the server stops
        code, took = server.terminate()
    finally:
        lock.rollback()
        lock.close()
    out = server.output()
    assert took < 5 + MARGIN_S, out[-4000:]
    assert code == 3, out[-4000:]
    handed_over = "shutdown abandoned: hand over the instances of epoch 1: database is locked"
    budget_ended = "shutdown not finished within 5 s: exiting now"
    assert handed_over in out or budget_ended in out, out[-4000:]
    assert_all_gone(pids, pgid=pids[-1], timeout=AT_ONCE_S)


STUCK = """
import asyncio, time
from dsched_server.lifecycle import ServerProcess, serve

class Part:
    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        time.sleep(60)  # blocks the event loop's thread: no step can time out

class Stuck(ServerProcess):
    def __init__(self) -> None:
        super().__init__(shutdown_timeout=2.0)
        self.add("start the part", Part())

    def ready_line(self) -> str:
        return "stuck is up"

    def abandon(self) -> None:
        print("abandon: ending what must not outlive the process", flush=True)

asyncio.run(serve("stuck", Stuck()))
"""


def test_the_deadline_ends_a_stop_stuck_outside_the_event_loop(tmp_path: Path) -> None:
    """The last resort: a part whose stop never gives the event loop back (a blocking call) is
    beyond every step's bound; the deadline, a timer thread of its own, still ends the process
    at ``shutdown_timeout``, after the process's last words."""
    proc = subprocess.Popen(
        [sys.executable, "-c", STUCK], stdout=subprocess.PIPE, text=True, cwd=tmp_path
    )
    lifeline.guard(proc)
    assert proc.stdout is not None
    assert proc.stdout.readline() == "stuck is up\n"
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=2 + MARGIN_S + 10)
    took = time.monotonic() - sent
    assert proc.returncode == 3, out
    assert 2 <= took < 2 + MARGIN_S, took
    assert out.splitlines() == [
        "dsched stuck: shutting down",
        "abandon: ending what must not outlive the process",
        "dsched stuck: not stopped within 2 s: exiting",
    ]
