"""What the dispatcher sends to workers: one job per attempt to dispatch."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from dsched.options import TimeoutStrategy
from dsched.server.engine.messages import Dispatched, Waiting
from dsched.spec import TaskKind


@dataclass(frozen=True, slots=True, kw_only=True)
class DispatchSpec:
    """Everything a worker needs to run one attempt (converted to ``TaskExecution`` on the wire)."""

    task_instance_id: int
    attempt: int
    workflow_instance_id: int
    workflow_code: int
    workflow_version: int
    task_name: str
    idempotency_key: str
    kind: TaskKind
    params: Mapping[str, str]
    timeout: timedelta
    timeout_strategy: TimeoutStrategy
    dry_run: bool
    owner_address: str
    owner_epoch: int
    submit_time: datetime


@dataclass(slots=True, eq=False)
class DispatchJob:
    """A queued dispatch. ``sent`` and ``cancelled`` are only touched on the event loop thread, so
    the runner can cancel a job the dispatcher has not sent without a lock (see InstanceRunner)."""

    spec: DispatchSpec
    worker_group: str
    order: tuple[int, int, int]  # (workflow priority, task priority, task instance id)
    on_dispatched: Callable[[Dispatched | Waiting], None]
    sent: bool = False
    waiting_reason: str = ""  # why it is parked now (kept for the dispatch timeout's message)
    told_reason: str = ""  # the waiting reason last told to its runner
    cancelled: bool = False
    target: str = ""  # worker address once sent
    # The worker an earlier runner of the instance sent this attempt to, perhaps unrecorded: only
    # that worker may get it while it lives (it answers ALREADY_ACCEPTED). See engine/reloads.py.
    pinned: str = ""
    attempts: int = field(default=0)

    def __lt__(self, other: DispatchJob) -> bool:
        return self.order < other.order
