"""Workflow and task instance states, and the kinds of the events that record them.

The values are the proto enum names without their prefix (``WORKFLOW_INSTANCE_STATE_RUNNING`` ->
``"RUNNING"``). They are persisted in the metadata store, so they are permanent.
"""

from __future__ import annotations

from enum import StrEnum


class WorkflowState(StrEnum):
    SUBMITTED = "SUBMITTED"
    RUNNING = "RUNNING"
    READY_PAUSE = "READY_PAUSE"
    PAUSED = "PAUSED"
    READY_STOP = "READY_STOP"
    STOPPED = "STOPPED"
    FAILED = "FAILED"
    SUCCEEDED = "SUCCEEDED"
    FAILOVER = "FAILOVER"

    @property
    def terminal(self) -> bool:
        """True for the states an instance rests in until a user acts (or forever)."""
        return self in WORKFLOW_TERMINAL


class TaskState(StrEnum):
    SUBMITTED = "SUBMITTED"
    DELAY_EXECUTION = "DELAY_EXECUTION"
    DISPATCHED = "DISPATCHED"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    KILLED = "KILLED"
    PAUSED = "PAUSED"
    NEED_FAULT_TOLERANCE = "NEED_FAULT_TOLERANCE"
    FORCED_SUCCESS = "FORCED_SUCCESS"

    @property
    def terminal(self) -> bool:
        """True once the attempt can change no more (except FAILED/KILLED -> FORCED_SUCCESS)."""
        return self in TASK_TERMINAL

    @property
    def successful(self) -> bool:
        return self in (TaskState.SUCCEEDED, TaskState.FORCED_SUCCESS)


class InstanceEventKind(StrEnum):
    """What an entry of an instance's event log records (the proto enum's comments say more)."""

    STATE = "STATE"
    CLAIMED = "CLAIMED"
    FAILOVER = "FAILOVER"
    TIMEOUT_WARNING = "TIMEOUT_WARNING"
    RETRY_SCHEDULED = "RETRY_SCHEDULED"
    WAITING = "WAITING"
    CONTROL = "CONTROL"


WORKFLOW_TERMINAL = frozenset(
    {WorkflowState.PAUSED, WorkflowState.STOPPED, WorkflowState.FAILED, WorkflowState.SUCCEEDED}
)
TASK_TERMINAL = frozenset(
    {
        TaskState.SUCCEEDED,
        TaskState.FAILED,
        TaskState.KILLED,
        TaskState.PAUSED,
        TaskState.NEED_FAULT_TOLERANCE,
        TaskState.FORCED_SUCCESS,
    }
)
