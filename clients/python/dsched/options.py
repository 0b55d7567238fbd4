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


class RunTrigger(StrEnum):
    """What started a run."""

    MANUAL = "MANUAL"  # a client's StartWorkflow
    SCHEDULE = "SCHEDULE"  # a schedule's fire time
    BACKFILL = "BACKFILL"  # a date of a backfill


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


class BackfillState(StrEnum):
    RUNNING = "RUNNING"
    PAUSED = "PAUSED"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"

    @property
    def finished(self) -> bool:
        return self in (BackfillState.SUCCEEDED, BackfillState.FAILED, BackfillState.CANCELLED)


class BackfillOrder(StrEnum):
    ASCENDING = "ASCENDING"
    DESCENDING = "DESCENDING"


class BackfillReprocess(StrEnum):
    """Which dates a backfill runs: all, those whose last run failed, those never run."""

    ALL = "ALL"
    FAILED = "FAILED"
    MISSING = "MISSING"


class BackfillFailure(StrEnum):
    """What a failed date does: the others run anyway, or the pending ones are skipped."""

    CONTINUE = "CONTINUE"
    STOP = "STOP"


class CatchUp(StrEnum):
    """What a schedule does with fire times missed while no master could fire them."""

    NONE = "NONE"  # skip them
    LATEST = "LATEST"  # fire the newest
    ALL = "ALL"  # fire them all, oldest first (up to the schedule's cap)


class Overlap(StrEnum):
    """What a fire does while the schedule's previous run still goes on."""

    RUN = "RUN"
    SKIP = "SKIP"
    QUEUE = "QUEUE"
