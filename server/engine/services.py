"""What instance runners share: the store, the clock, the dispatcher, workers, and worker calls
(through :class:`~dsched.server.engine.worker_client.WorkerClient`)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any

from dsched.server.constants import FAILOVER_DELAY_S, KILL_GRACE_S
from dsched.server.core.ports import Clock
from dsched.server.core.records import InstanceRecord
from dsched.server.engine.dispatcher import Dispatcher
from dsched.server.engine.effects import Mailbox
from dsched.server.engine.messages import KillUnanswered, TakeOverResult
from dsched.server.engine.notifier import Notifier
from dsched.server.engine.worker_client import WorkerCallError, WorkerClient
from dsched.server.engine.workers import WorkerDirectory, WorkerRef
from dsched.server.rpc.probe import PROBE_TIMEOUT_S
from dsched.server.store import instances as instance_repo
from dsched.server.store.database import Database

log = logging.getLogger(__name__)

WORKER_CALL_TIMEOUT_S = 10.0


@dataclass(slots=True)
class EngineMetrics:
    """Counters exposed for tests and operators through GetServerInfo (since this process started).

    ``stale_events``: worker reports rejected because the reporting incarnation does not own the
    attempt. ``stale_writes``: owner writes that changed nothing because another epoch owns the
    row now. ``ownership_lost``: instances dropped for that reason. ``instances_taken_over``:
    instances of dead master epochs this master queued for recovery. ``tasks_failed_over``:
    attempts re-run because their worker incarnation died.
    """

    stale_events: int = 0
    stale_writes: int = 0
    ownership_lost: int = 0
    commands_claimed: int = 0
    commands_lost_race: int = 0
    instances_taken_over: int = 0
    tasks_failed_over: int = 0
    illegal_transitions: int = 0  # batches the store refused for a transition the tables forbid


@dataclass(slots=True, kw_only=True)
class EngineServices:
    db: Database
    clock: Clock
    dispatcher: Dispatcher
    workers: WorkerDirectory
    worker_client: WorkerClient  # every call to a worker (engine/worker_client.py)
    notifier: Notifier
    address: str  # the client listener: this master's identity in the store and the registry
    cluster_address: str  # the cluster listener, where workers send this master's task events
    epoch: int
    default_group: str
    # Drive an instance again from the store (a runner's batch failed): instance id, and the
    # worker each attempt that runner sent but may not have recorded went to (engine/reloads.py).
    reload: Callable[[int, Mapping[int, str]], None]
    failover_delay: float = FAILOVER_DELAY_S
    dispatch_timeout: float = 0.0  # the default of runs that set none; 0: no limit
    metrics: EngineMetrics = field(default_factory=EngineMetrics)
    _tasks: set[asyncio.Task[Any]] = field(default_factory=set)

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        """Runs a fire-and-forget coroutine, keeping a reference so it is not collected."""
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def cancel_background(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def kill_task(self, runner: Mailbox, ti_id: int, attempt: int, target: str) -> None:
        """Asks the worker to kill an attempt; if it has none, ends it KILLED after a grace."""
        found = False
        if target:
            try:
                found = await self.worker_client.kill(
                    target, ti_id, attempt, "stopped by the master", timeout=WORKER_CALL_TIMEOUT_S
                )
            except WorkerCallError as err:
                log.warning("kill of task instance %s on %s failed: %s", ti_id, target, err.code)
                if self.workers.get(target) is not None:
                    return  # alive but unreachable now: its result (or a failover) settles it
        if not found:
            runner.schedule(KILL_GRACE_S, KillUnanswered(ti_id))

    async def take_over(
        self, runner: Mailbox, ti_id: int, attempt: int, host: str, worker_epoch: int
    ) -> None:
        """Tells the worker holding an adopted attempt that this master owns it now. The attempt is
        lost at once if another incarnation serves its worker's address or nothing listens there
        any more; a worker that is only missing from the registry gets the failover delay to come
        back (or to fence itself, if it is only cut off) before its attempt is declared lost."""
        found = False
        live = await self._incarnation(host, worker_epoch) if host else None
        if live is not None:
            try:
                found = await self.worker_client.take_over(
                    host,
                    ti_id,
                    attempt,
                    owner_address=self.cluster_address,
                    owner_epoch=runner.instance.epoch,
                    timeout=WORKER_CALL_TIMEOUT_S,
                )
            except WorkerCallError as err:
                log.warning("take-over of task instance %s on %s failed: %s", ti_id, host, err.code)
        runner.post(TakeOverResult(ti_id, found))

    async def _incarnation(self, host: str, epoch: int) -> WorkerRef | None:
        """The worker incarnation ``(host, epoch)`` if it is registered (after the failover delay
        if it is missing but not known dead), else None."""
        live = self.workers.get(host)
        if live is None:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + self.failover_delay
            probe_timeout = min(self.failover_delay, PROBE_TIMEOUT_S)
            if await self.worker_client.refused(host, timeout=probe_timeout):
                return None
            await asyncio.sleep(max(0.0, deadline - loop.time()))
            live = self.workers.get(host)
        return live if live is not None and live.epoch == epoch else None

    async def reply_with_instance(
        self, instance_id: int, future: asyncio.Future[InstanceRecord]
    ) -> None:
        try:
            async with self.db.read() as conn:
                record = await instance_repo.get_instance(conn, instance_id)
        except Exception as exc:  # the database went away after the commit: the caller retries
            if not future.done():
                future.set_exception(exc)
            return
        if not future.done():
            future.set_result(record)
