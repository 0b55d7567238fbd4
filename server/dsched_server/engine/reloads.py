"""Keeps every instance this master owns driven (ARCHITECTURE.md §4): reloads and the sweep.

A runner whose batch failed (the store went away, a row did not match) stops and asks for a
*reload*: the instance is rebuilt from the store and driven again. While the store is away that
read fails too, so a reload is retried with back-off, and woken as soon as the database is back,
until it works or the instance is no longer this epoch's to drive (ownership lost to a failover,
or it ended). At most one reload per instance is under way.

The *sweep* is the fallback for whatever still slips through: every ``interval`` seconds (and when
the database comes back) it lists the instances stamped with this master's epoch in an owned state
and reloads each one that has neither a runner nor a reload under way. Nothing else would ever
drive them: their master is alive, so no failover takes them.

*Pins.* A runner may have sent an attempt to a worker without having recorded it (the write of the
dispatch failed). Restored from the store, the attempt looks never dispatched; sent to another
worker it would run twice. So a reload carries over where each sent attempt went, and the rebuilt
runner sends it to the same worker again, which answers ALREADY_ACCEPTED (dispatch is idempotent on
the attempt there).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping

from dsched.backoff import Backoff
from dsched.errors import NotFound, Unavailable
from dsched_server.background import Woken
from dsched_server.core.transitions import OWNED_STATES
from dsched_server.engine.runner import InstanceRunner
from dsched_server.engine.runners import Runners
from dsched_server.engine.services import EngineServices
from dsched_server.store import instances as instance_repo
from dsched_server.store.database import Conn

log = logging.getLogger(__name__)

DEFAULT_SWEEP_INTERVAL_S = 15.0
SWEEP_LIMIT = 100_000  # owned instances listed per sweep (far above what a master drives)
_RETRY = Backoff(initial=0.2, maximum=5.0)

Build = Callable[[Conn, int], Awaitable[InstanceRunner]]


class Reloads(Woken):
    """Reloads (with retry) and the sweep of one master. ``build`` restores a runner from the
    store; ``enabled`` says whether the master may drive instances now (registered, connected)."""

    def __init__(
        self,
        services: EngineServices,
        runners: Runners,
        build: Build,
        *,
        interval: float = DEFAULT_SWEEP_INTERVAL_S,
        enabled: Callable[[], bool] = lambda: True,
    ) -> None:
        super().__init__("instance-sweep", every=interval, enabled=enabled)
        self.s = services
        self._runners = runners
        self._build = build
        self._pending: dict[int, asyncio.Task[None]] = {}
        self._pins: dict[int, dict[int, str]] = {}
        self.reloaded = 0  # runners restored by a reload (observability and tests)
        self.swept = 0  # instances the sweep found undriven

    async def stop(self) -> None:
        await super().stop()
        tasks = list(self._pending.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._pending.clear()
        self._pins.clear()

    def cancel_all(self) -> None:
        """Drops every reload under way (the master lost its epoch: none of these is its own)."""
        for task in self._pending.values():
            task.cancel()
        self._pending.clear()
        self._pins.clear()

    def pending(self, instance_id: int) -> bool:
        return instance_id in self._pending

    def request(self, instance_id: int, pins: Mapping[int, str] | None = None) -> None:
        """Reloads ``instance_id`` (retrying until it works or is not this epoch's). ``pins``:
        task instance id -> the worker its attempt was sent to (see the module docstring)."""
        self._pins.setdefault(instance_id, {}).update(pins or {})
        if instance_id not in self._pending:
            task = asyncio.create_task(self._reload(instance_id), name=f"reload-{instance_id}")
            self._pending[instance_id] = task
            task.add_done_callback(lambda t: self._done(instance_id, t))

    def _done(self, instance_id: int, task: asyncio.Task[None]) -> None:
        if self._pending.get(instance_id) is task:
            del self._pending[instance_id]
            self._pins.pop(instance_id, None)

    async def _reload(self, instance_id: int) -> None:
        availability = self.s.db.availability
        logged = False
        for delay in _RETRY.delays():
            try:
                await self._reload_once(instance_id)
                return
            except Unavailable:
                # The database is away: wait for it (or the back-off, whichever comes first).
                log.info("instance %s: reload waits for the database", instance_id)
                await availability.wait(delay)
                continue
            except Exception:  # bad data or a bug: said once with its traceback, then retried
                if not logged:
                    log.exception("instance %s: reload failed; retrying", instance_id)
                    logged = True
            await asyncio.sleep(delay)

    async def _reload_once(self, instance_id: int) -> None:
        epoch = self.s.epoch
        try:
            async with self.s.db.read() as conn:
                instance = await instance_repo.get_instance(conn, instance_id)
                if instance.epoch != epoch or instance.state not in OWNED_STATES:
                    log.info(
                        "instance %s is %s under epoch %s: not this master's (epoch %s) to drive",
                        instance_id,
                        instance.state.value,
                        instance.epoch,
                        epoch,
                    )
                    return
                runner = await self._build(conn, instance_id)
        except NotFound:
            return
        if self._runners.get(instance_id) is None and self.s.epoch == epoch:
            runner.state.pins.update(self._pins.get(instance_id, {}))
            self._runners.add(runner)
            self.reloaded += 1
            log.info("instance %s reloaded from the store", instance_id)

    async def _pass(self) -> int:
        return await self.sweep()

    async def sweep(self) -> int:
        """Reloads the owned instances nothing drives; returns how many it found."""
        epoch = self.s.epoch
        try:
            async with self.s.db.read() as conn:
                owned = await instance_repo.owned_by(
                    conn, self.s.address, epoch, OWNED_STATES, SWEEP_LIMIT
                )
        except Unavailable:
            return 0  # the next sweep (or the database's return) tries again
        except Exception:  # never fatal: this is the fallback of the fallback
            log.exception("instance sweep failed")
            return 0
        if self.s.epoch != epoch:
            return 0
        undriven = [i for i in owned if self._runners.get(i) is None and i not in self._pending]
        for instance_id in undriven:
            log.warning(
                "instance %s is owned by this master (epoch %s) but nothing drives it: reloading",
                instance_id,
                epoch,
            )
            self.request(instance_id)
        self.swept += len(undriven)
        return len(undriven)
