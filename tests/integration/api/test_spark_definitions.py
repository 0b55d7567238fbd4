"""SPARK task definitions over the wire (raw dsched.v1 stubs, a real master): a valid one reads
back as written; a bad one is refused INVALID_ARGUMENT with its field named and nothing stored,
whatever a client that skips the SDK's own checks sends."""

from __future__ import annotations

import grpc
import pytest

from dsched.v1 import spark_pb2
from tests.integration.api.conftest import (
    Cluster,
    assert_invalid,
    create_project,
    failure,
    pb,
    res,
    snapshot,
    workflow,
)

sp = spark_pb2


def spark_task(**fields: object) -> res.TaskDefinition:
    values: dict[str, object] = {
        "program_type": sp.SPARK_PROGRAM_TYPE_PYSPARK,
        "script": "print(1)",
        **fields,
    }
    return res.TaskDefinition(name="job", spark=sp.SparkTask(**values))  # type: ignore[arg-type]


async def test_a_spark_task_reads_back_as_it_was_written(cluster: Cluster) -> None:
    task = spark_task(
        master="spark://10.0.0.1:7077",
        deploy_mode=sp.SPARK_DEPLOY_MODE_CLIENT,
        conf={"spark.executor.instances.max": "${n}"},
        args=["${dt}", "; rm -rf /"],
        driver_memory="2g",
    )
    await create_project(cluster, "p")
    await cluster.stub.CreateWorkflow(pb.CreateWorkflowRequest(workflow=workflow("p", "s", [task])))
    got = await cluster.stub.GetWorkflow(pb.GetWorkflowRequest(project="p", name="s"))
    assert got.workflow.tasks[0].spark == task.spark


BAD = [
    (
        "python in cluster mode on a standalone master",
        {"master": "spark://h:7077", "deploy_mode": sp.SPARK_DEPLOY_MODE_CLUSTER},
        "workflow.tasks[0].spark.deploy_mode",
    ),
    ("no program type", {"program_type": 0}, "workflow.tasks[0].spark.program_type"),
    ("unknown program type", {"program_type": 99}, "workflow.tasks[0].spark.program_type"),
    ("a master that is an option", {"master": "--conf"}, "workflow.tasks[0].spark.master"),
    (
        "a main file that is an option",
        {"script": "", "main_file": "--py-files"},
        "workflow.tasks[0].spark.main_file",
    ),
    ("a conf key outside spark.*", {"conf": {"x": "1"}}, "workflow.tasks[0].spark.conf['x']"),
    ("a memory size", {"executor_memory": "lots"}, "workflow.tasks[0].spark.executor_memory"),
]


@pytest.mark.parametrize(("fields", "field"), [pytest.param(f, p, id=i) for i, f, p in BAD])
async def test_bad_spark_tasks_are_refused_and_change_nothing(
    cluster: Cluster, fields: dict[str, object], field: str
) -> None:
    before = await snapshot(cluster)
    request = pb.CreateWorkflowRequest(workflow=workflow("p", "bad", [spark_task(**fields)]))
    got = await failure(cluster.stub.CreateWorkflow(request))
    assert got.code == grpc.StatusCode.INVALID_ARGUMENT
    assert_invalid(got, field, reason="INVALID_WORKFLOW")
    assert await snapshot(cluster) == before
