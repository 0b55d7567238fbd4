"""Taking over the work of dead incarnations: masters' instances and workers' attempts.

ZooKeeper says who is alive; the store says who may write (ARCHITECTURE.md §4). A master
incarnation is alive while its ephemeral node (whose heartbeat carries its epoch) exists; a worker
incarnation likewise, identified by (address, epoch).

*Masters.* An instance belongs to the epoch stamped on it. When that epoch is not among the live
masters, :func:`fail_over_epoch` moves all its owned instances to FAILOVER with a recovery command
each, in one transaction conditional on the dead epoch; whichever master claims a command restores
the instance and adopts the attempts still running on workers (``Execution.start``). Running it
twice changes nothing; a crash half-way leaves the old rows untouched, for the next check.

The master check runs as soon as a master node goes away: the store fences the old epoch's writes,
so a master that is only paused cannot undo the takeover. Checks run under a registry lock so that
masters do not race each other.

*Workers.* A worker incarnation is identified by (address, epoch); an epoch that changes under the
same address is the death of the old incarnation and the birth of a new one. An incarnation that
left the registry is taken for dead, and every master tells its own runners (which retire the
attempts it held, NEED_FAULT_TOLERANCE conditional on its epoch, and run them again), as soon as one
of these holds:

- another incarnation registered at its address (a worker binds its port, exclusively, before it
  registers; a worker that fenced itself registers again only after killing its tasks);
- nothing listens at its address any more (``WorkerClient.refused``);
- it has not come back within the failover delay. That delay gives a worker that is alive but cut
  off time to notice and fence itself (``dsched_worker.app.fence_deadline``) before its tasks run
  again elsewhere.

Wall clocks of different hosts are never compared.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from dsched.backoff import Backoff
from dsched.errors import Aborted, DschedError, Unavailable
from dsched.states import InstanceEventKind, WorkflowState
from dsched_server.background import Woken
from dsched_server.constants import MASTERS_PATH
from dsched_server.coord.registry import Registry
from dsched_server.core.transitions import OWNED_STATES
from dsched_server.engine.messages import WorkerGone
from dsched_server.engine.runners import Runners
from dsched_server.engine.services import EngineServices
from dsched_server.heartbeat import decode_heartbeat
from dsched_server.rpc.probe import PROBE_TIMEOUT_S
from dsched_server.store import events
from dsched_server.store import instances as instance_repo
from dsched_server.store.events import NewEvent

log = logging.getLogger(__name__)

FAILOVER_LOCK = "failover"
# Even without membership changes, look for orphans now and then: a master that crashed while
# holding the lock, or a store that was down during the last check, must not leave them behind.
FALLBACK_CHECK_S = 30.0
UNREADABLE_RETRY_S = 1.0  # a master node that cannot be decoded: look again this much later
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


@dataclass(frozen=True, slots=True)
class _Missing:
    """A worker incarnation gone from the registry and not known dead yet; ``timer`` fails it over
    at the end of the failover delay."""

    epoch: int
    timer: asyncio.TimerHandle


class Failover(Woken):
    """Watches the registry and runs master and worker failover for one master incarnation.

    The master feeds it the master nodes it watches anyway (:meth:`on_masters`); worker
    membership comes from the master's worker directory. ``enabled`` says whether it may act now
    (registered and connected). ``delay`` is the failover delay for workers whose death is not
    confirmed; the worker client's probe tells whether nothing listens at an address any more.
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
        super().__init__("failover", every=FALLBACK_CHECK_S, enabled=enabled)
        self.s = services
        self._registry = registry
        self._runners = runners
        self._delay = delay
        self._masters: set[int] | None = None
        self._workers: dict[str, int] | None = None  # address -> epoch of the live workers
        # Worker incarnations gone from the registry, not known dead yet, by address.
        self._missing: dict[str, _Missing] = {}
        self._retry: asyncio.TimerHandle | None = None
        self._probes: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        """Checks for orphans now, then whenever membership changes."""
        self._workers = dict(self.s.workers.live)
        self.s.workers.subscribe(self._on_workers)
        self.wake()
        await super().start()

    async def stop(self) -> None:
        for handle in [*(m.timer for m in self._missing.values()), self._retry]:
            if handle is not None:
                handle.cancel()
        self._missing.clear()
        await super().stop()
        for task in self._probes:
            task.cancel()
        await asyncio.gather(*self._probes, return_exceptions=True)

    def on_masters(self, children: Mapping[str, bytes]) -> None:
        """Takes every snapshot of the master nodes."""
        live = live_master_epochs(children)
        if live is None:
            return
        if self._masters is not None and self._masters - live:
            gone = sorted(self._masters - live)
            log.info("master epoch(s) %s left the registry; taking over their instances", gone)
            self.wake()
        self._masters = live

    def _on_workers(self) -> None:
        live = dict(self.s.workers.live)  # address -> epoch: one incarnation per address
        before, self._workers = self._workers, live
        if before is None:
            return
        for address, epoch in sorted(live.items()):
            missing = self._missing.get(address)
            if missing is not None and missing.epoch == epoch:
                del self._missing[address]  # its session survived after all: the node is back
                missing.timer.cancel()
            known = before.get(address, missing.epoch if missing is not None else None)
            if known is not None and known < epoch:
                # Also covers incarnations in between that this master never saw.
                self._worker_dead(address, epoch - 1, f"is back as epoch {epoch}")
        for address, epoch in sorted(before.items()):
            if address not in live:
                self._await_worker(address, epoch)

    def _await_worker(self, address: str, epoch: int) -> None:
        log.info(
            "worker %s (epoch %s) left the registry; failing its tasks over once it is known dead, "
            "at the latest in %.1fs unless it is back",
            address,
            epoch,
            self._delay,
        )
        loop = asyncio.get_running_loop()
        why = f"did not come back within {self._delay:g}s"
        timer = loop.call_later(self._delay, self._missing_dead, address, epoch, why)
        self._missing[address] = _Missing(epoch, timer)
        task = loop.create_task(self._confirm(address, epoch), name=f"probe {address}")
        self._probes.add(task)
        task.add_done_callback(self._probes.discard)

    async def _confirm(self, address: str, epoch: int) -> None:
        if await self.s.worker_client.refused(address, timeout=PROBE_TIMEOUT_S):
            self._missing_dead(address, epoch, "nothing listens at its address any more")

    def _missing_dead(self, address: str, epoch: int, why: str) -> None:
        missing = self._missing.get(address)
        if missing is not None and missing.epoch == epoch:
            self._worker_dead(address, epoch, why)

    def _worker_dead(self, address: str, epoch: int, why: str) -> None:
        """Fails over the attempts of every incarnation of ``address`` up to ``epoch``."""
        missing = self._missing.pop(address, None)
        if missing is not None:
            missing.timer.cancel()
        log.warning("worker %s (epoch %s or older) %s: failing its tasks over", address, epoch, why)
        self._runners.broadcast(WorkerGone(address, epoch, why))

    async def _pass(self) -> None:
        """A master check: recovers the dead masters' instances (retried while enabled)."""
        for delay in _RETRY.delays():
            try:
                async with self._registry.lock(FAILOVER_LOCK):
                    live = live_master_epochs(await self._registry.children(MASTERS_PATH))
                    if live is None:
                        log.warning("a master node is unreadable; failover check postponed")
                        loop = asyncio.get_running_loop()
                        self._retry = loop.call_later(UNREADABLE_RETRY_S, self.wake)
                        return
                    await recover_orphans(self.s, live | {self.s.epoch})
                # The masters that lost the race for the lock find nothing to do here, but wake
                # their consumers: the new recovery commands are partly in their slots.
                self.s.notifier.notify_commands()
                return
            except Aborted as exc:
                log.info("failover raced a writer (%s); retrying", exc)
            except Unavailable:
                pass  # the database is away (the store logs the outage once): retried
            except Exception:  # store or registry unavailable: retried, never fatal
                log.exception("failover check failed; retrying")
            if not self._enabled():
                return
            await asyncio.sleep(delay)
