"""What an instance runner knows of its instance: the state its decisions start from.

Everything here lives in memory on the owning master and is rebuilt from the store when the
instance is restored (``CommandConsumer.build_runner``). A decision reads and updates it
(``engine/decision.py``); attempts the decision created carry provisional ids until their
batch committed (:meth:`RunState.bind`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from dsched.states import TaskState, WorkflowState
from dsched_server.core import execution as ex
from dsched_server.core.dag import Dag
from dsched_server.core.records import InstanceRecord, TaskInstanceRecord, WorkflowRecord
from dsched_server.engine.jobs import DispatchJob
from dsched_server.engine.messages import Dispatched, Waiting


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    """The master's settings a decision needs."""

    address: str  # the client listener: names the master a control was sent to
    cluster_address: str  # where workers send this master's task events (in every dispatch)
    default_group: str
    dispatch_timeout: float  # the default of runs that set none; 0: no limit


@dataclass(slots=True)
class Track:
    """What the runner knows about one valid attempt."""

    ti_id: int
    task: str
    attempt: int
    retry_times: int
    state: TaskState
    host: str
    worker_epoch: int
    submit_time: datetime
    job: DispatchJob | None = None
    started: datetime | None = None  # worker clock, from the RUNNING event
    warned: bool = False  # a TIMEOUT_WARNING was written
    waiting_for: str = ""  # a DEPENDENT attempt: what its last check said holds it up
    application_id: str = ""  # a SPARK attempt: the Spark application it runs, once reported


@dataclass(slots=True, kw_only=True)
class RunState:
    instance: InstanceRecord
    workflow: WorkflowRecord
    execution: ex.Execution
    settings: Settings
    # Where the dispatcher reports about this instance's jobs (the runner's queue).
    on_dispatched: Callable[[Dispatched | Waiting], None]
    tracks: dict[int, Track] = field(default_factory=dict)
    var_pool: dict[str, str] = field(default_factory=dict)
    stored_state: WorkflowState = WorkflowState.RUNNING  # as last committed
    # Task instance id -> the worker a predecessor runner sent the attempt to (see reloads).
    pins: dict[int, str] = field(default_factory=dict)
    # Task name -> Spark applications of its attempts lost with their worker: the next attempt's
    # worker kills them before it submits (ARCHITECTURE.md §4).
    lost_applications: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @classmethod
    def restore(
        cls,
        instance: InstanceRecord,
        workflow: WorkflowRecord,
        execution: ex.Execution,
        attempts: Sequence[TaskInstanceRecord],
        settings: Settings,
        on_dispatched: Callable[[Dispatched | Waiting], None],
    ) -> RunState:
        return cls(
            instance=instance,
            workflow=workflow,
            execution=execution,
            settings=settings,
            on_dispatched=on_dispatched,
            tracks={
                a.id: Track(
                    a.id,
                    a.task_name,
                    a.attempt,
                    a.retry_times,
                    a.state,
                    a.host,
                    a.worker_epoch,
                    a.submit_time,
                    application_id=a.application_id,
                )
                for a in attempts
            },
            var_pool=dict(instance.var_pool),
            stored_state=instance.state,
        )

    @property
    def id(self) -> int:
        return self.instance.id

    @property
    def dag(self) -> Dag:
        return self.execution.dag

    def bind(self, ids: Sequence[int], path: Sequence[WorkflowState]) -> None:
        """The batch committed: attempts it created get their ids (``-1`` -> ``ids[0]``, ...)
        and the instance the state it reached."""
        if path:
            self.stored_state = path[-1]
        if not ids:
            return
        real = {-(i + 1): ti for i, ti in enumerate(ids)}
        for provisional, ti in real.items():
            track = self.tracks.pop(provisional, None)
            if track is not None:
                track.ti_id = ti
                self.tracks[ti] = track
        self.execution.rebind(real)

    def sent(self) -> dict[int, str]:
        """Task instance id -> worker, for every attempt this runner (or its predecessor) sent."""
        sent = dict(self.pins)
        for track in self.tracks.values():
            if track.job is not None and track.job.sent and track.job.target:
                sent[track.ti_id] = track.job.target
        return sent
