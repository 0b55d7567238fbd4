"""The worker's records of a task attempt: what to run, what happened, and the master's answers.

These are plain values. ``dsched.v1`` messages never travel through the worker's logic:
:mod:`dsched.worker.convert` is the one place that turns messages into these records and back.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import StrEnum

from dsched.options import TimeoutStrategy
from dsched.spec import TaskKind

Clock = Callable[[], datetime]
"""Returns the current time as an aware UTC datetime (tests pass a fake, the app the wall clock)."""


@dataclass(frozen=True, slots=True, order=True)
class AttemptKey:
    """Identifies one attempt. Dispatch, kill and take-over are idempotent on it."""

    task_instance_id: int
    attempt: int

    def __str__(self) -> str:
        return f"{self.task_instance_id}#{self.attempt}"


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskExecution:
    """Everything the worker was told about one dispatched attempt (validated by the converter).

    ``params`` are exported to the task's environment as they are; ``timeout`` of zero means none.
    ``owner_address``/``owner_epoch`` name the master that receives the attempt's events;
    ``worker_address``/``worker_epoch`` name the worker incarnation that accepted it (stamped by the
    runner, exported to the task as its fencing token).
    """

    task_instance_id: int
    attempt: int
    workflow_instance_id: int
    workflow_code: int
    workflow_version: int
    task_name: str
    idempotency_key: str
    kind: TaskKind
    owner_address: str
    owner_epoch: int
    submit_time: datetime
    params: Mapping[str, str] = field(default_factory=dict)
    timeout: timedelta = timedelta(0)
    timeout_strategy: TimeoutStrategy = TimeoutStrategy.FAIL
    dry_run: bool = False
    worker_address: str = ""
    worker_epoch: int = 0

    @property
    def key(self) -> AttemptKey:
        return AttemptKey(self.task_instance_id, self.attempt)

    @property
    def kills_at_timeout(self) -> bool:
        """True if the worker kills the attempt at its deadline (WARN alone is the master's)."""
        return self.timeout > timedelta(0) and self.timeout_strategy.kills

    def with_owner(self, address: str, epoch: int) -> TaskExecution:
        """The same attempt, owned by another master (after a take-over)."""
        return replace(self, owner_address=address, owner_epoch=epoch)

    def accepted_by(self, address: str, epoch: int) -> TaskExecution:
        """The same attempt, stamped with the worker incarnation that accepted it."""
        return replace(self, worker_address=address, worker_epoch=epoch)


class TaskEventType(StrEnum):
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    KILLED = "KILLED"

    @property
    def terminal(self) -> bool:
        return self is not TaskEventType.RUNNING


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskEvent:
    """One state change of an attempt, as reported to its owner master.

    ``event_id`` is ``"<worker epoch>-<sequence>"``, unique per worker incarnation; the master's
    acknowledgement refers to it and a resent event keeps it, so the master can answer DUPLICATE.
    """

    event_id: str
    task_instance_id: int
    attempt: int
    workflow_instance_id: int
    type: TaskEventType
    event_time: datetime
    exit_code: int = 0
    out_params: Mapping[str, str] = field(default_factory=dict)
    pid: int = 0
    log_path: str = ""
    message: str = ""

    @property
    def key(self) -> AttemptKey:
        return AttemptKey(self.task_instance_id, self.attempt)


class AckDecision(StrEnum):
    UNSPECIFIED = "UNSPECIFIED"
    ACCEPTED = "ACCEPTED"
    DUPLICATE = "DUPLICATE"
    REJECTED_STALE = "REJECTED_STALE"
    NOT_OWNER = "NOT_OWNER"
    RETRY_LATER = "RETRY_LATER"

    @property
    def final(self) -> bool:
        """True when the event is settled and leaves the outbox."""
        return self in _FINAL_DECISIONS


_FINAL_DECISIONS = frozenset(
    {AckDecision.ACCEPTED, AckDecision.DUPLICATE, AckDecision.REJECTED_STALE}
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Ack:
    """A master's answer to one event; NOT_OWNER comes with ``owner_address`` (empty if unknown)."""

    event_id: str
    decision: AckDecision
    owner_address: str = ""
    reason: str = ""


class DispatchOutcome(StrEnum):
    ACCEPTED = "ACCEPTED"
    ALREADY_ACCEPTED = "ALREADY_ACCEPTED"
    REJECTED_FULL = "REJECTED_FULL"
    REJECTED_UNAVAILABLE = "REJECTED_UNAVAILABLE"


@dataclass(frozen=True, slots=True, kw_only=True)
class Dispatch:
    """The answer to a dispatch: the outcome, where the log is written, and why if rejected."""

    outcome: DispatchOutcome
    log_path: str = ""
    reason: str = ""
