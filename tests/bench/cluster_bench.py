"""Benchmark of a dsched cluster: the standalone bench's figures with 2 masters, 2 workers,
PostgreSQL and ZooKeeper, each server its own process.

Run with ``make bench-cluster`` (not part of the test suite). The workloads are the standalone
bench's (``tests/bench/common.py``), with the same targets: a 200-task chain of ``true`` (gap = a
task's start minus its upstream's end, both stamped by the workers, which share this machine's
clock), one root and 1,000 parallel ``true`` tasks against the spawn floor at the cluster's total
slots, 300 one-task runs started one after another by one client, and the peak RSS of every master
and worker sampled during the fan-out (task processes excluded), each alone and summed. The leaves
each worker ran are printed too: the fan-out's throughput depends on how the host selector spread
them. ``make bench`` prints these figures beside the standalone's (``standalone_bench --cluster``,
which calls :func:`measure`). Last, only here, failover speed
with the default timeouts (``tests/bench/failover.py``): a master, then a worker, is killed with
SIGKILL, five times each; target: the median time from the kill to the takeover of its work
<= 6 s.

The cluster is the cluster tests' harness (``tests/cluster/harness.py``): a private ZooKeeper, a
fresh PostgreSQL database (``DSCHED_TEST_PG_URL``, default the local server) dropped afterwards,
members started with ``dsched master`` / ``dsched worker``. Members log at WARNING, as the
standalone bench's server does, and warm-up is off: a bench measures a settled cluster, not one
whose workers all started a second ago.

Usage: ``python -m tests.bench.cluster_bench [--chain N] [--fanout N] [--singles N] [--slots N]
[--failovers N]``
from the repository root (``--slots`` per worker, ``--failovers`` trials of each kind, 0: none).
Exits 1 if a target is missed.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.bench import failover
from tests.bench.common import (
    MB,
    NEVER_BUSY,
    Fanout,
    Row,
    chain_rows,
    data_removed,
    fanout_rows,
    report,
    run_chain,
    run_fanout,
    run_singles,
    settle,
    singles_rows,
    spawn_floor,
)
from tests.bench.standalone_bench import add_arguments
from tests.cluster.harness import Member
from tests.cluster.tuned import TunedCluster
from tests.conftest import PG_URL, _Server

MASTERS = 2
WORKERS = 2
SETTINGS = {**NEVER_BUSY, "DSCHED_LOG_LEVEL": "WARNING", "DSCHED_WARMUP_SECONDS": "0"}


@contextmanager
def cluster(slots: int) -> Iterator[TunedCluster]:
    """Starts the cluster (masters first, then the workers with ``slots`` each); on the way out
    kills every process it started and drops the database. On an error, prints the members'
    logs."""
    with (
        tempfile.TemporaryDirectory(prefix="dsched-bench-cluster-") as run_dir,
        _Server(PG_URL, "postgresql").database() as db_url,
    ):
        run = TunedCluster(Path(run_dir), db_url, SETTINGS)
        try:
            run.start(masters=MASTERS, workers=0)
            for _ in range(WORKERS):
                run.add_worker(slots=slots)
            yield run
        except BaseException:
            print(f"----- cluster logs -----\n{run.report_logs()}", file=sys.stderr)
            raise
        finally:
            run.close()
    data_removed()


def rss_rows(members: list[Member], fanout: Fanout) -> list[Row]:
    rows: list[Row] = [
        (
            f"peak RSS {m.name} {m.role} (MB)",
            f"{fanout.peak_rss_by_pid[m.pid] / MB:.0f}",
            "-",
            True,
        )
        for m in members
    ]
    rows.append(("peak RSS of the servers, summed (MB)", f"{fanout.peak_rss / MB:.0f}", "-", True))
    return rows


def measure(args: argparse.Namespace, failovers: int = 0) -> list[Row]:
    """Runs the cluster's workloads (``args`` as for the standalone bench), then ``failovers``
    kills of each kind; returns its rows."""
    parallelism = WORKERS * args.slots
    with cluster(args.slots) as run:
        client = run.client()
        client.ensure_project("bench")
        run_chain(client, 20)  # warm-up: imports, connections, PostgreSQL plans
        gaps = run_chain(client, args.chain)
        members = run.masters() + run.workers()
        pids = [m.pid for m in members]
        singles = run_singles(client, args.singles, pids)
        floor = spawn_floor(args.fanout, parallelism)
        fanout = run_fanout(client, args.fanout, pids)
        masters, workers = [], []
        if failovers:
            failover.define(run)
            masters = [failover.master_trial(run) for _ in range(failovers)]
            workers = [failover.worker_trial(run, args.slots) for _ in range(failovers)]
    spread = " / ".join(str(n) for _, n in sorted(fanout.leaves_by_host.items()))
    return [
        *chain_rows(gaps),
        *fanout_rows(floor, parallelism, fanout),
        ("fan-out leaves per worker", spread, "-", True),
        *singles_rows(singles, args.singles),
        *rss_rows(members, fanout),
        *(failover.rows(masters, workers) if masters else []),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser)
    parser.add_argument("--failovers", type=int, default=5, help="kills of each kind")
    args = parser.parse_args()
    settle("cluster")
    rows = measure(args, args.failovers)
    title = (
        f"dsched cluster ({MASTERS} masters, {WORKERS} workers, PostgreSQL, ZooKeeper), "
        f"{args.chain}-task chain, {args.fanout}-task fan-out, {args.singles} one-task runs, "
        f"{args.slots} slots per worker, {os.cpu_count()} CPUs"
    )
    return report(title, rows)


if __name__ == "__main__":
    sys.exit(main())
