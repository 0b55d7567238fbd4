"""When each task run died, as seen from outside: for runs that could not say so themselves.

A run killed with SIGKILL (a worker fencing itself, a worker restarted on its data directory
killing the leftovers it recorded, the harness's ``kill9``) writes no ``end`` or ``term`` line to
the raw ledger, yet the checker must know until when it ran to tell whether two runs of one task
overlapped. :class:`DeathWatch` is a daemon thread that follows the ledger's ``start`` lines and
polls each run's pid every 100 ms, recording the wall-clock time it was first seen gone (to within
that interval). Wall clock, because the ledger's own times are ``date +%s.%N``.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from tests.cluster.ledger import TaskLedger

POLL_S = 0.1


def gone(pid: int) -> bool:
    """Whether ``pid`` has exited (a zombie has: it only waits to be reaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


class DeathWatch:
    """Fills ``deaths`` (pid -> wall-clock time of death) for every run the ledger started. An
    entry already there (the harness killed the run itself and knows when) is kept."""

    def __init__(self, ledger: TaskLedger, deaths: dict[int, float]) -> None:
        self._ledger = ledger
        self._deaths = deaths
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="chaos-deaths", daemon=True)
        self.error: BaseException | None = None

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        try:
            while not self._stop.wait(POLL_S):
                self.poll()
        except BaseException as exc:  # kept for the test to see; a thread must not die noisily
            self.error = exc

    def poll(self) -> None:
        """One pass: records the runs found gone since the last pass."""
        now = time.time()
        for line in self._ledger.lines():
            if line.kind == "start" and line.pid not in self._deaths and gone(line.pid):
                self._deaths[line.pid] = now
