""":class:`Ack` and the responses that carry acknowledgements back to the worker."""

from __future__ import annotations

from collections.abc import Iterable

from dsched.v1 import enums_pb2, task_event_service_pb2
from dsched_server.protocol.ack import Ack, AckDecision
from dsched_server.protocol.wire import checks


def ack_to_proto(ack: Ack) -> task_event_service_pb2.TaskEventAck:
    return task_event_service_pb2.TaskEventAck(
        event_id=ack.event_id,
        decision=f"TASK_EVENT_DECISION_{ack.decision.value}",
        owner_address=ack.owner_address,
        reason=ack.reason,
    )


def acks_to_proto(acks: Iterable[Ack]) -> task_event_service_pb2.ReportTaskEventsResponse:
    return task_event_service_pb2.ReportTaskEventsResponse(acks=[ack_to_proto(a) for a in acks])


def acks_from_proto(msg: task_event_service_pb2.ReportTaskEventsResponse) -> list[Ack]:
    """Never refuses: an answer it cannot use is one the worker does not settle on. An unknown
    decision (a newer master) becomes UNSPECIFIED, which the worker retries; an owner address it
    could not dial becomes "" (owner unknown)."""
    return [_ack_from_proto(a) for a in msg.acks]


def _ack_from_proto(msg: task_event_service_pb2.TaskEventAck) -> Ack:
    decision = checks.enum_member(
        AckDecision, enums_pb2.TaskEventDecision, "TASK_EVENT_DECISION_", msg.decision
    )
    owner = msg.owner_address
    return Ack(
        decision=decision or AckDecision.UNSPECIFIED,
        reason=msg.reason,
        owner_address=owner if checks.address_violation("owner_address", owner) is None else "",
        event_id=msg.event_id,
    )
