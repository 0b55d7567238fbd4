"""Spark application ids: found in a SPARK attempt's output while it runs, and killed by id.

The id is named by the line dsched's driver prints (``dsched: spark application id local-…``)
or by Spark's own output: a standalone master's ``app-…`` (client mode) or ``driver-…`` (cluster
mode), YARN's ``application_…``, a Kubernetes submission id ``namespace:pod``. Output arrives in
chunks; lines are parsed once complete, and a line over :data:`MAX_LINE` bytes is not looked at.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
from collections.abc import Callable, Mapping, Sequence

from dsched.spark import APPLICATION_ID

MAX_LINE = 64 * 1024
KILL_TIMEOUT_S = 120.0  # a kill by id starts a JVM: seconds on a busy host
_LINES = (
    re.compile(rb"dsched: spark application id (\S+)"),
    re.compile(rb"Connected to Spark cluster with app ID (app-\S+)"),
    re.compile(rb"(?:Driver successfully submitted as|Submission successfully created as) (\S+)"),
    re.compile(rb"Submitted application (application_\S+)"),
    re.compile(rb"submission ID (\S+:\S+)"),
)


class ApplicationIds:
    """Feed it output with :meth:`feed`; ``on_new`` is called with each id the first time it is
    seen (in order). :attr:`ids` are all of them."""

    def __init__(self, on_new: Callable[[str], None]) -> None:
        self._on_new = on_new
        self._tail = bytearray()
        self._skipping = False
        self.ids: list[str] = []

    @property
    def latest(self) -> str:
        return self.ids[-1] if self.ids else ""

    def feed(self, data: bytes) -> None:
        start = 0
        while (end := data.find(b"\n", start)) >= 0:
            if not self._skipping:
                self._tail += data[start:end]
                self._line(bytes(self._tail))
            self._tail.clear()
            self._skipping = False
            start = end + 1
        if not self._skipping:
            self._tail += data[start:]
            if len(self._tail) > MAX_LINE:
                self._tail.clear()
                self._skipping = True

    def close(self) -> None:
        if self._tail and not self._skipping:
            self._line(bytes(self._tail))
        self._tail.clear()

    def _line(self, line: bytes) -> None:
        for pattern in _LINES:
            match = pattern.search(line)
            if match is None:
                continue
            found = match.group(1).decode("ascii", "replace").rstrip(".,;")
            if APPLICATION_ID.fullmatch(found) and found not in self.ids:
                self.ids.append(found)
                self._on_new(found)
            return


async def run_bounded(
    argv: Sequence[str], env: Mapping[str, str], timeout: float = KILL_TIMEOUT_S
) -> tuple[int | None, str]:
    """Runs a short command (a kill by id) in its own process group; returns its exit code (None
    if it ran out of time and was killed) and the tail of its output."""
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env=dict(env),
        start_new_session=True,
    )
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), timeout)
    except (TimeoutError, asyncio.CancelledError):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        await proc.wait()
        raise_cancel = asyncio.current_task()
        if raise_cancel is not None and raise_cancel.cancelling():
            raise
        return None, ""
    return proc.returncode, out.decode("utf-8", "replace")[-2000:]
