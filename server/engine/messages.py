"""Inputs of an instance runner. Each runner consumes its messages strictly in order."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from dsched.server.core.controls import ControlKind
from dsched.server.core.records import InstanceRecord


class EventType(StrEnum):
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    KILLED = "KILLED"


class Decision(StrEnum):
    """The master's answer to a worker event (mirrors TaskEventDecision)."""

    ACCEPTED = "ACCEPTED"
    DUPLICATE = "DUPLICATE"
    REJECTED_STALE = "REJECTED_STALE"
    NOT_OWNER = "NOT_OWNER"
    RETRY_LATER = "RETRY_LATER"


@dataclass(frozen=True, slots=True)
class Ack:
    decision: Decision
    reason: str = ""
    owner_address: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskEventData:
    """A worker's report about one attempt."""

    event_id: str
    task_instance_id: int
    attempt: int
    workflow_instance_id: int
    type: EventType
    event_time: datetime
    exit_code: int = 0
    out_params: Mapping[str, str] = field(default_factory=dict)
    pid: int = 0
    log_path: str = ""
    message: str = ""


@dataclass(slots=True)
class WorkerEvent:
    event: TaskEventData
    worker_address: str
    worker_epoch: int
    reply: asyncio.Future[Ack]


@dataclass(frozen=True, slots=True)
class Dispatched:
    """A worker accepted an attempt."""

    task_instance_id: int
    host: str
    worker_epoch: int
    log_path: str


@dataclass(frozen=True, slots=True)
class RetryDue:
    task: str


@dataclass(frozen=True, slots=True)
class DelayDue:
    task_instance_id: int


@dataclass(frozen=True, slots=True)
class DispatchDue:
    """The dispatch timeout of an attempt passed: if no worker accepted it yet, it fails."""

    task_instance_id: int


@dataclass(frozen=True, slots=True)
class TimeoutWarning:
    task_instance_id: int


@dataclass(frozen=True, slots=True)
class TakeOverResult:
    """Whether the worker that held an adopted attempt still has it."""

    task_instance_id: int
    found: bool


@dataclass(frozen=True, slots=True)
class Waiting:
    """The dispatcher holds an attempt back: no worker of its group can take it now."""

    task_instance_id: int
    reason: str


@dataclass(frozen=True, slots=True)
class WorkerGone:
    """Every incarnation of the worker at ``address`` up to ``epoch`` is dead (``why`` says how it
    is known): their unfinished attempts are re-run elsewhere. Epochs only grow, and an address
    serves one process at a time, so an incarnation's death implies its predecessors'."""

    address: str
    epoch: int
    why: str = "is gone"


@dataclass(frozen=True, slots=True)
class KillUnanswered:
    """A kill found no such attempt on its worker (checked again after a grace period)."""

    task_instance_id: int


@dataclass(slots=True)
class Control:
    """A pause or stop a client sent to this master, which drives the instance: recorded and
    applied in one batch. ``reply`` gets the instance after the commit, or the refusal (the
    caller may cancel it to withdraw a control not yet taken up)."""

    kind: ControlKind
    request_id: str
    requested_by: str
    reply: asyncio.Future[InstanceRecord]


@dataclass(slots=True)
class ApplyControls:
    """Controls were recorded for this instance by another master (or while nobody drove it):
    apply them. ``reply`` (if any) is set once they are applied and committed."""

    reply: asyncio.Future[None] | None = None


Message = (
    WorkerEvent
    | Dispatched
    | RetryDue
    | DelayDue
    | TimeoutWarning
    | TakeOverResult
    | KillUnanswered
    | WorkerGone
    | Waiting
    | DispatchDue
    | Control
    | ApplyControls
)
