"""Benchmark of a dsched cluster: the standalone bench's figures with 2 masters, 2 workers,
PostgreSQL and ZooKeeper, each server its own process.

Run with ``make bench-cluster`` (not part of the test suite). The workloads are the standalone
bench's (``tests/bench/common.py``): a 200-task chain of ``true`` (gap = a task's start minus its
upstream's end, both stamped by the workers, which share this machine's clock; target: median
<= 20 ms, twice the standalone target, for the extra hops through gRPC, PostgreSQL and a second
process), one root and 1,000 parallel ``true`` tasks against the spawn floor at the cluster's total
slots (reported, no target), and the peak RSS of every master and worker sampled during the
fan-out (task processes excluded), each alone and summed. The leaves each worker ran are printed
too: the fan-out's throughput depends on how the host selector spread them. Last, failover speed
with the default timeouts (``tests/bench/failover.py``): a master, then a worker, is killed with
SIGKILL, five times each; target: the median time from the kill to the takeover of its work
<= 6 s.

The cluster is the cluster tests' harness (``tests/cluster/harness.py``): a private ZooKeeper, a
fresh PostgreSQL database (``DSCHED_TEST_PG_URL``, default the local server) dropped afterwards,
members started with ``dsched master`` / ``dsched worker``. Members log at WARNING, as the
standalone bench's server does, and warm-up is off: a bench measures a settled cluster, not one
whose workers all started a second ago.

Usage: ``python -m tests.bench.cluster_bench [--chain N] [--fanout N] [--slots N] [--failovers N]``
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
    Fanout,
    Row,
    chain_rows,
    default_slots,
    fanout_rows,
    report,
    run_chain,
    run_fanout,
    spawn_floor,
)
from tests.cluster.harness import Member
from tests.cluster.tuned import TunedCluster
from tests.conftest import PG_URL, _Server

MASTERS = 2
WORKERS = 2
CHAIN_TARGET_MS = 20.0
SETTINGS = {"DSCHED_LOG_LEVEL": "WARNING", "DSCHED_WARMUP_SECONDS": "0"}


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
    rows.append(("peak RSS all servers (MB)", f"{fanout.peak_rss / MB:.0f}", "-", True))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chain", type=int, default=200)
    parser.add_argument("--fanout", type=int, default=1000)
    parser.add_argument("--slots", type=int, default=default_slots(), help="per worker")
    parser.add_argument("--failovers", type=int, default=5, help="kills of each kind")
    args = parser.parse_args()
    parallelism = WORKERS * args.slots
    with cluster(args.slots) as run:
        client = run.client()
        client.ensure_project("bench")
        run_chain(client, 20)  # warm-up: imports, connections, PostgreSQL plans
        gaps = run_chain(client, args.chain)
        floor = spawn_floor(args.fanout, parallelism)
        members = run.masters() + run.workers()
        fanout = run_fanout(client, args.fanout, [m.pid for m in members])
        masters, workers = [], []
        if args.failovers:
            failover.define(run)
            masters = [failover.master_trial(run) for _ in range(args.failovers)]
            workers = [failover.worker_trial(run, args.slots) for _ in range(args.failovers)]
    rows = [
        *chain_rows(gaps, CHAIN_TARGET_MS),
        # Informational here: the cluster's one target is the chain gap.
        *fanout_rows(floor, parallelism, fanout, min_ratio=None),
        *rss_rows(members, fanout),
        *(failover.rows(masters, workers) if masters else []),
    ]
    spread = ", ".join(f"{host} {n}" for host, n in sorted(fanout.leaves_by_host.items()))
    title = (
        f"dsched cluster ({MASTERS} masters, {WORKERS} workers, PostgreSQL, ZooKeeper), "
        f"{args.chain}-task chain, {args.fanout}-task fan-out, {args.slots} slots per worker, "
        f"{os.cpu_count()} CPUs\nfan-out leaves per worker: {spread}"
    )
    return report(title, rows)


if __name__ == "__main__":
    sys.exit(main())
