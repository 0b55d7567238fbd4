"""A server SIGKILLed and never restarted: its worker's reaper kills the task groups at once.

Without it the task (and the grandchild it started in its group) would run on unsupervised until
the next start on the same data directory, while the masters run the attempt again elsewhere.
"""

from __future__ import annotations

import time
from pathlib import Path

import psutil

from dsched import Client, Shell, TaskState, Workflow
from tests.e2e.conftest import (
    alive,
    assert_all_gone,
    group_members,
    read_pids,
    spawner,
    start_standalone,
    wait_for_task,
)


def test_sigkill_of_the_server_kills_its_task_groups_without_a_restart(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    pid_file = tmp_path / "pids"
    with Workflow("orphaned", project="e2e-reaper") as wf:
        Shell("spawner", spawner(pid_file))
    server = start_standalone(data_dir)
    reaper_pid = int((data_dir / "worker" / "pgids" / "reaper.pid").read_text().split()[0])
    assert alive(reaper_pid)
    with Client.connect(server.address) as client:
        run = wf.run(client=client, wait=False)
        wait_for_task(client, run.id, "spawner", TaskState.RUNNING)
    pids = read_pids(pid_file, count=4)
    leader = pids[-1]
    assert len(group_members(leader)) >= 5, group_members(leader)

    assert server.kill() == -9  # the server's pid only: its tasks lead sessions of their own
    killed_at = time.monotonic()
    assert_all_gone(pids, pgid=leader, timeout=3)
    print(f"\ntask group gone {time.monotonic() - killed_at:.2f}s after the SIGKILL")
    assert_all_gone([reaper_pid], timeout=3)
    assert not psutil.pid_exists(reaper_pid) or psutil.Process(reaper_pid).status() == "zombie"
    # Two killers race, both legitimate: the reaper (its worker process died with the server) and
    # the worker itself, whose registry session died with the server's embedded registry and
    # which SIGKILLs its tasks when it fences (then the reaper finds the group forgotten).
    # Either way the group went at once (above); the log says which one did it.
    output = server.output()
    by_reaper = f"killed task process groups left by a dead worker: [{leader}]" in output
    by_fence = "registry session lost (epoch 1): fencing this worker" in output
    assert by_reaper or by_fence, output
