"""``dsched worker``: a registry session (ZooKeeper; in a standalone's worker process, the
standalone's registry over gRPC) and a :class:`~dsched_worker.app.Worker`, run with the life cycle
of every server process (:mod:`dsched_server.lifecycle`). It loads neither the master nor the
store: a worker process holds what a worker needs."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from dsched_server.config import Settings
from dsched_server.coord.factory import open_registry
from dsched_server.lifecycle import CLOSE_ZK, ServerProcess, run
from dsched_worker.app import Worker, WorkerOptions


class WorkerProcess(ServerProcess):
    """``dsched worker``: a ZooKeeper session and a :class:`Worker`."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings.shutdown_timeout)
        self.settings = settings
        self.registry = open_registry(settings)
        self.worker = Worker(WorkerOptions.from_settings(settings), registry=self.registry)
        self.add(f"join ZooKeeper at {settings.registry}", self.registry, stopping=CLOSE_ZK)
        self.add_worker(self.worker)

    def ready_line(self) -> str:
        w = self.worker
        return (
            f"dsched worker is up: address {w.address}, group {w.options.group}, "
            f"epoch {w.epoch}, pid {os.getpid()}"
        )


def worker_main(argv: Sequence[str] | None = None) -> int:
    """``dsched worker [--port N] [--registry ZK] [--group G] [--slots N] ...``; returns the exit
    status."""
    return run("worker", sys.argv[1:] if argv is None else argv, WorkerProcess)
