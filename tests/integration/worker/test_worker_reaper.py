"""The worker's reaper (:mod:`dsched_worker.reaper`): real reaper processes, real process groups.

Closing the pipe's write end is what the kernel does when the worker dies, however it dies; the
end-to-end test with a SIGKILLed server is in tests/e2e/test_reaper.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import struct
import subprocess
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import psutil
import pytest

from dsched_worker.orphans import LOG_NAME, ProcessRecords
from dsched_worker.process import ProcessGroup
from dsched_worker.reaper import PID_FILE, Reaper
from dsched_worker.record_log import RecordLog, frame
from tests import lifeline
from tests.integration.worker.conftest import Harness


@pytest.fixture
def directory(tmp_path: Path) -> Path:
    """The worker's process-group records."""
    return tmp_path / "pgids"


def _spawn_group(*argv: str) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(argv, start_new_session=True)
    lifeline.guard(proc)
    return proc


def _kill(*procs: subprocess.Popen[bytes]) -> None:
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def _reaper(directory: Path) -> Reaper:
    reaper = Reaper.start(directory)
    lifeline.guard(reaper.pid)
    return reaper


def _end(reaper: Reaper, *, stand_down: bool = False) -> None:
    """Stands the reaper down, or closes its pipe as the worker's death would; it exits 0."""
    if stand_down:
        reaper.stand_down()
    else:
        reaper.close()
    assert reaper.wait() == 0


def _ignored_signals(pid: int) -> set[int]:
    status = Path(f"/proc/{pid}/status").read_text()
    mask = int(
        next(line for line in status.splitlines() if line.startswith("SigIgn:")).split()[1], 16
    )
    return {sig for sig in range(1, 64) if mask >> (sig - 1) & 1}


def _started(pid: int) -> float:
    return psutil.Process(pid).create_time()


async def test_the_reaper_kills_the_recorded_groups_when_the_worker_end_closes(
    directory: Path, group_gone: Callable[[int], Awaitable[None]]
) -> None:
    reaper = _reaper(directory)
    records = ProcessRecords(directory)
    # A task with a background grandchild in its group, and one whose leader already exited.
    task = _spawn_group("bash", "-c", "sleep 60 & sleep 60")
    headless = _spawn_group("bash", "-c", "sleep 60 & echo started")
    records.record(task.pid)
    records.record(headless.pid)
    headless.wait(timeout=10)
    forgotten = _spawn_group("sleep", "60")  # recorded, then forgotten: not the worker's any more
    records.record(forgotten.pid)
    records.forget(forgotten.pid)
    bystander = _spawn_group("sleep", "60")  # never recorded
    try:
        _end(reaper)  # as when the worker dies
        assert task.wait(timeout=10) == -signal.SIGKILL
        await group_gone(task.pid)
        await group_gone(headless.pid)
        assert forgotten.poll() is None and bystander.poll() is None
        # The records stay for the next start (the reaper only reads them).
        assert (directory / LOG_NAME).exists()
    finally:
        _kill(task, forgotten, bystander)


async def test_a_reaper_told_to_stand_down_exits_killing_nothing(directory: Path) -> None:
    reaper = _reaper(directory)
    task = _spawn_group("sleep", "60")
    ProcessRecords(directory).record(task.pid)
    try:
        _end(reaper, stand_down=True)
        assert not psutil.pid_exists(reaper.pid)
        assert task.poll() is None
    finally:
        _kill(task)


async def test_a_recorded_pid_reused_by_another_process_is_not_killed_by_the_reaper(
    directory: Path,
) -> None:
    reaper = _reaper(directory)
    other = _spawn_group("sleep", "60")
    # The record says the group's leader started a minute before this process did.
    log = RecordLog(directory / LOG_NAME, compact_bytes=2**20)
    log.append(frame(b"R" + struct.pack("<Id", other.pid, _started(other.pid) - 60)))
    log.close()
    try:
        _end(reaper)
        assert other.poll() is None
    finally:
        _kill(other)


async def test_the_reaper_outlives_signals_aimed_at_the_worker(directory: Path) -> None:
    reaper = _reaper(directory)
    task = _spawn_group("sleep", "60")
    ProcessRecords(directory).record(task.pid)
    try:
        assert os.getpgid(reaper.pid) == reaper.pid != os.getpgid(0)  # a session of its own
        wanted = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
        for _ in range(400):  # its start-up, until it ignores them (Python takes a moment)
            if wanted <= _ignored_signals(reaper.pid):
                break
            time.sleep(0.025)
        for sig in wanted:
            os.kill(reaper.pid, sig)
        _end(reaper)  # not killed by any of them: it read the end of file
        assert task.wait(timeout=10) == -signal.SIGKILL
    finally:
        _kill(task)


async def test_a_new_reaper_on_the_same_directory_retires_the_earlier_one(directory: Path) -> None:
    first = _reaper(directory)
    second = _reaper(directory)
    try:
        assert first.wait(timeout=5) == -signal.SIGKILL
        assert (directory / PID_FILE).read_text().split()[0] == str(second.pid)
    finally:
        first.close()
        _end(second, stand_down=True)


def _descriptors(pid: int) -> set[str]:
    """What the descriptors ``pid`` holds open refer to. One may close between the listing and
    its readlink: the task's own, not inherited (right after the spawn, the dynamic loader of
    ``sleep`` has libc open as fd 3 for a moment); an inherited one stays open, so it is read."""
    found = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(FileNotFoundError):
            found.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
    return found


async def test_tasks_do_not_inherit_the_write_end_of_the_reaper_pipe(tmp_path: Path) -> None:
    reaper = _reaper(tmp_path / "pgids")
    pipe = f"pipe:[{os.fstat(reaper._fd).st_ino}]"  # type: ignore[arg-type]
    group = await ProcessGroup.spawn(
        ["sleep", "60"], cwd=tmp_path, env={}, on_output=lambda _: None
    )
    try:
        assert pipe not in _descriptors(group.pid)
    finally:
        group.signal(signal.SIGKILL)
        await asyncio.wait_for(group.wait(), 10)
        _end(reaper, stand_down=True)


async def test_a_worker_stopped_gracefully_leaves_its_reaper_exited_and_its_bystanders_alive(
    harness: Harness,
) -> None:
    worker = await harness.worker()
    assert worker.reaper is not None
    reaper_pid = worker.reaper.pid
    assert psutil.Process(reaper_pid).cmdline()[-2:] == [
        "dsched_worker.reaper",
        str(harness.data_dir / "pgids"),
    ]
    # A process group recorded in the worker's log, as if a task: a reaper that did not stand
    # down would kill it.
    bystander = _spawn_group("sleep", "60")
    ProcessRecords(harness.data_dir / "pgids").record(bystander.pid)
    try:
        await worker.stop(grace=0.5)
        assert not psutil.pid_exists(reaper_pid)
        assert bystander.poll() is None
    finally:
        _kill(bystander)
