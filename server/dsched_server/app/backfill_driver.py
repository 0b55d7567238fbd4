"""Carries backfills on: advances a backfill when one of its runs ends on this master, and every
few seconds advances every RUNNING backfill (the fallback for a run that ended on a master that
died before advancing, or was stopped where no runner saw it). See ``app/backfills.py``."""

from __future__ import annotations

import logging
from collections.abc import Callable

from dsched_server.app import backfills
from dsched_server.app.context import AppContext
from dsched_server.app.transaction import transact
from dsched_server.background import Woken
from dsched_server.store import backfills as store

log = logging.getLogger(__name__)

SWEEP_S = 5.0


class BackfillDriver(Woken):
    def __init__(
        self, ctx: AppContext, *, enabled: Callable[[], bool], every: float = SWEEP_S
    ) -> None:
        super().__init__("backfills", every=every, enabled=enabled)
        self.ctx = ctx
        self._due: set[int] = set()

    def run_ended(self, backfill_id: int) -> None:
        """A run of the backfill ended here: advance it now."""
        self._due.add(backfill_id)
        self.wake()

    async def _pass(self) -> None:
        due, self._due = self._due, set()
        if not due:  # nothing was reported: the periodic look at every running backfill
            try:
                async with self.ctx.db.read() as conn:
                    due = set(await store.running_ids(conn))
            except Exception as exc:  # the database is away: the next pass tries again
                log.info("backfills not read: %s", exc)
                return
        for backfill_id in sorted(due):
            await self._advance(backfill_id)

    async def _advance(self, backfill_id: int) -> None:
        try:
            await transact(self.ctx, lambda tx: backfills.advance(tx, backfill_id))
        except Exception as exc:  # logged; the sweep comes back to it
            log.warning("backfill %s not advanced: %s", backfill_id, exc)
