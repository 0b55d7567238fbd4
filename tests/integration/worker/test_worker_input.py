"""Hostile input to the worker's RPCs: INVALID_ARGUMENT with ErrorInfo and field violations, and no
side effects (no log, no working directory, no event)."""

from __future__ import annotations

from typing import Any

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc import aio
from grpc_status import rpc_status

from dsched.v1 import log_service_pb2, resources_pb2, worker_service_pb2
from dsched_server.protocol.wire.execution import execution_to_proto


def rich(err: aio.AioRpcError) -> tuple[error_details_pb2.ErrorInfo, list[str]]:
    """The ErrorInfo and the violated field names carried in the status details."""
    status = rpc_status.from_call(err)
    assert status is not None, "no google.rpc.Status in the trailers"
    info = error_details_pb2.ErrorInfo()
    fields: list[str] = []
    for detail in status.details:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            detail.Unpack(info)
        elif detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad = error_details_pb2.BadRequest()
            detail.Unpack(bad)
            fields += [v.field for v in bad.field_violations]
    return info, fields


def hostile_tasks(harness: Any) -> list[tuple[worker_service_pb2.TaskExecution, str]]:
    good = execution_to_proto(harness.execution("echo hi"))

    def variant(**changes: Any) -> worker_service_pb2.TaskExecution:
        msg = worker_service_pb2.TaskExecution()
        msg.CopyFrom(good)
        for name, value in changes.items():
            if name == "params":
                msg.params.update(value)
            elif name == "clear":
                msg.ClearField(value)
            elif name == "shell":
                msg.shell.CopyFrom(value)
            else:
                setattr(msg, name, value)
        return msg

    return [
        (variant(task_instance_id=-1), "task.task_instance_id"),
        (variant(task_instance_id=0, attempt=0), "task.attempt"),
        (variant(workflow_instance_id=0), "task.workflow_instance_id"),
        (variant(owner_address=""), "task.owner_address"),
        (variant(owner_address="evil host\n:1"), "task.owner_address"),
        (variant(clear="shell"), "task.kind"),
        (variant(task_name="../../etc"), "task.task_name"),
        (variant(params={"not a name": "x"}), "task.params['not a name']"),
        (variant(params={"1st": "x"}), "task.params['1st']"),
        (variant(params={"ok": "nul\x00byte"}), "task.params['ok']"),
        (variant(timeout_strategy=42), "task.timeout_strategy"),
        (variant(shell=resources_pb2.ShellTask(script="x" * 300_000)), "task.shell.script"),
    ]


async def test_dispatch_rejects_bad_input_without_side_effects(harness):
    worker = await harness.worker()
    stub = harness.stub(worker)
    cases = hostile_tasks(harness)

    for task, field in cases:
        with pytest.raises(aio.AioRpcError) as err:
            await stub.DispatchTask(worker_service_pb2.DispatchTaskRequest(task=task))
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, field
        info, fields = rich(err.value)
        assert (info.domain, info.reason) == ("dsched", "INVALID_ARGUMENT")
        assert field in fields, (field, fields)
    with pytest.raises(aio.AioRpcError) as missing:
        await stub.DispatchTask(worker_service_pb2.DispatchTaskRequest())
    assert rich(missing.value)[1] == ["task"]

    logs = harness.data_dir / "logs"
    assert not logs.exists() or not any(p.is_file() for p in logs.rglob("*"))
    exec_root = harness.data_dir / "exec"  # made (empty) when the worker starts
    assert not exec_root.exists() or not any(exec_root.iterdir())
    assert harness.master.received == []
    assert worker.runner.slots_in_use == 0


async def test_every_violation_is_reported_at_once(harness):
    worker = await harness.worker()
    task = worker_service_pb2.TaskExecution(task_instance_id=-5, attempt=-1, owner_address="")

    with pytest.raises(aio.AioRpcError) as err:
        await harness.stub(worker).DispatchTask(worker_service_pb2.DispatchTaskRequest(task=task))

    _, fields = rich(err.value)
    for field in ("task.task_instance_id", "task.attempt", "task.owner_address", "task.kind"):
        assert field in fields


@pytest.mark.parametrize(
    ("request_", "field"),
    [
        (log_service_pb2.ReadTaskLogRequest(task_instance_id=0), "task_instance_id"),
        (log_service_pb2.ReadTaskLogRequest(task_instance_id=-7), "task_instance_id"),
        (log_service_pb2.ReadTaskLogRequest(task_instance_id=1, offset=-1), "offset"),
        (log_service_pb2.ReadTaskLogRequest(task_instance_id=1, length=-1), "length"),
    ],
)
async def test_read_task_log_rejects_bad_input(harness, request_, field):
    worker = await harness.worker()

    with pytest.raises(aio.AioRpcError) as err:
        await harness.log_stub(worker).ReadTaskLog(request_)

    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    info, fields = rich(err.value)
    assert info.domain == "dsched"
    assert fields == [field]


async def test_read_beyond_the_end_is_out_of_range(harness):
    worker = await harness.worker()
    execution = harness.execution("echo hi")
    await harness.dispatch(worker, execution)
    await harness.master.wait_terminal(execution.task_instance_id)

    with pytest.raises(aio.AioRpcError) as err:
        await harness.log_stub(worker).ReadTaskLog(
            log_service_pb2.ReadTaskLogRequest(
                task_instance_id=execution.task_instance_id, offset=10**12
            )
        )

    assert err.value.code() == grpc.StatusCode.OUT_OF_RANGE


async def test_kill_and_take_over_reject_bad_input(harness):
    worker = await harness.worker()
    stub = harness.stub(worker)

    with pytest.raises(aio.AioRpcError) as kill:
        await stub.KillTask(worker_service_pb2.KillTaskRequest(task_instance_id=1, attempt=0))
    with pytest.raises(aio.AioRpcError) as take:
        await stub.TakeOverTask(
            worker_service_pb2.TakeOverTaskRequest(
                task_instance_id=1, attempt=1, owner_address="no spaces allowed:1"
            )
        )

    assert kill.value.code() == take.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert rich(kill.value)[1] == ["attempt"]
    assert rich(take.value)[1] == ["owner_address"]
