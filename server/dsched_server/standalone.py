"""``dsched standalone``: a master and a worker in one process, over an embedded registry.

Each has its own session on the embedded registry, over SQLite in the data directory: the same code
paths and gRPC calls as a cluster. The master's cluster listener (where the worker reports) is on
loopback and any free port unless configured. Start-up, the ready line, signals and exit statuses
are those of every server process (:mod:`dsched_server.processes`): SIGINT and SIGTERM stop it
cleanly within ``shutdown_timeout`` (the worker lets running tasks finish for what the budget
allows, the master stops claiming and hands its instances over, and both deregister before the
process exits).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from dsched_server.config import Settings
from dsched_server.coord.ensemble import EmbeddedEnsemble
from dsched_server.coord.factory import open_registry
from dsched_server.master import Master
from dsched_server.processes import (
    ServerProcess,
    master_options,
    run,
    use_pidfd_child_watcher,
)
from dsched_worker.app import Worker, WorkerOptions

# use_pidfd_child_watcher was born here; benchmarks still import it from this module.
__all__ = ["Standalone", "main", "use_pidfd_child_watcher"]


class Standalone(ServerProcess):
    """Master + worker + embedded registry in one process."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings.shutdown_timeout)
        self.settings = settings
        self.ensemble = EmbeddedEnsemble(settings.data_dir / "registry")
        # One registry session each, as in a cluster: either can lose it without the other.
        self.master_registry = open_registry(settings, self.ensemble)
        self.worker_registry = open_registry(settings, self.ensemble)
        self.master = Master(master_options(settings), registry=self.master_registry)
        self.worker = Worker(WorkerOptions.from_settings(settings), registry=self.worker_registry)
        self.add("open the master's registry session", self.master_registry)
        self.add("open the worker's registry session", self.worker_registry)
        self.add_master(self.master)
        self.add_worker(self.worker)

    def ready_line(self) -> str:
        return (
            f"dsched standalone is up: master {self.master.address} "
            f"(clients connect here), cluster listener {self.master.cluster_address}, "
            f"worker {self.worker.address}, "
            f"data in {self.settings.data_dir}, pid {os.getpid()}"
        )


def main(argv: Sequence[str] | None = None) -> int:
    """``dsched standalone [--port N] [--data-dir DIR] ...``; returns the exit status."""
    return run("standalone", sys.argv[1:] if argv is None else argv, Standalone)


if __name__ == "__main__":
    raise SystemExit(main())
