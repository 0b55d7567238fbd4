"""PYTHON task overhead benchmark (issue 11, acceptance 4, second half): what dsched adds to a
PYTHON task over spawning the same ``python -c pass`` directly.

* direct: ``<python> -c pass`` spawned and waited for ``--runs`` times in a row from this process
  (``subprocess.Popen``, the interpreter the standalone's worker uses by default:
  ``sys.executable``); each time from just before the spawn to the reap.
* dsched: ``--runs`` one-task runs of a workflow whose only task is ``Python("only", "pass")``,
  one after another on a fresh standalone (the workflow is submitted and run once first, to warm
  up). Each time from just before StartWorkflow until the client has seen the run SUCCEEDED on its
  watch stream; beside it the server's own stamps (instance submit to end) and the task's run on
  the worker (its process's start to end, which holds the interpreter's own start-up).

Reported: the medians, the overhead (dsched median minus direct median, in ms) and the ratio
(dsched median / direct median). No target: the figure is the answer to "how much does dsched
add", not a bar. With ``--repeat N`` each repetition has a fresh server and the medians of the
repetitions' medians are reported, with the load average at the start and the end (this machine
is shared; a loaded machine stretches both columns).

``make bench-python`` (``REPEAT=3`` for three runs). Alone: ``python -m tests.bench.python_bench
[--runs N] [--repeat N] [--no-settle]`` from the repository root.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass

from dsched import Client, Python, Workflow
from tests.bench.common import Row, default_slots, report, settle

RUNS = 30


@dataclass(frozen=True, slots=True)
class Overhead:
    """Medians in milliseconds: the direct spawn, the dsched run as the client sees it, the same
    by the server's stamps, and the task's run on the worker."""

    direct_ms: float
    dsched_ms: float
    server_ms: float
    task_ms: float

    @property
    def overhead_ms(self) -> float:
        return self.dsched_ms - self.direct_ms

    @property
    def ratio(self) -> float:
        return self.dsched_ms / self.direct_ms


def direct(runs: int) -> list[float]:
    """Milliseconds of each ``python -c pass``, spawned and reaped one after another."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True, stdin=subprocess.DEVNULL)
        times.append((time.perf_counter() - start) * 1000)
    return times


def through_dsched(client: Client, runs: int) -> tuple[list[float], list[float], list[float]]:
    """Client-observed, server-stamped and task run milliseconds of each one-task run."""
    with Workflow("bench_python", project="bench") as wf:
        Python("only", "pass")
    first = wf.run(wait=True, client=client, timeout=60)  # submits it and warms the path up
    assert first.state == "SUCCEEDED", first
    seen, stamped, task = [], [], []
    for _ in range(runs):
        start = time.perf_counter()
        instance_id = client.start_workflow("bench", "bench_python").id
        done = client.wait(instance_id, timeout=60)
        seen.append((time.perf_counter() - start) * 1000)
        assert done.state == "SUCCEEDED", done
        assert done.submit_time is not None and done.end_time is not None
        stamped.append((done.end_time - done.submit_time).total_seconds() * 1000)
        (ti,) = client.iter_task_instances(instance_id)
        assert ti.duration is not None, ti
        task.append(ti.duration.total_seconds() * 1000)
    return seen, stamped, task


def measure(runs: int, slots: int) -> Overhead:
    from tests.bench.standalone_bench import standalone  # its server (which imports common)

    baseline = direct(runs)
    with standalone(slots) as (address, _pids), Client.connect(address) as c:
        c.ensure_project("bench")
        seen, stamped, task = through_dsched(c, runs)
    median = statistics.median
    return Overhead(median(baseline), median(seen), median(stamped), median(task))


def rows(result: Overhead) -> list[Row]:
    return [
        ("python -c pass, spawned directly (ms)", f"{result.direct_ms:.1f}", "-", True),
        ("PYTHON task run, start to SUCCEEDED seen (ms)", f"{result.dsched_ms:.1f}", "-", True),
        ("  the same by the server's stamps (ms)", f"{result.server_ms:.1f}", "-", True),
        ("  the task's process on the worker (ms)", f"{result.task_ms:.1f}", "-", True),
        ("overhead dsched adds (ms)", f"{result.overhead_ms:.1f}", "-", True),
        ("ratio dsched / direct", f"{result.ratio:.2f}", "-", True),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=RUNS, help="one-task runs per repetition")
    parser.add_argument("--repeat", type=int, default=1, help="fresh servers; medians reported")
    parser.add_argument("--slots", type=int, default=default_slots(), help="the worker's")
    parser.add_argument("--no-settle", action="store_true", help="see tests/bench/common.py")
    args = parser.parse_args()
    load = os.getloadavg()
    results = []
    for n in range(args.repeat):
        if not args.no_settle:
            settle("PYTHON task overhead")
        result = measure(args.runs, args.slots)
        results.append(result)
        print(f"run {n + 1}: {result}", flush=True)
    fields = Overhead.__dataclass_fields__
    median = Overhead(*(statistics.median(getattr(r, f) for r in results) for f in fields))
    end = os.getloadavg()
    title = (
        f"PYTHON task overhead: median of {args.runs} one-task runs, median of {args.repeat} "
        f"repetition(s); {os.cpu_count()} CPUs, load average {load[0]:.2f} {load[1]:.2f} "
        f"{load[2]:.2f} at the start, {end[0]:.2f} {end[1]:.2f} {end[2]:.2f} at the end"
    )
    return report(title, rows(median))


if __name__ == "__main__":
    sys.exit(main())
