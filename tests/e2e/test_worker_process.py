"""A standalone whose worker runs in a process of its own (``--worker process``).

The worker process is a cluster's worker: killed with SIGKILL mid-run, its registry session ends
with its stream, the master re-runs its attempts once (its reaper has killed them), the
standalone starts another worker process, and every task ends with exactly one recorded run.
SIGTERM or SIGINT stops both processes and leaves nothing behind; SIGKILL of the standalone takes
the worker process (and, through its reaper, the tasks) with it.
"""

from __future__ import annotations

import os
import signal
from collections import Counter
from pathlib import Path

import psutil
import pytest

from dsched import Client, Shell, TaskState, Workflow, WorkflowState
from tests.e2e.conftest import (
    Ledger,
    Standalone,
    alive,
    assert_all_gone,
    by_task,
    eventually,
    read_pids,
    spawner,
    start_standalone,
    wait_done,
    wait_for_file_sh,
    wait_for_task,
)

SLOW = 4  # tasks running when the worker process is killed


def _reaper_pid(server: Standalone) -> int:
    return int((server.data_dir / "worker" / "pgids" / "reaper.pid").read_text().split()[0])


def test_a_killed_worker_process_is_restarted_and_its_tasks_rerun_once(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger")
    starts = tmp_path / "starts"  # one line per attempt that began: task, attempt, pid
    gate = tmp_path / "gate"
    with Workflow("killed_worker", project="e2e-worker-process") as wf:
        slow = [
            Shell(
                f"slow{i}",
                f'echo "$DSCHED_TASK_NAME $DSCHED_ATTEMPT $$" >> {starts}\n'
                f"{wait_for_file_sh(gate)}{ledger.append()}",
            )
            for i in range(SLOW)
        ]
        sink = Shell("sink", ledger.append())
        sink.set_upstream(slow)
    server = start_standalone(tmp_path / "data", worker="process")
    first = server.worker_pid
    assert first is not None and alive(first)
    first_reaper = _reaper_pid(server)
    with Client.connect(server.address) as client:
        run = wf.run(client=client, wait=False)

        def all_started() -> list[str] | None:
            lines = starts.read_text().splitlines() if starts.exists() else []
            return lines if len(lines) == SLOW else None

        first_attempts = eventually(all_started, timeout=60, what="the slow tasks to start")
        task_pids = [int(line.split()[2]) for line in first_attempts]

        os.kill(first, signal.SIGKILL)
        # Its reaper kills the running attempts at once: nothing runs beside the re-runs.
        assert_all_gone([first, first_reaper, *task_pids], timeout=10)
        eventually(
            lambda: (server.worker_pid or first) != first, timeout=60, what="a new worker process"
        )
        second = server.worker_pid
        assert second is not None and alive(second)
        gate.touch()
        final = wait_done(client, run.id, timeout=120)
        assert final.state is WorkflowState.SUCCEEDED, final
        attempts = by_task(client, run.id)

    # Every slow task began twice (the killed attempt and its one re-run), and ran to its end once.
    began = Counter(line.split()[0] for line in starts.read_text().splitlines())
    assert began == {f"slow{i}": 2 for i in range(SLOW)}, began
    assert ledger.counts() == {**{f"slow{i}": 1 for i in range(SLOW)}, "sink": 1}
    for i in range(SLOW):
        tries = attempts[f"slow{i}"]
        assert [t.state for t in tries][-1] is TaskState.SUCCEEDED, tries
        assert len(tries) == 2 and tries[0].state is not TaskState.SUCCEEDED, tries
    out = server.output()
    assert f"the worker process {first} died" in out, out[-4000:]
    assert "worker process restarted" in out, out[-4000:]

    reaper = _reaper_pid(server)
    server.assert_clean_stop()
    assert_all_gone([second, reaper], timeout=10)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_the_standalone_and_its_worker_process(
    tmp_path: Path, sig: signal.Signals
) -> None:
    """SIGTERM, or SIGINT as Ctrl-C sends it (the worker process, in a session of its own, does
    not get the terminal's signal: the standalone stops it in order)."""
    ledger = Ledger(tmp_path / "ledger")
    server = start_standalone(tmp_path / "data", worker="process")
    worker, reaper = server.worker_pid, _reaper_pid(server)
    assert worker is not None
    with Client.connect(server.address) as client:
        with Workflow("short", project="e2e-worker-process") as wf:
            Shell("short", f"sleep 1; {ledger.append()}")
        run = wf.run(client=client, wait=False)
        wait_for_task(client, run.id, "short", TaskState.RUNNING)
    server.proc.send_signal(sig)
    assert server.wait() == 0, server.output()[-4000:]
    # The running task was let finish, then the worker left the registry, then the master.
    assert [(e.task, e.attempt) for e in ledger.entries()] == [("short", 1)]
    out = server.output()
    assert out.index("dsched worker: stopped") < out.index("dsched standalone: stopped"), out
    assert_all_gone([worker, reaper], timeout=10)


def test_sigkill_of_the_standalone_takes_its_worker_process_and_tasks(tmp_path: Path) -> None:
    pid_file = tmp_path / "pids"
    server = start_standalone(tmp_path / "data", worker="process")
    worker, reaper = server.worker_pid, _reaper_pid(server)
    assert worker is not None
    with Client.connect(server.address) as client:
        with Workflow("orphaned", project="e2e-worker-process") as wf:
            Shell("spawner", spawner(pid_file))
        run = wf.run(client=client, wait=False)
        wait_for_task(client, run.id, "spawner", TaskState.RUNNING)
    pids = read_pids(pid_file, count=4)
    assert server.kill() == -9
    assert_all_gone([worker, reaper, *pids], pgid=pids[-1], timeout=10)
    assert not psutil.pid_exists(worker) or psutil.Process(worker).status() == "zombie"
