"""A master process: the gRPC API, command consumption, the DAG engine and dispatch.

Start order: store (migrated) -> gRPC server (to learn the bound address) -> a new epoch -> worker
directory and dispatcher -> registration in the registry -> recovery of instances whose owner epoch
is dead -> command consumer. ``stop`` reverses it; instances this master was driving stay owned by
its (now dead) epoch in the store and are recovered by the next master that starts or sees it gone.
"""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from dsched.server.api.context import MasterContext
from dsched.server.api.log_proxy import LogProxy
from dsched.server.api.master_servicer import MasterServicer
from dsched.server.api.task_events import TaskEventServicer
from dsched.server.clock import SystemClock
from dsched.server.constants import (
    DEFAULT_MASTER_PORT,
    DEFAULT_WORKER_GROUP,
    HEARTBEAT_INTERVAL_S,
    MASTERS_PATH,
)
from dsched.server.coord.registry import ConnectionState, Registry
from dsched.server.core.ports import Clock
from dsched.server.engine.commands import CommandConsumer
from dsched.server.engine.dispatcher import Dispatcher
from dsched.server.engine.failover import recover_orphans
from dsched.server.engine.notifier import Notifier
from dsched.server.engine.runners import Runners
from dsched.server.engine.services import EngineMetrics, EngineServices
from dsched.server.engine.workers import WorkerDirectory
from dsched.server.heartbeat import (
    HeartbeatInfo,
    Thresholds,
    decode_heartbeat,
    encode_heartbeat,
    sample_host,
)
from dsched.server.rpc.serving import Service, Serving
from dsched.server.store import servers
from dsched.server.store.database import Database
from dsched.v1 import (
    log_service_pb2,
    log_service_pb2_grpc,
    master_service_pb2,
    master_service_pb2_grpc,
    task_event_service_pb2,
    task_event_service_pb2_grpc,
)

log = logging.getLogger(__name__)

VERSION = "0.1.0"
MASTER_CAPACITY = 10_000  # instances a master drives before it reports BUSY


@dataclass(frozen=True, slots=True, kw_only=True)
class MasterOptions:
    db_url: str
    data_dir: Path
    host: str = "127.0.0.1"
    port: int = DEFAULT_MASTER_PORT
    default_group: str = DEFAULT_WORKER_GROUP
    host_selector: str = "lower_weight"
    warmup: timedelta = timedelta(minutes=10)
    heartbeat_interval: float = HEARTBEAT_INTERVAL_S
    thresholds: Thresholds = field(default_factory=Thresholds)


class Master:
    """One master incarnation. Use ``async with Master(...)`` or ``start``/``stop``."""

    def __init__(
        self, options: MasterOptions, *, registry: Registry, clock: Clock | None = None
    ) -> None:
        self.options = options
        self.registry = registry
        self.clock = clock or SystemClock()
        self.db = Database(options.db_url)
        self.notifier = Notifier()
        self.runners = Runners()
        self.workers = WorkerDirectory(
            registry, self.clock, selector=options.host_selector, warmup=options.warmup
        )
        self.dispatcher = Dispatcher(self.workers)
        self.address = ""
        self.epoch = 0
        self.start_time = self.clock.now()
        self.services: EngineServices | None = None
        self.consumer: CommandConsumer | None = None
        self._serving: Serving | None = None
        self._task_events: TaskEventServicer | None = None
        self._heartbeat_task: asyncio.Task[None] | None = None
        self._registered = False

    async def __aenter__(self) -> Master:
        await self.start()
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.stop()

    async def start(self) -> None:
        await self.db.start()
        ctx = MasterContext(
            db=self.db,
            clock=self.clock,
            notifier=self.notifier,
            runners=self.runners,
            workers=self.workers,
            registry=self.registry,
            metrics=EngineMetrics(),
            address="",
            epoch=lambda: self.epoch,
            start_time=self.start_time,
            version=VERSION,
            default_group=self.options.default_group,
            ready=_noop,
        )
        task_events = self._task_events = TaskEventServicer(ctx)
        self._serving = Serving(
            _services(ctx, task_events), f"{self.options.host}:{self.options.port}"
        )
        port = await self._serving.start()
        self.address = ctx.address = f"{self.options.host}:{port}"
        async with self.db.transaction() as conn:
            self.epoch = await servers.new_epoch(conn, "MASTER", self.address, self.clock.now())
        self.services = EngineServices(
            db=self.db,
            clock=self.clock,
            dispatcher=self.dispatcher,
            workers=self.workers,
            notifier=self.notifier,
            address=self.address,
            epoch=self.epoch,
            default_group=self.options.default_group,
            reload=self._reload,
        )
        ctx.metrics = self.services.metrics
        self.consumer = CommandConsumer(self.services, self.runners)
        await self.workers.start()
        await self.dispatcher.start()
        self.registry.add_state_listener(self._on_registry_state)
        await self.registry.register(self._node, encode_heartbeat(await self._heartbeat()))
        self._registered = True
        self._heartbeat_task = asyncio.create_task(self._heartbeat_loop(), name="master-heartbeat")
        await recover_orphans(self.services, await self._live_epochs())
        await self.consumer.start()
        log.info("master %s started (epoch %s)", self.address, self.epoch)

    async def stop(self, grace: float = 5.0) -> None:
        if self.consumer is not None:
            await self.consumer.stop()
        if self._serving is not None:
            await self._serving.health.enter_graceful_shutdown()
        # End open streams (watches, worker event streams) before the server has to cancel them.
        self.notifier.close()
        if self._task_events is not None:
            self._task_events.close()
        await self.runners.stop_all()
        if self.services is not None:
            await self.services.cancel_background()
        await self.dispatcher.stop()
        if self._heartbeat_task is not None:
            self._heartbeat_task.cancel()
            await asyncio.gather(self._heartbeat_task, return_exceptions=True)
        if self._registered:
            await self.registry.unregister(self._node)
            self._registered = False
        await self.workers.stop()
        if self._serving is not None:
            await self._serving.stop(grace)
        await self.db.stop()
        log.info("master %s stopped", self.address)

    @property
    def _node(self) -> str:
        return f"{MASTERS_PATH}/{self.address}"

    def _reload(self, instance_id: int) -> None:
        if self.consumer is not None and self.services is not None:
            self.services.spawn(self.consumer.reload(instance_id))

    async def _live_epochs(self) -> set[int]:
        live = {self.epoch}
        for data in (await self.registry.children(MASTERS_PATH)).values():
            try:
                live.add(decode_heartbeat(data).epoch)
            except Exception:  # an unreadable node cannot vouch for any epoch
                continue
        return live

    def _on_registry_state(self, state: ConnectionState) -> None:
        # SUSPENDED: stop claiming new work until the session is confirmed (DESIGN.md §4).
        if self.consumer is not None:
            self.consumer.paused = state is not ConnectionState.CONNECTED
            if state is ConnectionState.CONNECTED:
                self.notifier.notify_commands()

    async def _heartbeat(self) -> HeartbeatInfo:
        sample = await sample_host(self.options.data_dir)
        return HeartbeatInfo.from_sample(
            sample,
            thresholds=self.options.thresholds,
            slots_total=MASTER_CAPACITY,
            slots_in_use=len(self.runners),
            start_time=self.start_time,
            report_time=self.clock.now(),
            epoch=self.epoch,
            pid=os.getpid(),
        )

    async def _heartbeat_loop(self) -> None:
        while True:
            await asyncio.sleep(self.options.heartbeat_interval)
            try:
                await self.registry.update(self._node, encode_heartbeat(await self._heartbeat()))
            except Exception:  # registry blips are reported by its state listener
                log.warning("master heartbeat update failed", exc_info=True)


async def _noop() -> None:
    return None


def _services(ctx: MasterContext, task_events: TaskEventServicer) -> list[Service]:
    return [
        Service(
            master_service_pb2.DESCRIPTOR.services_by_name["MasterService"].full_name,
            MasterServicer(ctx),
            master_service_pb2_grpc.add_MasterServiceServicer_to_server,
        ),
        Service(
            task_event_service_pb2.DESCRIPTOR.services_by_name["TaskEventService"].full_name,
            task_events,
            task_event_service_pb2_grpc.add_TaskEventServiceServicer_to_server,
        ),
        Service(
            log_service_pb2.DESCRIPTOR.services_by_name["LogService"].full_name,
            LogProxy(ctx),
            log_service_pb2_grpc.add_LogServiceServicer_to_server,
        ),
    ]
