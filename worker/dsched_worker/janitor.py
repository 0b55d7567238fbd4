"""The worker's periodic clean-up: kept working directories and task logs past their retention.

One pass at start (what earlier incarnations left), then one every ``interval`` seconds: a tenth of
the shortest retention, between 1 s and 10 minutes, so nothing outlives its retention by much and a
pass over a quiet disk costs nothing worth measuring. A failing pass is logged and the next one
tries again. Per-attempt state lives in the files themselves, so the worker's memory does not
depend on its history.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Collection, Container
from pathlib import Path

from dsched_worker.log_expiry import DAY_S, expire_logs
from dsched_worker.workdirs import WorkDirs

log = logging.getLogger(__name__)

MIN_INTERVAL_S = 1.0
MAX_INTERVAL_S = 600.0


class Janitor:
    """``live`` returns the task instance ids of the attempts this worker has now.
    ``log_retention_days`` 0 keeps logs for ever."""

    def __init__(
        self,
        workdirs: WorkDirs,
        logs_root: Path,
        *,
        log_retention_days: float,
        live: Callable[[], Collection[int]],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._workdirs = workdirs
        self._logs_root = logs_root
        self._log_retention = log_retention_days * DAY_S
        self._live = live
        self._clock = clock
        retentions = [s for s in (workdirs.keep_failed, self._log_retention) if s > 0]
        self.interval = min(
            MAX_INTERVAL_S, max(MIN_INTERVAL_S, min(retentions, default=10 * MAX_INTERVAL_S) / 10)
        )
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="worker-janitor")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def sweep(self) -> None:
        """One pass (also what tests call)."""
        removed = await self._workdirs.sweep(_LiveNow(self._live))
        if removed:
            log.info("removed %d kept working directories", removed)
        if self._log_retention > 0:
            expired = await asyncio.to_thread(
                expire_logs,
                self._logs_root,
                older_than=self._log_retention,
                now=self._clock(),
                live=set(self._live()),
            )
            if expired.files:
                log.info(
                    "removed %d task logs (%d bytes) past retention", expired.files, expired.bytes
                )

    async def _run(self) -> None:
        while True:
            try:
                await self.sweep()
            except Exception:
                log.exception("worker clean-up failed; trying again in %.0f s", self.interval)
            await asyncio.sleep(self.interval)


class _LiveNow(Container[int]):
    """The attempts here as ``live`` says at each lookup, not when the pass began: the sweep yields
    between instances, and an attempt that starts meanwhile may get a directory from the pool whose
    modification time is older than ``keep_failed`` (a rename keeps a directory's times), which
    only its being live keeps from the trash while it runs."""

    def __init__(self, live: Callable[[], Collection[int]]) -> None:
        self._live = live

    def __contains__(self, task_instance_id: object) -> bool:
        return task_instance_id in self._live()
