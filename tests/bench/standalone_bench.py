"""Benchmark of standalone dsched: chain latency, fan-out throughput against the spawn floor, RSS.

Run with ``make bench`` (not part of the test suite: figures depend on the machine). Everything is
measured in one run and reported as ratios where that matters, because these machines are noisy:

* chain gap: a 200-task chain of ``true``; the gap is a task's start minus its upstream's end, both
  taken on the worker (median and p95; target: median <= 10 ms).
* fan-out throughput: one root and 1,000 parallel ``true`` tasks; tasks finished per second
  between the first start and the last end, next to the floor measured right before it: spawning
  ``bash -c true`` 1,000 times directly with the same parallelism as the worker's slots
  (target: >= 1/3 of the floor).
* RSS of the standalone process (master + worker; task processes excluded) sampled during the
  fan-out (target: <= 300 MB).

Usage: ``python -m tests.bench.standalone_bench [--chain N] [--fanout N] [--slots N]`` from the
repository root. It starts its own standalone dsched in a temporary directory. Exits 1 if a target
is missed. The workloads and the table live in ``tests/bench/common.py``, shared with
``cluster_bench.py``.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

from dsched import Client
from tests.bench.common import (
    MB,
    chain_rows,
    default_slots,
    fanout_rows,
    free_port,
    report,
    run_chain,
    run_fanout,
    spawn_floor,
)


@contextmanager
def standalone(slots: int) -> Iterator[tuple[str, int]]:
    """Starts ``dsched standalone`` and yields (address, pid); stops it with SIGTERM."""
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="dsched-bench-") as data_dir:
        env = {**os.environ, "DSCHED_WORKER_SLOTS": str(slots), "DSCHED_LOG_LEVEL": "WARNING"}
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "dsched.server.standalone",
                "--port",
                str(port),
                "--data-dir",
                data_dir,
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
        try:
            yield f"127.0.0.1:{port}", proc.pid
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chain", type=int, default=200)
    parser.add_argument("--fanout", type=int, default=1000)
    parser.add_argument("--slots", type=int, default=default_slots())
    args = parser.parse_args()
    with standalone(args.slots) as (address, pid), Client.connect(address) as client:
        client.ensure_project("bench")
        run_chain(client, 20)  # warm-up: imports, connections, SQLite pages
        gaps = run_chain(client, args.chain)
        floor = spawn_floor(args.fanout, args.slots)
        fanout = run_fanout(client, args.fanout, [pid])
    rows = [
        *chain_rows(gaps, target_ms=10),
        *fanout_rows(floor, args.slots, fanout),
        (
            "peak RSS master+worker (MB)",
            f"{fanout.peak_rss / MB:.0f}",
            "<= 300",
            fanout.peak_rss <= 300 * MB,
        ),
    ]
    title = (
        f"standalone dsched, {args.chain}-task chain, {args.fanout}-task fan-out, "
        f"{args.slots} worker slots, {os.cpu_count()} CPUs"
    )
    return report(title, rows)


if __name__ == "__main__":
    sys.exit(main())
