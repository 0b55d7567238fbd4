"""A master's scheduler: fires the online schedules of its share (README "Schedules").

The share is the schedules whose id falls in the master's command slot (id mod the number of
live masters), so every schedule has one master firing it while masters come and go; when two do
for a moment (the share moved), the fire row's unique key keeps each fire time to one run.

No loop scans every schedule every second: the schedules of the share sit in a
:class:`~dsched_server.core.fire_queue.FireQueue` by next fire time and the scheduler sleeps until
the earliest. It wakes at once when a schedule changes on this master, when the share moves
(masters came or went), and when a run of a schedule with queued fire times ends here; it reads
the schedules other masters' clients changed every ``refresh`` seconds. Due schedules are fired
up to ``batch`` per transaction (``app/firing.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from sqlalchemy.exc import IntegrityError

from dsched.errors import NotFound
from dsched_server.app import firing
from dsched_server.app.context import AppContext
from dsched_server.app.transaction import Transaction, transact
from dsched_server.background import Background
from dsched_server.core.cron import compile_cron
from dsched_server.core.fire_queue import FireQueue
from dsched_server.core.schedule import ScheduleRecord, next_fire
from dsched_server.store import schedules as store

log = logging.getLogger(__name__)

REFRESH_S = 5.0
# How far back the refresh looks before its last one. A change's update time is the clock of the
# master that took it, compared here with this master's: besides commit order, the look-back
# covers that much skew between masters' clocks (re-reading a change is harmless).
LOOK_BACK = timedelta(seconds=30)
BATCH = 200
# How long a storm of batches holds the event loop at most before letting it serve the rest.
YIELD_S = 0.25


class Scheduler(Background):
    def __init__(
        self,
        ctx: AppContext,
        *,
        slot: Callable[[], tuple[int, int]],
        enabled: Callable[[], bool],
        refresh: float = REFRESH_S,
        batch: int = BATCH,
    ) -> None:
        super().__init__("scheduler")
        self.ctx = ctx
        self._slot = slot
        self._enabled = enabled
        self._refresh = refresh
        self._batch = batch
        self.queue = FireQueue()
        self._wake = asyncio.Event()
        self._dirty: set[int] = set()
        self._ended: set[int] = set()
        self._reload = True
        self._refreshed: datetime | None = None
        # The update time of each change the refresh placed within the look-back: the next
        # refreshes read it again and skip it (a bulk of 10,000 changes costs one placing each).
        self._placed: dict[int, datetime] = {}
        self.fired = 0  # runs started by fire times here (tests, metrics)

    # ---------------------------------------------------------------------- wake-ups

    def changed(self, schedule_id: int) -> None:
        """A client changed the schedule through this master."""
        self._dirty.add(schedule_id)
        self._wake.set()

    def share_changed(self) -> None:
        """Masters came or went: the share is read again."""
        self._reload = True
        self._wake.set()

    def run_ended(self, schedule_id: int) -> None:
        """A run the schedule started ended here: a queued fire time may start now."""
        self._ended.add(schedule_id)
        self._wake.set()

    # ---------------------------------------------------------------------- the loop

    async def _run(self) -> None:
        while True:
            try:
                async with asyncio.timeout(self.sleep_time()):
                    await self._wake.wait()
            except TimeoutError:
                pass
            self._wake.clear()
            try:
                await self.pass_once()
            except Exception as exc:  # the database went away: the next pass tries again
                log.warning("scheduler pass failed: %s", exc)
                self._reload = True
                await asyncio.sleep(1.0)  # not a hot loop while the store is down

    def sleep_time(self) -> float:
        """Seconds until the earliest fire time or the next refresh, whichever is first. While
        firing is not enabled, the refresh interval even if a fire time is overdue (the master
        wakes the loop when it may fire again): the loop would otherwise spin at 0 s."""
        now = self.ctx.clock.now()
        until = self._refresh
        earliest = self.queue.earliest()
        if earliest is not None and self._enabled():
            until = min(until, (earliest - now).total_seconds())
        return max(until, 0.0)

    async def pass_once(self) -> int:
        """One pass of the loop at the clock's now: reads what changed, fires what is due.
        Returns the fire times that started a run. Fires nothing while not ``enabled()``: a
        master not registered, or whose registry session is in doubt (its share may already be
        another master's), must not fire (the fire row's key would keep a double fire to one run,
        but a fenced master does not write at all)."""
        if not self._enabled():
            return 0
        now = self.ctx.clock.now()
        if self._reload:
            await self._load_share(now)
        elif self._refreshed is None or (now - self._refreshed).total_seconds() >= self._refresh:
            await self._read_changes(now)
        if self._dirty:
            dirty, self._dirty = self._dirty, set()
            await self._read(dirty)
        if self._ended:
            ended, self._ended = self._ended, set()
            for schedule_id in sorted(ended):
                await transact(self.ctx, functools.partial(_start_queued, schedule_id=schedule_id))
        started = 0
        due = self.queue.pop_due(self.ctx.clock.now())
        committed: list[Transaction] = []
        loop = asyncio.get_running_loop()
        paused = loop.time()
        try:
            for i in range(0, len(due), self._batch):
                if loop.time() - paused >= YIELD_S:
                    # On SQLite a batch awaits nothing: the loop serves the rest now and then
                    # (the registry's heartbeats, the API), not after every batch, where the
                    # runners and claims ready by then would take most of its time.
                    await asyncio.sleep(0)
                    paused = loop.time()
                started += await self._fire(due[i : i + self._batch], committed)
        finally:
            # The command consumer is woken once the batches are written, not after each: woken
            # early, it claims the first runs between the batches and delays the rest.
            for tx in committed:
                tx.wake(self.ctx)
        self.fired += started
        return started

    def _mine(self, schedule_id: int) -> bool:
        index, count = self._slot()
        return schedule_id % max(count, 1) == index

    async def _load_share(self, now: datetime) -> None:
        self._reload = False
        async with self.ctx.db.read() as conn:
            online = await store.online(conn)
        self.queue.clear()
        for record in online:
            if self._mine(record.id):
                self.queue.set(record.id, _next(record, now))
        self._refreshed = now

    async def _read_changes(self, now: datetime) -> None:
        since = (self._refreshed or now) - LOOK_BACK
        async with self.ctx.db.read() as conn:
            changed = await store.changed_since(conn, since)
        self._refreshed = now
        self._placed = {i: t for i, t in self._placed.items() if t >= since}
        fresh = [r for r in changed if self._placed.get(r.id) != r.update_time]
        self._placed.update((r.id, r.update_time) for r in fresh)
        self._place(fresh, now)

    async def _read(self, ids: set[int]) -> None:
        found = []
        async with self.ctx.db.read() as conn:
            for schedule_id in sorted(ids):
                try:
                    found.append(await store.get(conn, schedule_id))
                except NotFound:
                    self.queue.remove(schedule_id)
        self._place(found, self.ctx.clock.now())

    def _place(self, records: Sequence[ScheduleRecord], now: datetime) -> None:
        for record in records:
            if record.online and self._mine(record.id):
                self.queue.set(record.id, _next(record, now))
            else:
                self.queue.remove(record.id)

    async def _fire(self, ids: list[int], committed: list[Transaction]) -> int:
        """Fires ``ids`` in one transaction; if another master fired one of them first (the
        unique key), each on its own, so the others still fire. Returns the runs started; the
        transactions that committed are appended to ``committed`` (to be woken)."""
        fired: dict[int, tuple[int, datetime | None]]
        try:
            fired = await transact(self.ctx, functools.partial(_fire_all, ids=ids), defer=committed)
        except IntegrityError:
            fired = {}
            for schedule_id in ids:
                try:
                    one = functools.partial(_fire_all, ids=[schedule_id])
                    fired.update(await transact(self.ctx, one, defer=committed))
                except IntegrityError:
                    log.info("schedule %s: fired by another master", schedule_id)
                    fired[schedule_id] = (0, None)  # read again below
        stale = {s for s, (_, upcoming) in fired.items() if upcoming is None}
        for schedule_id, (_, upcoming) in fired.items():
            if upcoming is not None:
                self.queue.set(schedule_id, upcoming)
        if stale:
            await self._read(stale)
        return sum(started for started, _ in fired.values())


async def _fire_all(tx: Transaction, ids: Sequence[int]) -> dict[int, tuple[int, datetime | None]]:
    """Per schedule: the runs started and its next fire time (None: read it again)."""
    fired = await firing.fire(tx, ids)
    return {i: (len(f.started), f.next_fire) for i, f in fired.items()}


async def _start_queued(tx: Transaction, schedule_id: int) -> None:
    with contextlib.suppress(NotFound):  # deleted meanwhile
        await firing.start_queued(tx, schedule_id)


def _next(record: ScheduleRecord, now: datetime) -> datetime | None:
    """When the schedule is due next here: right away if fire times were missed since its last
    fire (the catch-up policy decides what fires), else its next fire time."""
    spec = record.spec
    cron, zone = compile_cron(spec.cron), ZoneInfo(spec.time_zone)
    after = record.last_fire_time or now
    return next_fire(cron, zone, after, spec.window)
