"""A worker's answer to a dispatch."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum


class DispatchOutcome(StrEnum):
    """Values are the proto names without their ``DISPATCH_OUTCOME_`` prefix. UNSPECIFIED stands
    for an outcome this master does not know (a newer worker): not accepted."""

    UNSPECIFIED = "UNSPECIFIED"
    ACCEPTED = "ACCEPTED"
    ALREADY_ACCEPTED = "ALREADY_ACCEPTED"
    REJECTED_FULL = "REJECTED_FULL"
    REJECTED_UNAVAILABLE = "REJECTED_UNAVAILABLE"

    @property
    def accepted(self) -> bool:
        """True if the worker has the attempt (now or from an earlier identical dispatch)."""
        return self in (DispatchOutcome.ACCEPTED, DispatchOutcome.ALREADY_ACCEPTED)


@dataclass(frozen=True, slots=True, kw_only=True)
class Dispatch:
    """The answer for one attempt: the outcome, where its log is written, and why if rejected."""

    outcome: DispatchOutcome
    log_path: str = ""
    reason: str = ""

    @property
    def accepted(self) -> bool:
        """Not accepted (full, stopping) means the attempt does not run there."""
        return self.outcome.accepted


@dataclass(frozen=True, slots=True)
class DispatchReply:
    """A worker's answer to a batch: one answer per attempt, in the order sent, and the
    incarnation that answered (the fencing token of every attempt it accepted)."""

    worker_epoch: int
    results: Sequence[Dispatch]
