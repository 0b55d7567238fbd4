"""SPARK task overhead benchmark (issue 11, acceptance 4, first half): what dsched adds around a
Spark application, next to the application's own run time.

The job is a small PySpark program in ``local[1]`` (a count over a range); Spark's JVM start-up
dominates its run time, which is the point: the figures dsched adds are set against it.

* direct: ``spark-submit`` of the same program (dsched's driver file with the program written
  next to it, as the worker runs it), spawned and waited for ``--runs`` times from this process:
  the run time of the job without dsched.
* dsched: ``--runs`` one-task runs of a workflow whose only task is that SPARK task, one after
  another on a fresh standalone (one run first, to warm up). For each run, from the stamps on
  record (all processes on this machine, so one clock):
  - dispatch -> spark-submit start: the attempt's creation by the master (``submit_time``, just
    before it is dispatched) to its process's start on the worker (``start_time``);
  - the job's run: the spark-submit process's start to its exit (``start_time`` -> ``end_time``);
  - application end -> task SUCCEEDED: the process's exit (``end_time``, the worker's stamp) to
    the master's commit of SUCCEEDED (the task's SUCCEEDED event, ``create_time``);
  - application end -> SUCCEEDED seen: the same, to when this client saw the run SUCCEEDED.

Reported: medians; with ``--repeat N`` each repetition has a fresh server and the medians of the
repetitions' medians are reported, with the load average at the start and the end. No target.

``make bench-spark`` (``REPEAT=3`` for three runs). Alone: ``python -m tests.bench.spark_bench
[--runs N] [--repeat N] [--no-settle]`` from the repository root.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from dsched import Client, Spark, TaskState, Workflow
from dsched_worker.tasks.spark import installed_spark_home
from dsched_worker.tasks.spark_submit import driver_path
from tests.bench.common import Row, median_of_repeats

RUNS = 3
JOB = """
from pyspark.sql import SparkSession
spark = SparkSession.builder.getOrCreate()
print("count", spark.range(100000).selectExpr("id % 10 AS k").distinct().count(), flush=True)
spark.stop()
"""
CONF = {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "1"}


@dataclass(frozen=True, slots=True)
class Overhead:
    """Medians in milliseconds (see the module)."""

    direct_ms: float
    job_ms: float
    dispatch_to_start_ms: float
    end_to_succeeded_ms: float
    end_to_seen_ms: float


def _ms(later: datetime, earlier: datetime) -> float:
    return (later - earlier).total_seconds() * 1000


def direct(runs: int) -> list[float]:
    """Milliseconds of each spark-submit of the job, spawned and reaped one after another."""
    home = installed_spark_home()
    assert home is not None, "pyspark is not installed"
    env = {
        **os.environ,
        "SPARK_HOME": str(home),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }
    times = []
    with tempfile.TemporaryDirectory(prefix="dsched-bench-spark-") as tmp:
        program = Path(tmp) / "main.py"
        program.write_text(JOB)
        conf = [a for k, v in CONF.items() for a in ("--conf", f"{k}={v}")]
        argv = [str(home / "bin" / "spark-submit"), "--master", "local[1]", *conf]
        argv += [str(driver_path()), "pyspark", str(program)]
        for _ in range(runs):
            start = time.perf_counter()
            subprocess.run(
                argv,
                check=True,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                cwd=tmp,
            )
            times.append((time.perf_counter() - start) * 1000)
    return times


def through_dsched(client: Client, runs: int) -> dict[str, list[float]]:
    with Workflow("bench_spark", project="bench") as wf:
        Spark("job", JOB, master="local[1]", conf=CONF)
    first = wf.run(wait=True, client=client, timeout=600)
    assert first.state == "SUCCEEDED", first
    out: dict[str, list[float]] = {"job": [], "dispatch": [], "end": [], "seen": []}
    for _ in range(runs):
        instance_id = client.start_workflow("bench", "bench_spark").id
        done = client.wait(instance_id, timeout=600)
        seen = datetime.now(UTC)
        assert done.state == "SUCCEEDED", done
        (ti,) = client.iter_task_instances(instance_id)
        assert ti.application_id.startswith("local-"), ti
        assert ti.submit_time and ti.start_time and ti.end_time, ti
        (succeeded,) = [
            e.create_time
            for e in client.watch_instance(instance_id)
            if e.task_name == "job" and e.task_state is TaskState.SUCCEEDED
        ]
        assert succeeded is not None
        out["job"].append(_ms(ti.end_time, ti.start_time))
        out["dispatch"].append(_ms(ti.start_time, ti.submit_time))
        out["end"].append(_ms(succeeded, ti.end_time))
        out["seen"].append(_ms(seen, ti.end_time))
    return out


def measure(runs: int, slots: int) -> Overhead:
    from tests.bench.standalone_bench import standalone  # its server (which imports common)

    baseline = direct(runs)
    with standalone(slots) as (address, _pids), Client.connect(address) as c:
        c.ensure_project("bench")
        found = through_dsched(c, runs)
    median = statistics.median
    return Overhead(
        median(baseline),
        median(found["job"]),
        median(found["dispatch"]),
        median(found["end"]),
        median(found["seen"]),
    )


def rows(result: Overhead) -> list[Row]:
    return [
        ("the job by spark-submit directly (ms)", f"{result.direct_ms:.0f}", "-", True),
        ("the job's spark-submit run in dsched (ms)", f"{result.job_ms:.0f}", "-", True),
        ("dispatch -> spark-submit start (ms)", f"{result.dispatch_to_start_ms:.1f}", "-", True),
        ("application end -> task SUCCEEDED (ms)", f"{result.end_to_succeeded_ms:.1f}", "-", True),
        ("application end -> SUCCEEDED seen (ms)", f"{result.end_to_seen_ms:.1f}", "-", True),
    ]


def main() -> int:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # the worker passes it to spark-submit
    return median_of_repeats("SPARK task overhead", __doc__.splitlines()[0], RUNS, measure, rows)


if __name__ == "__main__":
    sys.exit(main())
