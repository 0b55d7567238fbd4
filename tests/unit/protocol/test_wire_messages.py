"""The protocol's proto seam: dispatch validation, round trips, acknowledgements, log reads."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import cast

import pytest

from dsched.errors import InvalidArgument
from dsched.options import TimeoutStrategy
from dsched.v1 import enums_pb2, log_service_pb2, task_event_service_pb2, worker_service_pb2
from dsched_server.protocol.ack import Ack, AckDecision
from dsched_server.protocol.event import TaskEventType
from dsched_server.protocol.log_read import MAX_LOG_READ, LogRead
from dsched_server.protocol.wire.ack import acks_from_proto, acks_to_proto
from dsched_server.protocol.wire.event import event_from_bytes, event_to_bytes
from dsched_server.protocol.wire.execution import execution_from_request, execution_to_proto
from dsched_server.protocol.wire.log_read import log_read_from_request

NOW = datetime(2030, 1, 1, tzinfo=UTC)


def request(execution) -> worker_service_pb2.DispatchTaskRequest:
    return worker_service_pb2.DispatchTaskRequest(task=execution_to_proto(execution))


def test_execution_round_trip(make_execution) -> None:
    execution = make_execution(
        params={"a": "1", "b": "x y"},
        timeout=timedelta(seconds=90, milliseconds=500),
        timeout_strategy=TimeoutStrategy.WARN_FAIL,
        dry_run=True,
    )
    assert execution_from_request(request(execution), now=NOW) == execution


def test_defaults_for_absent_fields(make_execution) -> None:
    msg = request(make_execution())
    msg.task.ClearField("submit_time")
    msg.task.idempotency_key = ""
    msg.task.timeout_strategy = enums_pb2.TIMEOUT_STRATEGY_UNSPECIFIED

    execution = execution_from_request(msg, now=NOW)

    assert execution.submit_time == NOW
    assert execution.idempotency_key == "5-load-2"
    assert execution.timeout_strategy is TimeoutStrategy.FAIL
    assert not execution.kills_at_timeout  # no timeout given


def test_negative_timeout_is_a_violation(make_execution) -> None:
    msg = request(make_execution())
    msg.task.timeout.seconds = -3
    with pytest.raises(InvalidArgument) as err:
        execution_from_request(msg, now=NOW)
    assert [v.field for v in err.value.violations] == ["task.timeout"]


def test_event_bytes_round_trip(make_event) -> None:
    event = make_event(
        "4-2", type=TaskEventType.FAILED, exit_code=143, out_params={"k": "v"}, message="m"
    )
    assert event_from_bytes(event_to_bytes(event)) == event


def test_event_from_bytes_rejects_garbage_and_unset_types() -> None:
    with pytest.raises(ValueError):
        event_from_bytes(b"\xff\xff\xff")
    with pytest.raises(ValueError):
        event_from_bytes(task_event_service_pb2.TaskEvent(event_id="1-1").SerializeToString())


def test_acks_round_trip_and_unknown_decisions() -> None:
    acks = [
        Ack(event_id="1-1", decision=AckDecision.ACCEPTED),
        Ack(event_id="1-2", decision=AckDecision.NOT_OWNER, owner_address="m:1", reason="moved"),
    ]
    msg = acks_to_proto(acks)
    assert acks_from_proto(msg) == acks
    msg.acks[0].decision = cast(enums_pb2.TaskEventDecision, 99)  # from a newer master
    assert acks_from_proto(msg)[0].decision is AckDecision.UNSPECIFIED


def test_log_requests_cap_the_length() -> None:
    read = log_service_pb2.ReadTaskLogRequest
    assert log_read_from_request(read(task_instance_id=3)) == LogRead(3, 0, MAX_LOG_READ)
    assert log_read_from_request(read(task_instance_id=3, offset=9, length=10)) == LogRead(3, 9, 10)
    assert log_read_from_request(read(task_instance_id=3, length=10**9)).length == MAX_LOG_READ
    tail = log_service_pb2.TailTaskLogRequest(task_instance_id=3, offset=7, follow=True)
    assert log_read_from_request(tail) == LogRead(3, 7, MAX_LOG_READ)
