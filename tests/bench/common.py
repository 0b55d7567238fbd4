"""What the benchmarks share: the chain and fan-out workloads, the spawn floor, RSS sampling,
the report table and the repeat-and-median ``main`` of the task overhead benches. Each bench
script starts its own servers and calls these with a connected :class:`~dsched.Client`; nothing
here knows whether it talks to a standalone or a cluster.

Times of a task come from the task instance rows, which the workers stamp with their own clocks;
all servers of a bench run on this machine, so gaps between tasks run by different workers are
still measured on one clock.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import itertools
import os
import socket
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import psutil

from dsched import Client, Shell, Workflow
from dsched.results import TaskInstance
from dsched_server.standalone import use_pidfd_child_watcher

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

MB = 2**20
# ext4 without a journal (this development machine's disk: /proc/fs/jbd2 is empty) skips, when it
# allocates an inode, every inode of the block group freed lately, reading its inode table block
# each time (find_inode_bit and recently_deleted, fs/ext4/ialloc.c: 60 s from the deletion, more
# while the block is dirty). A bench removing its data directory frees thousands of inodes; every
# log file and directory that a bench started right after creates then costs up to 15 times more,
# which made the second and third of three back-to-back `make bench` runs markedly slower. The
# worker's log root is a top directory and each day's directory under it is made under a scratch
# name, so that ext4 places it in a block group of its own (dsched_worker/topdir.py): a bench's
# logs no longer land where the last bench's removed ones were. The rest of a data directory (the
# master's database, the working directories' roots) still shares its parent's group, and a
# removal costs others as well: measured here (1,000 files created after 3,000 were removed in
# their group) 36 s after the removal 185 us per file, 70 s after 35 us. So a bench notes when it
# removed its data (STAMP's modification time) and the next one waits until SETTLE_S have passed
# before measuring.
SETTLE_S = 75.0
STAMP = Path(tempfile.gettempdir()) / "dsched-bench-data-removed"
# Servers of a bench never call themselves BUSY for the machine's CPU: the bench loads the machine
# on purpose (and other work may share it), and a master that stops claiming commands at 90 % CPU
# measures admission control, not dsched's overhead.
NEVER_BUSY = {"DSCHED_CPU_THRESHOLD": "1.0"}

# (metric, value, target, met)
Row = tuple[str, str, str, bool]
# One repetition's figures: a dataclass whose fields are all floats (see median_of_repeats).
Figures = TypeVar("Figures", bound="DataclassInstance")


def data_removed() -> None:
    """Notes that a bench has just removed a data directory (see :data:`SETTLE_S`)."""
    STAMP.touch()


def settle(what: str) -> None:
    """Waits until :data:`SETTLE_S` seconds have passed since a bench last removed a data
    directory, saying so if it waits; ``what``: what is about to be measured."""
    try:
        wait = SETTLE_S - (time.time() - STAMP.stat().st_mtime)
    except FileNotFoundError:
        return
    if wait > 0:
        print(
            f"waiting {wait:.0f} s before the {what}: the inodes a bench freed when it removed "
            f"its data directory age out of ext4's recently-deleted window",
            flush=True,
        )
        time.sleep(wait)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def default_slots() -> int:
    return max(4, 4 * (os.cpu_count() or 1))


def task_instances(client: Client, instance_id: int) -> list[TaskInstance]:
    return list(client.iter_task_instances(instance_id, page_size=1000))


def run_chain(client: Client, length: int) -> list[float]:
    """Runs a ``length``-task chain of ``true``; returns each task's start minus its upstream's
    end, in milliseconds (``length - 1`` gaps)."""
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
    """Samples the RSS of some processes every 20 ms in a thread. ``peaks`` holds each process's
    maximum by pid and ``peak`` the maximum of their sum (bytes); with one pid they are equal."""

    def __init__(self, pids: Sequence[int]) -> None:
        self._procs = [psutil.Process(pid) for pid in pids]
        self._stop = threading.Event()
        self.peak = 0
        self.peaks: dict[int, int] = {p.pid: 0 for p in self._procs}
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> None:
        total = 0
        for proc in self._procs:
            rss = proc.memory_info().rss
            self.peaks[proc.pid] = max(self.peaks[proc.pid], rss)
            total += rss
        self.peak = max(self.peak, total)

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            self._sample()

    def __enter__(self) -> RssSampler:
        self._sample()
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()


@dataclass(frozen=True, slots=True)
class Fanout:
    """A fan-out's throughput (leaves per second, first start to last end), the peak of the summed
    RSS of the sampled processes and each one's own peak (bytes, by pid), and how many leaves each
    worker ran (by task instance host)."""

    throughput: float
    peak_rss: int
    peak_rss_by_pid: dict[int, int]
    leaves_by_host: dict[str, int] = field(default_factory=dict)


def run_fanout(client: Client, width: int, pids: Sequence[int]) -> Fanout:
    """One root and ``width`` parallel ``true`` tasks, sampling the RSS of ``pids`` meanwhile."""
    with Workflow("bench_fanout", project="bench") as wf:
        root = Shell("root", "true")
        root >> [Shell(f"f{i:04d}", "true") for i in range(width)]
    wf.submit(client=client)
    with RssSampler(pids) as rss:
        instance = wf.run(wait=True, client=client)
    assert instance.state == "SUCCEEDED", instance
    leaves = [t for t in task_instances(client, instance.id) if t.task_name != "root"]
    assert len(leaves) == width
    first: datetime = min(t.start_time for t in leaves if t.start_time is not None)
    last: datetime = max(t.end_time for t in leaves if t.end_time is not None)
    hosts: dict[str, int] = {}
    for leaf in leaves:
        hosts[leaf.host] = hosts.get(leaf.host, 0) + 1
    return Fanout(width / (last - first).total_seconds(), rss.peak, dict(rss.peaks), hosts)


def tree_cpu(pids: Sequence[int]) -> float:
    """CPU seconds (user + system) used so far by these processes, their live descendants and
    the children each of them reaped (task processes included). Each process counts once, also
    when it is one of ``pids`` and a descendant of another (a standalone's worker process)."""
    procs: dict[int, psutil.Process] = {}
    for pid in pids:
        root = psutil.Process(pid)
        procs[pid] = root
        with contextlib.suppress(psutil.Error):
            procs.update((child.pid, child) for child in root.children(recursive=True))
    total = 0.0
    for proc in procs.values():
        with contextlib.suppress(psutil.Error):  # a task that ended meanwhile
            times = proc.cpu_times()
            # A standalone's worker process reaps the tasks: their CPU is in its children_*.
            total += times.user + times.system + times.children_user + times.children_system
    return total


@dataclass(frozen=True, slots=True)
class Singles:
    """One-task runs started one after another: completed runs per second (the first start to
    the last instance's end) and the CPU the server process tree used per run (seconds)."""

    runs_per_second: float
    cpu_per_run: float


def run_singles(client: Client, count: int, pids: Sequence[int]) -> Singles:
    """Starts ``count`` runs of a one-task workflow (``true``), each StartWorkflow call after the
    previous one returned, without waiting for the runs; then waits for them all."""
    with Workflow("bench_single", project="bench") as wf:
        Shell("only", "true")
    wf.run(wait=True, client=client)  # submits it and warms the path up
    cpu_before = tree_cpu(pids)
    started = datetime.now(UTC)
    ids = [client.start_workflow("bench", "bench_single").id for _ in range(count)]
    ends = []
    for instance_id in reversed(ids):  # the last started is usually the last to end
        instance = client.wait(instance_id)
        assert instance.state == "SUCCEEDED" and instance.end_time is not None, instance
        ends.append(instance.end_time)
    cpu = tree_cpu(pids) - cpu_before
    return Singles(count / (max(ends) - started).total_seconds(), cpu / count)


async def _spawn_floor(count: int, parallelism: int) -> float:
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


def spawn_floor(count: int, parallelism: int) -> float:
    """Tasks per second of ``count`` runs of ``bash -c true``, ``parallelism`` at a time, with the
    same asyncio subprocess machinery (pidfd child watcher on 3.11) the worker uses."""
    use_pidfd_child_watcher()
    return asyncio.run(_spawn_floor(count, parallelism))


# The targets of issue 9 (figures measured in one run). They are the standalone's; the cluster bench
# reports its figures against the same bars, beside the standalone's.
CHAIN_MEDIAN_MS = 5.0
CHAIN_P95_MS = 10.0
FANOUT_RATIO = 0.5
RUNS_PER_SECOND = 150.0


def chain_rows(
    gaps: Sequence[float], median_ms: float = CHAIN_MEDIAN_MS, p95_ms: float = CHAIN_P95_MS
) -> list[Row]:
    median = statistics.median(gaps)
    p95 = statistics.quantiles(gaps, n=20)[-1]
    return [
        ("chain gap median (ms)", f"{median:.2f}", f"<= {median_ms:g}", median <= median_ms),
        ("chain gap p95 (ms)", f"{p95:.2f}", f"<= {p95_ms:g}", p95 <= p95_ms),
    ]


def singles_rows(singles: Singles, count: int) -> list[Row]:
    rate = singles.runs_per_second
    return [
        (
            f"one-task runs/s ({count} started in a row)",
            f"{rate:.0f}",
            f">= {RUNS_PER_SECOND:g}",
            rate >= RUNS_PER_SECOND,
        ),
        ("server tree CPU per run (ms)", f"{singles.cpu_per_run * 1000:.1f}", "-", True),
    ]


def fanout_rows(
    floor: float, parallelism: int, fanout: Fanout, min_ratio: float | None = FANOUT_RATIO
) -> list[Row]:
    """The floor, the throughput and their ratio; ``min_ratio`` None reports the ratio only."""
    ratio = fanout.throughput / floor
    target = "-" if min_ratio is None else f">= {min_ratio:.2f}"
    met = min_ratio is None or ratio >= min_ratio
    return [
        ("spawn floor (tasks/s @ in parallel)", f"{floor:.0f} @{parallelism}", "-", True),
        ("fan-out throughput (tasks/s)", f"{fanout.throughput:.0f}", "-", True),
        ("fan-out / floor", f"{ratio:.2f}", target, met),
    ]


def fs_type(path: str) -> str:
    """The type of the file system holding ``path`` (the bench's data must not be on tmpfs)."""
    real = os.path.realpath(path)
    best = max(
        (p for p in psutil.disk_partitions(all=True) if real.startswith(p.mountpoint)),
        key=lambda p: len(p.mountpoint),
        default=None,
    )
    return best.fstype if best is not None else "unknown"


def report_beside(
    title: str, columns: Mapping[str, Sequence[Row]], targets_for: str | None = None
) -> int:
    """Prints ``title`` and one table with a value column per setup (rows matched by metric,
    in first-seen order; a target is the first column's); returns 1 if a target is missed.
    ``targets_for``: the one column the targets are for (the others are reported beside it: a
    figure of theirs beyond a target is marked, but does not make the exit status 1)."""
    print(f"\n{title}")
    names: list[str] = []
    targets: dict[str, str] = {}
    values: dict[tuple[str, str], tuple[str, bool]] = {}
    for column, rows in columns.items():
        for name, value, target, ok in rows:
            if name not in targets:
                names.append(name)
                targets[name] = target
            values[column, name] = (value, ok)
    width = max(len(n) for n in names)
    widths = {c: max(8, len(c) + 2) for c in columns}
    heads = {c: c if targets_for in (None, c) else f"({c})" for c in columns}
    print(
        f"{'metric':<{width}}  "
        + "  ".join(f"{heads[c]:>{widths[c]}}" for c in columns)
        + "  target"
    )
    missed = False
    for name in names:
        cells = []
        for column in columns:
            value, ok = values.get((column, name), ("", True))
            binding = targets_for in (None, column)
            missed |= binding and not ok
            mark = "" if ok else " !" if binding else " (!)"
            cells.append(f"{value + mark:>{widths[column]}}")
        print(f"{name:<{width}}  " + "  ".join(cells) + f"  {targets[name]}")
    if targets_for is None:
        print("(! marks a missed target)")
    else:
        others = ", ".join(c for c in columns if c != targets_for)
        print(
            f"(the targets are the {targets_for}'s: ! marks one it missed, and only those make "
            f"the exit status 1; {others or 'nothing else'} reported beside it, (!) where a figure "
            "is beyond the target)"
        )
    return 1 if missed else 0


def report(title: str, rows: Sequence[Row]) -> int:
    """Prints ``title`` and the table; returns the exit code (1 if a target is missed)."""
    print(f"\n{title}")
    width = max(len(r[0]) for r in rows)
    print(f"{'metric':<{width}}  {'value':>8}  {'target':<14}  ok")
    for name, value, target, ok in rows:
        print(f"{name:<{width}}  {value:>8}  {target:<14}  {'yes' if ok else 'NO'}")
    return 0 if all(r[3] for r in rows) else 1


def median_of_repeats(
    what: str,
    description: str,
    runs: int,
    measure: Callable[[int, int], Figures],
    rows: Callable[[Figures], Sequence[Row]],
) -> int:
    """The ``main`` of a bench that measures ``--runs`` one-task runs on a fresh server,
    ``--repeat`` times, and reports each figure's median over the repetitions (the PYTHON and
    SPARK task overhead benches): parses ``--runs`` (default ``runs``), ``--repeat``, ``--slots``
    and ``--no-settle``; per repetition settles (unless ``--no-settle``), calls
    ``measure(runs, slots)`` and prints its figures; then prints the table of ``rows`` of the
    field-wise medians under a title of ``what`` with the load average at the start and the end
    (the machine is shared: a loaded machine stretches every figure). Returns
    :func:`report`'s exit code; ``description`` is the command line's."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--runs", type=int, default=runs, help="one-task runs per repetition")
    parser.add_argument("--repeat", type=int, default=1, help="fresh servers; medians reported")
    parser.add_argument("--slots", type=int, default=default_slots(), help="the worker's")
    parser.add_argument("--no-settle", action="store_true", help="see tests/bench/common.py")
    args = parser.parse_args()
    load = os.getloadavg()
    results = []
    for n in range(args.repeat):
        if not args.no_settle:
            settle(what)
        result = measure(args.runs, args.slots)
        results.append(result)
        print(f"run {n + 1}: {result}", flush=True)
    median = dataclasses.replace(
        results[0],
        **{
            f.name: statistics.median(getattr(r, f.name) for r in results)
            for f in dataclasses.fields(results[0])
        },
    )
    end = os.getloadavg()
    title = (
        f"{what}: median of {args.runs} one-task runs, median of {args.repeat} "
        f"repetition(s); {os.cpu_count()} CPUs, load average {load[0]:.2f} {load[1]:.2f} "
        f"{load[2]:.2f} at the start, {end[0]:.2f} {end[1]:.2f} {end[2]:.2f} at the end"
    )
    return report(title, rows(median))
