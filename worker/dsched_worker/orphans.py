"""Task process groups that outlived their worker: recorded on disk, killed by the worker's reaper
the moment it dies, and at the next start.

Task processes lead their own sessions (see :mod:`dsched_worker.process`), so a worker killed with
SIGKILL leaves them running. By the time the worker comes back its old epoch has been fenced and the
masters have re-dispatched those attempts elsewhere: the leftovers are orphans whose results nobody
accepts, and which may still write to the outside world. The worker's reaper
(:mod:`dsched_worker.reaper`) kills every recorded group as soon as the worker is gone, and, in
case the reaper was killed too, the worker kills every process group recorded by an earlier
incarnation before it registers again.

Each running group is a record in an append-only log (:mod:`dsched_worker.record_log`),
``<dir>/groups.log``: ``R <u32 pgid><f64 start time>`` when its leader started, ``F <u32 pgid>``
when the group is gone, so a task costs two small writes and no file of its own. The start time is
the leader's as the kernel reports it (:func:`psutil.Process.create_time`): a pid reused by an
unrelated process since then has another start time and is left alone. Files ``<dir>/<pgid>``
holding the start time, the format of earlier versions, are read as well.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import signal
import struct
import threading
from pathlib import Path

import psutil

from dsched_worker.record_log import RecordLog, frame, read_records

log = logging.getLogger(__name__)

LOG_NAME = "groups.log"
COMPACT_BYTES = 64 * 2**10  # rewrite the log with the live groups alone past this size
_STARTED, _GONE = b"R", b"F"
_PGID = struct.Struct("<I")
_GROUP = struct.Struct("<Id")  # pgid, the leader's start time


class ProcessRecords:
    """The on-disk list of live task process groups of this worker's data directory.
    :meth:`record` is called right after a spawn (:mod:`dsched_worker.process`), :meth:`forget`
    once a group is gone, both on the loop; a lock keeps their appends and a compaction apart
    all the same, should a caller run in another thread."""

    def __init__(self, directory: Path) -> None:
        self._dir = directory
        self._log = RecordLog(directory / LOG_NAME, compact_bytes=COMPACT_BYTES)
        self._live: dict[int, bytes] = {}  # pgid -> its R record
        self._lock = threading.Lock()

    def record(self, pgid: int) -> None:
        """Remembers a process group whose leader was just started."""
        started = start_time(pgid)
        if started is None:
            return  # already gone: nothing can be orphaned
        entry = frame(_STARTED + _GROUP.pack(pgid, started))
        with self._lock:
            try:
                try:
                    self._log.append(entry)
                except FileNotFoundError:
                    self._dir.mkdir(parents=True, exist_ok=True)
                    self._log.append(entry)
            except OSError as exc:  # a full disk must not fail the task; the risk is logged
                log.warning("cannot record process group %d: %s", pgid, exc)
                return
            self._live[pgid] = entry

    def forget(self, pgid: int) -> None:
        """The group is gone (its task ended and the rest of the group was killed)."""
        with self._lock:
            if self._live.pop(pgid, None) is None:
                return
            with contextlib.suppress(OSError):
                self._log.append(frame(_GONE + _PGID.pack(pgid)))
                if self._log.wants_compaction(sum(map(len, self._live.values()))):
                    self._log.replace(list(self._live.values()))

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
        if not self._dir.is_dir():
            return []
        killed = kill_groups(self._dir)
        self._log.close()
        self._live.clear()
        for entry in self._dir.iterdir():
            if entry.name == LOG_NAME or entry.name.isdigit():
                with contextlib.suppress(OSError):
                    entry.unlink()
        return killed


_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@functools.cache
def _boot_time() -> float:
    return psutil.boot_time()  # fixed while the machine runs


def start_time(pid: int) -> float | None:
    """The start time of process ``pid`` exactly as :meth:`psutil.Process.create_time` computes
    it (its ``starttime`` in clock ticks since boot, plus the boot time), or None if it is gone.
    Read here with one small read: psutil took 160 us a spawn (it reads ``/proc/stat`` for the
    boot time each time and builds a Process), this 11 us; the reaper compares the two."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
        ticks = int(data[data.rfind(b")") + 2 :].split()[19])  # field 22: starttime
    except (OSError, ValueError, IndexError):
        return None
    return ticks / _CLOCK_TICKS + _boot_time()


def kill_groups(directory: Path) -> list[int]:
    """SIGKILLs every group recorded in ``directory`` and not forgotten whose leader still is the
    process recorded (same start time: a reused pid is left alone), or whose leader is gone while
    members live on (:func:`_headless_group`). Changes no file, so a reader of a log its writer
    still appends to (:mod:`dsched_worker.reaper`) can call it. Returns the pgids killed."""
    killed: list[int] = []
    for pgid, started in recorded(directory).items():
        if _same_process(pgid, started) or _headless_group(pgid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
                killed.append(pgid)
    return killed


def recorded(directory: Path) -> dict[int, float]:
    """The groups recorded in ``directory`` and not forgotten: pgid -> the leader's start time
    (none if ``directory`` does not exist). Reading stops at a record cut short (the worker died
    while writing it, as it would have died before writing a file of the earlier format); a
    malformed record is skipped."""
    groups: dict[int, float] = {}
    payloads, _ = read_records(directory / LOG_NAME)
    for payload in payloads:
        with contextlib.suppress(struct.error):
            if payload[:1] == _STARTED:
                pgid, started = _GROUP.unpack_from(payload, 1)
                groups[pgid] = started
            elif payload[:1] == _GONE:
                groups.pop(_PGID.unpack_from(payload, 1)[0], None)
    if not directory.is_dir():
        return groups
    for entry in directory.iterdir():  # the file-per-group format of earlier versions
        if entry.name.isdigit():
            with contextlib.suppress(OSError, ValueError):
                groups[int(entry.name)] = float(entry.read_text())
    return groups


def _same_process(pid: int, started: float) -> bool:
    """True if ``pid`` is the live process recorded (not a zombie: killed already, e.g. by the
    reaper, and not yet reaped by its new parent)."""
    try:
        proc = psutil.Process(pid)
        same = abs(proc.create_time() - started) < 0.01
        return same and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _headless_group(pgid: int) -> bool:
    """True if the leader ``pgid`` is gone but members of its group live on. Such a group is ours:
    the kernel does not hand out a pid that is still some group's id."""
    if psutil.pid_exists(pgid):
        return False  # a new process with that pid: not ours (its start time differed)
    for proc in psutil.process_iter(["pid", "status"]):
        with contextlib.suppress(psutil.Error):
            pid, status = proc.info["pid"], proc.info["status"]
            if pid != pgid and status != psutil.STATUS_ZOMBIE and os.getpgid(pid) == pgid:
                return True
    return False
