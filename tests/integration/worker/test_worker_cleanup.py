"""Working directories and task logs do not pile up: real bash attempts on a real Worker.

A successful attempt's directory goes when it ends; an unsuccessful one's is kept for the
configured time, then the janitor removes it; the directory of an attempt still running is never
removed, however old; logs past their retention go with their index links, a live one stays.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dsched_server.protocol.event import TaskEventType
from dsched_server.protocol.execution import TaskExecution
from dsched_worker.log_expiry import DAY_S, expire_logs
from dsched_worker.topdir import SCRATCH_PREFIX
from dsched_worker.workdirs import POOL

SUCCEEDED, FAILED = TaskEventType.SUCCEEDED, TaskEventType.FAILED
WAIT_S = 20.0
KEEP_S = 3.0  # long enough to see the kept directory; the janitor sweeps every second


async def gone(path: Path) -> bool:
    """Waits (bounded) for ``path`` to disappear; True if it did."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT_S
    while path.exists() and loop.time() < deadline:
        await asyncio.sleep(0.05)
    return not path.exists()


def running_seen(task_instance_id: int) -> Callable[[Any], bool]:
    return lambda m: any(
        r.event.task_instance_id == task_instance_id and r.event.type is TaskEventType.RUNNING
        for r in m.received
    )


def workdir(harness: Any, execution: TaskExecution) -> Path:
    root: Path = harness.data_dir / "exec"
    return root / str(execution.workflow_instance_id) / str(execution.task_instance_id)


async def test_success_removes_the_working_directory(harness):
    worker = await harness.worker()
    execution = harness.execution("mkdir -p deep/er && echo data > deep/er/file && pwd")
    await harness.dispatch(worker, execution)
    done = await harness.master.wait_terminal(execution.task_instance_id)
    assert done.type is SUCCEEDED

    assert await gone(workdir(harness, execution))
    assert await gone(workdir(harness, execution).parent)  # the instance's, now empty
    await worker.workdirs.wait_emptied()
    assert list((harness.data_dir / "exec" / ".trash").iterdir()) == []
    # The log says where it ran, and stays.
    assert str(workdir(harness, execution)) in worker.logs.path_for(execution).read_text()


async def test_an_empty_working_directory_is_removed_without_the_trash(harness):
    worker = await harness.worker()
    executions = [harness.execution("true") for _ in range(3)]
    for execution in executions:
        await harness.dispatch(worker, execution)
    for execution in executions:
        assert (await harness.master.wait_terminal(execution.task_instance_id)).type is SUCCEEDED

    for execution in executions:
        assert await gone(workdir(harness, execution))
        assert await gone(workdir(harness, execution).parent)
    assert not (harness.data_dir / "exec" / ".trash").exists()  # never needed


async def test_failure_keeps_the_directory_for_the_configured_time(harness):
    worker = await harness.worker(workdir_keep_failed=KEEP_S)
    ok = harness.execution("echo fine")
    failing = harness.execution("echo evidence > left.txt; exit 3")
    for execution in (ok, failing):
        await harness.dispatch(worker, execution)
    assert (await harness.master.wait_terminal(failing.task_instance_id)).type is FAILED
    assert (await harness.master.wait_terminal(ok.task_instance_id)).type is SUCCEEDED

    kept = workdir(harness, failing)
    assert (kept / "left.txt").read_text() == "evidence\n"  # kept for a look after the failure
    assert await gone(workdir(harness, ok))
    assert await gone(kept)  # then removed by the janitor
    assert await gone(kept.parent)


async def test_a_running_attempts_directory_is_never_swept(harness, gate):
    worker = await harness.worker(workdir_keep_failed=KEEP_S)
    g = gate("hold")
    execution = harness.execution(f'read _ < "{g.path}"')
    await harness.dispatch(worker, execution)
    await harness.master.wait_for(running_seen(execution.task_instance_id))
    running = workdir(harness, execution)
    long_ago = time.time() - 10 * 86400
    os.utime(running, (long_ago, long_ago))

    await worker.janitor.sweep()
    assert running.is_dir()
    g.open()
    assert (await harness.master.wait_terminal(execution.task_instance_id)).type is SUCCEEDED
    assert await gone(running)


async def test_logs_past_retention_go_with_their_index_links(harness, gate):
    worker = await harness.worker()
    old = harness.execution("echo old", workflow_instance_id=78)
    await harness.dispatch(worker, old)
    await harness.master.wait_terminal(old.task_instance_id)
    old_log = worker.logs.path_for(old)
    g = gate("live")
    live = harness.execution(f'read _ < "{g.path}"')
    await harness.dispatch(worker, live)
    await harness.master.wait_for(running_seen(live.task_instance_id))
    live_log = worker.logs.path_for(live)
    root = worker.logs.root
    index = root / "index"
    assert os.path.samefile(index / f"{old.task_instance_id}.log", old_log)  # a hard link
    # Both were last written 40 days ago, the live one only in appearance.
    long_ago = time.time() - 40 * DAY_S
    for path in (old_log, live_log):
        os.utime(path, (long_ago, long_ago))
    recent = root / "20240506" / "1" / "1" / "1-5.log"  # an old day, a recent write
    recent.parent.mkdir(parents=True)
    recent.write_text("recent\n")
    # An earlier version's layout: a directory per workflow instance, the same index.
    earlier = root / "20240506" / "1" / "2" / "77" / "900.log"
    earlier.parent.mkdir(parents=True)
    earlier.write_text("earlier\n")
    os.link(earlier, index / "900.log")
    os.utime(earlier, (long_ago, long_ago))
    # Scratch directories of days being made (make_below_top), left by a worker killed meanwhile.
    stale, fresh = root / f"{SCRATCH_PREFIX}1-0-aa", root / f"{SCRATCH_PREFIX}1-1-bb"
    for scratch in (stale, fresh):
        scratch.mkdir()
    os.utime(stale, (long_ago, long_ago))

    expired = await asyncio.to_thread(
        expire_logs,
        root,
        older_than=30 * DAY_S,
        now=time.time(),
        live=worker.runner.live_task_instances(),
    )

    assert expired.files == 2 and expired.bytes > 0
    assert not old_log.exists()
    assert not os.path.lexists(index / f"{old.task_instance_id}.log")
    assert not os.path.lexists(index / "900.log") and not earlier.parent.parent.exists()
    assert live_log.exists() and os.path.samefile(index / f"{live.task_instance_id}.log", live_log)
    assert recent.exists()
    assert not stale.exists() and fresh.is_dir()
    g.open()
    assert (await harness.master.wait_terminal(live.task_instance_id)).type is SUCCEEDED


async def test_retention_zero_keeps_logs(harness):
    worker = await harness.worker(log_retention_days=0.0)
    execution = harness.execution("echo kept")
    await harness.dispatch(worker, execution)
    await harness.master.wait_terminal(execution.task_instance_id)
    path = worker.logs.path_for(execution)
    long_ago = time.time() - 400 * DAY_S
    os.utime(path, (long_ago, long_ago))
    await worker.janitor.sweep()
    assert path.exists()


async def test_empty_directories_are_kept_for_later_attempts_with_the_mode_mkdir_gives(harness):
    worker = await harness.worker()
    umask = os.umask(0)
    os.umask(umask)
    pool = harness.data_dir / "exec" / POOL
    # The first task leaves its directory empty but with another mode: it goes into the pool,
    # and so does its instance's, empty then.
    first = harness.execution("chmod 700 .")
    await harness.dispatch(worker, first)
    assert (await harness.master.wait_terminal(first.task_instance_id)).type is SUCCEEDED
    assert await gone(workdir(harness, first).parent)
    await worker.workdirs.wait_emptied()
    pooled = {p.stat().st_ino for p in pool.iterdir()}
    assert len(pooled) == 2

    # The next attempt of that instance gets both (renamed: the same inodes), with the mode a
    # fresh mkdir would have given them.
    second = harness.execution("stat -c 'inode %i mode %a' . .. && touch left-behind")
    await harness.dispatch(worker, second)
    assert (await harness.master.wait_terminal(second.task_instance_id)).type is SUCCEEDED
    text = worker.logs.path_for(second).read_text()
    seen = {int(line.split()[1]) for line in text.splitlines() if line.startswith("inode ")}
    assert seen == pooled
    assert f"mode {0o777 & ~umask:o}\ninode" in text
    # It left a file: its directory is not pooled but removed, and its instance's with it.
    assert await gone(workdir(harness, second))
    await worker.workdirs.wait_emptied()
    assert list(pool.iterdir()) == []
    assert not workdir(harness, second).parent.exists()
    assert list((harness.data_dir / "exec" / ".trash").iterdir()) == []
