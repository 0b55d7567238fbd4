"""TaskEvent on the wire and in the outbox: every event a worker writes survives value -> pb ->
value, pb -> value -> pb and bytes -> value; anything else a peer or a damaged file could hold is
INVALID_ARGUMENT (ValueError from bytes), never another exception."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsched.errors import InvalidArgument
from dsched.v1 import task_event_service_pb2
from dsched_server.protocol.event import TaskEvent
from dsched_server.protocol.wire.event import (
    event_from_bytes,
    event_from_proto,
    event_to_bytes,
    event_to_proto,
    report_request,
    report_request_of_bytes,
)
from tests.unit.protocol.hostile import events, hostile


@given(events())
def test_value_to_pb_to_value(event: TaskEvent) -> None:
    assert event_from_proto(event_to_proto(event)) == event


@given(events())
def test_pb_to_value_to_pb(event: TaskEvent) -> None:
    msg = event_to_proto(event)
    assert event_to_proto(event_from_proto(msg)) == msg


@given(events())
def test_bytes_round_trip(event: TaskEvent) -> None:
    assert event_from_bytes(event_to_bytes(event)) == event


@given(st.lists(events(), max_size=3), st.integers(0, 2**63 - 1))
def test_a_report_carries_its_events_in_order(events: list[TaskEvent], epoch: int) -> None:
    msg = report_request("w:1", epoch, events)
    assert (msg.worker_address, msg.worker_epoch) == ("w:1", epoch)
    assert [event_from_proto(e) for e in msg.events] == events
    # The worker sends the bytes its outbox already holds: the same report.
    serialized = [event_to_bytes(e) for e in events]
    assert report_request_of_bytes("w:1", epoch, serialized) == msg


@given(hostile(task_event_service_pb2.TaskEvent))
def test_any_event_message_is_an_event_or_invalid_argument(
    msg: task_event_service_pb2.TaskEvent,
) -> None:
    try:
        event = event_from_proto(msg)
    except InvalidArgument as err:
        assert err.violations
    else:
        assert event.task_instance_id > 0 and event.attempt > 0 and event.event_id


@given(st.binary(max_size=96))
def test_any_bytes_are_an_event_or_value_error(data: bytes) -> None:
    try:
        event_from_bytes(data)
    except ValueError as err:
        assert str(err).startswith("not a TaskEvent")


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda m: setattr(m, "type", 0), "type"),
        (lambda m: setattr(m, "type", 99), "type"),
        (lambda m: setattr(m, "event_id", ""), "event_id"),
        (lambda m: setattr(m, "event_id", "1-" + "9" * 80), "event_id"),
        (lambda m: setattr(m, "task_instance_id", 0), "task_instance_id"),
        (lambda m: setattr(m, "attempt", -1), "attempt"),
        (lambda m: setattr(m, "workflow_instance_id", 0), "workflow_instance_id"),
        (lambda m: setattr(m.event_time, "seconds", -(2**62)), "event_time"),
    ],
)
def test_what_no_worker_sends_is_named(make_event, change, field) -> None:
    msg = event_to_proto(make_event("3-1"))
    change(msg)
    with pytest.raises(InvalidArgument) as err:
        event_from_proto(msg)
    assert [v.field for v in err.value.violations] == [field]
