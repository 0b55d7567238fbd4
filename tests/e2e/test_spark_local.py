"""SPARK tasks on a real standalone with real Spark in ``local[2]`` mode (README "SPARK tasks"):
the application id is recorded while the job runs, the driver's output streams into the task log
as it runs, OUT parameters reach the next task, parameters stay values, and a kill stops the
driver's process group."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from dsched import Client, Shell, Spark, TaskState, Workflow, WorkflowState
from tests.e2e.conftest import Standalone, assert_all_gone, cli, parse_table, wait_done
from tests.e2e.spark_jobs import (
    GATED_JOB,
    SPARK_TIMEOUT_S,
    release,
    running_with_application,
    standalone_for_spark,
    task_of,
    wait_for_log,
)

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(600)]
__all__ = ["release"]  # the fixture


@pytest.fixture(scope="module")
def spark_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Standalone]:
    yield from standalone_for_spark(tmp_path_factory.mktemp("spark-standalone"))


@pytest.fixture(scope="module")
def spark_client(spark_server: Standalone) -> Iterator[Client]:
    with Client.connect(spark_server.address) as conn:
        yield conn


def test_a_pyspark_job_streams_names_its_application_and_passes_out_params(
    spark_server: Standalone, spark_client: Client, release: Path, tmp_path: Path
) -> None:
    evil = "x; rm -rf /tmp/nothing-here $(touch pwned) --master yarn"
    seen = tmp_path / "seen"
    with Workflow("pyspark", project="spark-e2e") as wf:
        job = Spark(
            "count",
            GATED_JOB,
            master="local[2]",
            args=[str(release), "${evil}"],
            conf={"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"},
            params={"evil": evil},
        )
        job >> Shell("after", f"echo \"$groups\" > '{seen}'")
    instance = wf.run(client=spark_client, wait=False)
    ti = running_with_application(spark_client, instance.id, "count")
    assert ti.application_id.startswith("local-"), ti
    # The driver's output is in the log while the application still runs (it waits for us).
    log = wait_for_log(spark_client, ti.id, "stage one done: 7 groups")
    assert f"argv ['{release}', '{evil}']" in log, log[-3000:]
    assert not (tmp_path / "pwned").exists()
    assert task_of(spark_client, instance.id, "count").state is TaskState.RUNNING  # type: ignore[union-attr]
    shown = cli(spark_server, "show", str(instance.id))
    rows = {r["TASK"]: r for r in parse_table(shown.stdout)}
    assert rows["count"]["APPLICATION"] == ti.application_id, shown.stdout
    release.touch()
    done = wait_done(spark_client, instance.id, timeout=SPARK_TIMEOUT_S)
    assert done.state is WorkflowState.SUCCEEDED, done
    count = task_of(spark_client, instance.id, "count")
    assert count is not None and count.out_params == {"groups": "7"}, count
    assert count.application_id == ti.application_id
    assert seen.read_text().strip() == "7"


def test_spark_sql_binds_parameters_as_values(spark_client: Client) -> None:
    hostile = "2026-01-01'; DROP TABLE t; --"
    with Workflow("sparksql", project="spark-e2e") as wf:
        Spark(
            "query",
            "CREATE TEMPORARY VIEW t AS SELECT id FROM range(5);\n"
            "-- a comment; with a semicolon\n"
            "SELECT :dt AS dt, count(*) AS n, 'a;b' AS s FROM t",
            program_type="SQL",
            master="local[1]",
            conf={"spark.ui.enabled": "false"},
            params={"dt": hostile},
        )
    instance = wf.run(client=spark_client, timeout=SPARK_TIMEOUT_S)
    assert instance.state is WorkflowState.SUCCEEDED, instance
    query = task_of(spark_client, instance.id, "query")
    assert query is not None and query.application_id.startswith("local-"), query
    assert query.out_params == {"dt": hostile, "n": "5", "s": "a;b"}


def count_multiples(spark, dt: str, every: str = "7") -> dict[str, object]:
    """A PySpark body written as a function in the workflow file (it ships as text)."""
    rows = spark.range(1000).filter(f"id % {int(every)} = 0").count()
    return {"rows": rows, "day": dt}


def test_a_pyspark_body_written_as_a_function(spark_client: Client, tmp_path: Path) -> None:
    seen = tmp_path / "seen"
    with Workflow("pysparkfn", project="spark-e2e", params={"dt": "2026-11-28"}) as wf:
        job = Spark.from_function(
            count_multiples, master="local[1]", conf={"spark.ui.enabled": "false"}
        )
        job >> Shell("after", f"echo \"$rows $day\" > '{seen}'")
    instance = wf.run(client=spark_client, timeout=SPARK_TIMEOUT_S)
    assert instance.state is WorkflowState.SUCCEEDED, instance
    ti = task_of(spark_client, instance.id, "count_multiples")
    assert ti is not None and ti.application_id.startswith("local-"), ti
    assert ti.out_params == {"rows": "143", "day": "2026-11-28"}
    assert seen.read_text().split() == ["143", "2026-11-28"]


def test_a_killed_spark_task_stops_its_driver(spark_client: Client, release: Path) -> None:
    with Workflow("pysparkkill", project="spark-e2e") as wf:
        Spark(
            "count",
            GATED_JOB,
            master="local[1]",
            args=[str(release)],
            conf={"spark.ui.enabled": "false"},
        )
    instance = wf.run(client=spark_client, wait=False)
    ti = running_with_application(spark_client, instance.id, "count")
    wait_for_log(spark_client, ti.id, "stage one done")
    spark_client.stop_instance(instance.id)
    done = wait_done(spark_client, instance.id, timeout=SPARK_TIMEOUT_S)
    assert done.state is WorkflowState.STOPPED, done
    killed = task_of(spark_client, instance.id, "count")
    assert killed is not None and killed.state is TaskState.KILLED, killed
    assert killed.application_id == ti.application_id
    assert_all_gone([ti.pid], pgid=ti.pid, timeout=30)
