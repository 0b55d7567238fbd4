"""The owner's fallback for controls whose nudge never arrived (ARCHITECTURE.md §4).

A master that records a control for another master's instance nudges the owner at once; the nudge
can be lost (the recording master died right after its commit, or gave up at the call's deadline
while the owner was unreachable). Now and then each master looks for pending controls of the
instances its epoch owns and hands them to their runners. Instances being taken over need no sweep:
the adopting master applies their pending controls when it restores them.
"""

from __future__ import annotations

import asyncio
import logging

from dsched.errors import Unavailable
from dsched_server.background import Background
from dsched_server.engine.messages import ApplyControls
from dsched_server.engine.runners import Runners
from dsched_server.engine.services import EngineServices
from dsched_server.store import controls as control_repo

log = logging.getLogger(__name__)

SWEEP_S = 5.0


class ControlSweep(Background):
    """``start``/``stop``; :meth:`sweep_once` is one pass."""

    def __init__(self, services: EngineServices, runners: Runners, *, every: float = SWEEP_S):
        super().__init__("control-sweep")
        self.s = services
        self.runners = runners
        self.every = every

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.every)
            try:
                await self.sweep_once()
            except Unavailable:
                pass  # a database outage (logged once by the store); the next pass tries again
            except Exception:
                log.exception("control sweep failed; the next pass tries again")

    async def sweep_once(self) -> int:
        """Hands the pending controls of this epoch's instances to their runners; returns how many
        instances had some."""
        async with self.s.db.read() as conn:
            ids = await control_repo.owned_with_pending(conn, self.s.epoch)
        found = 0
        for instance_id in ids:
            runner = self.runners.get(instance_id)
            if runner is not None and not runner.done:
                runner.post(ApplyControls())
                found += 1
        if found:
            log.info("control sweep: applying the pending controls of %d instance(s)", found)
        return found
