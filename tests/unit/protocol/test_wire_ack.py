"""Acknowledgements on the wire: every answer a master gives survives both round trips; whatever a
master could send decodes without an exception, to a decision the worker knows (UNSPECIFIED for
one it does not) and an owner address it may dial or none."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from dsched.v1 import task_event_service_pb2
from dsched_server.protocol.ack import Ack, AckDecision
from dsched_server.protocol.wire.ack import acks_from_proto, acks_to_proto
from dsched_server.protocol.wire.checks import address_violation
from tests.unit.protocol.hostile import ADDRESSES, hostile

ACKS = st.builds(
    Ack,
    decision=st.sampled_from(AckDecision),
    reason=st.text(max_size=40),
    owner_address=st.one_of(st.just(""), ADDRESSES),
    event_id=st.text(max_size=30),
)


@given(st.lists(ACKS, max_size=4))
def test_value_to_pb_to_value(acks: list[Ack]) -> None:
    assert acks_from_proto(acks_to_proto(acks)) == acks


@given(st.lists(ACKS, max_size=4))
def test_pb_to_value_to_pb(acks: list[Ack]) -> None:
    msg = acks_to_proto(acks)
    assert acks_to_proto(acks_from_proto(msg)) == msg


@given(hostile(task_event_service_pb2.ReportTaskEventsResponse))
def test_any_answer_decodes_to_something_the_worker_can_act_on(
    msg: task_event_service_pb2.ReportTaskEventsResponse,
) -> None:
    acks = acks_from_proto(msg)
    assert [a.event_id for a in acks] == [a.event_id for a in msg.acks]
    for ack in acks:
        assert isinstance(ack.decision, AckDecision)
        assert ack.owner_address == "" or address_violation("a", ack.owner_address) is None


def test_unknown_decisions_and_undiallable_owners_are_unknown() -> None:
    msg = task_event_service_pb2.ReportTaskEventsResponse(
        acks=[
            task_event_service_pb2.TaskEventAck(event_id="1-1", decision=99),  # type: ignore[arg-type]
            task_event_service_pb2.TaskEventAck(
                event_id="1-2", decision="TASK_EVENT_DECISION_NOT_OWNER", owner_address="a b:1"
            ),
        ]
    )
    assert acks_from_proto(msg) == [
        Ack(AckDecision.UNSPECIFIED, event_id="1-1"),
        Ack(AckDecision.NOT_OWNER, event_id="1-2"),
    ]
