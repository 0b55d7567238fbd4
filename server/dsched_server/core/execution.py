"""The pure state machine of one running workflow instance.

An :class:`Execution` knows the DAG, the run's scope and options, and the latest attempt of every
task. The engine feeds it facts (an attempt was created, reached a state, a retry is due, a user
paused or stopped) and carries out the :data:`Action` values it returns (create a task instance,
kill one, schedule a retry, finish the instance). It performs no I/O and reads no clock: times come
in as arguments. One instance's facts must be fed strictly in order.

Semantics (after DolphinScheduler's workflow and task state rules):

* A task in scope starts when every in-scope upstream task succeeded (or was force-succeeded, or is
  disabled). Upstream tasks outside the scope are ignored.
* A failed attempt with retries left is retried after its interval as a new attempt. A final
  failure blocks the failed task's downstream. With CONTINUE other branches go on; with END every
  active task is killed and nothing new starts. The instance ends FAILED.
* A paused attempt is re-created on resume as a new attempt that keeps its retry count.
* Pause: queued attempts end PAUSED, running ones finish, nothing new starts; the instance ends
  PAUSED (or FAILED/SUCCEEDED if that is what happened). Stop: running attempts are killed, queued
  ones end KILLED; the instance ends STOPPED.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol

from dsched.options import FailureStrategy
from dsched.states import TaskState, WorkflowState
from dsched_server.core.dag import Dag

_ON_WORKER = frozenset({TaskState.DISPATCHED, TaskState.RUNNING})
_QUEUED = frozenset({TaskState.SUBMITTED, TaskState.DELAY_EXECUTION})
_FINAL_FAILURES = frozenset({TaskState.FAILED, TaskState.KILLED})


@dataclass(frozen=True, slots=True)
class Create:
    """Create a new attempt (task instance) and dispatch it after ``delay``."""

    task: str
    attempt: int
    retry_times: int
    delay: timedelta


@dataclass(frozen=True, slots=True)
class Redispatch:
    """Queue an existing, never-dispatched attempt again (after a restore)."""

    task: str
    task_instance_id: int


@dataclass(frozen=True, slots=True)
class Adopt:
    """An existing attempt may be on a worker (after a restore): take it over or replace it."""

    task: str
    task_instance_id: int


@dataclass(frozen=True, slots=True)
class ScheduleRetry:
    """Feed :meth:`Execution.retry_due` for ``task`` after ``delay``."""

    task: str
    delay: timedelta


@dataclass(frozen=True, slots=True)
class Kill:
    """Kill an attempt that is on a worker."""

    task: str
    task_instance_id: int


@dataclass(frozen=True, slots=True)
class Cancel:
    """End an attempt that never reached a worker, in ``state`` (PAUSED or KILLED)."""

    task: str
    task_instance_id: int
    state: TaskState


@dataclass(frozen=True, slots=True)
class Finish:
    """The instance is done: persist ``state``."""

    state: WorkflowState
    reason: str


Action = Create | Redispatch | Adopt | ScheduleRetry | Kill | Cancel | Finish


class AttemptView(Protocol):
    """What the execution needs to know of a stored attempt when it is restored: the store's
    :class:`~dsched_server.core.records.TaskInstanceRecord` is one, read as it is."""

    @property
    def id(self) -> int: ...

    @property
    def task_name(self) -> str: ...

    @property
    def attempt(self) -> int: ...

    @property
    def retry_times(self) -> int: ...

    @property
    def state(self) -> TaskState: ...

    @property
    def end_time(self) -> datetime | None: ...


@dataclass(slots=True)
class _Task:
    name: str
    last_attempt: int = 0  # highest attempt number ever used (valid or not)
    ti_id: int = 0  # latest valid attempt, 0 if none
    state: TaskState | None = None  # its state; None = no valid attempt
    retry_times: int = 0
    pending: bool = False  # a Create was emitted and its id is not known yet
    retry_waiting: bool = False  # a ScheduleRetry is outstanding
    passed: bool = False  # disabled task passed through
    ended: datetime | None = None  # end time of a restored attempt (for the retry interval)


@dataclass(slots=True)
class Execution:
    """See the module docstring. Build with :meth:`restore` (a fresh run restores nothing)."""

    dag: Dag
    scope: frozenset[str]
    failure_strategy: FailureStrategy
    phase: WorkflowState = WorkflowState.RUNNING
    finished: WorkflowState | None = None
    _tasks: dict[str, _Task] = field(default_factory=dict)
    _ending: bool = False  # failure strategy END fired
    _failed: list[str] = field(default_factory=list)
    # The tasks in DAG order, and where :attr:`active` last found an active one: its next scan
    # starts there (see :attr:`active`).
    _ring: list[_Task] = field(default_factory=list)
    _cursor: int = 0

    @classmethod
    def restore(
        cls,
        dag: Dag,
        scope: frozenset[str],
        failure_strategy: FailureStrategy,
        attempts: Iterable[AttemptView],
        last_attempts: Mapping[str, int],
        phase: WorkflowState = WorkflowState.RUNNING,
    ) -> Execution:
        """Builds the execution from the valid attempts in the store (none for a fresh run).

        ``last_attempts`` holds the highest attempt number per task, superseded attempts included,
        so new attempts never reuse a number.
        """
        ex = cls(dag=dag, scope=scope, failure_strategy=failure_strategy, phase=phase)
        ex._tasks = {
            name: _Task(name, last_attempt=last_attempts.get(name, 0)) for name in dag.order
        }
        for view in sorted(attempts, key=lambda v: v.attempt):
            slot = ex._tasks[view.task_name]
            slot.ti_id, slot.state, slot.retry_times = (
                view.id,
                view.state,
                view.retry_times,
            )
            slot.last_attempt = max(slot.last_attempt, view.attempt)
            slot.ended = view.end_time
        ex._ring = list(ex._tasks.values())
        return ex

    # ----------------------------------------------------------------------------- queries

    @property
    def active(self) -> bool:
        """True while some attempt is queued, on a worker, being created or waiting for a retry.

        Asked after every fact. A scan from the first task would cost a wide fan-out O(tasks) per
        fact (the tasks that ended first are the ones in front): 9 % of the master's CPU in a
        2,000-task fan-out. The scan starts at the task found active last time and wraps around,
        so it usually stops at once (the attempts in flight move forward through the DAG order)
        and still looks at every task before it answers False."""
        ring = self._ring
        size = len(ring)
        start = self._cursor
        for i in range(start, start + size):
            j = i - size if i >= size else i
            if self._is_active(ring[j]):
                self._cursor = j
                return True
        return False

    def state_of(self, task: str) -> TaskState | None:
        return self._tasks[task].state

    def task_instance_of(self, task: str) -> int:
        return self._tasks[task].ti_id

    @staticmethod
    def _is_active(t: _Task) -> bool:
        return t.pending or t.retry_waiting or (t.state is not None and not t.state.terminal)

    def _done_ok(self, name: str) -> bool:
        t = self._tasks[name]
        return t.passed or (t.state is not None and t.state.successful)

    def _retries_left(self, t: _Task) -> bool:
        return t.retry_times < self.dag.tasks[t.name].retries

    def _final_failure(self, t: _Task) -> bool:
        if t.state is TaskState.KILLED:
            return True
        return t.state is TaskState.FAILED and not self._retries_left(t)

    def _may_release(self) -> bool:
        return self.phase is WorkflowState.RUNNING and not self._ending and self.finished is None

    # ----------------------------------------------------------------------------- inputs

    def start(self, now: datetime) -> list[Action]:
        """First actions after :meth:`restore`: resume restored attempts, then release ready tasks.

        A master may have died half-way through a pause, a stop or an END failure: restored in
        READY_PAUSE, READY_STOP or with a final failure under END, queued attempts are cancelled
        and (unless pausing) attempts on workers adopted and killed, as the first master would
        have done.
        """
        for name in self.dag.order:
            if name in self.scope and self._final_failure(self._tasks[name]):
                self._failed.append(name)
        if self._failed and self.failure_strategy is FailureStrategy.END:
            self._ending = True
        killing = self._ending or self.phase is WorkflowState.READY_STOP
        actions: list[Action] = []
        for name in self.dag.order:
            t = self._tasks[name]
            if t.state in _QUEUED:
                if killing:
                    actions.append(Cancel(name, t.ti_id, TaskState.KILLED))
                elif self.phase is WorkflowState.READY_PAUSE:
                    actions.append(Cancel(name, t.ti_id, TaskState.PAUSED))
                else:
                    actions.append(Redispatch(name, t.ti_id))
            elif t.state in _ON_WORKER:
                actions.append(Adopt(name, t.ti_id))
                if killing:
                    actions.append(Kill(name, t.ti_id))
            elif (
                t.state is TaskState.FAILED
                and self._retries_left(t)
                and name in self.scope
                and self._may_release()  # else the retry happens on resume / recover
            ):
                actions.append(self._retry(t, now=now, ended=t.ended))
        actions.extend(self._release(self.dag.order))
        actions.extend(self._maybe_finish())
        return actions

    def attempt_created(self, task: str, task_instance_id: int, state: TaskState) -> list[Action]:
        """Binds the id of the attempt a :class:`Create` asked for.

        If a pause, a stop or an END failure was fed in after the Create (the engine creates a
        batch's attempts last), returns the :class:`Cancel` that ends the new attempt; carry it out
        like any other action instead of dispatching the attempt.
        """
        t = self._tasks[task]
        t.pending, t.ti_id, t.state = False, task_instance_id, state
        if self._may_release() or state not in _QUEUED:
            return []
        killing = self._ending or self.phase is WorkflowState.READY_STOP
        return [Cancel(task, task_instance_id, TaskState.KILLED if killing else TaskState.PAUSED)]

    def rebind(self, ids: Mapping[int, int]) -> None:
        """Attempts bound with provisional ids (:meth:`attempt_created` before their ids were
        known) get their real ones: ``ids`` maps one to the other."""
        for t in self._tasks.values():
            t.ti_id = ids.get(t.ti_id, t.ti_id)

    def task_state(self, task: str, state: TaskState, now: datetime) -> list[Action]:
        """Records the new state of the task's current attempt and returns what follows from it."""
        t = self._tasks[task]
        t.state = state
        if not state.terminal:
            return []
        actions: list[Action] = []
        if state is TaskState.FAILED and self._retries_left(t) and self._may_release():
            actions.append(self._retry(t, now=now, ended=now))
        elif self._final_failure(t) and self.phase is not WorkflowState.READY_STOP:
            self._failed.append(task)
            if self.failure_strategy is FailureStrategy.END and not self._ending:
                self._ending = True
                actions.extend(self._wind_down(TaskState.KILLED))
        elif state.successful:
            actions.extend(self._release(self.dag.downstream[task]))
        actions.extend(self._maybe_finish())
        return actions

    def retry_due(self, task: str) -> list[Action]:
        """A retry's interval elapsed: create the next attempt if the run still wants it."""
        t = self._tasks[task]
        if not t.retry_waiting:
            return []
        t.retry_waiting = False
        if not self._may_release():
            return self._maybe_finish()
        return [self._create(t, retry_times=t.retry_times + 1)]

    def replace(self, task: str) -> list[Action]:
        """The task's attempt was lost with its worker: a new attempt replaces it without using up a
        user retry (the caller marks the old one NEED_FAULT_TOLERANCE)."""
        t = self._tasks[task]
        if t.state is None or t.state.terminal:
            return []
        t.state = TaskState.NEED_FAULT_TOLERANCE
        if not self._may_release():  # paused, stopping or ending: nothing new starts
            return self._maybe_finish()
        return [self._create(t, retry_times=t.retry_times)]

    def pause(self) -> list[Action]:
        """User pause: queued attempts end PAUSED, running ones finish, nothing new starts."""
        if self.phase is not WorkflowState.RUNNING or self.finished is not None:
            return []
        self.phase = WorkflowState.READY_PAUSE
        actions: list[Action] = []
        for t in self._tasks.values():
            # the retry happens on resume (restore sees FAILED + retries left)
            t.retry_waiting = False
            if t.state in _QUEUED:
                actions.append(Cancel(t.name, t.ti_id, TaskState.PAUSED))
        return actions + self._maybe_finish()

    def stop(self) -> list[Action]:
        """User stop: kill what runs, cancel what is queued; the instance ends STOPPED."""
        if self.finished is not None or self.phase is WorkflowState.READY_STOP:
            return []
        self.phase = WorkflowState.READY_STOP
        return self._wind_down(TaskState.KILLED) + self._maybe_finish()

    # ----------------------------------------------------------------------------- internals

    def _wind_down(self, queued_state: TaskState) -> list[Action]:
        actions: list[Action] = []
        for t in self._tasks.values():
            t.retry_waiting = False
            if t.state in _QUEUED:
                actions.append(Cancel(t.name, t.ti_id, queued_state))
            elif t.state in _ON_WORKER:
                actions.append(Kill(t.name, t.ti_id))
        return actions

    def _retry(self, t: _Task, *, now: datetime, ended: datetime | None) -> ScheduleRetry:
        interval = self.dag.tasks[t.name].retry_interval
        # An end time ahead of ``now`` (another host's clock) must not stretch the wait.
        elapsed = max(timedelta(0), now - ended) if ended is not None else timedelta(0)
        # Wait what is left of the interval (DolphinScheduler once added the elapsed time instead).
        t.retry_waiting = True
        return ScheduleRetry(t.name, max(timedelta(0), interval - elapsed))

    def _create(self, t: _Task, *, retry_times: int) -> Create:
        t.last_attempt += 1
        t.pending, t.state, t.ti_id, t.retry_times = True, None, 0, retry_times
        return Create(t.name, t.last_attempt, retry_times, self.dag.tasks[t.name].delay)

    def _ready(self, name: str) -> bool:
        t = self._tasks[name]
        if name not in self.scope or t.passed or t.pending or t.retry_waiting:
            return False
        if t.state is not None and t.state is not TaskState.PAUSED:
            return False
        return all(self._done_ok(up) for up in self.dag.upstream[name] if up in self.scope)

    def _release(self, candidates: Iterable[str]) -> list[Action]:
        # Passing a disabled task through starts nothing, so it happens while pausing too (else a
        # run whose remaining tasks are all disabled would end PAUSED); only creating needs RUNNING.
        if self.finished is not None:
            return []
        creating = self._may_release()
        actions: list[Action] = []
        queue = deque(candidates)
        while queue:
            name = queue.popleft()
            if not self._ready(name):
                continue
            t = self._tasks[name]
            if self.dag.tasks[name].disabled:
                t.passed = True  # passed through; its downstream may now be ready
                queue.extend(self.dag.downstream[name])
            elif creating:
                # A paused attempt is re-created with its retry count: a pause grants no retries.
                actions.append(self._create(t, retry_times=t.retry_times if t.state else 0))
        return actions

    def _maybe_finish(self) -> list[Action]:
        if self.finished is not None or self.active:
            return []
        if self.phase is WorkflowState.READY_STOP:
            state, reason = WorkflowState.STOPPED, "stopped by user"
        elif self._failed:
            state, reason = WorkflowState.FAILED, f"task {self._failed[0]} failed"
        elif all(self._done_ok(name) for name in self.scope):
            state, reason = WorkflowState.SUCCEEDED, ""
        elif self.phase is WorkflowState.READY_PAUSE:
            state, reason = WorkflowState.PAUSED, "paused by user"
        else:
            # Unreachable when the tables are right; failing loudly beats a stuck RUNNING instance.
            state, reason = WorkflowState.FAILED, "no task can run (internal inconsistency)"
        self.finished = state
        return [Finish(state, reason)]
