"""A fake engine that drives :class:`Execution` the way the master does, checking invariants.

It plays both the store (attempts with ids, states and end times) and the workers (a test says which
task runs, succeeds, fails or is killed). Every action the execution returns is carried out in
order; a :class:`Cancel` is persisted and fed back as the attempt's new state, as the engine does.
Creates are carried out at once, or inside :meth:`Driver.batch` only when the batch ends (the engine
creates the attempts of a batch after handling all its messages), with the actions
``attempt_created`` returns.

Checked on every step (an ``AssertionError`` names the broken rule):

* a Create is for an enabled, in-scope task of a RUNNING, unfinished execution, whose in-scope
  upstream tasks all succeeded (or were passed through because disabled);
* no task is created while it has a live attempt or a pending Create, and attempt numbers strictly
  increase per task;
* every task state change is legal by the transition table; every Cancel targets a queued attempt;
* no attempt is dispatched unless the execution is RUNNING, and while stopping, no attempt on a
  worker ends without this execution having asked to kill it (a dead master's Kill may be lost);
* exactly one Finish, its state legal from the phase it was emitted in, emitted only when no
  attempt is live.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import TypeVar

from dsched.options import FailureStrategy, TaskDependType
from dsched.spec import WorkflowSpec
from dsched.states import TaskState, WorkflowState
from dsched_server.core.dag import Dag
from dsched_server.core.execution import (
    Action,
    Adopt,
    Cancel,
    Create,
    Execution,
    Finish,
    Kill,
    Redispatch,
    ScheduleRetry,
)
from dsched_server.core.transitions import check_task_transition, check_workflow_transition

A = TypeVar("A")

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
QUEUED = frozenset({TaskState.SUBMITTED, TaskState.DELAY_EXECUTION})
ON_WORKER = frozenset({TaskState.DISPATCHED, TaskState.RUNNING})


@dataclass(slots=True)
class Attempt:
    """One stored task instance."""

    id: int
    task: str
    attempt: int
    retry_times: int
    state: TaskState
    end_time: datetime | None = None
    valid: bool = True

    @property
    def task_name(self) -> str:  # as the store's record names it (core.execution.AttemptView)
        return self.task


class Driver:
    def __init__(self, ex: Execution, *, now: datetime = T0, store: Iterable[Attempt] = ()) -> None:
        self.ex = ex
        self.dag = ex.dag
        self.now = now
        self.store: dict[int, Attempt] = {a.id: a for a in store}
        self.current: dict[str, int] = {}
        for a in sorted(self.store.values(), key=lambda a: a.attempt):
            if a.valid:
                self.current[a.task] = a.id
        self.next_id = max(self.store, default=100) + 1
        self.actions: list[Action] = []
        self.retries: dict[str, ScheduleRetry] = {}
        self.finishes: list[Finish] = []
        self.started = False
        self._deferred: list[Create] | None = None
        self.kill_sent: set[int] = set()

    # ------------------------------------------------------------------------- construction

    @classmethod
    def fresh(
        cls,
        spec: WorkflowSpec,
        *,
        start: Sequence[str] = (),
        depend: TaskDependType = TaskDependType.TASK_POST,
        strategy: FailureStrategy = FailureStrategy.CONTINUE,
    ) -> Driver:
        """A new run, started."""
        dag = Dag(spec)
        ex = Execution.restore(dag, dag.scope(start, depend), strategy, [], {})
        driver = cls(ex)
        driver.start()
        return driver

    def restored(
        self,
        *,
        phase: WorkflowState = WorkflowState.RUNNING,
        later: timedelta = timedelta(0),
        strategy: FailureStrategy | None = None,
        start: bool = True,
    ) -> Driver:
        """A new Execution (another master, or a resume) built from this driver's store."""
        views = [self.store[i] for i in self.current.values()]
        last: dict[str, int] = {}
        for a in self.store.values():
            last[a.task] = max(last.get(a.task, 0), a.attempt)
        ex = Execution.restore(
            self.dag,
            self.ex.scope,
            strategy or self.ex.failure_strategy,
            views,
            last,
            phase=phase,
        )
        copy = [replace(a) for a in self.store.values()]
        driver = Driver(ex, now=self.now + later, store=copy)
        if start:
            driver.start()
        return driver

    def invalidate(self, *states: TaskState) -> None:
        """What the store does for recover-failed: attempts in ``states`` and every attempt
        downstream of them stop being valid."""
        hit = {a.task for a in self.store.values() if a.valid and a.state in states}
        hit |= self.dag.descendants(hit)
        for a in self.store.values():
            if a.task in hit:
                a.valid = False
        self.current = {t: i for t, i in self.current.items() if t not in hit}

    # ------------------------------------------------------------------------- facts

    def start(self) -> list[Action]:
        assert not self.started, "start() twice"
        self.started = True
        return self._apply(self.ex.start(self.now))

    def dispatch(self, task: str) -> list[Action]:
        # The engine dispatches only what the execution left queued; pause and stop cancel that.
        assert self.ex.phase is WorkflowState.RUNNING, f"{task} dispatched while {self.ex.phase}"
        out = []
        if self.state(task) is TaskState.DELAY_EXECUTION:
            out += self._set(task, TaskState.SUBMITTED)
        return out + self._set(task, TaskState.DISPATCHED)

    def run(self, task: str) -> list[Action]:
        out = self.dispatch(task) if self.state(task) in QUEUED else []
        return out + self._set(task, TaskState.RUNNING)

    def succeed(self, task: str) -> list[Action]:
        return self.end(task, TaskState.SUCCEEDED)

    def fail(self, task: str) -> list[Action]:
        return self.end(task, TaskState.FAILED)

    def killed(self, task: str) -> list[Action]:
        """The worker reports the attempt KILLED (after a Kill, or on its own)."""
        return self.end(task, TaskState.KILLED)

    def lose(self, task: str) -> list[Action]:
        """The attempt's worker is gone: the store marks it NEED_FAULT_TOLERANCE and not valid."""
        att = self.attempt(task)
        check_task_transition(att.state, TaskState.NEED_FAULT_TOLERANCE, task_instance_id=att.id)
        att.state, att.valid, att.end_time = TaskState.NEED_FAULT_TOLERANCE, False, self.now
        del self.current[task]
        return self._apply(self.ex.replace(task))

    def complete(self, *tasks: str) -> list[Action]:
        out: list[Action] = []
        for name in tasks:
            out += self.succeed(name)
        return out

    def fire_retry(self, task: str) -> list[Action]:
        """The ScheduleRetry timer of ``task`` went off."""
        retry = self.retries.pop(task)
        self.now += retry.delay
        return self._apply(self.ex.retry_due(task))

    def pause(self) -> list[Action]:
        return self._apply(self.ex.pause())

    def stop(self) -> list[Action]:
        return self._apply(self.ex.stop())

    def advance(self, delta: timedelta) -> None:
        self.now += delta

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Facts fed inside form one engine batch: their Creates are carried out when it ends."""
        assert self._deferred is None, "nested batch"
        self._deferred = []
        yield
        deferred, self._deferred = self._deferred, None
        for create in deferred:
            self._apply(self._bind(create))

    # ------------------------------------------------------------------------- queries

    def state(self, task: str) -> TaskState | None:
        ti = self.current.get(task)
        return None if ti is None else self.store[ti].state

    def attempt(self, task: str) -> Attempt:
        return self.store[self.current[task]]

    def attempts(self, task: str) -> list[Attempt]:
        return sorted((a for a in self.store.values() if a.task == task), key=lambda a: a.attempt)

    def creates(self, task: str | None = None) -> list[Create]:
        return [a for a in self.actions if isinstance(a, Create) and task in (None, a.task)]

    def created(self) -> list[str]:
        return [c.task for c in self.creates()]

    def of_type(self, kind: type[A], actions: Iterable[Action] | None = None) -> list[A]:
        return [a for a in (self.actions if actions is None else actions) if isinstance(a, kind)]

    def live(self) -> set[str]:
        return {t for t, i in self.current.items() if not self.store[i].state.terminal}

    def queued(self) -> set[str]:
        return {t for t, i in self.current.items() if self.store[i].state in QUEUED}

    @property
    def finish(self) -> Finish:
        assert len(self.finishes) == 1, self.finishes
        return self.finishes[0]

    @property
    def finished(self) -> bool:
        return bool(self.finishes)

    # ------------------------------------------------------------------------- machinery

    def _set(self, task: str, state: TaskState) -> list[Action]:
        att = self.attempt(task)
        check_task_transition(att.state, state, task_instance_id=att.id)
        if state.terminal and att.state in ON_WORKER and self.ex.phase is WorkflowState.READY_STOP:
            assert att.id in self.kill_sent, f"{task} ended while stopping but was never killed"
        att.state = state
        if state.terminal:
            att.end_time = self.now
        return self._apply(self.ex.task_state(task, state, self.now))

    def end(self, task: str, state: TaskState) -> list[Action]:
        """The worker reports the attempt's final ``state`` (running it first if it was queued)."""
        out = self.run(task) if self.state(task) in QUEUED else []
        return out + self._set(task, state)

    def _apply(self, actions: Iterable[Action]) -> list[Action]:
        done: list[Action] = []
        queue: deque[Action] = deque(actions)
        while queue:
            action = queue.popleft()
            done.append(action)
            self.actions.append(action)
            if isinstance(action, Create):
                self._check_create(action)
                if self._deferred is None:
                    queue.extend(self._bind(action))
                else:
                    self._deferred.append(action)
            elif isinstance(action, Cancel):
                queue.extend(self._cancel(action))
            elif isinstance(action, ScheduleRetry):
                assert action.task not in self.retries, f"second retry timer for {action.task}"
                assert self.state(action.task) is TaskState.FAILED, action
                assert action.delay >= timedelta(0), action
                self.retries[action.task] = action
            elif isinstance(action, Kill):
                assert self.current.get(action.task) == action.task_instance_id, action
                assert self.state(action.task) in ON_WORKER, action
                self.kill_sent.add(action.task_instance_id)
            elif isinstance(action, Redispatch):
                assert self.current.get(action.task) == action.task_instance_id, action
                assert self.state(action.task) in QUEUED, action
            elif isinstance(action, Adopt):
                assert self.current.get(action.task) == action.task_instance_id, action
                assert self.state(action.task) in ON_WORKER, action
            else:
                self._finish(action)
        return done

    def _check_create(self, c: Create) -> None:
        ex, dag = self.ex, self.dag
        assert ex.finished is None and ex.phase is WorkflowState.RUNNING, f"{c} while {ex.phase}"
        assert c.task in ex.scope, f"{c} out of scope"
        assert not dag.tasks[c.task].disabled, f"{c} of a disabled task"
        assert c.task not in self.live(), f"{c} while an attempt of it is live"
        assert all(p.task != c.task for p in self._deferred or ()), f"second pending Create {c}"
        previous = [a.attempt for a in self.store.values() if a.task == c.task]
        assert c.attempt > max(previous, default=0), f"{c} reuses an attempt number {previous}"
        for up in dag.upstream[c.task]:
            assert self._upstream_ok(up), f"{c} before upstream {up} succeeded"
        assert c.delay == dag.tasks[c.task].delay

    def _bind(self, c: Create) -> list[Action]:
        """Stores the attempt a Create asked for and tells the execution its id."""
        ti = self.next_id
        self.next_id += 1
        state = TaskState.DELAY_EXECUTION if c.delay > timedelta(0) else TaskState.SUBMITTED
        self.store[ti] = Attempt(ti, c.task, c.attempt, c.retry_times, state)
        self.current[c.task] = ti
        return self.ex.attempt_created(c.task, ti, state)

    def _upstream_ok(self, name: str) -> bool:
        if name not in self.ex.scope:
            return True
        state = self.state(name)
        if state is not None and state.successful:
            return True
        return self.dag.tasks[name].disabled and all(
            self._upstream_ok(up) for up in self.dag.upstream[name]
        )

    def _cancel(self, c: Cancel) -> list[Action]:
        assert c.state in (TaskState.PAUSED, TaskState.KILLED), c
        assert self.current.get(c.task) == c.task_instance_id, c
        assert self.state(c.task) in QUEUED, f"{c} of an attempt in {self.state(c.task)}"
        att = self.attempt(c.task)
        check_task_transition(att.state, c.state, task_instance_id=att.id)
        att.state = c.state
        att.end_time = self.now
        return list(self.ex.task_state(c.task, c.state, self.now))

    def _finish(self, f: Finish) -> None:
        assert not self.finishes, f"second Finish {f} after {self.finishes}"
        assert not self.live(), f"{f} while {sorted(self.live())} are live"
        assert not self._deferred, f"{f} while Creates {self._deferred} are pending"
        check_workflow_transition(self.ex.phase, f.state, instance_id=1)
        assert self.ex.finished is f.state
        self.finishes.append(f)
