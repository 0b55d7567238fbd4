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

Usage: ``python tests/bench/standalone_bench.py [--chain N] [--fanout N] [--slots N]
[--server HOST:PORT]``. Without ``--server`` it starts its own standalone dsched in a temporary
directory. Exits 1 if a target is missed.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime

import psutil

from dsched import Client, Shell, Workflow
from dsched.results import TaskInstance
from dsched.server.standalone import use_pidfd_child_watcher


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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


def task_instances(client: Client, instance_id: int) -> list[TaskInstance]:
    return list(client.iter_task_instances(instance_id, page_size=1000))


def run_chain(client: Client, length: int) -> list[float]:
    with Workflow("bench_chain", project="bench") as wf:
        tasks = [Shell(f"t{i:04d}", "true") for i in range(length)]
        for up, down in itertools.pairwise(tasks):
            up >> down
    instance = wf.run(wait=True, client=client)
    assert instance.state == "SUCCEEDED", instance
    by_name = {t.task_name: t for t in task_instances(client, instance.id)}
    gaps = []
    for i in range(1, length):
        ended, started = by_name[f"t{i - 1:04d}"].end_time, by_name[f"t{i:04d}"].start_time
        assert ended is not None and started is not None
        gaps.append((started - ended).total_seconds() * 1000)
    return gaps


class RssSampler:
    """Samples a process's RSS every 20 ms in a thread; ``peak`` is the maximum seen (bytes)."""

    def __init__(self, pid: int) -> None:
        self._proc = psutil.Process(pid)
        self._stop = threading.Event()
        self.peak = 0
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, self._proc.memory_info().rss)

    def __enter__(self) -> RssSampler:
        self.peak = self._proc.memory_info().rss
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()


def run_fanout(client: Client, width: int, pid: int) -> tuple[float, int]:
    with Workflow("bench_fanout", project="bench") as wf:
        root = Shell("root", "true")
        root >> [Shell(f"f{i:04d}", "true") for i in range(width)]
    wf.submit(client=client)
    with RssSampler(pid) as rss:
        instance = wf.run(wait=True, client=client)
    assert instance.state == "SUCCEEDED", instance
    leaves = [t for t in task_instances(client, instance.id) if t.task_name != "root"]
    assert len(leaves) == width
    first: datetime = min(t.start_time for t in leaves if t.start_time is not None)
    last: datetime = max(t.end_time for t in leaves if t.end_time is not None)
    return width / (last - first).total_seconds(), rss.peak


async def _spawn_floor(count: int, parallelism: int) -> float:
    """``count`` runs of ``bash -c true``, ``parallelism`` at a time, with the same asyncio
    subprocess machinery (pidfd child watcher on 3.11) the worker uses."""
    gate = asyncio.Semaphore(parallelism)

    async def one() -> None:
        async with gate:
            proc = await asyncio.create_subprocess_exec(
                "bash",
                "-c",
                "true",
                start_new_session=True,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.DEVNULL,
            )
            await proc.wait()

    start = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(count)))
    return count / (time.perf_counter() - start)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chain", type=int, default=200)
    parser.add_argument("--fanout", type=int, default=1000)
    parser.add_argument("--slots", type=int, default=max(4, 4 * (os.cpu_count() or 1)))
    args = parser.parse_args()
    with standalone(args.slots) as (address, pid), Client.connect(address) as client:
        client.ensure_project("bench")
        run_chain(client, 20)  # warm-up: imports, connections, SQLite pages
        gaps = run_chain(client, args.chain)
        use_pidfd_child_watcher()
        floor = asyncio.run(_spawn_floor(args.fanout, args.slots))
        throughput, peak_rss = run_fanout(client, args.fanout, pid)
    median = statistics.median(gaps)
    p95 = statistics.quantiles(gaps, n=20)[-1]
    ratio = throughput / floor
    rows = [
        ("chain gap median (ms)", f"{median:.2f}", "<= 10", median <= 10),
        ("chain gap p95 (ms)", f"{p95:.2f}", "-", True),
        ("spawn floor (tasks/s)", f"{floor:.0f}", f"{args.slots} in parallel", True),
        ("fan-out throughput (tasks/s)", f"{throughput:.0f}", "-", True),
        ("fan-out / floor", f"{ratio:.2f}", ">= 0.33", ratio >= 1 / 3),
        (
            "peak RSS master+worker (MB)",
            f"{peak_rss / 2**20:.0f}",
            "<= 300",
            peak_rss <= 300 * 2**20,
        ),
    ]
    print(
        f"\nstandalone dsched, {args.chain}-task chain, {args.fanout}-task fan-out, "
        f"{args.slots} worker slots, {os.cpu_count()} CPUs"
    )
    width = max(len(r[0]) for r in rows)
    print(f"{'metric':<{width}}  {'value':>8}  {'target':<14}  ok")
    for name, value, target, ok in rows:
        print(f"{name:<{width}}  {value:>8}  {target:<14}  {'yes' if ok else 'NO'}")
    return 0 if all(r[3] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
