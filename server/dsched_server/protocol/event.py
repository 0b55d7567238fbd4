"""What a worker reports about an attempt: one state change, sent to the attempt's owner."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from dsched_server.protocol.attempt import AttemptKey


class TaskEventType(StrEnum):
    """Values are the proto names without their ``TASK_EVENT_TYPE_`` prefix."""

    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    KILLED = "KILLED"

    @property
    def terminal(self) -> bool:
        return self is not TaskEventType.RUNNING


@dataclass(frozen=True, slots=True, kw_only=True)
class AttemptReport:
    """What an event says about its attempt: RUNNING with its process and log, or how the attempt
    ended (its exit code, OUT parameters and why); ``application_id``: the Spark application id,
    once known (a RUNNING event is sent when it appears)."""

    type: TaskEventType
    exit_code: int = 0
    out_params: Mapping[str, str] = field(default_factory=dict)
    pid: int = 0
    log_path: str = ""
    message: str = ""
    application_id: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskEvent(AttemptReport):
    """One state change of an attempt, as reported to its owner master: the report, the attempt
    it is about and when it happened.

    ``event_id`` is ``"<worker epoch>-<sequence>"``, unique per worker incarnation; the master's
    acknowledgement refers to it and a resent event keeps it, so the master can answer DUPLICATE.
    """

    event_id: str
    task_instance_id: int
    attempt: int
    workflow_instance_id: int
    event_time: datetime

    @property
    def key(self) -> AttemptKey:
        return AttemptKey(self.task_instance_id, self.attempt)
