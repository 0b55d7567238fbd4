"""Taking over the work of dead incarnations: masters' instances and workers' attempts.

ZooKeeper says who is alive; the store says who may write (ARCHITECTURE.md §4). A master
incarnation is alive while its ephemeral node (whose heartbeat carries its epoch) exists; a worker
incarnation likewise, identified by (address, epoch).

*Masters.* An instance belongs to the epoch stamped on it. When that epoch is not among the live
masters, :func:`fail_over_epoch` moves all its owned instances to FAILOVER with a recovery command
each, in one transaction conditional on the dead epoch; whichever master claims a command restores
the instance and adopts the attempts still running on workers (``Execution.start``). Running it
twice changes nothing; a crash half-way leaves the old rows untouched, for the next check.

*Workers.* A worker incarnation that left the registry and has not come back (same address and
epoch) within the failover delay is dead: every master tells its own runners, which retire the
attempts that incarnation held (NEED_FAULT_TOLERANCE, conditional on its epoch) and run them again.

The delay gives a disconnected but living process time to notice and fence itself (a worker kills
its tasks at half its session timeout) before anyone else acts; checks run under a registry lock so
that masters do not race each other. Wall clocks of different hosts are never compared.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Iterable, Mapping

from dsched.errors import Aborted, DschedError
from dsched.server.constants import MASTERS_PATH
from dsched.server.coord.registry import Registry
from dsched.server.core.backoff import Backoff
from dsched.server.core.transitions import OWNED_STATES
from dsched.server.engine.messages import WorkerGone
from dsched.server.engine.runners import Runners
from dsched.server.engine.services import EngineServices
from dsched.server.heartbeat import decode_heartbeat
from dsched.server.store import events
from dsched.server.store import instances as instance_repo
from dsched.server.store.events import NewEvent
from dsched.states import InstanceEventKind, WorkflowState

log = logging.getLogger(__name__)

FAILOVER_LOCK = "failover"
# Even without membership changes, look for orphans now and then: a master that crashed while
# holding the lock, or a store that was down during the last check, must not leave them behind.
FALLBACK_CHECK_S = 30.0
_RETRY = Backoff(initial=0.2, maximum=5.0)


async def fail_over_epoch(services: EngineServices, epoch: int, why: str) -> int:
    """Queues the recovery of every owned instance of master epoch ``epoch``; returns how many."""
    now = services.clock.now()
    async with services.db.transaction() as conn:
        taken = await instance_repo.fail_over_epoch(conn, epoch, OWNED_STATES, now)
        await events.append(
            conn,
            [
                NewEvent(
                    workflow_instance_id=instance_id,
                    workflow_state=WorkflowState.FAILOVER,
                    kind=InstanceEventKind.FAILOVER,
                    message=f"owner epoch {epoch} {why}; recovering from {state}",
                )
                for instance_id, state in taken
            ],
            now,
        )
    if taken:
        services.metrics.instances_taken_over += len(taken)
        log.warning(
            "took over %d instance(s) of master epoch %s (%s): %s",
            len(taken),
            epoch,
            why,
            [i for i, _ in taken][:20],
        )
        services.notifier.notify_commands()
    return len(taken)


async def recover_orphans(services: EngineServices, live_epochs: Iterable[int]) -> int:
    """Queues the recovery of every owned instance whose epoch is not live; returns the count."""
    async with services.db.read() as conn:
        dead = await instance_repo.dead_owner_epochs(conn, set(live_epochs), OWNED_STATES)
    return sum([await fail_over_epoch(services, epoch, "is gone") for epoch in dead])


def live_master_epochs(children: Mapping[str, bytes]) -> set[int] | None:
    """The epochs of the registered masters; None if a node cannot be read (then nobody's work
    may be taken: the unreadable member might own it)."""
    epochs: set[int] = set()
    for data in children.values():
        try:
            epochs.add(decode_heartbeat(data).epoch)
        except DschedError:
            return None
    return epochs


class Failover:
    """Watches the registry and runs master and worker failover for one master incarnation.

    The master feeds it the master nodes it watches anyway (:meth:`on_masters`); worker
    membership comes from the master's worker directory. ``enabled`` says whether it may act now
    (registered and connected).
    """

    def __init__(
        self,
        services: EngineServices,
        registry: Registry,
        runners: Runners,
        *,
        delay: float,
        enabled: Callable[[], bool],
    ) -> None:
        self.s = services
        self._registry = registry
        self._runners = runners
        self._delay = delay
        self._enabled = enabled
        self._masters: set[int] | None = None
        self._workers: set[tuple[str, int]] | None = None
        self._due = asyncio.Event()
        self._handles: list[asyncio.TimerHandle] = []
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Checks for orphans now, then whenever membership changes (after the delay)."""
        self._workers = self.s.workers.live
        self.s.workers.subscribe(self._on_workers)
        self._due.set()
        self._task = asyncio.create_task(self._run(), name="failover")

    async def stop(self) -> None:
        for handle in self._handles:
            handle.cancel()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    def check_soon(self) -> None:
        """Asks for a master check after the failover delay."""
        self._later(self._due.set)

    def _later(self, callback: Callable[[], None]) -> None:
        loop = asyncio.get_running_loop()
        self._handles = [h for h in self._handles if not h.cancelled()]
        self._handles.append(loop.call_later(self._delay, callback))

    def on_masters(self, children: Mapping[str, bytes]) -> None:
        """Takes every snapshot of the master nodes."""
        live = live_master_epochs(children)
        if live is None:
            return
        if self._masters is not None and self._masters - live:
            gone = sorted(self._masters - live)
            log.info("master epoch(s) %s left the registry; checking in %.1fs", gone, self._delay)
            self.check_soon()
        self._masters = live

    def _on_workers(self) -> None:
        live = self.s.workers.live
        if self._workers is not None:
            for address, epoch in sorted(self._workers - live):
                log.info(
                    "worker %s (epoch %s) left the registry; failing its tasks over in %.1fs "
                    "unless it is back",
                    address,
                    epoch,
                    self._delay,
                )
                self._later(functools.partial(self._worker_check, address, epoch))
        self._workers = live

    def _worker_check(self, address: str, epoch: int) -> None:
        if self._workers is not None and (address, epoch) in self._workers:
            return  # its session survived after all (the node came back with the same epoch)
        self._runners.broadcast(WorkerGone(address, epoch))

    async def _run(self) -> None:
        while True:
            try:
                async with asyncio.timeout(FALLBACK_CHECK_S):
                    await self._due.wait()
            except TimeoutError:
                pass
            self._due.clear()
            if self._enabled():
                await self._check_masters()

    async def _check_masters(self) -> None:
        for delay in _RETRY.delays():
            try:
                async with self._registry.lock(FAILOVER_LOCK):
                    live = live_master_epochs(await self._registry.children(MASTERS_PATH))
                    if live is None:
                        log.warning("a master node is unreadable; failover check postponed")
                        self.check_soon()
                        return
                    await recover_orphans(self.s, live | {self.s.epoch})
                # The masters that lost the race for the lock find nothing to do here, but wake
                # their consumers: the new recovery commands are partly in their slots.
                self.s.notifier.notify_commands()
                return
            except Aborted as exc:
                log.info("failover raced a writer (%s); retrying", exc)
            except Exception:  # store or registry unavailable: retried, never fatal
                log.exception("failover check failed; retrying")
            if not self._enabled():
                return
            await asyncio.sleep(delay)
