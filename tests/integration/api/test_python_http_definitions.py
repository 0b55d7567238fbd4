"""PYTHON and HTTP task definitions over the wire (raw dsched.v1 stubs, a real master): hostile
fields are refused with INVALID_ARGUMENT naming each field and nothing is stored; a valid
definition comes back as it was sent."""

from __future__ import annotations

from typing import Any

import pytest

from dsched.v1 import http_task_pb2, python_task_pb2
from tests.integration.api.conftest import (
    Cluster,
    assert_invalid,
    failure,
    pb,
    res,
    snapshot,
    workflow,
)

H = http_task_pb2


def http_task(**fields: Any) -> res.TaskDefinition:
    fields.setdefault("url", "https://api.example.com/v1/ping")
    return res.TaskDefinition(name="call", http=H.HttpTask(**fields))


def python_task(**fields: Any) -> res.TaskDefinition:
    fields.setdefault("script", "print('hi')")
    return res.TaskDefinition(name="py", python=python_task_pb2.PythonTask(**fields))


async def test_valid_kinds_round_trip(cluster: Cluster) -> None:
    tasks = [
        python_task(interpreter="/usr/bin/python3"),
        http_task(
            method=H.HTTP_METHOD_POST,
            headers={"Authorization": "Bearer ${token}", "X-Day": "${dt}"},
            body='{"a": 1}',
            request_timeout={"seconds": 5},
            expected_status=[200, 202],
            body_contains="ok",
            response_param="answer",
            max_response_bytes=4096,
            url="http://127.0.0.1:8080/api/${dt}?q=${dt}",
        ),
    ]
    await cluster.stub.CreateProject(pb.CreateProjectRequest(project=res.Project(name="k")))
    sent = workflow("k", "kinds", tasks)
    await cluster.stub.CreateWorkflow(pb.CreateWorkflowRequest(workflow=sent))
    got = await cluster.stub.GetWorkflow(pb.GetWorkflowRequest(project="k", name="kinds"))
    by_name = {t.name: t for t in got.workflow.tasks}
    assert by_name["py"].python == tasks[0].python
    assert by_name["call"].http == tasks[1].http


@pytest.mark.parametrize(
    ("task", "field", "contains"),
    [
        (python_task(script="  "), "workflow.tasks[0].python.script", "must not be empty"),
        (python_task(script="a\x00b"), "workflow.tasks[0].python.script", "NUL"),
        (python_task(interpreter="python3 -c evil"), "workflow.tasks[0].python.interpreter", ""),
        (python_task(interpreter="venv/bin/python"), "workflow.tasks[0].python.interpreter", ""),
        (http_task(url=""), "workflow.tasks[0].http.url", "is required"),
        (http_task(url="ftp://x/y"), "workflow.tasks[0].http.url", "http:// or https://"),
        (http_task(url="http://ok.com@evil.com/"), "workflow.tasks[0].http.url", "user info"),
        (http_task(url="http://a b/"), "workflow.tasks[0].http.url", "whitespace"),
        (http_task(url="http://h:99999/"), "workflow.tasks[0].http.url", "invalid port"),
        (http_task(url="http://é.com/"), "workflow.tasks[0].http.url", "ASCII"),
        (http_task(url="/relative"), "workflow.tasks[0].http.url", ""),
        (http_task(method=42), "workflow.tasks[0].http.method", "unknown"),
        (http_task(expected_status=[99]), "workflow.tasks[0].http.expected_status[0]", "100"),
        (http_task(expected_status=[600]), "workflow.tasks[0].http.expected_status[0]", "599"),
        (http_task(headers={"Host": "evil"}), "workflow.tasks[0].http.headers['Host']", ""),
        (http_task(headers={"X": "a\r\nB: c"}), "workflow.tasks[0].http.headers['X']", "line"),
        (http_task(headers={"bad name": "x"}), "workflow.tasks[0].http.headers['bad name']", ""),
        (
            http_task(request_timeout={"seconds": 7200}),
            "workflow.tasks[0].http.request_timeout",
            "",
        ),
        (http_task(request_timeout={"seconds": -1}), "workflow.tasks[0].http.request_timeout", ""),
        (http_task(response_param="PATH"), "workflow.tasks[0].http.response_param", ""),
        (http_task(response_param="1x"), "workflow.tasks[0].http.response_param", ""),
        (http_task(max_response_bytes=-1), "workflow.tasks[0].http.max_response_bytes", ""),
        (http_task(max_response_bytes=2**30), "workflow.tasks[0].http.max_response_bytes", ""),
        (http_task(body="x" * (256 * 1024 + 1)), "workflow.tasks[0].http.body", "256 KiB"),
    ],
)
async def test_hostile_fields_are_refused_and_nothing_is_stored(
    cluster: Cluster, task: res.TaskDefinition, field: str, contains: str
) -> None:
    before = await snapshot(cluster)
    request = pb.CreateWorkflowRequest(workflow=workflow("k", "bad", [task]))
    got = await failure(cluster.stub.CreateWorkflow(request))
    # A parameter name's reason outranks the generic one (README "Parameter names").
    reason = {"PATH": "RESERVED_PARAMETER_NAME", "1x": "INVALID_PARAMETER_NAME"}.get(
        task.http.response_param, "INVALID_WORKFLOW"
    )
    assert_invalid(got, field, reason=reason, contains=contains)
    assert await snapshot(cluster) == before
