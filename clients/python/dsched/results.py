"""Typed results of SDK calls: frozen values built from server responses by :mod:`dsched.convert`.

Times are timezone-aware UTC datetimes, or None where the server has not set them yet (an
instance that has not started has no ``start_time``). Nothing here holds a protobuf message or a
connection, so results can be kept, compared, pickled and printed freely.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Generic, TypeVar

from dsched.options import (
    BackfillFailure,
    BackfillOrder,
    BackfillReprocess,
    BackfillState,
    CatchUp,
    CommandType,
    FailureStrategy,
    HistoryKind,
    Overlap,
    Priority,
    ReleaseState,
    RunTrigger,
    TaskDependType,
)
from dsched.spec import WorkflowSpec
from dsched.states import InstanceEventKind, TaskState, WorkflowState

T = TypeVar("T")


class ServerRole(StrEnum):
    """The role of a cluster member (proto ``ServerRole`` without its prefix)."""

    MASTER = "MASTER"
    WORKER = "WORKER"


class ServerStatus(StrEnum):
    """The load status a member publishes: BUSY members take no new work."""

    NORMAL = "NORMAL"
    BUSY = "BUSY"


def _elapsed(start: datetime | None, end: datetime | None) -> timedelta | None:
    if start is None or end is None:
        return None
    return end - start


@dataclass(frozen=True, slots=True, kw_only=True)
class Project:
    """A namespace for workflows."""

    name: str
    description: str = ""
    create_time: datetime | None = None
    update_time: datetime | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkflowInfo:
    """One stored version of a workflow definition: the spec plus what the server assigned."""

    spec: WorkflowSpec
    code: int
    version: int
    release_state: ReleaseState
    create_time: datetime | None = None
    update_time: datetime | None = None

    @property
    def project(self) -> str:
        return self.spec.project

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def online(self) -> bool:
        """True when the workflow can be started."""
        return self.release_state is ReleaseState.ONLINE


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkflowVersionInfo:
    """A summary of one version of a workflow definition."""

    version: int
    description: str = ""
    task_count: int = 0
    create_time: datetime | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkflowInstance:
    """One run of a workflow definition (see ``WorkflowInstance`` in resources.proto)."""

    id: int
    project: str
    workflow: str
    workflow_code: int
    workflow_version: int
    state: WorkflowState
    command_type: CommandType | None = None
    params: Mapping[str, str] = field(default_factory=dict)
    start_tasks: tuple[str, ...] = ()
    task_depend_type: TaskDependType = TaskDependType.TASK_POST
    failure_strategy: FailureStrategy = FailureStrategy.CONTINUE
    priority: Priority = Priority.MEDIUM
    worker_group: str = ""
    dry_run: bool = False
    host: str = ""
    run_times: int = 0
    submit_time: datetime | None = None
    start_time: datetime | None = None
    end_time: datetime | None = None
    state_reason: str = ""
    var_pool: Mapping[str, str] = field(default_factory=dict)
    # What its time parameters and DEPENDENT windows count from, and in which zone (None: an
    # instance stored before dsched kept one); what started it; the backfill it runs a date of,
    # or the schedule whose fire time it is.
    schedule_time: datetime | None = None
    time_zone: str = "UTC"
    trigger: RunTrigger = RunTrigger.MANUAL
    backfill_id: int | None = None
    schedule_id: int | None = None

    @property
    def terminal(self) -> bool:
        """True once the instance rests until a user acts (PAUSED, STOPPED, FAILED, SUCCEEDED)."""
        return self.state.terminal

    @property
    def duration(self) -> timedelta | None:
        """Run time from start to end; None while it has not both started and ended."""
        return _elapsed(self.start_time, self.end_time)


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskInstance:
    """One attempt of one task inside a workflow instance; its id also names its log."""

    id: int
    workflow_instance_id: int
    task_name: str
    attempt: int
    state: TaskState
    retry_times: int = 0
    valid: bool = True
    host: str = ""
    pid: int = 0
    log_path: str = ""
    exit_code: int | None = None
    submit_time: datetime | None = None
    start_time: datetime | None = None
    end_time: datetime | None = None
    out_params: Mapping[str, str] = field(default_factory=dict)
    priority: Priority = Priority.MEDIUM
    worker_group: str = ""
    state_reason: str = ""
    application_id: str = ""  # a SPARK attempt's Spark application, once its output named it

    @property
    def duration(self) -> timedelta | None:
        """Run time of the process; None while it has not both started and ended."""
        return _elapsed(self.start_time, self.end_time)


@dataclass(frozen=True, slots=True, kw_only=True)
class InstanceEvent:
    """One entry of an instance's event log.

    Workflow-level events have ``task_instance_id == 0`` and a ``workflow_state``; task-level events
    have a ``task_state`` and the task's name.
    """

    sequence: int
    workflow_instance_id: int
    task_instance_id: int = 0
    task_name: str = ""
    workflow_state: WorkflowState | None = None
    task_state: TaskState | None = None
    kind: InstanceEventKind = InstanceEventKind.STATE
    message: str = ""
    create_time: datetime | None = None

    @property
    def is_task_event(self) -> bool:
        return self.task_instance_id != 0


@dataclass(frozen=True, slots=True, kw_only=True)
class WatchFrame:
    """One frame of an instance watch: events (none in a progress frame), cursor and state."""

    events: tuple[InstanceEvent, ...]
    cursor: int
    state: WorkflowState | None


@dataclass(frozen=True, slots=True, kw_only=True)
class LogChunk:
    """Bytes of a task log starting at ``offset``; resume reading at ``next_offset``.

    ``end_of_log`` is set once the task instance is terminal and everything up to ``next_offset``
    was sent. ``size`` is the log's size when it was read (only ``read_log`` reports it).
    """

    data: bytes
    offset: int
    next_offset: int
    end_of_log: bool = False
    size: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterMember:
    """A live master or worker and its latest heartbeat.

    ``weight`` is a worker's effective selection weight as the answering master computes it now
    (0..100, higher is preferred, reduced during warm-up, 0 while BUSY); always 0 for masters.
    ``queued`` is a worker's backlog: attempts it accepted that wait for a free slot.
    ``cluster_address`` is a master's cluster listener, where its workers report (empty for
    workers). No field holds an epoch: epochs are fencing tokens, which clients never see.
    """

    role: ServerRole
    address: str
    group: str = ""
    status: ServerStatus | None = None
    cpu_usage: float = 0.0
    memory_usage: float = 0.0
    load_average: float = 0.0
    disk_usage: float = 0.0
    slots_total: int = 0
    slots_in_use: int = 0
    queued: int = 0
    pid: int = 0
    start_time: datetime | None = None
    report_time: datetime | None = None
    weight: float = 0.0
    cluster_address: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerInfo:
    """The server that answered a ``server_info`` call. ``counters`` are its engine counters
    since it started, by name (``stale_events``, ``commands_claimed``, ...; the set may grow)."""

    version: str
    api_version: str
    role: ServerRole | None
    address: str
    start_time: datetime | None = None
    counters: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class HistoryTally:
    """What a history clean-up deleted (or, dry, would delete) of one kind: how many, and the
    oldest and newest of them (answered, created or finished; None when there were none)."""

    kind: HistoryKind
    count: int
    oldest: datetime | None = None
    newest: datetime | None = None


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    """One page of a list call; pass ``next_page_token`` to get the next (empty on the last)."""

    items: tuple[T, ...]
    next_page_token: str = ""

    @property
    def last(self) -> bool:
        return not self.next_page_token


@dataclass(frozen=True, slots=True)
class BackfillProgress:
    succeeded: int = 0
    running: int = 0
    failed: int = 0
    pending: int = 0
    skipped: int = 0
    eta: timedelta | None = None  # an estimate; None until a run has finished

    @property
    def total(self) -> int:
        return self.succeeded + self.running + self.failed + self.pending + self.skipped

    @property
    def done(self) -> int:
        """Dates that will not run again: succeeded, failed or skipped."""
        return self.succeeded + self.failed + self.skipped


@dataclass(frozen=True, slots=True)
class Backfill:
    """Runs of a workflow for past schedule times (see ``Backfill`` in backfill.proto)."""

    id: int
    project: str
    workflow: str
    state: BackfillState
    dates: tuple[datetime, ...] = ()  # in run order (empty in a listing)
    time_zone: str = "UTC"
    cron: str = ""
    order: BackfillOrder = BackfillOrder.ASCENDING
    parallelism: int = 1
    reprocess: BackfillReprocess = BackfillReprocess.ALL
    on_failure: BackfillFailure = BackfillFailure.CONTINUE
    progress: BackfillProgress = field(default_factory=BackfillProgress)
    create_time: datetime | None = None
    end_time: datetime | None = None


@dataclass(frozen=True, slots=True)
class ScheduleInfo:
    """A stored schedule (see ``Schedule`` in schedule.proto)."""

    id: int
    project: str
    workflow: str
    cron: str
    time_zone: str = "UTC"
    online: bool = False
    start_time: datetime | None = None
    end_time: datetime | None = None
    catch_up: CatchUp = CatchUp.LATEST
    catch_up_cap: int = 100
    overlap: Overlap = Overlap.RUN
    next_fire_time: datetime | None = None
    last_fire_time: datetime | None = None
