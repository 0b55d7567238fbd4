"""Retention of the master's history: what may be deleted, and how old it must be.

Three kinds, each with its own age (README "Retention"): request ids (the idempotency log), the
events of finished instances (their watch history), and finished instances themselves (with their
task instances, events and controls). *Finished* is SUCCEEDED, FAILED or STOPPED: a PAUSED
instance waits for a resume, and an unfinished one is never touched, nor is anything it needs. An
instance rerun or recovered after it finished is unfinished again, and its end time starts over.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from dsched.options import HistoryKind
from dsched.states import WorkflowState

__all__ = ["FINISHED", "HistoryKind", "Tally", "cutoffs"]

FINISHED = frozenset({WorkflowState.SUCCEEDED, WorkflowState.FAILED, WorkflowState.STOPPED})


@dataclass(frozen=True, slots=True)
class Tally:
    """How many of a kind a clean-up deleted (or, dry, would delete), and the time span of those:
    creation times for request ids and events, end times for instances."""

    kind: HistoryKind
    count: int = 0
    oldest: datetime | None = None
    newest: datetime | None = None

    def plus(self, count: int, times: Iterable[datetime]) -> Tally:
        span = [t for t in (self.oldest, self.newest, *times) if t is not None]
        return Tally(
            self.kind,
            self.count + count,
            min(span, default=None),
            max(span, default=None),
        )


def cutoffs(now: datetime, ages: Mapping[HistoryKind, timedelta]) -> dict[HistoryKind, datetime]:
    """The time before which each kind is deleted; a kind whose age is not positive is kept."""
    return {kind: now - age for kind, age in ages.items() if age > timedelta(0)}
