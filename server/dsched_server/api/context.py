"""What the master's API servicers share (one object, built by the composition root): the
application layer's context, plus what only the servicers read (the cluster view, the server's
identity and counters)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime

from dsched_server.app.context import AppContext
from dsched_server.coord.registry import Registry
from dsched_server.datasource_key import DatasourceKey
from dsched_server.engine.grpc_worker_client import GrpcWorkerClient
from dsched_server.engine.history import History
from dsched_server.engine.services import EngineMetrics
from dsched_server.engine.workers import WorkerDirectory


@dataclass(slots=True, kw_only=True)
class MasterContext(AppContext):
    workers: WorkerDirectory
    worker_logs: GrpcWorkerClient  # the channels to workers, for the log proxy
    registry: Registry
    metrics: EngineMetrics
    start_time: datetime
    version: str
    default_group: str
    ready: Callable[[], Awaitable[None]]
    history: History  # the clean-up of old history (CleanUpHistory)
    datasource_key: DatasourceKey  # encrypts datasource passwords (README "Datasources")
