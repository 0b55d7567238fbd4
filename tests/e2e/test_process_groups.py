"""Killing a task kills its whole process group: background children and subshells included.

The task starts two ``sleep 1000 &`` and a sleeping subshell, writes their pids, then sleeps. After
``dsched stop`` every recorded pid, and every other member of the task's process group (the
subshell's own ``sleep``), must be gone within a bounded time. (The END failure strategy kills the
same way: see test_failure_strategy.py.)
"""

from __future__ import annotations

import re
import time
from pathlib import Path

from dsched import Client, Shell, TaskState, Workflow, WorkflowState
from tests.e2e.conftest import (
    Standalone,
    assert_all_gone,
    by_task,
    cli,
    group_members,
    read_pids,
    spawner,
    wait_done,
    wait_for_task,
)


def test_cli_stop_kills_the_task_process_group(
    server: Standalone, client: Client, project: str, tmp_path: Path
) -> None:
    pid_file = tmp_path / "pids"
    with Workflow("spawner", project=project) as wf:
        Shell("spawner", spawner(pid_file)) >> Shell("never", "echo never")
    run = wf.run(client=client, wait=False)
    wait_for_task(client, run.id, "spawner", TaskState.RUNNING)
    pids = read_pids(pid_file, count=4)
    leader = pids[-1]
    # The subshell's own `sleep 1000` was never written down; it is found by its process group.
    assert len(group_members(leader)) >= 5, group_members(leader)

    asked = time.monotonic()
    stopped = cli(server, "stop", str(run.id))
    assert stopped.returncode == 0, stopped.stderr
    assert re.fullmatch(rf"instance {run.id}  (READY_STOP|STOPPED)\n", stopped.stdout)

    final = wait_done(client, run.id, timeout=30)
    assert final.state is WorkflowState.STOPPED
    assert time.monotonic() - asked < 15, "stop took longer than a kill grace period"
    tasks = by_task(client, run.id)
    assert set(tasks) == {"spawner"}, "a task downstream of a killed one was started"
    [attempt] = tasks["spawner"]
    assert attempt.state is TaskState.KILLED
    assert attempt.pid == leader
    assert attempt.start_time is not None and attempt.end_time is not None
    assert final.end_time is not None and attempt.end_time <= final.end_time
    assert (attempt.end_time - attempt.start_time).total_seconds() < 15  # not its 1000 s
    assert_all_gone(pids, pgid=leader, timeout=10)
