"""What the dispatcher sends to workers: one job per attempt to dispatch."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from dsched_server.engine.messages import Dispatched, Waiting
from dsched_server.protocol.execution import TaskExecution


@dataclass(slots=True, eq=False)
class DispatchJob:
    """A queued dispatch. ``sent`` and ``cancelled`` are only touched on the event loop thread, so
    the runner can cancel a job the dispatcher has not sent without a lock (see InstanceRunner)."""

    spec: TaskExecution
    worker_group: str
    order: tuple[int, int, int]  # (workflow priority, task priority, task instance id)
    on_dispatched: Callable[[Dispatched | Waiting], None]
    sent: bool = False
    waiting_reason: str = ""  # why it is parked now (kept for the dispatch timeout's message)
    told_reason: str = ""  # the waiting reason last told to its runner
    cancelled: bool = False
    target: str = ""  # worker address once sent
    target_epoch: int = 0  # the epoch that worker was registered under when it was sent
    # The worker an earlier runner of the instance sent this attempt to, perhaps unrecorded: only
    # that worker may get it while it lives (it answers ALREADY_ACCEPTED). See engine/reloads.py.
    pinned: str = ""
    attempts: int = field(default=0)

    def __lt__(self, other: DispatchJob) -> bool:
        return self.order < other.order
