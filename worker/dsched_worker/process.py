"""A task's process group: spawn, feed its output to a callback, signal it, and clean up after it.

Each task process starts in a new session (``start_new_session=True``), so it leads its own process
group and every descendant that does not create its own session belongs to that group. This gives
one handle (the pgid, equal to the leader's pid) to kill the whole tree.

The process is spawned with :class:`subprocess.Popen` (the vfork path: no ``preexec_fn``) in a
thread of the loop's default executor, not on the loop: ``Popen`` returns only once the child has
exec'd bash (it reads a close-on-exec pipe to learn whether ``exec`` failed), and the exec, the
working directory made before it and the read of the new process's start time after it (to record
its group: :mod:`dsched_worker.orphans`) block for a good fraction of a millisecond, longer when
the disk or the CPUs are busy; the GIL is released meanwhile, so the loop carries on with the
other attempts. The spawning thread records the group right after the spawn, as the loop did
before: no other code of the spawn runs between the two, so the window in which a worker killed
with SIGKILL leaves a group nobody recorded stays as narrow as it was. The loop then watches two
descriptors per process with plain reader callbacks: the
output pipe and a pidfd that turns readable when the process exits, which then reaps it. asyncio's
subprocess machinery did the same with a transport, a protocol, pipe transports, a child watcher
and a task per spawn, a good part of a short task's cost on the worker. Waiting for the pipe to
close would not do: it closes only once every holder of its write end is gone, and a background
grandchild (``sleep 1000 &``) that inherited stdout keeps them open long after the script exited. So
:meth:`ProcessGroup.wait` waits for the *leader's* exit, then SIGKILLs whatever is left in its
group. The task is over when its main process is; leftover children would otherwise hold the pipe,
hang the attempt and keep running unsupervised. A descendant that escaped into its own session is
out of reach: its end of the pipe is abandoned after :data:`DRAIN_TIMEOUT_S`.

The pgid stays valid until the last member of the group is gone. Signalling a group whose members
are all gone raises ProcessLookupError, which is ignored: there is nothing left to kill.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

log = logging.getLogger(__name__)

# After the group was killed, how long to wait for the pipe to report end-of-file (normally a few
# milliseconds; longer only if a descendant escaped the group with setsid and still holds it).
DRAIN_TIMEOUT_S = 2.0
READ_CHUNK = 256 * 1024  # bytes read from the output pipe per callback at most

OutputCallback = Callable[[bytes], None]


class GroupRecords(Protocol):
    """Where running groups are recorded (:class:`dsched_worker.orphans.ProcessRecords`);
    ``record`` is called from the spawning thread, ``forget`` on the loop."""

    def record(self, pgid: int) -> None: ...

    def forget(self, pgid: int) -> None: ...


class _Watch:
    """The loop's view of one spawned process: its output pipe and its pidfd, both read by loop
    callbacks (no transport, protocol, child watcher or task per process)."""

    def __init__(
        self, proc: subprocess.Popen[bytes], out_fd: int, on_output: OutputCallback
    ) -> None:
        self._loop = asyncio.get_running_loop()
        self._proc = proc
        self._out_fd: int | None = out_fd
        self._on_output = on_output
        self.exited = asyncio.Event()
        self.drained = asyncio.Event()
        os.set_blocking(out_fd, False)
        self._pidfd: int | None = os.pidfd_open(proc.pid)
        self._loop.add_reader(out_fd, self._read)
        self._loop.add_reader(self._pidfd, self._reap)

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
        assert self._pidfd is not None
        self._loop.remove_reader(self._pidfd)
        os.close(self._pidfd)
        self._pidfd = None
        self.exited.set()

    def close(self) -> None:
        """Stops reading the output; the process is still reaped when it exits."""
        self._close_output()

    def _close_output(self) -> None:
        if self._out_fd is not None:
            self._loop.remove_reader(self._out_fd)
            os.close(self._out_fd)
            self._out_fd = None


class ProcessGroup:
    """A running process that leads its own process group. Create with :meth:`spawn`."""

    def __init__(
        self, proc: subprocess.Popen[bytes], watch: _Watch, records: GroupRecords | None
    ) -> None:
        self._watch = watch
        self._records = records
        self.pid: int = proc.pid

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
    ) -> ProcessGroup:
        """Starts ``argv`` in a new session with stdin from /dev/null and stdout+stderr going to
        ``on_output`` (called on the loop with each chunk), in a thread (see the module):
        ``prepare`` first (e.g. makes ``cwd``; what it raises is raised here), and the group is
        recorded in ``records`` right after the spawn (forgotten by :meth:`wait`). Raises
        OSError if it cannot start."""
        loop = asyncio.get_running_loop()
        started = loop.run_in_executor(None, _start, list(argv), cwd, dict(env), prepare, records)
        try:
            proc, read_fd = await asyncio.shield(started)
        except asyncio.CancelledError:
            # The thread carries on: whatever it starts must not outlive the cancelled attempt.
            started.add_done_callback(lambda done: _abandon(done, records))
            raise
        return cls(proc, _Watch(proc, read_fd, on_output), records)

    @property
    def exited(self) -> bool:
        return self._watch.exited.is_set()

    async def wait(self) -> int:
        """Waits for the leader to exit, kills the rest of its group, waits (bounded) for the output
        to drain, and returns the leader's return code (negative: killed by that signal)."""
        try:
            await self._watch.exited.wait()
            self.signal(signal.SIGKILL)  # leftovers: see the module docstring
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


def _start(
    argv: list[str],
    cwd: Path,
    env: dict[str, str],
    prepare: Callable[[], None] | None,
    records: GroupRecords | None,
) -> tuple[subprocess.Popen[bytes], int]:
    """In the spawning thread: the process and the read end of its output pipe."""
    if prepare is not None:
        prepare()
    read_fd, write_fd = os.pipe()  # both close-on-exec; the child gets write_fd as 1 and 2
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=write_fd,
            stderr=write_fd,
            cwd=cwd,
            env=env,
            start_new_session=True,
        )
    except BaseException:
        os.close(read_fd)
        raise
    finally:
        os.close(write_fd)  # the child holds its own copies
    if records is not None:
        try:
            records.record(proc.pid)
        except BaseException:
            _kill(proc, read_fd, None)
            proc.wait()
            raise
    return proc, read_fd


def _abandon(
    done: asyncio.Future[tuple[subprocess.Popen[bytes], int]], records: GroupRecords | None
) -> None:
    """On the loop: kills what a spawn whose caller was cancelled started, and reaps it in a
    thread (a killed process exits at once, but the loop does not wait even for that)."""
    if done.cancelled() or done.exception() is not None:
        return
    proc, read_fd = done.result()
    _kill(proc, read_fd, records)
    with contextlib.suppress(RuntimeError):  # the loop is closing: the process stays a zombie
        asyncio.get_running_loop().run_in_executor(None, proc.wait)


def _kill(proc: subprocess.Popen[bytes], read_fd: int, records: GroupRecords | None) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    os.close(read_fd)
    if records is not None:
        records.forget(proc.pid)


def exit_code(returncode: int) -> int:
    """A return code as a shell reports it: death by signal N becomes 128 + N."""
    return 128 - returncode if returncode < 0 else returncode
