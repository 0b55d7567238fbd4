"""The engine of a master without a network: real runners, dispatcher, worker directory,
command consumer and failover over a real SQLite store (a file in the test's directory) and an
in-process registry, with the workers replaced by :mod:`tests.fakes.worker`.

:class:`Engine` is the composition (the master's, minus its gRPC listeners); tests start runs
through the store as the API does, drive the fake workers and await what the engine writes.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest

from dsched.errors import AlreadyExists, NotFound
from dsched.server.clock import SystemClock
from dsched.server.coord.embedded import EmbeddedEnsemble, EmbeddedRegistry
from dsched.server.core.controls import ControlKind
from dsched.server.core.records import InstanceRecord, RunOptions, TaskInstanceRecord
from dsched.server.engine.commands import CommandConsumer
from dsched.server.engine.dispatcher import Dispatcher
from dsched.server.engine.failover import Failover
from dsched.server.engine.messages import Control
from dsched.server.engine.notifier import Notifier
from dsched.server.engine.runners import Runners
from dsched.server.engine.services import EngineServices
from dsched.server.engine.workers import WorkerDirectory
from dsched.server.store import definitions, servers
from dsched.server.store import instances as instance_repo
from dsched.server.store import task_instances as ti_repo
from dsched.server.store.database import Database
from dsched.spec import WorkflowSpec
from tests.fakes.worker import WAIT_S, FakeWorkers

T = TypeVar("T")
FAILOVER_DELAY_S = 0.2  # for a worker that left without being known dead


@dataclass
class Engine:
    """One master's engine (the master's composition minus its gRPC listeners)."""

    db: Database
    workers: FakeWorkers
    registry: EmbeddedRegistry
    directory: WorkerDirectory
    dispatcher: Dispatcher
    services: EngineServices
    runners: Runners
    consumer: CommandConsumer
    failover: Failover
    stopped: bool = False

    @property
    def epoch(self) -> int:
        return self.services.epoch

    async def crash(self) -> None:
        """Stops everything without handing anything over, as a killed master would (its
        instances stay stamped with its epoch). Idempotent."""
        if self.stopped:
            return
        self.stopped = True
        await self.consumer.stop()
        await self.failover.stop()
        await self.runners.stop_all()
        await self.services.cancel_background()
        await self.dispatcher.stop()
        await self.directory.stop()
        await self.registry.stop()

    async def start_run(self, spec: WorkflowSpec, **options: Any) -> int:
        """Stores ``spec`` (once per project/name) and a START command for it, as StartWorkflow
        does, then wakes the consumer; returns the instance id."""
        now = datetime.now(UTC)
        async with self.db.transaction() as conn:
            try:
                workflow = await definitions.get_workflow(conn, spec.project, spec.name)
            except NotFound:
                with contextlib.suppress(AlreadyExists):
                    await definitions.create_project(conn, spec.project, "", now)
                workflow = await definitions.create_workflow(conn, spec, now)
            project = await definitions.get_project(conn, spec.project)
            run = RunOptions(**options)
            instance_id = await instance_repo.create_instance(conn, workflow, project.id, run, now)
        self.services.notifier.notify_commands(instance_id)
        return instance_id

    async def instance(self, instance_id: int) -> InstanceRecord:
        async with self.db.read() as conn:
            return await instance_repo.get_instance(conn, instance_id)

    async def attempts(self, instance_id: int) -> list[TaskInstanceRecord]:
        """Every attempt of the instance, superseded ones included, in creation order."""
        async with self.db.read() as conn:
            return await ti_repo.list_for_instance(
                conn, instance_id, include_superseded=True, after=None, limit=1000
            )

    async def until(
        self, instance_id: int, done: Callable[[InstanceRecord], bool] = lambda i: i.state.terminal
    ) -> InstanceRecord:
        """Waits (bounded) until the stored instance satisfies ``done``."""
        return await self._until(instance_id, self.instance, done)

    async def tasks_until(
        self, instance_id: int, done: Callable[[list[TaskInstanceRecord]], bool]
    ) -> list[TaskInstanceRecord]:
        """Waits (bounded) until the instance's attempts (all of them) satisfy ``done``."""
        return await self._until(instance_id, self.attempts, done)

    async def _until(
        self, instance_id: int, read: Callable[[int], Awaitable[T]], done: Callable[[T], bool]
    ) -> T:
        # Woken by the runner's notifications, never by polling on a timer: take the signal,
        # then read, so that a change in between still wakes us.
        notifier = self.services.notifier
        async with asyncio.timeout(WAIT_S):
            while True:
                signal = notifier.signal(instance_id)
                value = await read(instance_id)
                if done(value):
                    return value
                await signal.wait()

    async def control(self, instance_id: int, kind: ControlKind) -> InstanceRecord:
        """A pause or stop sent to this master, which drives the instance."""
        runner = self.runners.get(instance_id)
        assert runner is not None, f"no runner drives instance {instance_id}"
        reply: asyncio.Future[InstanceRecord] = asyncio.get_running_loop().create_future()
        request_id = f"test-{kind.value}-{instance_id}"
        runner.post(Control(kind, request_id, self.services.address, reply))
        async with asyncio.timeout(WAIT_S):
            return await reply


def _reload(_instance_id: int, _pins: Mapping[int, str]) -> None:
    raise AssertionError("no batch may fail against a healthy SQLite store")


@dataclass
class World:
    """What the masters of a test share: the store, the registry and the fake workers."""

    db: Database
    ensemble: EmbeddedEnsemble
    workers: FakeWorkers
    masters: list[Engine] = field(default_factory=list)

    async def master(self) -> Engine:
        """Starts a master engine (a new epoch). It does not register in the registry, so a
        master started after it treats its epoch as dead: start the next one only to take over
        from a crashed one (:meth:`crash`)."""
        n = len(self.masters)
        address, cluster = f"127.0.0.1:{7001 + 2 * n}", f"127.0.0.1:{7002 + 2 * n}"
        registry = EmbeddedRegistry(self.ensemble)
        await registry.start()
        clock = SystemClock()
        directory = WorkerDirectory(
            registry,
            clock,
            selector="round_robin",
            warmup=timedelta(0),
            on_left=self.workers.forget,
        )
        dispatcher = Dispatcher(directory, self.workers)
        async with self.db.transaction() as conn:
            epoch = await servers.new_epoch(conn, "MASTER", address, clock.now())
        services = EngineServices(
            db=self.db,
            clock=clock,
            dispatcher=dispatcher,
            workers=directory,
            worker_client=self.workers,
            notifier=Notifier(),
            address=address,
            cluster_address=cluster,
            epoch=epoch,
            default_group="default",
            reload=_reload,
            failover_delay=FAILOVER_DELAY_S,
        )
        runners = Runners()
        self.workers.owners[cluster] = runners
        consumer = CommandConsumer(services, runners)
        failover = Failover(
            services, registry, runners, delay=FAILOVER_DELAY_S, enabled=lambda: True
        )
        await directory.start()
        await dispatcher.start()
        await failover.start()
        await consumer.start()
        engine = Engine(
            self.db,
            self.workers,
            registry,
            directory,
            dispatcher,
            services,
            runners,
            consumer,
            failover,
        )
        self.masters.append(engine)
        return engine


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[World]:
    db = Database(f"sqlite+aiosqlite:///{tmp_path / 'meta.db'}")
    await db.start()
    ensemble = EmbeddedEnsemble(tmp_path / "registry")
    world = World(db, ensemble, FakeWorkers(ensemble))
    try:
        yield world
    finally:
        for master in reversed(world.masters):
            await master.crash()
        await world.workers.close()
        await db.stop()


@pytest.fixture
async def engine(world: World) -> Engine:
    """One master engine with no workers yet."""
    return await world.master()
