"""Benchmark of standalone dsched: chain latency, fan-out throughput against the spawn floor,
one-task runs per second, RSS; ``make bench`` runs it and then the cluster bench, and prints both
side by side.

Run with ``make bench`` (not part of the test suite: figures depend on the machine). Everything is
measured in one run and reported as ratios where that matters, because these machines are noisy.
The targets (``tests/bench/common.py``) are those of issue 9:

* chain gap: a 200-task chain of ``true``; the gap is a task's start minus its upstream's end, both
  taken on the worker (target: median <= 5 ms, p95 <= 10 ms).
* fan-out throughput: one root and 1,000 parallel ``true`` tasks; tasks finished per second
  between the first start and the last end, next to the floor measured right before it: spawning
  ``bash -c true`` 1,000 times directly with the same parallelism as the worker's slots
  (target: >= 0.5 x the floor).
* one-task runs: 300 runs of a one-task workflow started one after another by one client (each
  StartWorkflow after the previous one returned, not waiting for the runs); completed runs per
  second from the first start to the last end (target: >= 150), and the CPU the server's process
  tree (the server, its children, the task processes it reaped) used per run.
* RSS of the standalone server (master + worker, the worker process's included when it has
  one; task processes and the reaper excluded) sampled during the fan-out (target: <= 300 MB).
* backfill (issue 10, ``tests/bench/backfill_bench.py``): 365 daily dates of a 5-task chain of
  ``true``, PARALLEL 8, from CreateBackfill to SUCCEEDED (target: <= 15 s), next to the same
  1,825 tasks as one run's fan-out, and their ratio. The standalone only (the cluster's column
  leaves these rows empty).

The data directory is a fresh temporary directory under ``--data-parent`` (default: the system's
temporary directory); its file system type is printed, because tmpfs flatters the figures.

Usage: ``python -m tests.bench.standalone_bench [--chain N] [--fanout N] [--singles N] [--slots N]
[--data-parent DIR] [--cluster] [--no-settle]`` from the repository root. Unless
``--no-settle``, it first waits until 75 s have passed since a bench last removed its data
directory (``tests/bench/common.py``, ``SETTLE_S``: on ext4 without a journal the inodes freed
then slow down every file created for a minute or more). Exits 1 if a target is missed by
the standalone: the targets are issue 9's for the standalone; the cluster (``--cluster``, what
``make bench`` runs) is reported beside it, marked ``(!)`` where it is beyond a target, without
changing the exit status.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO

from dsched import Client
from tests.bench import backfill_bench
from tests.bench.common import (
    MB,
    NEVER_BUSY,
    Row,
    chain_rows,
    data_removed,
    default_slots,
    fanout_rows,
    free_port,
    fs_type,
    report_beside,
    run_chain,
    run_fanout,
    run_singles,
    settle,
    singles_rows,
    spawn_floor,
)


@contextmanager
def standalone(
    slots: int, data_parent: str | None = None, worker: str | None = None
) -> Iterator[tuple[str, list[int]]]:
    """Starts ``dsched standalone`` with its data in a fresh directory under ``data_parent`` (and
    ``--worker worker`` if given) and yields (address, pids): the standalone's, then its worker
    process's if it has one; stops it with SIGTERM."""
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="dsched-bench-", dir=data_parent) as data_dir:
        env = {
            **os.environ,
            **NEVER_BUSY,
            "DSCHED_WORKER_SLOTS": str(slots),
            "DSCHED_LOG_LEVEL": "WARNING",
        }
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "dsched_server.standalone",
                "--port",
                str(port),
                "--data-dir",
                data_dir,
                *(["--worker", worker] if worker else []),
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        assert proc.stdout is not None
        line = proc.stdout.readline()  # the "is up" line (or an error)
        if "is up" not in line:
            proc.kill()
            raise SystemExit(f"standalone did not start: {line}{proc.stdout.read()}")
        child = re.search(r"\(process (\d+)\)", line)
        # The server's log is read to the end: a full pipe would block it at its next warning.
        drain = threading.Thread(target=_drain, args=(proc.stdout,), daemon=True)
        drain.start()
        try:
            yield f"127.0.0.1:{port}", [proc.pid, *([int(child[1])] if child else [])]
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
    data_removed()


def _drain(stream: IO[str]) -> None:
    for _ in stream:
        pass


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options both benches take."""
    parser.add_argument("--chain", type=int, default=200)
    parser.add_argument("--fanout", type=int, default=1000)
    parser.add_argument("--singles", type=int, default=300, help="one-task runs")
    parser.add_argument("--slots", type=int, default=default_slots(), help="per worker")


def measure(args: argparse.Namespace) -> list[Row]:
    """Runs the standalone's workloads; returns its rows."""
    with (
        standalone(args.slots, args.data_parent, args.worker) as (address, pids),
        Client.connect(address) as c,
    ):
        c.ensure_project("bench")
        run_chain(c, 20)  # warm-up: imports, connections, SQLite pages
        gaps = run_chain(c, args.chain)
        singles = run_singles(c, args.singles, pids)
        floor = spawn_floor(args.fanout, args.slots)
        fanout = run_fanout(c, args.fanout, pids)
        backfill = backfill_bench.measure(c, pids)
    return [
        *chain_rows(gaps),
        *fanout_rows(floor, args.slots, fanout),
        *singles_rows(singles, args.singles),
        (
            "peak RSS of the servers (MB)",
            f"{fanout.peak_rss / MB:.0f}",
            "<= 300",
            fanout.peak_rss <= 300 * MB,
        ),
        *backfill_bench.rows(backfill),
    ]


def title(args: argparse.Namespace, start_load: float) -> str:
    """The table's title; ``start_load``: the 1-minute load average when the bench began (the
    bench itself raises it; the one at the end is added)."""
    data = args.data_parent or tempfile.gettempdir()
    return (
        f"{args.chain}-task chain, {args.fanout}-task fan-out, {args.singles} one-task runs, "
        f"{args.slots} slots per worker, {os.cpu_count()} CPUs, load average "
        f"{start_load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end; "
        f"standalone data in {data} ({fs_type(data)})"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser)
    parser.add_argument("--data-parent", default=None, help="where the data directory goes")
    parser.add_argument(
        "--worker", default=None, help="the standalone's --worker (default: its default)"
    )
    parser.add_argument(
        "--cluster", action="store_true", help="then the cluster bench, side by side"
    )
    parser.add_argument(
        "--no-settle",
        action="store_true",
        help="measure at once, also right after another bench removed its data (see SETTLE_S)",
    )
    args = parser.parse_args()
    if not args.no_settle:
        settle("standalone")
    start_load = os.getloadavg()[0]
    columns = {"standalone": measure(args)}
    if args.cluster:
        from tests.bench import cluster_bench  # imports the cluster harness: only when asked

        if not args.no_settle:
            settle("cluster")
        columns["cluster"] = cluster_bench.measure(args)
    return report_beside(
        title(args, start_load),
        columns,
        targets_for="standalone",
    )


if __name__ == "__main__":
    sys.exit(main())
