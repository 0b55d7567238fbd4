"""TaskExecution on the wire: every valid attempt survives value -> pb -> value and pb -> value ->
pb; any dispatch request a peer could send decodes to attempts or to INVALID_ARGUMENT, never to
another exception."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsched.errors import InvalidArgument
from dsched.v1 import worker_service_pb2
from dsched_server.protocol.execution import TaskExecution
from dsched_server.protocol.wire.execution import (
    MAX_DISPATCH_BATCH,
    dispatch_request,
    execution_from_request,
    execution_to_proto,
    executions_from_request,
)
from tests.unit.protocol.hostile import executions, hostile

NOW = datetime(2030, 1, 1, tzinfo=UTC)


def single(execution: TaskExecution) -> worker_service_pb2.DispatchTaskRequest:
    return worker_service_pb2.DispatchTaskRequest(task=execution_to_proto(execution))


@given(executions())
def test_value_to_pb_to_value(execution: TaskExecution) -> None:
    assert execution_from_request(single(execution), now=NOW) == execution


@given(executions())
def test_pb_to_value_to_pb(execution: TaskExecution) -> None:
    msg = execution_to_proto(execution)
    decoded = execution_from_request(worker_service_pb2.DispatchTaskRequest(task=msg), now=NOW)
    assert execution_to_proto(decoded) == msg


@given(st.lists(executions(), min_size=1, max_size=4))
def test_batches_round_trip_in_order(batch: list[TaskExecution]) -> None:
    assert executions_from_request(dispatch_request(batch), now=NOW) == batch


@given(hostile(worker_service_pb2.DispatchTaskRequest))
def test_any_dispatch_request_is_an_attempt_or_invalid_argument(
    msg: worker_service_pb2.DispatchTaskRequest,
) -> None:
    try:
        execution = execution_from_request(msg, now=NOW)
    except InvalidArgument as err:
        assert err.violations  # says which field, not only that something is wrong
    else:
        assert execution.task_instance_id > 0 and execution.attempt > 0
        assert execution_to_proto(execution).task_instance_id == msg.task.task_instance_id


# A batch nests every task kind's message (shell, spark, sql...): drawing one can take a second on
# a loaded machine, which is the machine, not the strategy.
@settings(suppress_health_check=[HealthCheck.too_slow])
@given(hostile(worker_service_pb2.DispatchTasksRequest))
def test_any_batch_is_attempts_or_invalid_argument(
    msg: worker_service_pb2.DispatchTasksRequest,
) -> None:
    try:
        found = executions_from_request(msg, now=NOW)
    except InvalidArgument as err:
        assert err.violations
    else:
        assert [e.task_instance_id for e in found] == [t.task_instance_id for t in msg.tasks]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda t: setattr(t.timeout, "seconds", 2**62), "task.timeout"),
        (lambda t: setattr(t.timeout, "nanos", 2**31 - 1), "task.timeout"),
        (lambda t: setattr(t.submit_time, "seconds", 2**62), "task.submit_time"),
        (lambda t: setattr(t.submit_time, "nanos", -1), "task.submit_time"),
        (lambda t: setattr(t, "timeout_strategy", 77), "task.timeout_strategy"),
        (lambda t: t.ClearField("shell"), "task.kind"),
        # Skipped when empty (nearly every dispatch), still checked when not.
        (lambda t: t.earlier_application_ids.append("rm -rf /"), "task.earlier_application_ids[0]"),
        (lambda t: t.earlier_application_ids.extend(["x"] * 17), "task.earlier_application_ids"),
        (lambda t: setattr(t, "task_name", "a/b"), "task.task_name"),
        (lambda t: setattr(t, "task_name", "load "), "task.task_name"),
    ],
)
def test_out_of_range_fields_are_named(make_execution, change, field) -> None:
    msg = single(make_execution())
    change(msg.task)
    with pytest.raises(InvalidArgument) as err:
        execution_from_request(msg, now=NOW)
    assert [v.field for v in err.value.violations] == [field]


def test_a_batch_too_large_is_refused_before_decoding(make_execution) -> None:
    msg = dispatch_request([make_execution()] * (MAX_DISPATCH_BATCH + 1))
    with pytest.raises(InvalidArgument) as err:
        executions_from_request(msg, now=NOW)
    assert [v.field for v in err.value.violations] == ["tasks"]
