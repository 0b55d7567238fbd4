"""Run and task options. Values are the proto enum names without their prefix, as stored."""

from __future__ import annotations

from enum import StrEnum


class FailureStrategy(StrEnum):
    CONTINUE = "CONTINUE"
    END = "END"


class TaskDependType(StrEnum):
    TASK_ONLY = "TASK_ONLY"
    TASK_PRE = "TASK_PRE"
    TASK_POST = "TASK_POST"


class Priority(StrEnum):
    HIGHEST = "HIGHEST"
    HIGH = "HIGH"
    MEDIUM = "MEDIUM"
    LOW = "LOW"
    LOWEST = "LOWEST"

    @property
    def rank(self) -> int:
        """0 for HIGHEST .. 4 for LOWEST: smaller is served first."""
        return _PRIORITY_RANK[self]


_PRIORITY_RANK = {p: i for i, p in enumerate(Priority)}


class TimeoutStrategy(StrEnum):
    WARN = "WARN"
    FAIL = "FAIL"
    WARN_FAIL = "WARN_FAIL"

    @property
    def kills(self) -> bool:
        return self is not TimeoutStrategy.WARN

    @property
    def warns(self) -> bool:
        return self is not TimeoutStrategy.FAIL


class ReleaseState(StrEnum):
    OFFLINE = "OFFLINE"
    ONLINE = "ONLINE"


class CommandType(StrEnum):
    START = "START"
    RESUME = "RESUME"
    RECOVER_FAILED = "RECOVER_FAILED"
    RERUN = "RERUN"
    EXECUTE_FROM_TASK = "EXECUTE_FROM_TASK"
    FAILOVER = "FAILOVER"


class HistoryKind(StrEnum):
    """A kind of history a clean-up deletes (README "Retention"), in the order it is deleted."""

    REQUEST_IDS = "REQUEST_IDS"  # stored answers to request ids
    EVENTS = "EVENTS"  # the events of finished instances
    INSTANCES = "INSTANCES"  # finished instances with their task instances, events and controls
