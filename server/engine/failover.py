"""Taking over instances whose owning master incarnation is dead.

An instance belongs to the epoch stamped on it. When that epoch is not among the live masters, the
instance is moved to FAILOVER with a recovery command in one transaction that is conditional on the
dead epoch and the state it had; whichever master claims the command restores the state and adopts
the attempts still running on workers (see ``Execution.start``). Wall clocks are never compared.
Crashing half-way leaves either the old row untouched (retried next time) or the row and its command
both written.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from dsched.server.core.transitions import OWNED_STATES
from dsched.server.engine.services import EngineServices
from dsched.server.store import events
from dsched.server.store import instances as instance_repo
from dsched.server.store.events import NewEvent
from dsched.states import WorkflowState

log = logging.getLogger(__name__)


async def recover_orphans(services: EngineServices, live_epochs: Iterable[int]) -> int:
    """Queues the recovery of every owned instance whose epoch is not live; returns the count."""
    live = set(live_epochs)
    async with services.db.read() as conn:
        orphans = await instance_repo.owned_by_dead_epochs(conn, live, OWNED_STATES)
    recovered = 0
    for instance_id, epoch, state in orphans:
        now = services.clock.now()
        async with services.db.transaction() as conn:
            if not await instance_repo.mark_failover(conn, instance_id, epoch, state, now):
                continue
            await events.append(
                conn,
                [
                    NewEvent(
                        workflow_instance_id=instance_id,
                        workflow_state=WorkflowState.FAILOVER,
                        kind="FAILOVER",
                        message=f"owner epoch {epoch} is gone; recovering from {state}",
                    )
                ],
                now,
            )
        recovered += 1
        log.info("instance %s of dead epoch %s queued for recovery", instance_id, epoch)
    if recovered:
        services.notifier.notify_commands()
    return recovered
