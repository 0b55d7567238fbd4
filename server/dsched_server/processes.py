"""``dsched master``: a ZooKeeper session and a :class:`~dsched_server.master.Master`, run with the
life cycle of every server process (:mod:`dsched_server.lifecycle`: the ready line, signals, exit
statuses); and the master part of the settings, which ``dsched standalone`` shares."""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Sequence
from datetime import timedelta

from sqlalchemy.exc import DBAPIError

from dsched.errors import Unavailable
from dsched_server.config import Settings
from dsched_server.coord.factory import open_registry
from dsched_server.core.retention import HistoryKind
from dsched_server.lifecycle import CLOSE_ZK, START_MASTER, ServerProcess, reason, run
from dsched_server.master import Master, MasterOptions


def retention_ages(settings: Settings) -> dict[HistoryKind, timedelta]:
    """The master's history ages (README "Retention"); 0 days keeps a kind for ever."""
    days = {
        HistoryKind.REQUEST_IDS: settings.request_id_retention_days,
        HistoryKind.EVENTS: settings.event_retention_days,
        HistoryKind.INSTANCES: settings.instance_retention_days,
    }
    return {kind: timedelta(days=d) for kind, d in days.items()}


def master_options(settings: Settings) -> MasterOptions:
    """The master part of the shared settings (used by ``master`` and ``standalone``)."""
    return MasterOptions(
        db_url=settings.db_url,
        data_dir=settings.data_dir,
        host=settings.host,
        port=settings.port,
        cluster_host=settings.cluster_host,
        cluster_port=settings.cluster_port,
        capacity=settings.master_capacity,
        default_group=settings.worker_group,
        host_selector=settings.host_selector,
        warmup=timedelta(seconds=settings.warmup_seconds),
        heartbeat_interval=settings.heartbeat_interval,
        thresholds=settings.thresholds,
        failover_delay=settings.failover_delay,
        sweep_interval=settings.instance_sweep_interval,
        dispatch_timeout=settings.dispatch_timeout,
        min_schedule_interval=settings.min_schedule_interval,
        retention=retention_ages(settings),
        retention_interval=settings.retention_interval,
        datasource_key_file=settings.datasource_key_file or None,
        create_datasource_key=settings.role == "standalone",
    )


class MasterProcess(ServerProcess):
    """``dsched master``: a ZooKeeper session and a :class:`Master`."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings.shutdown_timeout)
        self.settings = settings
        self.registry = open_registry(settings)
        self.master = Master(master_options(settings), registry=self.registry)
        self.add(f"join ZooKeeper at {settings.registry}", self.registry, stopping=CLOSE_ZK)
        self.add_master(self.master)

    def ready_line(self) -> str:
        m = self.master
        return (
            f"dsched master is up: address {m.address}, cluster address {m.cluster_address}, "
            f"epoch {m.epoch}, pid {os.getpid()}"
        )

    def describe(self, what: str, exc: Exception) -> str:
        # SQLAlchemy wraps what the database said; a server that never answered surfaces as the
        # driver's connection error (asyncpg: refused, unknown host, timed out). Nothing else the
        # master does at start dials out: the gRPC server only binds.
        if isinstance(exc, Unavailable) and isinstance(exc.__cause__, Exception):
            exc = exc.__cause__  # the store's DATABASE_UNAVAILABLE: say what the driver said
        unreachable = isinstance(exc, ConnectionError | socket.gaierror | TimeoutError)
        if isinstance(exc, DBAPIError) or (what == START_MASTER and unreachable):
            return f"cannot use the database {self.settings.safe_db_url}: {reason(exc)}"
        return super().describe(what, exc)


def master_main(argv: Sequence[str] | None = None) -> int:
    """``dsched master [--port N] [--registry ZK] [--db URL] ...``; returns the exit status."""
    return run("master", sys.argv[1:] if argv is None else argv, MasterProcess)
