"""Scale bench: does a long-lived standalone server stay flat and bounded from 1,000 to N runs?

Run with ``make bench-scale`` (not part of the test suite: figures depend on the machine). It starts
a real standalone server (a subprocess, its data in a fresh directory on disk, as
``standalone_bench`` does) and one client that starts N one-task runs (``true``) one after another,
each followed to its end by a watch the way ``dsched run --wait`` does (the path that used to leak
memory per watched instance). At the checkpoint (1,000 runs) and at N it measures, side by side:

* runs/s over the last ``--window`` runs before each checkpoint;
* the server's RSS (before the first run, at each checkpoint, after clean-up): of each of its
  processes (the standalone, which is the master, and its worker process when it has one) and
  their sum;
* the disk bytes (allocated blocks) and inodes the data directory holds, per run, in all and by
  part (the SQLite database with its WAL, task logs, working directories, the rest), and the bytes
  of the database pages in use (a delete frees pages for reuse; the file keeps its size);
* list latencies, the median of ``--samples`` calls through the SDK: instances by workflow (the
  busy one, and one with a single run), by project (one with a single run), by state (SUCCEEDED,
  which nearly all are, and FAILED, which none is), the task instances of the newest run and its
  events (a watch of the finished instance from its start).

Then the ratios (N / first checkpoint; flat is about 1). The server's RSS (its processes' sum)
is flat when at N and after the clean-up it is within ``RSS_FLAT`` (5 %) of its value at the
first checkpoint; the table also gives its growth per run between the two (a server that keeps
something per run shows it there, whatever the noise of the RSS). Clean-up is ``dsched cleanup
--older-than 1s --what request_ids,events,instances`` (every finished run's history on the
master) when this checkout has that command; otherwise the bench says "clean-up: not available"
and reports no after-clean-up figures. Task logs are the worker's, kept for
``log_retention_days`` (README "Retention"), so they stay. Exits 1 if a ratio is off its bound:
list latencies may grow at most 2x, RSS at most 5 % (after clean-up too), runs/s may drop at most
by half.

Usage: ``python -m tests.bench.scale_bench [--runs N] [--at K] [--window W] [--samples S]
[--slots N] [--data-parent DIR]`` from the repository root (``--runs 2000`` while developing:
50,000 one-task runs take about a quarter of an hour at 50 runs/s).
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil

from dsched import Client, Shell, Workflow
from tests.bench.common import (
    MB,
    Row,
    default_slots,
    fs_type,
    report_beside,
    task_instances,
)
from tests.bench.standalone_bench import standalone

PROJECT = "scale"
RARE_PROJECT = "scale_rare"
LATENCY_GROWTH = 2.0  # the most a list latency may grow from 1k to N (medians, a noisy machine)
RSS_FLAT = 1.05  # the most the RSS may grow from the first checkpoint to N and after clean-up
RUNS_DROP = 0.5


@dataclass(frozen=True, slots=True)
class Disk:
    """Allocated bytes and inodes (files, directories, links) by part of the data directory, and
    the bytes of the SQLite database's pages in use (its file keeps its size after a delete: freed
    pages are reused, not returned)."""

    parts: dict[str, tuple[int, int]]
    db_live: int

    @property
    def bytes(self) -> int:
        return sum(b for b, _ in self.parts.values())

    @property
    def inodes(self) -> int:
        return sum(i for _, i in self.parts.values())


PARTS = {"dsched.db": "database", "worker/logs": "task logs", "worker/exec": "working dirs"}


def _part(relative: str) -> str:
    for prefix, part in PARTS.items():
        if relative.startswith(prefix):
            return part
    return "other"


def disk_usage(root: Path) -> Disk:
    parts: dict[str, tuple[int, int]] = {p: (0, 0) for p in (*PARTS.values(), "other")}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in (*dirnames, *filenames):
            path = os.path.join(dirpath, name)
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                continue  # removed while we walked (a working directory at its attempt's end)
            part = _part(os.path.relpath(path, root))
            used, inodes = parts[part]
            parts[part] = (used + st.st_blocks * 512, inodes + 1)
    with sqlite3.connect(f"file:{root / 'dsched.db'}?mode=ro", uri=True) as db:
        pages = db.execute("PRAGMA page_count").fetchone()[0]
        free = db.execute("PRAGMA freelist_count").fetchone()[0]
        size = db.execute("PRAGMA page_size").fetchone()[0]
    return Disk(parts, (pages - free) * size)


def data_dir_of(pid: int) -> Path:
    """The ``--data-dir`` the standalone server was started with."""
    argv = psutil.Process(pid).cmdline()
    return Path(argv[argv.index("--data-dir") + 1])


def median_ms(call: Callable[[], object], samples: int) -> float:
    call()  # a first call warms caches and connections; the median ignores it anyway
    times = []
    for _ in range(samples):
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def latencies(client: Client, samples: int) -> dict[str, float]:
    """Median milliseconds of each listing (first page, 50 items)."""
    newest = client.list_instances(project=PROJECT, workflow="one", page_size=1).items[0].id
    calls: dict[str, Callable[[], object]] = {
        "instances by workflow": lambda: client.list_instances(project=PROJECT, workflow="one"),
        "instances by workflow (1 run)": lambda: client.list_instances(
            project=RARE_PROJECT, workflow="lone"
        ),
        "instances by project (1 run)": lambda: client.list_instances(project=RARE_PROJECT),
        "instances by state SUCCEEDED": lambda: client.list_instances(states=["SUCCEEDED"]),
        "instances by state FAILED (none)": lambda: client.list_instances(states=["FAILED"]),
        "task instances": lambda: task_instances(client, newest),
        "events (watch of a finished run)": lambda: list(client.watch_instance(newest)),
    }
    return {name: median_ms(call, samples) for name, call in calls.items()}


@dataclass(frozen=True, slots=True)
class Checkpoint:
    runs: int
    runs_per_second: float
    rss: dict[str, int]  # by process
    disk: Disk
    latency_ms: dict[str, float]


def rss_of(processes: dict[str, psutil.Process]) -> dict[str, int]:
    """The RSS of each process (bytes), by name."""
    return {name: p.memory_info().rss for name, p in processes.items()}


def one_run(client: Client) -> None:
    """A run started and followed to its end as ``dsched run --wait`` does."""
    instance = client.start_workflow(PROJECT, "one")
    final = client.wait(instance.id)
    assert final.state == "SUCCEEDED", final


def cleanup_command() -> list[str] | None:
    """The ``dsched cleanup`` command line of this checkout, or None if it has none."""
    dsched = [sys.executable, "-m", "dsched.cli.main"]
    probe = subprocess.run([*dsched, "cleanup", "--help"], capture_output=True, text=True)
    return [*dsched, "cleanup"] if probe.returncode == 0 else None


def run_cleanup(command: list[str], address: str) -> str:
    """Deletes the history of every finished instance (all of it: the youngest is older than the
    one second the command takes at least); returns the command's output."""
    time.sleep(1.1)
    what = "request_ids,events,instances"
    done = subprocess.run(
        [*command, "--server", address, "--older-than", "1s", "--what", what],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise SystemExit(f"clean-up failed ({done.returncode}): {done.stdout}{done.stderr}")
    return done.stdout.strip()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50_000)
    parser.add_argument("--at", type=int, default=1_000, help="the first checkpoint (runs)")
    parser.add_argument("--window", type=int, default=500, help="runs timed before a checkpoint")
    parser.add_argument("--samples", type=int, default=30, help="calls per list latency")
    parser.add_argument("--slots", type=int, default=default_slots())
    parser.add_argument("--data-parent", help="where the data directory goes (default: temp dir)")
    args = parser.parse_args()
    if not 0 < args.window <= args.at < args.runs:
        parser.error("need 0 < --window <= --at < --runs")
    command = cleanup_command()
    load = os.getloadavg()[0]
    with (
        standalone(args.slots, args.data_parent) as (address, pids),
        Client.connect(address) as client,
    ):
        # Task processes and the reaper are not the server's: its master and its worker are.
        processes = {"standalone (master)": psutil.Process(pids[0])}
        if len(pids) > 1:
            processes["its worker process"] = psutil.Process(pids[1])
        data_dir = data_dir_of(pids[0])
        for project, name in ((PROJECT, "one"), (RARE_PROJECT, "lone")):
            client.ensure_project(project)
            with Workflow(name, project=project) as wf:
                Shell("only", "true")
            wf.run(wait=True, client=client)  # submits it, puts it online, warms the path up
        base_rss, base_disk = rss_of(processes), disk_usage(data_dir)
        checkpoints: list[Checkpoint] = []
        window_start = time.perf_counter()
        for done in range(1, args.runs + 1):
            if done in (args.at - args.window + 1, args.runs - args.window + 1):
                window_start = time.perf_counter()
            one_run(client)
            if done in (args.at, args.runs):
                rate = args.window / (time.perf_counter() - window_start)
                checkpoints.append(
                    Checkpoint(
                        done,
                        rate,
                        rss_of(processes),
                        disk_usage(data_dir),
                        latencies(client, args.samples),
                    )
                )
                print(f"{done} runs: {checkpoints[-1]}", flush=True)  # kept if a long run dies
            elif done % 5000 == 0:
                print(f"{done} runs", flush=True)
        cleaned = None
        if command is not None:
            print(run_cleanup(command, address))
            cleaned = (rss_of(processes), disk_usage(data_dir))
    first, last = checkpoints
    table = table_of(first, last, base_disk, cleaned)
    title = (
        f"standalone dsched at scale: {args.runs} one-task runs, each with a watch to its end; "
        f"{args.slots} worker slots, {os.cpu_count()} CPUs, data on {fs_type(str(data_dir))}; "
        f"load average {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end"
    )
    code = report_beside(title, table.columns)
    before = ", ".join(f"{name} {rss / MB:.1f}" for name, rss in base_rss.items())
    print(f"server RSS before the first run: {sum(base_rss.values()) / MB:.1f} MB ({before})")
    if cleaned is None:
        print("clean-up: not available (this checkout has no `dsched cleanup`)")
    return code


class Table:
    """The report's columns: the first checkpoint, the last, their ratio (flat is about 1) and
    after clean-up; a row's target is the bound on its ratio."""

    def __init__(self, first: Checkpoint, last: Checkpoint) -> None:
        self.first, self.last = first, last
        self.columns: dict[str, list[Row]] = {
            f"{first.runs} runs": [],
            f"{last.runs} runs": [],
            "ratio": [],
            "after clean-up": [],
        }

    def add(
        self,
        name: str,
        values: tuple[float, float],
        digits: int = 2,
        bound: float | None = None,
        grow: bool = True,
        after: float | None = None,
    ) -> None:
        """``values`` at both checkpoints; ``bound`` on their ratio (at most if ``grow``, else at
        least); ``after``: the value after clean-up, held to the same bound against the first."""
        at_first, at_last = values
        target = "-" if bound is None else f"{'<=' if grow else '>='} {bound:g}x"

        def ok(ratio: float) -> bool:
            return bound is None or (ratio <= bound if grow else ratio >= bound)

        first, last, ratios, cleaned = self.columns.values()
        first.append((name, f"{at_first:.{digits}f}", target, True))
        last.append((name, f"{at_last:.{digits}f}", target, True))
        if at_first:  # nothing to compare with where the first checkpoint has none of it
            ratios.append((name, f"{at_last / at_first:.2f}", target, ok(at_last / at_first)))
        if after is not None:
            held = not at_first or ok(after / at_first)
            cleaned.append((name, f"{after:.{digits}f}", target, held))


def table_of(
    first: Checkpoint,
    last: Checkpoint,
    base_disk: Disk,
    cleaned: tuple[dict[str, int], Disk] | None,
) -> Table:
    def kb(part: str | None) -> Callable[[Disk, int], float]:
        def of(disk: Disk, runs: int) -> float:
            now = disk.bytes if part is None else disk.parts[part][0]
            base = base_disk.bytes if part is None else base_disk.parts[part][0]
            return (now - base) / runs / 1024

        return of

    def inodes(disk: Disk, runs: int) -> float:
        return (disk.inodes - base_disk.inodes) / runs

    def live_kb(disk: Disk, runs: int) -> float:
        return (disk.db_live - base_disk.db_live) / runs / 1024

    table = Table(first, last)
    rate = (first.runs_per_second, last.runs_per_second)
    table.add("runs/s", rate, 1, RUNS_DROP, grow=False)
    total = (sum(first.rss.values()), sum(last.rss.values()))
    after = sum(cleaned[0].values()) if cleaned else None
    table.add(
        "server RSS, all its processes (MB)",
        (total[0] / MB, total[1] / MB),
        1,
        RSS_FLAT,
        after=after and after / MB,
    )
    for name in first.rss:
        table.add(
            f"  {name} (MB)",
            (first.rss[name] / MB, last.rss[name] / MB),
            1,
            after=cleaned and cleaned[0][name] / MB,
        )
    runs_between = last.runs - first.runs
    table.add(
        "  growth of the sum since the first checkpoint (KB/run)",
        (0.0, (total[1] - total[0]) / runs_between / 1024),
        3,
        after=after and (after - total[0]) / runs_between / 1024,
    )
    per_run: list[tuple[str, Callable[[Disk, int], float]]] = [
        ("disk per run (KB)", kb(None)),
        ("inodes per run", inodes),
        *((f"  {part} (KB/run)", kb(part)) for part in base_disk.parts),
        ("  database pages in use (KB/run)", live_kb),
    ]
    for name, of in per_run:
        values = (of(first.disk, first.runs), of(last.disk, last.runs))
        table.add(name, values, after=cleaned and of(cleaned[1], last.runs))
    for name, ms in first.latency_ms.items():
        table.add(f"{name} (ms)", (ms, last.latency_ms[name]), 2, LATENCY_GROWTH)
    return table


if __name__ == "__main__":
    sys.exit(main())
