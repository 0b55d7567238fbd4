"""The janitor's sweep against an attempt that starts while it runs (real directories under
tmp_path, the interleaving forced on the event loop)."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from pathlib import Path

from dsched_server.protocol.execution import TaskExecution
from dsched_worker.janitor import Janitor
from dsched_worker.workdirs import POOL, WorkDirs

KEEP_S = 60.0


async def test_an_attempt_that_starts_during_a_sweep_keeps_its_recycled_directory(
    tmp_path: Path, make_execution: Callable[..., TaskExecution]
) -> None:
    root = tmp_path / "exec"
    workdirs = WorkDirs(root, keep_failed=KEEP_S)
    live: set[int] = set()  # the runner's attempts
    janitor = Janitor(workdirs, tmp_path / "logs", log_retention_days=0, live=lambda: set(live))
    long_ago = time.time() - 10 * KEEP_S
    # An attempt that left its directory empty: it goes into the pool, and its instance's too.
    # They stay there longer than keep_failed; a rename keeps a directory's times, so the next
    # attempt's directory looks that old.
    done = make_execution(workflow_instance_id=1, task_instance_id=10)
    workdirs.make(workdirs.path(done))
    workdirs.ended(done, succeeded=True)
    await workdirs.wait_emptied()
    for spare in (root / POOL).iterdir():
        os.utime(spare, (long_ago, long_ago))
    # Two instances with a failed attempt kept past keep_failed: the sweep yields between them.
    kept = [root / "2" / "20", root / "3" / "30"]
    for path in kept:
        path.mkdir(parents=True)
        os.utime(path, (long_ago, long_ago))

    sweep = asyncio.create_task(janitor.sweep())
    await asyncio.sleep(0)  # the sweep has been through one instance and yields
    (unvisited,) = [path for path in kept if path.exists()]
    # An attempt in the instance not swept yet: the runner has it before its directory is made
    # (in the spawning thread; called here to hold the sweep where it is).
    starting = make_execution(workflow_instance_id=int(unvisited.parent.name), task_instance_id=99)
    live.add(starting.task_instance_id)
    workdirs.make(workdirs.path(starting))
    assert workdirs.path(starting).stat().st_mtime <= long_ago  # the pooled directory
    await sweep
    await workdirs.wait_emptied()

    assert not unvisited.exists()  # the sweep went on through that instance
    assert workdirs.path(starting).is_dir()  # but not into the running attempt's directory
