"""A master process: the gRPC API, command consumption, the DAG engine, dispatch and failover.

Start order: store (migrated) -> gRPC servers (to learn the bound addresses) -> a new epoch ->
worker directory and dispatcher -> registration in the registry -> failover (recovery of instances
whose owner epoch is dead, then watching the members) -> command consumer.

Registry connection (ARCHITECTURE.md §4): SUSPENDED pauses claiming and dispatching. LOST means
other masters may be taking this incarnation's instances over: the master drops every instance it
drives (its writes would be refused by the store anyway), takes a new epoch once reconnected,
registers again and hands the old epoch's instances over for recovery at once (it knows they are
orphans).

Two listeners (ARCHITECTURE.md §1): clients call ``MasterService`` and the ``LogService`` proxy on
``host:port`` (the master's identity: its registry node, the owner host of its instances); workers
report task events to ``TaskEventService`` on ``cluster_host:cluster_port``, which the master names
in every dispatch and take-over and publishes in its registry node so that other masters can
redirect workers to it. Until calls are authenticated, the cluster listener is what keeps clients
from forging task results: only cluster members may reach it.

Metadata database (ARCHITECTURE.md §4): while it cannot be reached, every RPC answers UNAVAILABLE
(reason DATABASE_UNAVAILABLE) and health reports NOT_SERVING; runners whose writes failed are
reloaded with back-off (:mod:`dsched_server.engine.reloads`), and once it is back health reports
SERVING, the command queue is scanned and the sweep looks for owned instances nothing drives.

``stop`` (SIGTERM) stops claiming, stops the runners, hands their instances over (so a surviving
master resumes them at once) and deregisters, each step bounded
by the shutdown's budget (:mod:`dsched_server.shutdown`). If the store is unreachable then, the
instances stay with the dead epoch and are recovered by the failover check; if the registry is, the
node goes when the session expires. Either is recorded as abandoned.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from dsched.backoff import Backoff
from dsched.errors import DschedError
from dsched.v1 import (
    log_service_pb2,
    log_service_pb2_grpc,
    master_peer_service_pb2,
    master_peer_service_pb2_grpc,
    master_service_pb2,
    master_service_pb2_grpc,
    task_event_service_pb2,
    task_event_service_pb2_grpc,
)
from dsched_server.api.context import MasterContext
from dsched_server.api.log_proxy import LogProxy
from dsched_server.api.master_peer import MasterPeerServicer
from dsched_server.api.master_servicer import MasterServicer
from dsched_server.api.task_events import TaskEventServicer
from dsched_server.app.backfill_driver import BackfillDriver
from dsched_server.app.scheduler import Scheduler
from dsched_server.clock import SystemClock
from dsched_server.constants import (
    DEFAULT_CLUSTER_PORT,
    DEFAULT_MASTER_CAPACITY,
    DEFAULT_MASTER_PORT,
    DEFAULT_WORKER_GROUP,
    FAILOVER_DELAY_S,
    HEARTBEAT_INTERVAL_S,
    MASTERS_PATH,
    RETENTION_INTERVAL_S,
)
from dsched_server.coord.registry import ConnectionState, Registry
from dsched_server.core.ports import Clock
from dsched_server.core.retention import HistoryKind
from dsched_server.datasource_key import KEY_FILE_NAME, DatasourceKey
from dsched_server.engine.commands import CommandConsumer
from dsched_server.engine.control_sweep import ControlSweep
from dsched_server.engine.dispatcher import Dispatcher
from dsched_server.engine.failover import Failover, fail_over_epoch
from dsched_server.engine.grpc_worker_client import GrpcWorkerClient
from dsched_server.engine.history import History
from dsched_server.engine.notifier import Notifier
from dsched_server.engine.peers import Peers
from dsched_server.engine.reloads import DEFAULT_SWEEP_INTERVAL_S, Reloads
from dsched_server.engine.runners import Runners
from dsched_server.engine.services import EngineMetrics, EngineServices
from dsched_server.engine.workers import WorkerDirectory
from dsched_server.heartbeat import (
    HeartbeatInfo,
    ServerStatus,
    Thresholds,
    decode_heartbeat,
    encode_heartbeat,
    sample_host,
)
from dsched_server.rpc.serving import Service, Serving
from dsched_server.shutdown import Shutdown
from dsched_server.store import servers
from dsched_server.store.database import Database

log = logging.getLogger(__name__)

VERSION = "0.1.0"
_RETRY = Backoff(initial=0.2, maximum=5.0)
# Bounds of the steps of a stop (seconds), within the shutdown's budget. _TAIL_S is kept for what
# is stopped after the master (the registry session).
_HAND_OVER_S = 10.0
_UNREGISTER_S = 3.0
_CLOSE_DB_S = 2.0
_UNWIND_S = 1.0
_TAIL_S = 1.0
CLUSTER_PORT_FILE = "cluster-port"  # in the data directory: the port "any free port" chose last
# What each listener serves besides health and reflection (ARCHITECTURE.md §1). No answer of a
# client service may carry a fencing token; a test walks their descriptors.
CLIENT_SERVICES = (
    master_service_pb2.DESCRIPTOR.services_by_name["MasterService"],
    log_service_pb2.DESCRIPTOR.services_by_name["LogService"],
)
CLUSTER_SERVICES = (
    task_event_service_pb2.DESCRIPTOR.services_by_name["TaskEventService"],
    master_peer_service_pb2.DESCRIPTOR.services_by_name["MasterPeerService"],
)


@dataclass(frozen=True, slots=True, kw_only=True)
class MasterOptions:
    db_url: str
    data_dir: Path
    host: str = "127.0.0.1"
    port: int = DEFAULT_MASTER_PORT
    cluster_host: str = ""  # "" means host
    cluster_port: int = DEFAULT_CLUSTER_PORT
    capacity: int = DEFAULT_MASTER_CAPACITY  # instances it drives before it reports BUSY
    default_group: str = DEFAULT_WORKER_GROUP
    host_selector: str = "lower_weight"
    warmup: timedelta = timedelta(minutes=10)
    heartbeat_interval: float = HEARTBEAT_INTERVAL_S
    thresholds: Thresholds = field(default_factory=Thresholds)
    failover_delay: float = FAILOVER_DELAY_S  # for workers whose death is not confirmed
    sweep_interval: float = DEFAULT_SWEEP_INTERVAL_S
    dispatch_timeout: float = 0.0  # seconds; 0: a task waits for a worker as long as it takes
    min_schedule_interval: float = 1.0  # seconds: no schedule may fire more often
    # Ages of the history clean-up (engine/history.py); none given: nothing is deleted.
    retention: Mapping[HistoryKind, timedelta] = field(default_factory=dict)
    retention_interval: float = RETENTION_INTERVAL_S
    # The key file of datasource passwords (None: <data_dir>/datasource.key) and whether this
    # master may create it (a standalone; never a cluster's masters, which must share one).
    datasource_key_file: Path | None = None
    create_datasource_key: bool = True


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
        self.worker_client = GrpcWorkerClient()
        self.workers = WorkerDirectory(
            registry,
            self.clock,
            selector=options.host_selector,
            warmup=options.warmup,
            on_left=self.worker_client.forget,
        )
        self.dispatcher = Dispatcher(self.workers, self.worker_client)
        self.peers = Peers()
        self.history = History(
            self.db,
            self.clock,
            ages=options.retention,
            interval=options.retention_interval,
        )
        self.datasource_key = DatasourceKey(
            options.datasource_key_file or options.data_dir / KEY_FILE_NAME,
            create=options.create_datasource_key,
        )
        self.address = ""
        self.cluster_address = ""
        self.epoch = 0
        self.start_time = self.clock.now()
        self.services: EngineServices | None = None
        self.consumer: CommandConsumer | None = None
        self.control_sweep: ControlSweep | None = None
        self.backfills: BackfillDriver | None = None
        self.scheduler: Scheduler | None = None
        self._serving: Serving | None = None
        self._cluster_serving: Serving | None = None
        self._task_events: TaskEventServicer | None = None
        self._heartbeat_task: asyncio.Task[None] | None = None
        self._registered = False
        self._busy = False
        self._connected = asyncio.Event()
        self._masters: list[str] = []  # live master addresses, sorted: the command slots
        self._cluster_addresses: dict[str, str] = {}  # live master address -> cluster listener
        self._cancel_watch: object = None
        self.failover: Failover | None = None
        self.reloads: Reloads | None = None
        self._reincarnating: asyncio.Task[None] | None = None
        self._stopping = False

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
            worker_logs=self.worker_client,
            registry=self.registry,
            metrics=EngineMetrics(),
            address="",
            owner_cluster_address=self._owner_cluster_address,
            epoch=lambda: self.epoch,
            start_time=self.start_time,
            version=VERSION,
            default_group=self.options.default_group,
            ready=_noop,
            peers=self.peers,
            history=self.history,
            datasource_key=self.datasource_key,
        )
        task_events = self._task_events = TaskEventServicer(ctx)
        self._serving = Serving(_client_services(ctx), f"{self.options.host}:{self.options.port}")
        port = await self._serving.start()
        self.address = ctx.address = f"{self.options.host}:{port}"
        self.cluster_address = await self._serve_cluster(task_events, MasterPeerServicer(ctx))
        async with self.db.transaction() as conn:
            self.epoch = await servers.new_epoch(conn, "MASTER", self.address, self.clock.now())
        self.services = EngineServices(
            db=self.db,
            clock=self.clock,
            dispatcher=self.dispatcher,
            workers=self.workers,
            worker_client=self.worker_client,
            notifier=self.notifier,
            address=self.address,
            cluster_address=self.cluster_address,
            epoch=self.epoch,
            default_group=self.options.default_group,
            reload=self._reload,
            datasource_key=self.datasource_key,
            failover_delay=self.options.failover_delay,
            dispatch_timeout=self.options.dispatch_timeout,
        )
        ctx.metrics = self.services.metrics
        self.consumer = CommandConsumer(
            self.services, self.runners, slot=self._slot, busy=lambda: self._busy
        )
        self.reloads = Reloads(
            self.services,
            self.runners,
            self.consumer.build_runner,
            interval=self.options.sweep_interval,
            enabled=lambda: self._registered,
        )
        self.db.availability.subscribe(self._on_database)
        self.control_sweep = ControlSweep(self.services, self.runners)
        self.backfills = BackfillDriver(ctx, enabled=lambda: self._registered)
        self.services.on_backfill_run_ended = self.backfills.run_ended
        # Fires only while the registry session is sure (not SUSPENDED): the share of a master
        # whose session may have expired is already another master's (ARCHITECTURE.md §4).
        self.scheduler = Scheduler(
            ctx, slot=self._slot, enabled=lambda: self._registered and self._connected.is_set()
        )
        self.services.on_schedule_run_ended = self.scheduler.run_ended
        ctx.schedule_changed = self.scheduler.changed
        ctx.min_schedule_interval = timedelta(seconds=self.options.min_schedule_interval)
        self.failover = Failover(
            self.services,
            self.registry,
            self.runners,
            delay=self.options.failover_delay,
            enabled=lambda: self._registered and self._connected.is_set(),
        )
        await self.workers.start()
        await self.dispatcher.start()
        self.registry.add_state_listener(self._on_registry_state)
        if self.registry.state is ConnectionState.CONNECTED:
            self._connected.set()
        self._cancel_watch = self.registry.watch_children(MASTERS_PATH, self._on_masters)
        first = await self._heartbeat()
        self._busy = first.status is ServerStatus.BUSY
        await self.registry.register(self._node, encode_heartbeat(first))
        self._registered = True
        self._heartbeat_task = asyncio.create_task(self._heartbeat_loop(), name="master-heartbeat")
        await self.failover.start()
        await self.reloads.start()
        await self.consumer.start()
        await self.control_sweep.start()
        await self.backfills.start()
        await self.scheduler.start()
        await self.history.start()
        log.info(
            "master %s started (epoch %s); workers report to %s",
            self.address,
            self.epoch,
            self.cluster_address,
        )

    async def _serve_cluster(self, task_events: TaskEventServicer, peer: MasterPeerServicer) -> str:
        """Binds the cluster listener and returns its address. With ``cluster_port`` 0, the port
        of the previous incarnation (remembered in the data directory) is tried first: a worker
        that restarts with it (standalone) resends the events in its outbox to that address."""
        host, wanted = self.options.cluster_host or self.options.host, self.options.cluster_port
        memo = self.options.data_dir / CLUSTER_PORT_FILE
        for port in _remembered_port(memo) if wanted == 0 else []:
            serving = Serving(_cluster_services(task_events, peer), f"{host}:{port}")
            try:
                bound = await serving.start()
            except (OSError, RuntimeError):
                log.info("cluster port %s of the previous run is taken; any free port it is", port)
                continue
            self._cluster_serving = serving
            return f"{host}:{bound}"
        self._cluster_serving = Serving(_cluster_services(task_events, peer), f"{host}:{wanted}")
        bound = await self._cluster_serving.start()
        if wanted == 0:
            with contextlib.suppress(OSError):  # only a convenience for the next start
                memo.parent.mkdir(parents=True, exist_ok=True)
                memo.write_text(f"{bound}\n")
        return f"{host}:{bound}"

    async def stop(self, grace: float = 5.0, *, shutdown: Shutdown | None = None) -> None:
        """Stops as the module says. Every step is bounded by ``shutdown`` (default: a new one of
        the default timeout), keeping :data:`_TAIL_S` for what is stopped after the master; what a
        step cannot do (the store or the registry does not answer) is recorded there as
        abandoned. Calls in progress get up to ``grace`` seconds."""
        shutdown = shutdown or Shutdown()
        self._stopping = True
        driving = len(self.runners)
        await shutdown.step("stop claiming", self._stop_claiming(), reserve=_TAIL_S)
        for serving in (self._serving, self._cluster_serving):
            if serving is not None:
                await serving.health.enter_graceful_shutdown()
        # End open streams (watches, worker event streams) before the server has to cancel them.
        self.notifier.close()
        if self._task_events is not None:
            self._task_events.close()
        await shutdown.step(
            f"stop driving {driving} instances", self.runners.stop_all(), reserve=_TAIL_S
        )
        if self.services is not None:
            await shutdown.step(
                "stop background work", self.services.cancel_background(), reserve=_TAIL_S
            )
        await shutdown.step("stop dispatching", self.dispatcher.stop(), reserve=_TAIL_S)
        database_answers = True
        if self.services is not None and self._registered:
            # Not done: the failover check of any master recovers them after the failover delay.
            handing_over = fail_over_epoch(self.services, self.epoch, "was stopped")
            what = f"hand over the instances of epoch {self.epoch}"
            limit = shutdown.share(_HAND_OVER_S, 0.4)
            database_answers = await shutdown.step(what, handing_over, limit=limit, reserve=_TAIL_S)
        if self._heartbeat_task is not None:
            await shutdown.cancel("stop the heartbeat", self._heartbeat_task, reserve=_TAIL_S)
        if callable(self._cancel_watch):
            self._cancel_watch()
        if self._registered:
            self._registered = False
            # Not done: the node goes when the session expires.
            leaving = self.registry.unregister(self._node)
            what = f"remove {self._node} from the registry"
            limit = shutdown.share(_UNREGISTER_S, 0.1)
            await shutdown.step(what, leaving, limit=limit, reserve=_TAIL_S)
        await shutdown.step("stop watching workers", self.workers.stop(), reserve=_TAIL_S)
        closing_workers = self.worker_client.close()
        await shutdown.step("close the worker channels", closing_workers, reserve=_TAIL_S)
        await shutdown.step("close the master channels", self.peers.close(), reserve=_TAIL_S)
        closing_db = shutdown.share(_CLOSE_DB_S, 0.1)
        servings = [s for s in (self._serving, self._cluster_serving) if s is not None]
        if servings:
            calls_grace = shutdown.budget(grace, reserve=_TAIL_S + closing_db + _UNWIND_S)
            calls = asyncio.gather(*(serving.stop(calls_grace) for serving in servings))
            await shutdown.step("end the calls in progress", calls, reserve=_TAIL_S + closing_db)
        closing = self.db.stop(close=database_answers)
        await shutdown.step("close the database", closing, limit=closing_db, reserve=_TAIL_S)
        log.info("master %s stopped", self.address)

    async def _stop_claiming(self) -> None:
        if self._reincarnating is not None:
            self._reincarnating.cancel()
            await asyncio.gather(self._reincarnating, return_exceptions=True)
        if self.failover is not None:
            await self.failover.stop()
        if self.consumer is not None:
            await self.consumer.stop()
        if self.reloads is not None:
            await self.reloads.stop()
        if self.control_sweep is not None:
            await self.control_sweep.stop()
        if self.backfills is not None:
            await self.backfills.stop()
        if self.scheduler is not None:
            await self.scheduler.stop()
        await self.history.stop()

    @property
    def _node(self) -> str:
        return f"{MASTERS_PATH}/{self.address}"

    def _reload(self, instance_id: int, pins: Mapping[int, str]) -> None:
        if self.reloads is not None and not self._stopping:
            self.reloads.request(instance_id, pins)

    def _on_database(self, available: bool) -> None:
        """The metadata database went away or came back (ARCHITECTURE.md §4)."""
        if self._stopping:
            return
        for serving in (self._serving, self._cluster_serving):
            if serving is not None:
                serving.report(available)
        if available:
            self.notifier.notify_commands()
            if self.reloads is not None:
                self.reloads.wake()  # the database is back: sweep at once

    def _slot(self) -> tuple[int, int]:
        if self.address in self._masters:
            return self._masters.index(self.address), len(self._masters)
        return 0, 1

    def _owner_cluster_address(self, address: str) -> str:
        """Where workers report to the live master ``address``; "" if it is not live."""
        if address == self.address:
            return self.cluster_address
        return self._cluster_addresses.get(address, "")

    def _on_masters(self, children: Mapping[str, bytes]) -> None:
        # The slots go to the masters that claim: a BUSY one's share moves to the others at once.
        before = self._masters
        self._masters = sorted(a for a, data in children.items() if not _busy_node(data))
        self._cluster_addresses = {a: _cluster_address(a, data) for a, data in children.items()}
        self.notifier.notify_commands()  # the slots moved: look at the queue again
        # Only when the claiming masters changed: the nodes' data changes with every heartbeat,
        # and a reload reads every online schedule and computes its next fire (10,000 online
        # schedules: half a core while idle, in the cron-storm bench).
        if self.scheduler is not None and self._masters != before:
            self.scheduler.share_changed()  # so did the schedules' shares
        if self.failover is not None:
            self.failover.on_masters(children)

    def _on_registry_state(self, state: ConnectionState) -> None:
        if self._stopping:
            return
        connected = state is ConnectionState.CONNECTED
        # SUSPENDED: stop claiming and dispatching until the session is confirmed
        # (ARCHITECTURE.md §4).
        if self.consumer is not None:
            self.consumer.paused = not connected
        if connected:
            self._connected.set()
            self.dispatcher.resume()
            self.notifier.notify_commands()
            if self.scheduler is not None:
                self.scheduler.share_changed()  # may fire again; the share may have moved
        else:
            self._connected.clear()
            self.dispatcher.pause()
        if state is ConnectionState.LOST and (
            self._reincarnating is None or self._reincarnating.done()
        ):
            self._reincarnating = asyncio.create_task(self._reincarnate(), name="reincarnate")

    async def _reincarnate(self) -> None:
        """After a lost session: drop every instance, then come back as a new epoch."""
        old = self.epoch
        self._registered = False
        log.error("registry session lost (epoch %s): dropping all instances", old)
        if self.reloads is not None:
            self.reloads.cancel_all()
        await self.runners.stop_all()
        for delay in _RETRY.delays():
            await self._connected.wait()
            try:
                async with self.db.transaction() as conn:
                    epoch = await servers.new_epoch(conn, "MASTER", self.address, self.clock.now())
                self.epoch = epoch
                if self.services is not None:
                    self.services.epoch = epoch
                await self.registry.register(self._node, encode_heartbeat(await self._heartbeat()))
            except Exception as exc:  # store or registry unavailable: retry
                log.warning("re-registration failed (%s); retrying in %.2fs", exc, delay)
                await asyncio.sleep(delay)
                continue
            self._registered = True
            if self.scheduler is not None:
                self.scheduler.share_changed()  # fires again, as the new epoch
            log.info("re-registered as %s with epoch %s (was %s)", self.address, epoch, old)
            await self._hand_over(old, "lost its registry session")
            self.notifier.notify_commands()
            return

    async def _hand_over(self, epoch: int, why: str) -> None:
        """Queues the recovery of ``epoch``'s instances now (this process knows nobody drives
        them); on failure the failover check of some master does it later."""
        assert self.services is not None
        try:
            await fail_over_epoch(self.services, epoch, why)
        except Exception as exc:  # the store is down: the failover check recovers them later
            log.warning("could not hand over the instances of epoch %s: %s", epoch, exc)

    async def _heartbeat(self) -> HeartbeatInfo:
        sample = await sample_host(self.options.data_dir)
        return HeartbeatInfo.from_sample(
            sample,
            thresholds=self.options.thresholds,
            slots_total=self.options.capacity,
            slots_in_use=len(self.runners),
            start_time=self.start_time,
            report_time=self.clock.now(),
            epoch=self.epoch,
            pid=os.getpid(),
            cluster_address=self.cluster_address,
        )

    async def _heartbeat_loop(self) -> None:
        while True:
            await asyncio.sleep(self.options.heartbeat_interval)
            if not self._registered:
                continue
            try:
                info = await self._heartbeat()
                busy = info.status is ServerStatus.BUSY
                if busy != self._busy:
                    log.warning(
                        "master is %s: %s claiming commands",
                        info.status.value,
                        "stops" if busy else "resumes",
                    )
                    self._busy = busy
                    if not busy:
                        self.notifier.notify_commands()
                await self.registry.update(self._node, encode_heartbeat(info))
            except DschedError as exc:  # registry blips are reported by its state listener
                log.warning("master heartbeat update failed: %s", exc)
            except Exception:
                log.warning("master heartbeat update failed", exc_info=True)


def _busy_node(data: bytes) -> bool:
    try:
        return decode_heartbeat(data).status is ServerStatus.BUSY
    except DschedError:
        return False  # unreadable: keep its slot (the steal after STEAL_AFTER_S covers it)


def _remembered_port(path: Path) -> list[int]:
    try:
        port = int(path.read_text().strip())
    except (OSError, ValueError):
        return []
    return [port] if 0 < port <= 65535 else []


def _cluster_address(address: str, data: bytes) -> str:
    """The cluster listener of the master registered as ``address``. A node without one was
    written by a master that served workers on its client address; an unreadable one gets ""."""
    try:
        return decode_heartbeat(data).cluster_address or address
    except DschedError:
        return ""


async def _noop() -> None:
    return None


def _cluster_services(task_events: TaskEventServicer, peer: MasterPeerServicer) -> list[Service]:
    """What only cluster members call: served on the cluster listener alone."""
    task_event_service, master_peer_service = CLUSTER_SERVICES
    return [
        Service(
            task_event_service.full_name,
            task_events,
            task_event_service_pb2_grpc.add_TaskEventServiceServicer_to_server,
        ),
        Service(
            master_peer_service.full_name,
            peer,
            master_peer_service_pb2_grpc.add_MasterPeerServiceServicer_to_server,
        ),
    ]


def _client_services(ctx: MasterContext) -> list[Service]:
    """What clients call: served on the client listener, which serves nothing else."""
    master_service, log_service = CLIENT_SERVICES
    return [
        Service(
            master_service.full_name,
            MasterServicer(ctx),
            master_service_pb2_grpc.add_MasterServiceServicer_to_server,
        ),
        Service(
            log_service.full_name,
            LogProxy(ctx),
            log_service_pb2_grpc.add_LogServiceServicer_to_server,
        ),
    ]
