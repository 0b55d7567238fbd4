"""PYTHON and HTTP kinds: local validation, the round trips through every seam (definition proto,
dispatch proto, the store's JSON), and the SDK's ``Python``, ``Http`` and ``@task``."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from dsched import Http, HttpMethod, HttpSpec, InvalidWorkflow, Python, PythonSpec, Workflow, task
from dsched.convert import task_spec_from_proto, task_spec_to_proto
from dsched.errors import FieldViolation, InvalidArgument
from dsched.spec import TaskSpec, WorkflowSpec, encoded_size, validate_workflow
from dsched.v1 import worker_service_pb2
from dsched_server.protocol.execution import TaskExecution
from dsched_server.protocol.wire.execution import (
    execution_from_request,
    execution_to_proto,
)
from dsched_server.store.codec import task_from_json, task_to_json, task_type
from tests.unit.sdk import function_samples

HTTP = HttpSpec(
    url="https://api.example.com/v1/${dt}?q=${dt}",
    method=HttpMethod.PUT,
    headers={"Authorization": "Bearer ${token}", "X-Trace": "1"},
    body='{"when": "${dt}"}',
    request_timeout=timedelta(seconds=12, milliseconds=500),
    expected_status=(200, 204),
    body_contains="ok",
    response_param="answer",
    max_response_bytes=4096,
)
PYTHON = PythonSpec(script="print('hi')\n", interpreter="/usr/bin/python3")


@pytest.mark.parametrize("kind", [HTTP, PYTHON, HttpSpec(url="http://h/"), PythonSpec(script="x")])
def test_kinds_round_trip_through_every_seam(kind: HttpSpec | PythonSpec) -> None:
    spec = TaskSpec(name="t", kind=kind)
    out: list[FieldViolation] = []
    assert task_spec_from_proto(task_spec_to_proto(spec), "t", out) == spec and out == []
    stored = task_from_json("t", task_type(spec), task_to_json(spec), ())
    assert stored == spec
    execution = TaskExecution(
        task_instance_id=1,
        attempt=1,
        workflow_instance_id=2,
        workflow_code=3,
        workflow_version=1,
        task_name="t",
        idempotency_key="2-t-1",
        kind=kind,
        owner_address="127.0.0.1:1",
        owner_epoch=1,
        submit_time=datetime(2024, 1, 1, tzinfo=UTC),
    )
    request = worker_service_pb2.DispatchTaskRequest(task=execution_to_proto(execution))
    assert execution_from_request(request, now=datetime.now(UTC)) == execution


def test_the_store_names_the_kinds() -> None:
    assert task_type(TaskSpec(name="t", kind=HTTP)) == "HTTP"
    assert task_type(TaskSpec(name="t", kind=PYTHON)) == "PYTHON"


def test_a_dispatch_with_a_hostile_kind_is_refused_with_the_fields_named() -> None:
    execution = TaskExecution(
        task_instance_id=1,
        attempt=1,
        workflow_instance_id=2,
        workflow_code=3,
        workflow_version=1,
        task_name="t",
        idempotency_key="2-t-1",
        kind=replace(HTTP, url="gopher://h/", expected_status=(1000,)),
        owner_address="127.0.0.1:1",
        owner_epoch=1,
        submit_time=datetime(2024, 1, 1, tzinfo=UTC),
    )
    request = worker_service_pb2.DispatchTaskRequest(task=execution_to_proto(execution))
    with pytest.raises(InvalidArgument) as caught:
        execution_from_request(request, now=datetime.now(UTC))
    fields = {v.field for v in caught.value.violations}
    assert fields == {"task.http.url", "task.http.expected_status[0]"}


def test_the_counted_size_bounds_the_encoding() -> None:
    spec = WorkflowSpec(project="p", name="w", tasks=(TaskSpec(name="a", kind=HTTP),))
    from dsched.convert import workflow_spec_to_proto

    assert encoded_size(spec) >= workflow_spec_to_proto(spec).ByteSize()
    negative = replace(HTTP, expected_status=(-1, -2), max_response_bytes=-5)
    spec = WorkflowSpec(project="p", name="w", tasks=(TaskSpec(name="a", kind=negative),))
    assert encoded_size(spec) >= workflow_spec_to_proto(spec).ByteSize()


def test_local_validation_names_the_fields() -> None:
    bad = replace(
        HTTP,
        url="http://ok@evil/",
        headers={"Content-Length": "1", "x": "a\nb"},
        expected_status=(200, 200, 42),
        response_param="HOME",
        max_response_bytes=-1,
    )
    spec = WorkflowSpec(
        project="p",
        name="w",
        tasks=(
            TaskSpec(name="a", kind=bad),
            TaskSpec(name="b", kind=PythonSpec(script="", interpreter="../python")),
        ),
    )
    found, _ = validate_workflow(spec)
    assert {v.field for v in found} == {
        "workflow.tasks[0].http.url",
        "workflow.tasks[0].http.headers['Content-Length']",
        "workflow.tasks[0].http.headers['x']",
        "workflow.tasks[0].http.expected_status",
        "workflow.tasks[0].http.expected_status[2]",
        "workflow.tasks[0].http.response_param",
        "workflow.tasks[0].http.max_response_bytes",
        "workflow.tasks[1].python.script",
        "workflow.tasks[1].python.interpreter",
    }


def test_sdk_classes_build_the_kinds() -> None:
    with Workflow("w", project="p") as wf:
        Python("py", "print(1)", interpreter="python3")
        Http("call", "http://h/x", method="post", expected_status=201, request_timeout=5)
    spec = wf.validate()
    assert spec.tasks[0].kind == PythonSpec(script="print(1)", interpreter="python3")
    assert spec.tasks[1].kind == HttpSpec(
        url="http://h/x",
        method=HttpMethod.POST,
        expected_status=(201,),
        request_timeout=timedelta(seconds=5),
    )
    with Workflow("w2", project="p") as bad:
        Http("call", "file:///etc/passwd")
    with pytest.raises(InvalidWorkflow, match="http:// or https://"):
        bad.validate()


@task(retries=3, interpreter="python3")
def double(n: str, suffix: str = "!") -> dict[str, object]:
    return {"doubled": str(int(n) * 2) + suffix, "parts": [1, 2]}


def test_a_task_function_ships_its_source_and_runs_alone() -> None:
    with Workflow("w", project="p"):
        made = double(params={"n": "21"})
        renamed = double("again", retries=0)
    assert (made.name, made.retries, made.interpreter) == ("double", 3, "python3")
    assert (renamed.name, renamed.retries) == ("again", 0)
    assert double.fn("2") == {"doubled": "4!", "parts": [1, 2]}
    assert "@task" not in made.script
    env = {"n": "21", "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-I", "-c", made.script],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.splitlines() == ["${setValue(doubled=42!)}", "${setValue(parts=[1, 2])}"]


def test_a_task_function_refuses_reserved_parameter_names() -> None:
    with pytest.raises(InvalidArgument, match="its parameter"):
        task(function_samples.reserved_parameter)
