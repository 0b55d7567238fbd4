"""A master's answer to one task event."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class AckDecision(StrEnum):
    """Values are the proto names without their ``TASK_EVENT_DECISION_`` prefix. A master never
    answers UNSPECIFIED; a worker reads a decision it does not know (a newer master) as it."""

    UNSPECIFIED = "UNSPECIFIED"
    ACCEPTED = "ACCEPTED"
    DUPLICATE = "DUPLICATE"
    REJECTED_STALE = "REJECTED_STALE"
    NOT_OWNER = "NOT_OWNER"
    RETRY_LATER = "RETRY_LATER"

    @property
    def final(self) -> bool:
        """True when the event is settled and leaves the worker's outbox."""
        return self in _FINAL_DECISIONS


_FINAL_DECISIONS = frozenset(
    {AckDecision.ACCEPTED, AckDecision.DUPLICATE, AckDecision.REJECTED_STALE}
)


@dataclass(frozen=True, slots=True)
class Ack:
    """NOT_OWNER comes with ``owner_address`` (empty if unknown). ``event_id`` names the event
    answered; a master's runner decides before it is known to the answer (the event is beside
    it) and the servicer stamps it when it sends the answer."""

    decision: AckDecision
    reason: str = ""
    owner_address: str = ""
    event_id: str = ""
