"""Spawning a task's process group off the loop (:mod:`dsched_worker.process`): the group is
recorded by the spawning thread before the spawn returns and forgotten once it is gone, a failure
to prepare starts nothing, and a spawn whose caller is cancelled meanwhile leaves no process
behind."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
from collections.abc import Awaitable, Callable
from pathlib import Path

import psutil
import pytest

from dsched_worker.orphans import ProcessRecords, recorded, start_time
from dsched_worker.process import ProcessGroup


class _Records:
    """Records groups like :class:`ProcessRecords` and says on the loop when one is forgotten."""

    def __init__(self) -> None:
        self.recorded: list[int] = []
        self.forgotten: list[int] = []
        self.forgot = asyncio.Event()

    def record(self, pgid: int) -> None:
        self.recorded.append(pgid)

    def forget(self, pgid: int) -> None:
        self.forgotten.append(pgid)
        self.forgot.set()


def _sleep_in(cwd: Path, records: _Records, prepare: Callable[[], None]) -> Awaitable[ProcessGroup]:
    """Spawns ``sleep 60`` in ``cwd`` after ``prepare``, recording its group in ``records``."""
    return ProcessGroup.spawn(
        ["sleep", "60"],
        cwd=cwd,
        env={},
        on_output=lambda _: None,
        prepare=prepare,
        records=records,
    )


async def _gone(pid: int) -> None:
    """Returns once ``pid`` has exited (its pidfd turns readable; no polling)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    exited = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_reader(fd, exited.set)
    try:
        await asyncio.wait_for(exited.wait(), 10)
    finally:
        loop.remove_reader(fd)
        os.close(fd)


async def test_the_group_is_recorded_before_the_spawn_returns_and_forgotten_after_wait(
    tmp_path: Path,
) -> None:
    records = ProcessRecords(tmp_path / "pgids")
    group = await ProcessGroup.spawn(
        ["sleep", "60"], cwd=tmp_path, env={}, on_output=lambda _: None, records=records
    )
    try:
        assert group.pid in recorded(tmp_path / "pgids")
        assert os.getpgid(group.pid) == group.pid
    finally:
        group.signal(signal.SIGKILL)
        await asyncio.wait_for(group.wait(), 10)
    assert group.pid not in recorded(tmp_path / "pgids")


async def test_prepare_runs_first_and_its_error_starts_nothing(tmp_path: Path) -> None:
    records = _Records()
    cwd = tmp_path / "made" / "by" / "prepare"
    group = await ProcessGroup.spawn(
        ["true"],
        cwd=cwd,
        env={},
        on_output=lambda _: None,
        prepare=lambda: cwd.mkdir(parents=True),
        records=records,
    )
    assert await asyncio.wait_for(group.wait(), 10) == 0
    assert records.recorded == records.forgotten == [group.pid]

    def refuse() -> None:
        raise PermissionError("no")

    with pytest.raises(PermissionError):
        await _sleep_in(tmp_path, records, refuse)
    assert records.recorded == [group.pid]


async def test_a_spawn_is_never_cut_in_half_by_a_cancellation(tmp_path: Path) -> None:
    # The spawn does not yield to the loop (see dsched_worker.process): a caller is cancelled
    # before it starts anything or after its group is recorded, never in between.
    records = _Records()
    early = asyncio.ensure_future(_sleep_in(tmp_path, records, lambda: None))
    early.cancel()
    with pytest.raises(asyncio.CancelledError):
        await early
    assert records.recorded == []

    order: list[str] = []
    asyncio.get_running_loop().call_soon(order.append, "other callback")
    group = await _sleep_in(tmp_path, records, lambda: order.append("prepare"))
    order.append("spawned")
    assert order == ["prepare", "spawned"]  # nothing else ran meanwhile
    assert records.recorded == [group.pid]
    group.signal(signal.SIGKILL)
    await asyncio.wait_for(group.wait(), 10)
    assert records.forgotten == [group.pid]


def test_start_time_is_psutils_create_time(tmp_path: Path) -> None:
    """The reaper compares a recorded start time with psutil's: they must agree exactly."""
    proc = subprocess.Popen(["sleep", "60"])
    try:
        assert start_time(proc.pid) == psutil.Process(proc.pid).create_time()
    finally:
        proc.kill()
        proc.wait()
    assert start_time(proc.pid) is None


async def _run_collecting(argv: list[str], cwd: Path, stdin: bytes | None) -> tuple[int, bytes]:
    chunks: list[bytes] = []
    group = await ProcessGroup.spawn(argv, cwd=cwd, env={}, on_output=chunks.append, stdin=stdin)
    code = await asyncio.wait_for(group.wait(), 30)
    return code, b"".join(chunks)


async def test_stdin_bytes_reach_the_process_then_end_of_file(tmp_path: Path) -> None:
    code, out = await _run_collecting(["cat"], tmp_path, b"secret spec\n")
    assert (code, out) == (0, b"secret spec\n")


async def test_a_payload_larger_than_any_pipe_is_fed_whole_by_the_loop(tmp_path: Path) -> None:
    # 3 MiB: more than pipe-max-size (1 MiB by default), so the loop writes the rest as cat reads.
    payload = os.urandom(3 * 1024 * 1024)
    code, out = await _run_collecting(["sh", "-c", "cat > in.bin"], tmp_path, payload)
    assert code == 0 and out == b""
    assert (tmp_path / "in.bin").read_bytes() == payload


async def test_a_process_that_never_reads_its_stdin_ends_normally(tmp_path: Path) -> None:
    # The unread part of the payload is dropped (EPIPE) without failing or hanging the wait.
    code, out = await _run_collecting(
        ["sh", "-c", "exec 0<&-; echo done"], tmp_path, os.urandom(2 * 1024 * 1024)
    )
    assert (code, out) == (0, b"done\n")


async def test_without_stdin_bytes_stdin_is_dev_null(tmp_path: Path) -> None:
    code, out = await _run_collecting(["readlink", "/proc/self/fd/0"], tmp_path, None)
    assert (code, out) == (0, b"/dev/null\n")


async def test_wait_returns_all_the_output_whether_or_not_it_was_drained_at_the_exit(
    tmp_path: Path,
) -> None:
    # A silent process's pipe is at end of file when its exit is seen (wait skips the drain
    # wait); output still in the pipe then is waited for.
    assert await _run_collecting(["true"], tmp_path, None) == (0, b"")
    script = "head -c 300000 /dev/zero | tr '\\0' x; echo; exit 3"
    code, out = await _run_collecting(["bash", "-c", script], tmp_path, None)
    assert code == 3 and out == b"x" * 300000 + b"\n"


async def test_a_descendant_that_escaped_the_group_does_not_hang_the_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # setsid leaves the group (the SIGKILL misses it) holding the pipe: abandoned after the bound.
    monkeypatch.setattr("dsched_worker.process.DRAIN_TIMEOUT_S", 0.2)
    pid_file = tmp_path / "escaped.pid"
    script = f"setsid bash -c 'echo $$ > {pid_file}; exec sleep 30' & sleep 0.2; echo left"
    try:
        code, out = await _run_collecting(["bash", "-c", script], tmp_path, None)
        assert (code, out) == (0, b"left\n")
    finally:
        if pid_file.exists():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid_file.read_text()), signal.SIGKILL)
