"""A task's process group: spawn, feed its output to a callback, signal it, and clean up after it.

Each task process starts in a new session (``start_new_session=True``), so it leads its own process
group and every descendant that does not create its own session belongs to that group. This gives
one handle (the pgid, equal to the leader's pid) to kill the whole tree.

The process is spawned with :class:`subprocess.Popen` (the vfork path: no ``preexec_fn``) on the
loop, and the group is recorded right after the spawn: no other code runs between the two, so the
window in which a worker killed with SIGKILL leaves a group nobody recorded stays narrow. ``Popen``
returns once the child has exec'd bash (it reads a close-on-exec pipe to learn whether ``exec``
failed): the loop stands still for that, a few hundred microseconds. It did this in a thread of the
loop's default executor for a while, so that the loop could carry on meanwhile; measured on the
2-CPU virtual machine this project is developed on, that cost more than it saved: a spawn releases
the GIL some twenty times (every system call of ``Popen``, the log file, the working directory),
each release with the loop waiting is a hand-off between threads and a futex wake-up of the other
CPU, and a 1,000-task fan-out spent 0.5-0.9 ms more worker CPU per task with the thread (2.0-3.0
against 1.6-1.8 ms), at the same or a lower throughput, and a longer chain gap. The file system work
of a spawn is cheap because it allocates next to nothing (the working directory comes from a pool,
:mod:`dsched_worker.workdirs`; the log is one file, in a block group of its own:
:mod:`dsched_worker.topdir`). The loop then watches two descriptors per process with plain reader
callbacks: the output pipe and a pidfd that turns readable when the process exits, which then reaps
it. asyncio's subprocess machinery did the same with a transport, a protocol, pipe transports, a
child watcher and a task per spawn, a good part of a short task's cost on the worker. Waiting for
the pipe to close would not do: it closes only once every holder of its write end is gone, and a
background grandchild (``sleep 1000 &``) that inherited stdout keeps them open long after the script
exited. So :meth:`ProcessGroup.wait` waits for the *leader's* exit, then SIGKILLs whatever is left
in its group. The task is over when its main process is; leftover children would otherwise hold the
pipe, hang the attempt and keep running unsupervised. A descendant that escaped into its own session
is out of reach: its end of the pipe is abandoned after :data:`DRAIN_TIMEOUT_S`.

A process may be given bytes on its stdin (``spawn(stdin=...)``: how a dsched child program receives
its spec, :mod:`dsched_worker.tasks.child`; never in its arguments or environment, which other
users of the host read in ``/proc/<pid>/cmdline`` and ``environ``). The spawn makes the
pipe as large as the payload (up to the system's ``pipe-max-size``, 1 MiB by default) and fills it
before the spawn, so the common payload needs no writer callback; whatever does not fit is
written by a loop writer callback as the process reads. The write end is closed once everything is
written, so the process sees end-of-file; a process that exits without reading all of it ends the
feeding (``EPIPE``), it does not fail the task.

The pgid stays valid until the last member of the group is gone. Signalling a group whose members
are all gone raises ProcessLookupError, which is ignored: there is nothing left to kill.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

log = logging.getLogger(__name__)

# After the group was killed, how long to wait for the pipe to report end-of-file (normally a few
# milliseconds; longer only if a descendant escaped the group with setsid and still holds it).
DRAIN_TIMEOUT_S = 2.0
READ_CHUNK = 256 * 1024  # bytes read from the output pipe (written to the input) per callback
PIPE_DEFAULT = 64 * 1024  # Linux's pipe size; a larger stdin payload asks for a larger pipe
PIPE_MAX = 1024 * 1024  # /proc/sys/fs/pipe-max-size by default: the most an unprivileged user gets

OutputCallback = Callable[[bytes], None]


class GroupRecords(Protocol):
    """Where running groups are recorded (:class:`dsched_worker.orphans.ProcessRecords`);
    both are called on the loop."""

    def record(self, pgid: int) -> None: ...

    def forget(self, pgid: int) -> None: ...


class _Watch:
    """The loop's view of one spawned process: its output pipe and its pidfd, both read by loop
    callbacks (no transport, protocol, child watcher or task per process)."""

    def __init__(self, spawned: _Spawned, on_output: OutputCallback) -> None:
        self._loop = asyncio.get_running_loop()
        self._proc = proc = spawned.proc
        self._out_fd: int | None = spawned.out_fd
        self._on_output = on_output
        self.exited = asyncio.Event()
        self.drained = asyncio.Event()
        os.set_blocking(spawned.out_fd, False)
        self._pidfd: int | None = os.pidfd_open(proc.pid)
        self._loop.add_reader(spawned.out_fd, self._read)
        self._loop.add_reader(self._pidfd, self._reap)
        self.started = spawned.started
        self.exited_at: float | None = None  # time.monotonic() when the exit was seen
        self._in_fd = spawned.in_fd  # set only while part of the stdin payload is unwritten
        self._pending = memoryview(spawned.pending)
        if self._in_fd is not None:
            self._loop.add_writer(self._in_fd, self._feed)

    @property
    def returncode(self) -> int | None:
        return self._proc.returncode

    def _read(self) -> None:
        assert self._out_fd is not None
        try:
            data = os.read(self._out_fd, READ_CHUNK)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            log.warning("reading the output of pid %d failed: %s", self._proc.pid, exc)
            data = b""
        if data:
            self._on_output(data)
            return
        self._close_output()  # end of file: every holder of the write end is gone
        self.drained.set()

    def _reap(self) -> None:
        if self._proc.poll() is None:
            return  # not yet (a spurious wake-up)
        self.exited_at = time.monotonic()
        assert self._pidfd is not None
        self._loop.remove_reader(self._pidfd)
        os.close(self._pidfd)
        self._pidfd = None
        self.exited.set()

    def _feed(self) -> None:
        assert self._in_fd is not None
        try:
            written = os.write(self._in_fd, self._pending[:READ_CHUNK])
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:  # EPIPE: the process closed its stdin or exited; it has enough
            log.debug("feeding the stdin of pid %d ended: %s", self._proc.pid, exc)
            written = len(self._pending)
        self._pending = self._pending[written:]
        if not self._pending:
            self._close_input()

    def close(self) -> None:
        """Stops reading the output and feeding the input; the process is still reaped when it
        exits."""
        self._close_output()
        self._close_input()

    def _close_input(self) -> None:
        if self._in_fd is not None:
            self._loop.remove_writer(self._in_fd)
            os.close(self._in_fd)
            self._in_fd = None

    def _close_output(self) -> None:
        if self._out_fd is not None:
            self._loop.remove_reader(self._out_fd)
            os.close(self._out_fd)
            self._out_fd = None


class ProcessGroup:
    """A running process that leads its own process group. Create with :meth:`spawn`."""

    def __init__(self, pid: int, watch: _Watch, records: GroupRecords | None) -> None:
        self._watch = watch
        self._records = records
        self.pid: int = pid
        # time.monotonic() when the process was started (right before its spawn)
        self.started = watch.started

    @classmethod
    async def spawn(
        cls,
        argv: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str],
        on_output: OutputCallback,
        prepare: Callable[[], None] | None = None,
        records: GroupRecords | None = None,
        stdin: bytes | None = None,
    ) -> ProcessGroup:
        """Starts ``argv`` in a new session with stdout+stderr going to ``on_output`` (called on
        the loop with each chunk): ``prepare`` first (e.g. makes ``cwd``; what it raises is
        raised here), and the group is recorded in ``records`` right after the spawn (forgotten
        by :meth:`wait`). Its stdin is /dev/null, or a pipe that delivers ``stdin`` and then
        end-of-file. Raises OSError if it cannot start. A coroutine that does not wait today (see
        the module): its callers need not change if a spawn waits again one day."""
        spawned = _start(_Job(list(argv), cwd, dict(env), prepare, records, stdin))
        return cls(spawned.proc.pid, _Watch(spawned, on_output), records)

    @property
    def exited(self) -> bool:
        return self._watch.exited.is_set()

    @property
    def exited_at(self) -> float | None:
        """:func:`time.monotonic` when its leader's exit was seen (None while it runs)."""
        return self._watch.exited_at

    async def wait(self) -> int:
        """Waits for the leader to exit, kills the rest of its group, waits (bounded) for the output
        to drain, and returns the leader's return code (negative: killed by that signal)."""
        try:
            await self._watch.exited.wait()
            self.signal(signal.SIGKILL)  # leftovers: see the module docstring
            # Usually drained already (the pipe's end of file comes with the exit): then no
            # wait_for, whose task and timer cost 18-20 us an attempt (Python 3.11).
            if not self._watch.drained.is_set():
                try:
                    await asyncio.wait_for(self._watch.drained.wait(), DRAIN_TIMEOUT_S)
                except TimeoutError:
                    log.warning(
                        "output pipe of pid %d still open after its group was killed; abandoned",
                        self.pid,
                    )
            code = self._watch.returncode
            return code if code is not None else -int(signal.SIGKILL)
        finally:
            if not self.exited:  # cancelled while running: the group must not outlive its task
                self.signal(signal.SIGKILL)
            self._watch.close()
            if self._records is not None:
                self._records.forget(self.pid)  # no member of the group is alive any more

    def signal(self, sig: signal.Signals) -> None:
        """Sends ``sig`` to every process of the group; a group with no members left is ignored."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, sig)

    async def kill(self, grace: float) -> None:
        """SIGTERM to the group; SIGKILL if the leader is still alive after ``grace`` seconds.

        Members that outlive the leader are SIGKILLed by :meth:`wait`."""
        self.signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(self._watch.exited.wait(), grace)
        except TimeoutError:
            self.signal(signal.SIGKILL)


@dataclass(frozen=True, slots=True)
class _Job:
    """What a spawn starts."""

    argv: list[str]
    cwd: Path
    env: dict[str, str]
    prepare: Callable[[], None] | None
    records: GroupRecords | None
    stdin: bytes | None


@dataclass(frozen=True, slots=True)
class _Spawned:
    """What a spawn started: the process, the read end of its output pipe, and the
    write end of its input pipe with the part of the payload still to write (if any is)."""

    proc: subprocess.Popen[bytes]
    out_fd: int
    # time.monotonic() right before the spawn: the task's start. Not after it: the parent
    # may get the CPU back only after the new process has run (and printed) for a while.
    started: float
    in_fd: int | None = None
    pending: bytes = b""

    def close(self) -> None:
        os.close(self.out_fd)
        if self.in_fd is not None:
            os.close(self.in_fd)


def _start(job: _Job) -> _Spawned:
    """Starts the process (see :class:`_Spawned`)."""
    if job.prepare is not None:
        job.prepare()
    in_read, in_write, pending = _input_pipe(job.stdin)
    try:
        read_fd, write_fd = os.pipe()  # both close-on-exec; the child gets write_fd as 1 and 2
    except BaseException:
        _close(in_read, in_write)
        raise
    try:
        started = time.monotonic()
        proc = subprocess.Popen(
            job.argv,
            stdin=subprocess.DEVNULL if in_read is None else in_read,
            stdout=write_fd,
            stderr=write_fd,
            cwd=job.cwd,
            env=job.env,
            start_new_session=True,
        )
    except BaseException:
        _close(read_fd, in_write)
        raise
    finally:
        _close(write_fd, in_read)  # the child holds its own copies
    spawned = _Spawned(proc, read_fd, started, in_write, pending)
    if job.records is not None:
        try:
            job.records.record(proc.pid)
        except BaseException:
            _kill(spawned, None)
            proc.wait()
            raise
    return spawned


def _input_pipe(data: bytes | None) -> tuple[int | None, int | None, bytes]:
    """The read end of a pipe holding ``data`` (None: no input), the write end if part of it is
    still to write (else it is closed), and that part. The pipe is grown to hold all of ``data``
    where the system allows it (see the module)."""
    if data is None:
        return None, None, b""
    read_fd, write_fd = os.pipe()
    try:
        if len(data) > PIPE_DEFAULT:
            with contextlib.suppress(OSError):  # above pipe-max-size: the loop writes the rest
                fcntl.fcntl(write_fd, fcntl.F_SETPIPE_SZ, min(len(data), PIPE_MAX))
        os.set_blocking(write_fd, False)
        written = 0
        while written < len(data):
            try:
                written += os.write(write_fd, data[written : written + PIPE_MAX])
            except BlockingIOError:
                break
    except BaseException:
        _close(read_fd, write_fd)
        raise
    if written == len(data):
        os.close(write_fd)
        return read_fd, None, b""
    return read_fd, write_fd, data[written:]


def _close(*fds: int | None) -> None:
    for fd in fds:
        if fd is not None:
            os.close(fd)


def _kill(spawned: _Spawned, records: GroupRecords | None) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(spawned.proc.pid, signal.SIGKILL)
    spawned.close()
    if records is not None:
        records.forget(spawned.proc.pid)


def exit_code(returncode: int) -> int:
    """A return code as a shell reports it: death by signal N becomes 128 + N."""
    return 128 - returncode if returncode < 0 else returncode
