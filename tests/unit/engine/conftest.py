"""The engine of a master without a network: real runners, dispatcher, worker directory,
command consumer and failover over a real SQLite store (a file in the test's directory) and an
in-process registry, with the workers replaced by :mod:`tests.fakes.worker`.

:class:`Engine` is the composition (the master's, minus its gRPC listeners); tests start and
control runs through the application layer (what the gRPC handlers call), drive the fake workers
and await what the engine writes.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import pytest
from grpc import aio

from dsched.errors import AlreadyExists, NotFound
from dsched.options import ReleaseState
from dsched.spec import WorkflowSpec
from dsched_server.app import controls, runs
from dsched_server.app.context import AppContext
from dsched_server.app.runs import StartRun
from dsched_server.app.transaction import Transaction, transact
from dsched_server.clock import SystemClock
from dsched_server.coord.embedded import EmbeddedEnsemble, EmbeddedRegistry
from dsched_server.core.controls import ControlKind
from dsched_server.core.records import InstanceRecord, RunOptions, TaskInstanceRecord
from dsched_server.datasource_key import DatasourceKey
from dsched_server.engine.commands import CommandConsumer
from dsched_server.engine.dispatcher import Dispatcher
from dsched_server.engine.failover import Failover
from dsched_server.engine.notifier import Notifier
from dsched_server.engine.runners import Runners
from dsched_server.engine.services import EngineServices
from dsched_server.engine.workers import WorkerDirectory
from dsched_server.store import definitions, servers
from dsched_server.store import instances as instance_repo
from dsched_server.store import task_instances as ti_repo
from dsched_server.store.database import Database
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
    app: AppContext
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
        """Stores ``spec`` online (once per project and name), then starts a run of it through
        the application layer, as StartWorkflow does; returns the instance id."""

        async def define(tx: Transaction) -> None:
            try:
                await definitions.get_workflow(tx.conn, spec.project, spec.name)
                return
            except NotFound:
                pass
            with contextlib.suppress(AlreadyExists):
                await definitions.create_project(tx.conn, spec.project, "", tx.now)
            await definitions.create_workflow(tx.conn, spec, tx.now)
            await definitions.set_release_state(
                tx.conn, spec.project, spec.name, ReleaseState.ONLINE, tx.now
            )

        await transact(self.app, define)
        run = StartRun(spec.project, spec.name, RunOptions(**options))
        instance = await transact(self.app, lambda tx: runs.start(tx, run))
        return instance.id

    async def resume(self, instance_id: int) -> None:
        """Resumes a paused or stopped instance through the application layer."""
        await transact(self.app, lambda tx: runs.resume(tx, instance_id))

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
        """A pause or stop sent to this master (which drives the instance) through the
        application layer; the instance once the control is applied."""
        done = await controls.control(self.app, instance_id, kind, "", WAIT_S)
        assert done.applied
        return done.instance


class _NoPeers:
    """No other master is reachable (the tests' masters drive their own instances)."""

    async def apply_controls(self, address: str, instance_id: int, timeout: float) -> bool:
        return False


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
            datasource_key=DatasourceKey(Path(f"{self.db.url.database}.key"), create=True),
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
        app = AppContext(
            db=self.db,
            clock=clock,
            notifier=services.notifier,
            runners=runners,
            peers=_NoPeers(),
            address=address,
            owner_cluster_address=lambda _address: "",
            epoch=lambda: epoch,
        )
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
            app,
        )
        self.masters.append(engine)
        return engine


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test here runs without a network: opening a gRPC channel or server, or connecting or
    binding a socket, fails the test (the workers are fakes, the registry is in-process, the
    store is a SQLite file)."""

    def refuse(*_args: object, **_kwargs: object) -> NoReturn:
        raise AssertionError("engine unit tests use no network")

    for name in ("insecure_channel", "server"):
        monkeypatch.setattr(aio, name, refuse)
    for name in ("connect", "connect_ex", "bind"):
        monkeypatch.setattr(socket.socket, name, refuse)


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
