"""``dsched standalone``: a master and a worker, over an embedded registry and SQLite.

Each has its own session on the embedded registry, over SQLite in the data directory: the same code
paths and gRPC calls as a cluster. The master's cluster listener (where the worker reports) is on
loopback and any free port unless configured. ``worker_mode`` (``--worker``) says where the worker
runs: ``process``, a ``dsched worker`` child process (:mod:`dsched_server.child_worker`) that
reaches the registry through ``RegistryService`` on loopback
(:mod:`dsched_server.coord.registry_servicer`), so that master and worker do not share one
interpreter lock; or ``in-process``, both in this process (one interpreter, less memory).

Start-up, the ready line, signals and exit statuses
are those of every server process (:mod:`dsched_server.lifecycle`): SIGINT and SIGTERM stop it
cleanly within ``shutdown_timeout`` (the worker lets running tasks finish for what the budget
allows, the master stops claiming and hands its instances over, and both deregister before the
process exits).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from dsched_server.child_worker import ChildWorker
from dsched_server.config import Settings
from dsched_server.coord.ensemble import EmbeddedEnsemble
from dsched_server.coord.factory import open_registry
from dsched_server.coord.registry_servicer import RegistryServer
from dsched_server.lifecycle import ServerProcess, run, use_pidfd_child_watcher
from dsched_server.master import Master
from dsched_server.processes import master_options
from dsched_worker.app import TAIL_S, Worker, WorkerOptions

# use_pidfd_child_watcher was born here; benchmarks still import it from this module.
__all__ = ["Standalone", "main", "use_pidfd_child_watcher"]


class Standalone(ServerProcess):
    """Master + embedded registry in this process; the worker in a child process or here."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings.shutdown_timeout)
        self.settings = settings
        self.ensemble = EmbeddedEnsemble(settings.data_dir / "registry")
        # One registry session each, as in a cluster: either can lose it without the other.
        self.master_registry = open_registry(settings, self.ensemble)
        self.master = Master(master_options(settings), registry=self.master_registry)
        self.add("open the master's registry session", self.master_registry)
        self.worker: Worker | None = None
        self.child: ChildWorker | None = None
        if settings.worker_mode == "process":
            self.registry_server = RegistryServer(self.ensemble)
            # The child stops first, within the budget less what the master's stop keeps.
            self.child = ChildWorker(
                settings,
                lambda: self.registry_server.address,
                stop_budget=max(1.0, settings.shutdown_timeout - TAIL_S - 1.0),
            )
            self.add(
                "serve the registry to the worker process",
                self.registry_server,
                stopping="stop serving the registry",
            )
            self.add_master(self.master)
            self.add_worker(self.child, "the worker process")
        else:
            self.worker_registry = open_registry(settings, self.ensemble)
            self.worker = Worker(
                WorkerOptions.from_settings(settings), registry=self.worker_registry
            )
            self.add("open the worker's registry session", self.worker_registry)
            self.add_master(self.master)
            self.add_worker(self.worker)

    def ready_line(self) -> str:
        if self.child is not None:
            worker = f"worker {self.child.address} (process {self.child.pid})"
        else:
            assert self.worker is not None
            worker = f"worker {self.worker.address}"
        return (
            f"dsched standalone is up: master {self.master.address} "
            f"(clients connect here), cluster listener {self.master.cluster_address}, "
            f"{worker}, "
            f"data in {self.settings.data_dir}, pid {os.getpid()}"
        )


def main(argv: Sequence[str] | None = None) -> int:
    """``dsched standalone [--port N] [--data-dir DIR] ...``; returns the exit status."""
    return run("standalone", sys.argv[1:] if argv is None else argv, Standalone)


if __name__ == "__main__":
    raise SystemExit(main())
