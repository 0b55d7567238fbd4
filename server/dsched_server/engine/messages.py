"""Inputs of an instance runner. Each runner consumes its messages strictly in order."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from enum import Enum

from dsched_server.core.controls import ControlKind
from dsched_server.core.dependent import Result
from dsched_server.core.records import InstanceRecord
from dsched_server.protocol.ack import Ack
from dsched_server.protocol.event import TaskEvent


@dataclass(slots=True)
class WorkerEvent:
    """A task event a worker incarnation reported; ``reply`` gets the answer once it is durable."""

    event: TaskEvent
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
class Waiting:
    """The dispatcher holds an attempt back: no worker of its group can take it now."""

    task_instance_id: int
    reason: str


class Check(Enum):
    """Why the runner looks at one of its attempts again."""

    DELAY = "delay"  # its delayed start is due
    DISPATCH = "dispatch"  # its dispatch timeout: if no worker accepted it yet, it fails
    TIMEOUT_WARNING = "timeout warning"  # it runs longer than its task's timeout
    KILL_UNANSWERED = "kill unanswered"  # a kill found no such attempt (looked at after a grace)
    NOT_ON_WORKER = "not on worker"  # the worker that held an adopted attempt no longer has it
    DEPENDENCY = "dependency"  # a DEPENDENT attempt: look at what it waits for (again)
    RETRY = "retry"  # it failed, and its task's retry interval has elapsed since


@dataclass(frozen=True, slots=True)
class AttemptCheck:
    """One attempt to look at again: a timer the runner set came due, or a worker's answer says
    so. One type for all of them, so that binding a batch's provisional attempt ids to the
    committed ones (``effects.py``) covers every timer."""

    check: Check
    task_instance_id: int


@dataclass(frozen=True, slots=True)
class DependencyChecked:
    """What a DEPENDENT attempt's dependencies came to when the store was read; ``detail`` says
    which one holds it up, for its state reason."""

    task_instance_id: int
    result: Result
    detail: str


@dataclass(frozen=True, slots=True)
class WorkerGone:
    """Every incarnation of the worker at ``address`` up to ``epoch`` is dead (``why`` says how it
    is known): their unfinished attempts are re-run elsewhere. Epochs only grow, and an address
    serves one process at a time, so an incarnation's death implies its predecessors'."""

    address: str
    epoch: int
    why: str = "is gone"


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
    | AttemptCheck
    | WorkerGone
    | Waiting
    | DependencyChecked
    | Control
    | ApplyControls
)
