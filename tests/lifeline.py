"""Processes started by tests die with the test run, even when pytest itself is SIGKILLed.

A test run starts servers (ZooKeeper's JVM, masters, workers, standalones) in process groups of
their own, and those start task process groups of their own: none of them would notice that pytest
died. So the first test that starts one also starts a *lifeline*: a small watchdog process (this
file run as a script) in a session of its own, reading a pipe whose only writer is pytest. The
kernel closes the pipe when pytest exits, however it exits; at end of file the watchdog kills, with
SIGKILL:

- every process registered with :func:`guard` (checked by its start time: a pid reused since is
  left alone) and, if it leads one, its process group;
- every descendant of those, found by walking ``/proc`` with the registered processes and then
  each generation frozen first (SIGSTOP), so nothing forks away during the walk; and each
  descendant's group if it leads one (a worker's tasks lead groups of their own);
- the task process groups recorded by workers (``<data dir>/pgids``, see
  :mod:`dsched_worker.orphans`) anywhere under the trees given to :func:`watch_tree` (the session's
  temporary directory): that covers the tasks of workers that run inside pytest and the orphans of
  workers a test killed;
- the processes named by the ``*.pid`` files of directories given to :func:`watch_pidfiles` (the
  local cluster's), started after that call.

A parent-death signal (``PR_SET_PDEATHSIG``) alone would not do: it fires when the parent *thread*
ends, reaches only direct children, and would orphan a server's tasks before anything could find
them. After a normal end of pytest the watchdog finds nothing left to kill.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
_FREEZE_ROUNDS = 50  # generations of descendants walked at most (a fork bomb must not hang it)


# ------------------------------------------------------------------------------- the test's side


def guard(process: subprocess.Popen[bytes] | subprocess.Popen[str] | int) -> None:
    """Registers a process this test run started (a Popen or a pid): it dies with the run."""
    pid = process if isinstance(process, int) else process.pid
    started = start_ticks(pid)
    if started is not None:
        _LIFELINE.send(f"pid {pid} {started}")


def watch_tree(path: Path) -> None:
    """Worker data directories anywhere under ``path``: their recorded task groups die with the
    run."""
    _LIFELINE.send(f"tree {path.absolute()}")


def watch_pidfiles(path: Path) -> None:
    """``path/*.pid`` (one pid per file) written from now on: those processes die with the run."""
    _LIFELINE.send(f"pidfiles {uptime_ticks()} {path.absolute()}")


def watchdog_pid() -> int | None:
    """The lifeline's watchdog process, if it runs."""
    return _LIFELINE.pid


class _Lifeline:
    """The pipe to the watchdog, started at the first registration."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def send(self, line: str) -> None:
        with self._lock:
            if self._proc is None:
                self._proc = subprocess.Popen(
                    [sys.executable, str(Path(__file__).resolve())],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.DEVNULL,
                    # Its own session: a signal to pytest's group (Ctrl-C) does not reach it.
                    start_new_session=True,
                )
                atexit.register(self._close)
            stdin = self._proc.stdin
            assert stdin is not None
            stdin.write(f"{line}\n".encode())
            stdin.flush()

    def _close(self) -> None:
        # A normal end: end of file now, and the watchdog's (empty) sweep is waited for, so no
        # Popen is left running at the interpreter's exit.
        if self._proc is not None and self._proc.stdin is not None:
            with contextlib.suppress(OSError):
                self._proc.stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=10)


_LIFELINE = _Lifeline()


# ------------------------------------------------------------------------------------ /proc reads


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command (state, ppid, pgrp, ...), or None."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    return text.rsplit(")", 1)[1].split()


def start_ticks(pid: int) -> int | None:
    """When ``pid`` started, in clock ticks since boot (None: no such process)."""
    fields = _stat(pid)
    return None if fields is None else int(fields[19])


def uptime_ticks() -> int:
    return int(float(Path("/proc/uptime").read_text().split()[0]) * _CLOCK_TICKS)


def processes() -> dict[int, tuple[int, int, int]]:
    """Every live process: pid -> (ppid, pgid, start ticks); zombies are left out."""
    table: dict[int, tuple[int, int, int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _stat(int(entry.name))
            if fields is not None and fields[0] not in ("Z", "X"):
                table[int(entry.name)] = (int(fields[1]), int(fields[2]), int(fields[19]))
    return table


# ----------------------------------------------------------------------------------- the watchdog


class _Sweep:
    """What the watchdog kills at end of file (see the module docstring)."""

    def __init__(self) -> None:
        self.guarded: dict[int, int] = {}  # pid -> start ticks
        self.trees: list[Path] = []
        self.pidfiles: list[tuple[int, Path]] = []  # (registered at, directory)
        self._own_group = os.getpgrp()

    def take(self, line: str) -> None:
        kind, _, rest = line.strip().partition(" ")
        if kind == "pid":
            pid, started = rest.split()
            self.guarded[int(pid)] = int(started)
        elif kind == "tree":
            self.trees.append(Path(rest))
        elif kind == "pidfiles":
            since, path = rest.split(" ", 1)
            self.pidfiles.append((int(since), Path(path)))

    def run(self) -> None:
        table = processes()
        roots = {pid for pid, started in self.guarded.items() if _is(table, pid, started)}
        for since, directory in self.pidfiles:
            for pid in _pids_in(directory):
                if pid in table and table[pid][2] >= since:
                    roots.add(pid)
        frozen = self._freeze_descendants(roots)
        table = processes()
        leaders = {pid for pid in frozen if pid in table and table[pid][1] == pid}
        for pgid in leaders:
            self._killpg(pgid)
        for pid in frozen:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        self._kill_recorded_groups()

    def _freeze_descendants(self, roots: set[int]) -> set[int]:
        frozen: set[int] = set()
        generation = roots
        for _ in range(_FREEZE_ROUNDS):
            for pid in generation:
                if self._safe(pid):
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(pid, signal.SIGSTOP)
                    frozen.add(pid)
            generation = {
                pid for pid, (ppid, _, _) in processes().items() if ppid in frozen
            } - frozen
            if not generation:
                break
        return frozen

    def _kill_recorded_groups(self) -> None:
        try:
            from dsched_worker.orphans import ProcessRecords
        except ImportError:  # not the project's interpreter: nothing was recorded by it either
            return
        for tree in self.trees:
            for directory, _, _ in os.walk(tree):
                if Path(directory).name == "pgids":
                    ProcessRecords(Path(directory)).kill_recorded()

    def _safe(self, pid: int) -> bool:
        return pid > 1 and pid != os.getpid()

    def _killpg(self, pgid: int) -> None:
        if pgid > 1 and pgid != self._own_group:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)


def _is(table: dict[int, tuple[int, int, int]], pid: int, started: int) -> bool:
    return pid in table and table[pid][2] == started


def _pids_in(directory: Path) -> list[int]:
    found = []
    for entry in directory.glob("*.pid") if directory.is_dir() else []:
        with contextlib.suppress(OSError, ValueError):
            found.append(int(entry.read_text().split()[0]))
    return found


def main(stdin: IO[str]) -> None:
    """The watchdog: collects registrations until end of file, then sweeps."""
    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    sweep = _Sweep()
    for line in stdin:
        sweep.take(line)
    started = time.monotonic()
    sweep.run()
    if time.monotonic() - started > 5:
        print(f"lifeline: the sweep took {time.monotonic() - started:.1f}s", file=sys.stderr)


if __name__ == "__main__":
    main(sys.stdin)
