"""SIGTERM while tasks run: the standalone shuts down gracefully within ``shutdown_timeout``.

The worker gives running tasks what the shutdown timeout leaves (about 16 s of the default 30) to
finish, then kills their process groups; a task that ends in time completes normally (exit 0), one
that does not is killed and reported as abandoned (exit 3), and in both cases nothing is left
running after the process exited. More in test_bounded_shutdown.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dsched import Client, Shell, TaskState, Workflow
from tests.e2e.conftest import (
    Ledger,
    assert_all_gone,
    read_pids,
    server_errors,
    spawner,
    start_standalone,
    wait_for_task,
)

SHUTDOWN_TIMEOUT_S = 30.0  # the default
MARGIN_S = 3.0  # signal delivery, the exit itself, a loaded machine


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
    pid_file = tmp_path / "pids"
    server = start_standalone(tmp_path / "data")
    with Client.connect(server.address) as client:
        with Workflow("long", project="e2e-sigterm") as wf:
            Shell("long", spawner(pid_file))
        run = wf.run(client=client, wait=False)
        wait_for_task(client, run.id, "long", TaskState.RUNNING)
        pids = read_pids(pid_file, count=4)
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
