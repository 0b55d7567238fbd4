"""Benchmark of a backfill on standalone dsched (issue 10, acceptance 6b): 365 daily dates of a
workflow of 5 chained ``true`` tasks, PARALLEL 8; the wall time from the CreateBackfill call until
the backfill reads SUCCEEDED (target: <= 15 s), next to the same 1,825 tasks run as one fan-out
(one run of 1,825 parallel ``true`` tasks, start to SUCCEEDED) measured in the same run, and the
ratio of the two: what running the work as 365 runs, 8 at a time, costs over one run.

Chained rather than 5 parallel tasks: each date's run then holds one worker slot at a time, so
PARALLEL 8 is what limits it (not the slots), and every run pays 5 dispatches in a row: the
backfill's own path (a run started per freed slot, its advance) is what is measured.

``make bench`` runs it inside the standalone bench (``standalone_bench.measure``). Alone:
``python -m tests.bench.backfill_bench [--dates N] [--parallel N] [--repeat N] [--no-settle]``
from the repository root; with ``--repeat`` it prints each run's figures and their medians.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from dsched import Client, Shell, Workflow
from dsched.options import BackfillState
from tests.bench.common import Row, default_slots, report, settle, tree_cpu

DATES = 365
WIDTH = 5
PARALLEL = 8
TARGET_S = 15.0
FIRST = datetime(2025, 1, 1, tzinfo=UTC)
# How often the bench asks whether the backfill is done. Not its resolution: the time taken ends
# at the backfill's end time (stamped by the server, on this machine's clock). Rarely, because
# each GetBackfill reads and sends all its dates: the bench must not load what it measures.
POLL_S = 0.5


@dataclass(frozen=True, slots=True)
class BackfillRun:
    """Wall seconds of the backfill (CreateBackfill to SUCCEEDED) and of the same tasks as one
    fan-out (StartWorkflow to SUCCEEDED), and the CPU seconds the server's process tree (tasks
    included) used for each: steadier than wall time on a shared machine."""

    backfill_s: float
    fanout_s: float
    backfill_cpu_s: float
    fanout_cpu_s: float

    @property
    def ratio(self) -> float:
        return self.backfill_s / self.fanout_s


def run_backfill(client: Client, dates: int, parallel: int, width: int = WIDTH) -> float:
    """Backfills ``dates`` daily dates of a ``width``-task chain of ``true``, ``parallel`` at a
    time; returns the seconds from the CreateBackfill call until it reads SUCCEEDED."""
    name = f"bench_backfill_{width}"
    with Workflow(name, project="bench") as wf:
        tasks = [Shell(f"t{i}", "true") for i in range(width)]
        for up, down in itertools.pairwise(tasks):
            up >> down
    wf.submit(client=client)
    last = FIRST + (dates - 1) * timedelta(days=1)
    began = datetime.now(UTC)
    backfill = client.create_backfill("bench", name, start=FIRST, end=last, parallelism=parallel)
    while backfill.state is BackfillState.RUNNING:
        time.sleep(POLL_S)  # the bench's own wait, not a server path
        backfill = client.get_backfill(backfill.id)
    assert backfill.state is BackfillState.SUCCEEDED, backfill
    assert backfill.progress.done == dates, backfill.progress
    assert backfill.end_time is not None
    return (backfill.end_time - began).total_seconds()


def run_flat(client: Client, tasks: int) -> float:
    """One run of ``tasks`` parallel ``true`` tasks; the seconds from StartWorkflow until it
    is SUCCEEDED (the workflow is submitted first, outside the time)."""
    with Workflow(f"bench_flat_{tasks}", project="bench") as wf:
        for i in range(tasks):
            Shell(f"f{i:04d}", "true")
    wf.submit(client=client)
    began = time.perf_counter()
    instance = client.wait(client.start_workflow("bench", wf.name).id)
    took = time.perf_counter() - began
    assert instance.state == "SUCCEEDED", instance
    return took


def measure(
    client: Client, pids: Sequence[int], dates: int = DATES, parallel: int = PARALLEL
) -> BackfillRun:
    """The backfill, then the same tasks as one fan-out, on the server ``client`` talks to, whose
    processes are ``pids``."""
    cpu = tree_cpu(pids)
    backfill_s = run_backfill(client, dates, parallel)
    backfill_cpu = tree_cpu(pids) - cpu
    fanout_s = run_flat(client, dates * WIDTH)
    return BackfillRun(backfill_s, fanout_s, backfill_cpu, tree_cpu(pids) - cpu - backfill_cpu)


def rows(run: BackfillRun, dates: int = DATES) -> list[Row]:
    """The backfill (PARALLEL 8 unless the bench was told otherwise), the fan-out, the ratio."""
    tasks = dates * WIDTH
    return [
        (
            f"backfill {dates} x {WIDTH} (s)",
            f"{run.backfill_s:.1f}",
            f"<= {TARGET_S:g}",
            run.backfill_s <= TARGET_S,
        ),
        (f"same {tasks} tasks as one fan-out (s)", f"{run.fanout_s:.1f}", "-", True),
        ("backfill / fan-out", f"{run.ratio:.2f}", "-", True),
        (
            "server tree CPU: backfill / fan-out (s)",
            f"{run.backfill_cpu_s:.1f} / {run.fanout_cpu_s:.1f}",
            "-",
            True,
        ),
    ]


def main() -> int:
    from tests.bench.standalone_bench import standalone  # its server (which imports this module)

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dates", type=int, default=DATES)
    parser.add_argument("--parallel", type=int, default=PARALLEL)
    parser.add_argument("--repeat", type=int, default=1, help="runs; the medians are reported")
    parser.add_argument("--slots", type=int, default=default_slots(), help="the worker's")
    parser.add_argument("--no-settle", action="store_true", help="see tests/bench/common.py")
    args = parser.parse_args()
    if not args.no_settle:
        settle("backfill bench")
    load = os.getloadavg()[0]
    runs = []
    with standalone(args.slots) as (address, pids), Client.connect(address) as c:
        c.ensure_project("bench")
        run_backfill(c, 10, args.parallel)  # warm-up: imports, connections, SQLite pages
        for n in range(args.repeat):
            run = measure(c, pids, args.dates, args.parallel)
            runs.append(run)
            print(
                f"run {n + 1}: backfill {run.backfill_s:.2f} s ({run.backfill_cpu_s:.2f} s CPU), "
                f"fan-out {run.fanout_s:.2f} s ({run.fanout_cpu_s:.2f} s CPU), "
                f"ratio {run.ratio:.2f}",
                flush=True,
            )
    median = BackfillRun(
        statistics.median(r.backfill_s for r in runs),
        statistics.median(r.fanout_s for r in runs),
        statistics.median(r.backfill_cpu_s for r in runs),
        statistics.median(r.fanout_cpu_s for r in runs),
    )
    return report(
        f"backfill of {args.dates} daily dates of {WIDTH} chained `true` tasks, PARALLEL "
        f"{args.parallel}, median of {args.repeat}; {args.slots} slots, {os.cpu_count()} CPUs, "
        f"load average {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end",
        rows(median, args.dates),
    )


if __name__ == "__main__":
    sys.exit(main())
