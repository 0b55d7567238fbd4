"""Records of the metadata the master works with: plain frozen dataclasses.

The store returns these and the engine and API consume them; ORM rows and pb2 messages never travel
through business logic (ARCHITECTURE.md §8.2). Times are timezone-aware UTC datetimes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from dsched.options import (
    CommandType,
    FailureStrategy,
    Priority,
    ReleaseState,
    RunTrigger,
    TaskDependType,
)
from dsched.spec import WorkflowSpec
from dsched.states import InstanceEventKind, TaskState, WorkflowState


@dataclass(frozen=True, slots=True, kw_only=True)
class ProjectRecord:
    id: int
    name: str
    description: str
    create_time: datetime
    update_time: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkflowRecord:
    """One version of a workflow definition."""

    id: int  # the workflow's stable code
    project: str
    project_id: int
    spec: WorkflowSpec
    version: int
    release_state: ReleaseState
    create_time: datetime
    update_time: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkflowVersionRecord:
    version: int
    description: str
    task_count: int
    create_time: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class RunScope:
    """Which tasks a run covers: start tasks (empty = all) extended by the depend type."""

    start_tasks: tuple[str, ...] = ()
    depend_type: TaskDependType = TaskDependType.TASK_POST


@dataclass(frozen=True, slots=True, kw_only=True)
class RunOptions:
    """What a client chose when starting a run."""

    params: Mapping[str, str] = field(default_factory=dict)
    scope: RunScope = RunScope()
    failure_strategy: FailureStrategy = FailureStrategy.CONTINUE
    priority: Priority = Priority.MEDIUM
    worker_group: str = ""
    dry_run: bool = False
    # How long a task may wait for a worker; None: the master's default; zero: no limit.
    dispatch_timeout: timedelta | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class InstanceRecord:
    """A workflow instance."""

    id: int
    project: str
    workflow: str
    workflow_code: int
    workflow_version: int
    state: WorkflowState
    command_type: CommandType
    options: RunOptions
    run_scope: RunScope  # the scope of the current run (execute-from-task narrows it)
    host: str
    epoch: int
    run_times: int
    submit_time: datetime
    start_time: datetime | None
    end_time: datetime | None
    state_reason: str
    var_pool: Mapping[str, str]
    # What its time parameters and DEPENDENT windows count from (None: a run stored before
    # instances had one; its submit time stands in), in which zone, what started it, its backfill.
    schedule_time: datetime | None = None
    time_zone: str = "UTC"
    trigger: RunTrigger = RunTrigger.MANUAL
    backfill_id: int | None = None
    schedule_id: int | None = None

    @property
    def queue_rank(self) -> int:
        """Where its commands and tasks queue: by priority, backfill runs behind all others."""
        return queue_rank(self.options.priority, self.trigger)


# Added to a backfill run's priority rank (ranks are 0-4), so that its command is claimed and its
# tasks are dispatched after those of every scheduled or manual run, whatever their priorities:
# a backfill never starves the runs that are due now.
BACKFILL_LANE = 10


def queue_rank(priority: Priority, trigger: RunTrigger) -> int:
    return priority.rank + (BACKFILL_LANE if trigger is RunTrigger.BACKFILL else 0)


@dataclass(frozen=True, slots=True, kw_only=True)
class CommandRecord:
    id: int
    type: CommandType
    workflow_instance_id: int
    priority: Priority
    scope: RunScope | None  # set for EXECUTE_FROM_TASK
    restore_state: WorkflowState | None  # set for FAILOVER: the state the instance had
    create_time: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskInstanceRecord:
    """One attempt of one task."""

    id: int
    workflow_instance_id: int
    task_name: str
    attempt: int
    retry_times: int
    state: TaskState
    valid: bool
    host: str
    worker_epoch: int
    pid: int
    log_path: str
    exit_code: int | None
    submit_time: datetime
    start_time: datetime | None
    end_time: datetime | None
    out_params: Mapping[str, str]
    priority: Priority
    worker_group: str
    state_reason: str
    application_id: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class EventRecord:
    """One row of the append-only instance event log."""

    sequence: int
    workflow_instance_id: int
    task_instance_id: int  # 0 for workflow-level events
    task_name: str
    workflow_state: WorkflowState | None
    task_state: TaskState | None
    kind: InstanceEventKind
    message: str
    create_time: datetime
