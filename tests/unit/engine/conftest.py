"""The engine of one master without a network: real runners, dispatcher, worker directory,
command consumer and failover over a real SQLite store (a file in the test's directory) and an
in-process registry, with the workers replaced by :mod:`tests.fakes.worker`.

:class:`Engine` is the composition (the master's, minus its gRPC listeners); tests start runs
through the store as the API does, drive the fake workers and await what the engine writes.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
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

MASTER = "127.0.0.1:7001"
CLUSTER = "127.0.0.1:7002"
T = TypeVar("T")
FAILOVER_DELAY_S = 0.2  # for a worker that left without being known dead


@dataclass
class Engine:
    db: Database
    workers: FakeWorkers
    directory: WorkerDirectory
    dispatcher: Dispatcher
    services: EngineServices
    runners: Runners
    consumer: CommandConsumer
    failover: Failover

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
        runner.post(Control(kind, f"test-{kind.value}-{instance_id}", MASTER, reply))
        async with asyncio.timeout(WAIT_S):
            return await reply


def _reload(_instance_id: int, _pins: Mapping[int, str]) -> None:
    raise AssertionError("no batch may fail against a healthy SQLite store")


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[Engine]:
    db = Database(f"sqlite+aiosqlite:///{tmp_path / 'meta.db'}")
    await db.start()
    ensemble = EmbeddedEnsemble(tmp_path / "registry")
    registry = EmbeddedRegistry(ensemble)
    await registry.start()
    clock = SystemClock()
    fakes = FakeWorkers(ensemble)
    directory = WorkerDirectory(
        registry, clock, selector="round_robin", warmup=timedelta(0), on_left=fakes.forget
    )
    dispatcher = Dispatcher(directory, fakes)
    async with db.transaction() as conn:
        epoch = await servers.new_epoch(conn, "MASTER", MASTER, clock.now())
    services = EngineServices(
        db=db,
        clock=clock,
        dispatcher=dispatcher,
        workers=directory,
        worker_client=fakes,
        notifier=Notifier(),
        address=MASTER,
        cluster_address=CLUSTER,
        epoch=epoch,
        default_group="default",
        reload=_reload,
        failover_delay=FAILOVER_DELAY_S,
    )
    runners = Runners()
    fakes.runners = runners
    consumer = CommandConsumer(services, runners)
    failover = Failover(services, registry, runners, delay=FAILOVER_DELAY_S, enabled=lambda: True)
    await directory.start()
    await dispatcher.start()
    await failover.start()
    await consumer.start()
    try:
        yield Engine(db, fakes, directory, dispatcher, services, runners, consumer, failover)
    finally:
        await consumer.stop()
        await failover.stop()
        await runners.stop_all()
        await services.cancel_background()
        await dispatcher.stop()
        await directory.stop()
        await fakes.close()
        await registry.stop()
        await db.stop()
