"""What the master's API servicers share (one object, built by the composition root)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime

from dsched.server.coord.registry import Registry
from dsched.server.core.ports import Clock
from dsched.server.engine.grpc_worker_client import GrpcWorkerClient
from dsched.server.engine.notifier import Notifier
from dsched.server.engine.peers import Peers
from dsched.server.engine.runners import Runners
from dsched.server.engine.services import EngineMetrics
from dsched.server.engine.workers import WorkerDirectory
from dsched.server.store.database import Database


@dataclass(slots=True, kw_only=True)
class MasterContext:
    db: Database
    clock: Clock
    notifier: Notifier
    runners: Runners
    workers: WorkerDirectory
    worker_logs: GrpcWorkerClient  # the channels to workers, for the log proxy
    registry: Registry
    metrics: EngineMetrics
    address: str
    # The cluster listener of a live master given its address ("" when it is not live): where a
    # worker is told to send events of instances that master owns.
    owner_cluster_address: Callable[[str], str]
    epoch: Callable[[], int]
    start_time: datetime
    version: str
    default_group: str
    ready: Callable[[], Awaitable[None]]
    peers: Peers
