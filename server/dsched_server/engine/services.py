"""What the engine's parts share (the one context): the store, the clock, the dispatcher, workers
and the :class:`~dsched_server.engine.worker_client.WorkerClient`, the master's identity and
settings, its counters and its background tasks. What a runner's batch does with them after its
commit is :class:`~dsched_server.engine.executor.EffectExecutor`'s."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any

from dsched_server.constants import FAILOVER_DELAY_S
from dsched_server.core.ports import Clock
from dsched_server.datasource_key import DatasourceKey
from dsched_server.engine.dependency_waits import DependencyWaits
from dsched_server.engine.dispatcher import Dispatcher
from dsched_server.engine.notifier import Notifier
from dsched_server.engine.worker_client import WorkerClient
from dsched_server.engine.workers import WorkerDirectory
from dsched_server.store.database import Database
from dsched_server.store.group_commit import GroupCommit


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
    # Decrypts the passwords of the datasources SQL and PROCEDURE attempts use (at dispatch).
    datasource_key: DatasourceKey
    failover_delay: float = FAILOVER_DELAY_S
    dispatch_timeout: float = 0.0  # the default of runs that set none; 0: no limit
    metrics: EngineMetrics = field(default_factory=EngineMetrics)
    dependency_waits: DependencyWaits = field(default_factory=DependencyWaits)
    # A run of a backfill ended here (its id): the backfill may start its next dates.
    on_backfill_run_ended: Callable[[int], None] = lambda _backfill_id: None
    # A run a schedule started ended here (the schedule's id): a queued fire time may start.
    on_schedule_run_ended: Callable[[int], None] = lambda _schedule_id: None
    # The runners' batches, several in one transaction when they are ready together.
    commits: GroupCommit = field(init=False)
    _tasks: set[asyncio.Task[Any]] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.commits = GroupCommit(self.db)

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        """Runs a fire-and-forget coroutine, keeping a reference so it is not collected."""
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def cancel_background(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
