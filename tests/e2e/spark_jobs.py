"""The PySpark programs and the standalone the SPARK tests share (tests/e2e/test_spark*.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from dsched import Client, TaskInstance, TaskState
from tests.e2e.conftest import Standalone, clean_env, eventually, start_standalone

SPARK_ENV = {"SPARK_LOCAL_IP": "127.0.0.1"}  # else Spark resolves the host name: 90 s here
# Spark's JVM start-up on a loaded 2-core machine: tens of seconds per application.
SPARK_TIMEOUT_S = 240.0

# Counts in Spark, says so, then waits for the file named by its first argument (the test's
# release) so that the test can look at the attempt while the application runs; prints its
# arguments to show how parameters arrived, and sets an OUT parameter.
GATED_JOB = """
import os, sys, time
from pyspark.sql import SparkSession
spark = SparkSession.builder.getOrCreate()
rows = spark.range(1000).selectExpr("id % 7 AS k").groupBy("k").count().count()
print(f"stage one done: {rows} groups", flush=True)
print("argv", sys.argv[1:], flush=True)
release = sys.argv[1]
while not os.path.exists(release):
    time.sleep(0.2)
print("${setValue(groups=%d)}" % rows, flush=True)
spark.stop()
"""


def standalone_for_spark(tmp: Path, worker: str | None = None) -> Iterator[Standalone]:
    """A standalone whose worker passes SPARK_LOCAL_IP to spark-submit; stopped cleanly."""
    env = clean_env(DSCHED_LOG_LEVEL="INFO", DSCHED_CPU_THRESHOLD="1", **SPARK_ENV)
    server = start_standalone(tmp, env=env, worker=worker)
    try:
        yield server
    finally:
        if server.proc.poll() is None:
            server.assert_clean_stop()


def task_of(client: Client, instance_id: int, name: str) -> TaskInstance | None:
    found = [t for t in client.iter_task_instances(instance_id) if t.task_name == name]
    return found[0] if found else None


def running_with_application(
    client: Client, instance_id: int, name: str, *, timeout: float = SPARK_TIMEOUT_S
) -> TaskInstance:
    """The task's valid attempt once it is RUNNING with its application id recorded."""

    def check() -> TaskInstance | None:
        ti = task_of(client, instance_id, name)
        if ti is not None and ti.state.terminal:
            raise AssertionError(f"{name} ended {ti.state} before its application id: {ti}")
        ok = ti is not None and ti.state is TaskState.RUNNING and ti.application_id
        return ti if ok else None

    return eventually(check, timeout=timeout, interval=0.5, what=f"{name} runs an application")


def log_text(client: Client, task_instance_id: int) -> str:
    """The whole log as it is now (read in chunks)."""
    data, offset = b"", 0
    while True:
        chunk = client.read_log(task_instance_id, offset)
        data += chunk.data
        if not chunk.data or chunk.next_offset >= (chunk.size or 0):
            return data.decode(errors="replace")
        offset = chunk.next_offset


def wait_for_log(client: Client, ti_id: int, text: str, timeout: float = SPARK_TIMEOUT_S) -> str:
    def check() -> str | None:
        log = log_text(client, ti_id)
        return log if text in log else None

    return eventually(
        check,
        timeout=timeout,
        interval=0.5,
        what=f"{text!r} in the log of task instance {ti_id}",
    )


@pytest.fixture
def release(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "release"
    yield path
    path.touch()  # whatever happened, no job waits for it after the test
