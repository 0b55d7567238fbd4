"""SPARK task definitions: what validation refuses (hostile values that would become spark-submit
options, malformed masters and sizes, Python in cluster mode on a standalone master), the SDK
class, the proto round trip and the size the definition limits count."""

from __future__ import annotations

import pytest

from dsched import Spark, Workflow
from dsched.convert import task_spec_from_proto, task_spec_to_proto, workflow_spec_to_proto
from dsched.errors import FieldViolation, InvalidWorkflow
from dsched.spark import (
    APPLICATION_ID,
    DeployMode,
    MasterKind,
    SparkProgram,
    SparkSpec,
    application_ids_violations,
    master_kind,
    spark_violations,
)
from dsched.spec import TaskSpec, WorkflowSpec, check_workflow, encoded_size

PY = SparkSpec(program_type=SparkProgram.PYSPARK, script="print(1)")


def problems(spec: SparkSpec) -> dict[str, str]:
    return {v.field.removeprefix("s."): v.description for v in spark_violations("s", spec)}


def with_(**changes: object) -> SparkSpec:
    values = {f: getattr(PY, f) for f in PY.__dataclass_fields__}
    values.update(changes)
    return SparkSpec(**values)


def test_a_plain_pyspark_task_is_valid() -> None:
    assert problems(PY) == {}
    assert PY.master_url == "local[*]"


@pytest.mark.parametrize(
    ("master", "kind"),
    [
        ("local", MasterKind.LOCAL),
        ("local[*]", MasterKind.LOCAL),
        ("local[4]", MasterKind.LOCAL),
        ("local[4,2]", MasterKind.LOCAL),
        ("spark://10.0.0.1:7077", MasterKind.STANDALONE),
        ("spark://a:7077,b.example:7077", MasterKind.STANDALONE),
        ("yarn", MasterKind.YARN),
        ("k8s://https://kube.example:6443", MasterKind.KUBERNETES),
        ("spark://host", None),
        ("mesos://x:5050", None),
        ("local[0]", None),
        ("yarn --conf x", None),
        ("--master", None),
        ("spark://a:7077 b:1", None),
    ],
)
def test_master_urls(master: str, kind: MasterKind | None) -> None:
    assert master_kind(master) is kind
    assert ("master" in problems(with_(master=master))) is (kind is None)


def test_python_in_cluster_mode_on_a_standalone_master_is_refused() -> None:
    spec = with_(master="spark://h:7077", deploy_mode=DeployMode.CLUSTER)
    assert "client mode only" in problems(spec)["deploy_mode"]
    sql = with_(
        program_type=SparkProgram.SQL, master="spark://h:7077", deploy_mode=DeployMode.CLUSTER
    )
    assert "deploy_mode" in problems(sql)
    jar = with_(
        program_type=SparkProgram.JAR,
        script="",
        main_file="etl.jar",
        main_class="com.acme.Etl",
        master="spark://h:7077",
        deploy_mode=DeployMode.CLUSTER,
    )
    assert problems(jar) == {}
    assert "cluster master" in problems(with_(deploy_mode=DeployMode.CLUSTER))["deploy_mode"]
    assert problems(with_(master="yarn", deploy_mode=DeployMode.CLUSTER)) == {}


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"main_file": "--conf", "script": ""}, "main_file"),
        ({"main_file": "a.py"}, "script"),  # both given
        ({"script": " "}, "script"),  # neither
        ({"py_files": ("a.zip,--class",)}, "py_files[0]"),
        ({"files": ("-x",)}, "files[0]"),
        ({"conf": {"spark.master": "yarn"}}, "conf['spark.master']"),
        ({"conf": {"--verbose": "1"}}, "conf['--verbose']"),
        ({"conf": {"spark.x": "a\nb"}}, "conf['spark.x']"),
        ({"conf": {"spark.x": "a\x00b"}}, "conf['spark.x']"),
        ({"driver_memory": "2 g"}, "driver_memory"),
        ({"executor_memory": "-1g"}, "executor_memory"),
        ({"driver_cores": -1}, "driver_cores"),
        ({"num_executors": 10**6}, "num_executors"),
        ({"args": ("ok", "a\x00")}, "args[1]"),
        ({"app_name": "a\x1b[31m"}, "app_name"),
        ({"main_class": "Main"}, "main_class"),
        ({"script": "print('\ud800')"}, "script"),
    ],
)
def test_hostile_values_are_refused(changes: dict[str, object], field: str) -> None:
    assert field in problems(with_(**changes)), problems(with_(**changes))


def test_jar_programs_need_a_jar_and_a_class() -> None:
    jar = with_(program_type=SparkProgram.JAR, script="")
    assert {"main_file", "main_class"} <= problems(jar).keys()


def test_values_with_shell_syntax_are_just_values() -> None:
    spec = with_(args=("; rm -rf /", "$(id)", "--master yarn"), conf={"spark.x": "`id`; ls"})
    assert problems(spec) == {}


def test_application_ids() -> None:
    for good in ("local-1795927222049", "app-20261129050216-0000", "driver-20261129050216-0001"):
        assert APPLICATION_ID.fullmatch(good)
    assert application_ids_violations("ids", ["app-20261129050216-0000"]) == []
    assert application_ids_violations("ids", ["x; rm -rf /"]) == [
        FieldViolation("ids[0]", "is not a Spark application id")
    ]
    assert len(application_ids_violations("ids", ["local-1795927222049"] * 17)) == 1


def test_the_sdk_class_builds_the_spec_and_the_definition_round_trips() -> None:
    with Workflow("w", project="p") as wf:
        Spark(
            "count",
            "print(1)",
            master="local[2]",
            conf={"spark.sql.shuffle.partitions": 4},
            args=["${dt}", 3, True],
            driver_memory="1g",
            program_type="pyspark",
        )
    spec = wf.to_spec()
    kind = spec.tasks[0].kind
    assert isinstance(kind, SparkSpec)
    assert kind.args == ("${dt}", "3", "true")
    assert kind.conf == {"spark.sql.shuffle.partitions": "4"}
    out: list[FieldViolation] = []
    assert task_spec_from_proto(task_spec_to_proto(spec.tasks[0]), "t", out) == spec.tasks[0]
    assert out == []


def test_an_invalid_spark_task_fails_the_workflow_with_its_field() -> None:
    spec = WorkflowSpec(
        project="p",
        name="w",
        tasks=(
            TaskSpec(name="t", kind=with_(master="spark://h:7077", deploy_mode=DeployMode.CLUSTER)),
        ),
    )
    with pytest.raises(InvalidWorkflow) as caught:
        check_workflow(spec)
    assert [v.field for v in caught.value.violations] == ["workflow.tasks[0].spark.deploy_mode"]


def test_the_counted_size_bounds_protobuf_s() -> None:
    big = with_(
        args=("a" * 1000, "é" * 300),
        conf={"spark.k": "v" * 500},
        py_files=("x.zip",),
        files=("y.txt",),
        driver_cores=2**10,
        app_name="数",
    )
    spec = WorkflowSpec(project="p", name="w", tasks=(TaskSpec(name="t", kind=big),))
    exact = workflow_spec_to_proto(spec).ByteSize()
    assert exact <= encoded_size(spec) <= exact + 74 + 37


def body(spark, dt: str) -> dict[str, object]:
    return {"n": spark.range(3).count(), "dt": dt}


def test_a_function_becomes_a_pyspark_program_given_a_session() -> None:
    with Workflow("w", project="p") as wf:
        task = Spark.from_function(body, master="local[1]")
    assert task.name == "body" and wf.to_spec().tasks[0].kind == task.spec
    script = task.spec.script
    compile(script, "main.py", "exec")
    assert "def body(spark, dt: str)" in script
    assert "return body(spark=session, **kwargs)" in script
    assert "('dt',)" in script  # the task parameters it reads: not spark
