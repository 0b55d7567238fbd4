"""Task process groups that outlived their worker: recorded on disk, killed at the next start.

Task processes lead their own sessions (see :mod:`dsched.worker.process`), so a worker killed with
SIGKILL leaves them running. By the time the worker comes back its old epoch has been fenced and the
masters have re-dispatched those attempts elsewhere: the leftovers are orphans whose results nobody
accepts, and which may still write to the outside world. Before it registers again, the worker
kills every process group recorded by an earlier incarnation.

One file per running group, ``<dir>/<pgid>``, holding the leader's start time as the kernel reports
it (:func:`psutil.Process.create_time`): a pid reused by an unrelated process since then has another
start time and is left alone.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
from pathlib import Path

import psutil

log = logging.getLogger(__name__)


class ProcessRecords:
    """The on-disk list of live task process groups of this worker's data directory."""

    def __init__(self, directory: Path) -> None:
        self._dir = directory

    def record(self, pgid: int) -> None:
        """Remembers a process group whose leader was just started."""
        try:
            started = psutil.Process(pgid).create_time()
        except psutil.Error:
            return  # already gone: nothing can be orphaned
        try:
            self._dir.mkdir(parents=True, exist_ok=True)
            (self._dir / str(pgid)).write_text(repr(started))
        except OSError as exc:  # a full disk must not fail the task; the orphan risk is logged
            log.warning("cannot record process group %d: %s", pgid, exc)

    def forget(self, pgid: int) -> None:
        """The group is gone (its task ended and the rest of the group was killed)."""
        with contextlib.suppress(OSError):
            (self._dir / str(pgid)).unlink()

    def kill_leftovers(self) -> list[int]:
        """At start: SIGKILLs every group an earlier incarnation recorded (see
        :meth:`kill_recorded`) and logs them. Returns the pgids killed."""
        killed = self.kill_recorded()
        if killed:
            log.warning("killed task process groups left by an earlier run: %s", killed)
        return killed

    def kill_recorded(self) -> list[int]:
        """SIGKILLs every recorded group whose leader still is the process recorded (or whose
        leader is gone while members live on); forgets all records. Returns the pgids killed."""
        killed: list[int] = []
        if not self._dir.is_dir():
            return killed
        for entry in self._dir.iterdir():
            try:
                pgid, started = int(entry.name), float(entry.read_text())
            except (OSError, ValueError):
                with contextlib.suppress(OSError):
                    entry.unlink()
                continue
            if _same_process(pgid, started) or _headless_group(pgid):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pgid, signal.SIGKILL)
                    killed.append(pgid)
            with contextlib.suppress(OSError):
                entry.unlink()
        return killed


def _same_process(pid: int, started: float) -> bool:
    try:
        return abs(psutil.Process(pid).create_time() - started) < 0.01
    except psutil.Error:
        return False


def _headless_group(pgid: int) -> bool:
    """True if the leader ``pgid`` is gone but members of its group live on. Such a group is ours:
    the kernel does not hand out a pid that is still some group's id."""
    if psutil.pid_exists(pgid):
        return False  # a new process with that pid: not ours (its start time differed)
    for proc in psutil.process_iter(["pid"]):
        with contextlib.suppress(psutil.Error):
            if proc.info["pid"] != pgid and os.getpgid(proc.info["pid"]) == pgid:
                return True
    return False
