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

import statistics
import subprocess
import sys
import time
from dataclasses import dataclass

from dsched import Client, Python, Workflow
from tests.bench.common import Row, median_of_repeats

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
    return median_of_repeats("PYTHON task overhead", __doc__.splitlines()[0], RUNS, measure, rows)


if __name__ == "__main__":
    sys.exit(main())
