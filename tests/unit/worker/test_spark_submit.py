"""The SPARK task's pure parts: the spark-submit argument list (parameters replaced inside one
argument, never through a shell), the kill-by-id commands, application ids found in output, and
the SQL driver's statement splitting and binding."""

from __future__ import annotations

from dsched.spark import DeployMode, SparkProgram, SparkSpec
from dsched_worker.tasks.spark_apps import ApplicationIds
from dsched_worker.tasks.spark_driver import bound, split_statements
from dsched_worker.tasks.spark_submit import expand, kill_argv, submit_argv

EVIL = "x; rm -rf / $(id) --master yarn"


def test_parameters_stay_inside_one_argument() -> None:
    spec = SparkSpec(
        program_type=SparkProgram.JAR,
        main_file="etl.jar",
        main_class="com.acme.Etl",
        master="spark://h:7077",
        deploy_mode=DeployMode.CLUSTER,
        driver_memory="1g",
        num_executors=3,
        conf={"spark.app.tag": "run-${dt}"},
        py_files=("a.zip", "b.zip"),
        args=("--date", "${dt}", "${missing}", "$${dt}"),
    )
    argv = submit_argv(
        "/s/spark-submit", spec, primary="etl.jar", params={"dt": EVIL}, default_name="t"
    )
    assert argv == [
        *("/s/spark-submit", "--master", "spark://h:7077", "--deploy-mode", "cluster"),
        *("--name", "t", "--class", "com.acme.Etl", "--num-executors", "3"),
        *("--driver-memory", "1g", "--py-files", "a.zip,b.zip"),
        *("--conf", f"spark.app.tag=run-{EVIL}"),
        *("--conf", "spark.standalone.submit.waitAppCompletion=true"),
        *("etl.jar", "--date", EVIL, "${missing}", f"${EVIL}"),
    ]


def test_expansion_is_one_pass() -> None:
    assert expand("${a}-${b}", {"a": "${b}", "b": "B"}) == "${b}-B"


def test_kill_commands_by_id() -> None:
    assert kill_argv("/s", "spark://h:7077", "driver-20261129050216-0001") == [
        *("/s", "--master", "spark://h:7077", "--kill", "driver-20261129050216-0001"),
    ]
    assert kill_argv("/s", "k8s://https://k:6443", "ns:pod-1") is not None
    # Client-mode applications end with their driver's process group.
    assert kill_argv("/s", "spark://h:7077", "app-20261129050216-0000") is None
    assert kill_argv("/s", "local[2]", "local-1795927222049") is None


def test_application_ids_are_found_across_chunks_once() -> None:
    seen: list[str] = []
    apps = ApplicationIds(seen.append)
    apps.feed(b"26/11/29 INFO StandaloneSchedulerBackend: Connected to Spark cluster with app")
    apps.feed(b" ID app-20261129050216-0000\nnoise\ndsched: spark application id local-1")
    apps.feed(b"795927222049\n")
    apps.feed(b"Connected to Spark cluster with app ID app-20261129050216-0000\n")
    apps.feed(b"dsched: spark application id ; rm -rf /\n")  # not an id
    apps.close()
    assert seen == ["app-20261129050216-0000", "local-1795927222049"]
    assert apps.latest == "local-1795927222049"


def test_an_endless_line_is_skipped_not_buffered() -> None:
    seen: list[str] = []
    apps = ApplicationIds(seen.append)
    apps.feed(b"x" * 100_000)
    apps.feed(b"dsched: spark application id local-1795927222049\n")
    apps.feed(b"dsched: spark application id local-1795927222050\n")
    assert seen == ["local-1795927222050"]


def test_sql_statements_split_outside_quotes_and_comments() -> None:
    text = "SELECT ';' AS a; -- c; d\nSELECT \"x;y\", `b;c` /* ; */ FROM t;;\n SELECT 'it''s'"
    assert split_statements(text) == [
        "SELECT ';' AS a",
        'SELECT "x;y", `b;c`   FROM t',
        "SELECT 'it''s'",
    ]


def test_only_referenced_parameters_are_bound() -> None:
    params = {"dt": "2026'; DROP TABLE t; --", "other": "1"}
    assert bound("SELECT :dt, :nope", params) == {"dt": params["dt"]}
