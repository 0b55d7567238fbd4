"""The master's history clean-up: request ids, events and finished instances past their ages.

:meth:`History.clean` deletes (or, dry, counts) what is older than a cutoff per kind, a bounded
batch per transaction (:mod:`dsched_server.store.retention`), yielding to the event loop between
batches; the ``dsched cleanup`` command reaches it through ``MasterService.CleanUpHistory``.
Every master also runs it with the configured ages every ``interval`` seconds, the first time at a
random point of the first interval, so masters started together do not all clean at once. Two
masters cleaning at once is harmless (each row is deleted once; see the store module), so no lock
is needed for safety.

Deleting instances deletes their events first, as the events kind does (so a transaction holds
at most a batch of them), and counts them as events: a dry run reports the same.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta

from sqlalchemy.exc import DBAPIError

from dsched.errors import Aborted, Unavailable
from dsched_server.constants import RETENTION_INTERVAL_S
from dsched_server.core.ports import Clock
from dsched_server.core.retention import HistoryKind, Tally, cutoffs
from dsched_server.store import retention
from dsched_server.store.database import Database

log = logging.getLogger(__name__)

_PAUSE_S = 0.005  # between batches: other writers get the database (SQLite: the event loop)


class History:
    """``ages`` per kind (a kind with age 0 is kept for ever) for the periodic clean-up."""

    def __init__(
        self,
        db: Database,
        clock: Clock,
        *,
        ages: Mapping[HistoryKind, timedelta],
        interval: float = RETENTION_INTERVAL_S,
        jitter: Callable[[float], float] = lambda interval: random.uniform(0, interval),
    ) -> None:
        self._db = db
        self._clock = clock
        self.ages = dict(ages)
        self.interval = interval
        self._jitter = jitter
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        if any(age > timedelta(0) for age in self.ages.values()):
            self._task = asyncio.create_task(self._run(), name="history-clean-up")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def clean(
        self, cutoff: Mapping[HistoryKind, datetime], *, dry_run: bool
    ) -> dict[HistoryKind, Tally]:
        """Deletes (dry: counts) each kind in ``cutoff`` older than its time; returns the tallies
        of the kinds asked for (and of events, when instances are)."""
        cutoff = dict(cutoff)
        if HistoryKind.INSTANCES in cutoff:
            # Their events first, in batches: the later of the two cutoffs covers both.
            instances = cutoff[HistoryKind.INSTANCES]
            cutoff[HistoryKind.EVENTS] = max(cutoff.get(HistoryKind.EVENTS, instances), instances)
        tallies: dict[HistoryKind, Tally] = {}
        for kind in HistoryKind:  # the declared order: events before their instances
            if kind in cutoff:
                tallies[kind] = await self._clean_kind(kind, cutoff[kind], dry_run)
        return tallies

    async def _clean_kind(self, kind: HistoryKind, cutoff: datetime, dry_run: bool) -> Tally:
        tally = Tally(kind)
        after: retention.Cursor | None = None
        skip_locked = not self._db.is_sqlite
        while True:
            try:
                if dry_run:
                    async with self._db.read() as conn:
                        batch = await retention.step(conn, kind, cutoff, after, dry_run=True)
                else:
                    async with self._db.transaction() as conn:
                        batch = await retention.step(
                            conn, kind, cutoff, after, dry_run=False, skip_locked=skip_locked
                        )
            except DBAPIError as exc:
                if not exc.connection_invalidated and _is_conflict(exc):
                    raise Aborted(
                        "a concurrent change conflicted with the clean-up; retry", reason="CONFLICT"
                    ) from exc
                raise
            tally = tally.plus(batch.count, batch.times)
            if batch.after is None:
                return tally
            after = batch.after
            await asyncio.sleep(_PAUSE_S)

    async def _run(self) -> None:
        await asyncio.sleep(self._jitter(self.interval))
        while True:
            try:
                tallies = await self.clean(cutoffs(self._clock.now(), self.ages), dry_run=False)
                done = {k.value: t.count for k, t in tallies.items() if t.count}
                if done:
                    log.info("history clean-up deleted %s", done)
            except (Unavailable, Aborted):
                pass  # a database outage (logged once by the store) or a conflict: next time
            except Exception:
                log.exception("history clean-up failed; the next pass tries again")
            await asyncio.sleep(self.interval)


def _is_conflict(exc: DBAPIError) -> bool:
    """A deadlock or serialization failure (PostgreSQL 40P01/40001, MariaDB 1213/1205)."""
    orig = exc.orig
    code = str(getattr(orig, "sqlstate", "") or getattr(orig, "pgcode", "") or "")
    args = getattr(orig, "args", ())
    number = args[0] if args and isinstance(args[0], int) else None
    return code in ("40P01", "40001") or number in (1213, 1205)
