"""The reaper: a process per worker that kills the worker's task process groups when it dies.

Task processes lead sessions of their own (:mod:`dsched_worker.process`), so a worker killed with
SIGKILL leaves them running. Masters fail its attempts over once its registry session has expired
and nothing answers at its address; if nobody restarts the worker before that (a slow supervisor,
a loaded host, no supervisor at all), the orphans and the attempts run again elsewhere would run
at the same time. So at start the worker starts ``python -m dsched_worker.reaper <pgids dir>``
(:meth:`Reaper.start`): a process in a session of its own (a signal to the worker's group or a
Ctrl-C in its terminal does not reach it; it ignores SIGINT, SIGTERM and SIGHUP anyway) whose stdin
is the read end of a pipe. Only the worker holds the write end: both ends are close-on-exec and
tasks are spawned with ``close_fds``, so no task inherits it. The reaper blocks reading it: no
polling, no cost per task. When the worker dies, however it dies, the kernel closes the write end
and the read returns end of file at once: the reaper SIGKILLs every group recorded in the worker's
log and not forgotten (:func:`~dsched_worker.orphans.kill_groups`: a leader whose pid was reused
since has another start time and is left alone; a group whose leader is gone but members live on is
killed), logs what it killed to its stderr (the worker's), and exits. On a graceful stop the worker
tells it to stand down (:data:`STAND_DOWN`, one byte) once its tasks have ended, and it exits
killing nothing.

If the reaper itself is killed nothing breaks: the next worker started on the same data directory
kills the recorded groups at its start, as before the reaper existed. That worker first kills a
reaper an earlier incarnation left (:func:`retire`, by the pid and start time in ``reaper.pid``),
so that no old reaper reads the log once the new worker records its own groups in it.

A window remains: between spawning a task and appending its group to the log the worker runs no
other code (:mod:`dsched_worker.process` records the group right after ``Popen`` returns), but a
worker killed in those microseconds leaves a group nobody recorded: neither the reaper nor the next
start knows of it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

from dsched_worker.orphans import kill_groups

log = logging.getLogger(__name__)

STAND_DOWN = b"S"
PID_FILE = "reaper.pid"  # in the pgids directory: "<pid> <start time>"
EXIT_TIMEOUT_S = 5.0


class Reaper:
    """The worker's side: the running reaper process and the pipe's write end."""

    def __init__(self, proc: subprocess.Popen[bytes], write_fd: int) -> None:
        self._proc = proc
        self._fd: int | None = write_fd

    @property
    def pid(self) -> int:
        return self._proc.pid

    @classmethod
    def start(cls, directory: Path) -> Reaper:
        """Retires an earlier incarnation's reaper, then starts one watching the groups recorded
        in ``directory``."""
        directory.mkdir(parents=True, exist_ok=True)
        retire(directory)
        read_fd, write_fd = os.pipe()  # both close-on-exec; the reaper gets read_fd as stdin
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", __name__, str(directory)],
                stdin=read_fd,
                stdout=subprocess.DEVNULL,
                cwd="/",
                start_new_session=True,
            )
        except BaseException:
            os.close(write_fd)
            raise
        finally:
            os.close(read_fd)
        with contextlib.suppress(psutil.Error, OSError):
            started = psutil.Process(proc.pid).create_time()
            (directory / PID_FILE).write_text(f"{proc.pid} {started}")
        return cls(proc, write_fd)

    def stand_down(self) -> None:
        """The worker's tasks have ended: the reaper exits killing nothing."""
        if self._fd is not None:
            with contextlib.suppress(OSError):  # it was killed: nothing to tell
                os.write(self._fd, STAND_DOWN)
        self.close()

    def close(self) -> None:
        """Closes the write end without standing down: the reaper kills what is recorded."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def wait(self, timeout: float = EXIT_TIMEOUT_S) -> int | None:
        """After :meth:`stand_down` or :meth:`close`: waits (bounded) for the reaper to exit and
        reaps it; returns its exit code (None if it did not exit: then it is killed)."""
        try:
            return self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            log.warning("the reaper (pid %d) did not exit; killed", self._proc.pid)
            self._proc.kill()
            self._proc.wait()
            return None


def retire(directory: Path) -> None:
    """SIGKILLs the reaper an earlier worker on ``directory`` started, if it still runs (its pid
    and start time match ``reaper.pid``); the caller kills the recorded groups itself."""
    try:
        pid_text, started_text = (directory / PID_FILE).read_text().split()
        proc = psutil.Process(int(pid_text))
        if abs(proc.create_time() - float(started_text)) >= 0.01:
            return  # a reused pid
        proc.kill()
        # Not proc.wait(): it would reap a child of this process (a worker restarted in-process)
        # behind its Popen's back. A zombie is dead enough.
        deadline = time.monotonic() + EXIT_TIMEOUT_S
        while proc.status() != psutil.STATUS_ZOMBIE and time.monotonic() < deadline:
            time.sleep(0.01)
    except (OSError, ValueError, psutil.Error):  # gone: psutil.NoSuchProcess
        return


def main(argv: list[str]) -> int:
    """The reaper process: ``python -m dsched_worker.reaper <pgids dir>`` with the pipe as stdin."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)  # it must outlive the worker: it exits on end of file
    directory = Path(argv[0])
    try:
        word = os.read(0, 1)
    except OSError:
        word = b""
    if word == STAND_DOWN:
        return 0
    logging.basicConfig(format="%(asctime)s %(levelname)-7s reaper %(name)s: %(message)s")
    killed = kill_groups(directory)
    if killed:
        log.warning("killed task process groups left by a dead worker: %s", killed)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
