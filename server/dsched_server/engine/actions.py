"""Carrying out what an instance's execution decided, as writes and effects (no I/O).

:class:`Decider` is the core of a runner's pure decision (``engine/decision.py`` feeds it
messages): it turns :mod:`~dsched_server.core.execution` actions into the batch's writes (a
:class:`~dsched_server.store.batch.BatchWrites`) and effects (an
:class:`~dsched_server.engine.effects.Effects`), updating the runner's
:class:`~dsched_server.engine.run_state.RunState` as it goes. It awaits nothing and touches
neither the store nor a worker; the runner commits the writes in one store call and only then
runs the effects.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timedelta

from dsched.options import TimeoutStrategy
from dsched.spec import TaskSpec
from dsched.states import InstanceEventKind, TaskState, WorkflowState
from dsched.time_expr import TimeExprError
from dsched_server.core import execution as ex
from dsched_server.core.builtin_params import RunIdentity
from dsched_server.core.param_values import ExpandedTooLarge, task_params
from dsched_server.core.params import idempotency_key
from dsched_server.engine.effects import Effects
from dsched_server.engine.jobs import DispatchJob
from dsched_server.engine.messages import AttemptCheck, Check
from dsched_server.engine.run_state import RunState, Track
from dsched_server.protocol.execution import WORKER_KINDS, TaskExecution
from dsched_server.store.batch import BatchWrites
from dsched_server.store.events import NewEvent
from dsched_server.store.task_instances import NewAttempt, TaskValues, TaskWrite


@dataclass(slots=True)
class Plan:
    """A decided batch: what to write (in one store call) and what to do after the commit."""

    writes: BatchWrites
    effects: Effects


class Decider:
    """Decides one batch of one instance (see the module docstring)."""

    def __init__(self, state: RunState, now: datetime) -> None:
        self.st = state
        self.now = now
        self.plan = Plan(
            BatchWrites(
                instance_id=state.id,
                epoch=state.instance.epoch,
                now=now,
                state_before=state.stored_state,
            ),
            Effects(),
        )
        self.w = self.plan.writes
        self.fx = self.plan.effects

    # ------------------------------------------------------------------------- actions

    def apply(self, actions: list[ex.Action]) -> None:
        pending = list(actions)
        while pending:
            action = pending.pop(0)
            if isinstance(action, ex.Create):
                pending.extend(self._create(action))
            elif isinstance(action, ex.Redispatch):
                self.dispatch(self.st.tracks[action.task_instance_id])
            elif isinstance(action, ex.Adopt):
                adopted = self.st.tracks[action.task_instance_id]
                self.fx.adopt(adopted.ti_id, adopted.attempt, adopted.host, adopted.worker_epoch)
            elif isinstance(action, ex.ScheduleRetry):
                # Keyed by the failed attempt, like every timer: the next attempt supersedes it.
                failed_id = self.st.execution.task_instance_of(action.task)
                self.fx.timer(action.delay.total_seconds(), AttemptCheck(Check.RETRY, failed_id))
                failed = self.st.tracks.get(failed_id)
                if failed is not None:
                    self.w.events.append(
                        self.event(
                            failed,
                            None,
                            InstanceEventKind.RETRY_SCHEDULED,
                            f"retry in {action.delay}",
                        )
                    )
            elif isinstance(action, ex.Kill):
                self.kill(self.st.tracks[action.task_instance_id])
            elif isinstance(action, ex.Cancel):
                pending.extend(self._cancel(action))
            else:
                self._finish(action)

    def _create(self, create: ex.Create) -> list[ex.Action]:
        """A new attempt, known by a provisional id until the batch committed (it supersedes the
        task's older attempts in the same transaction)."""
        task = self.st.dag.tasks[create.task]
        row = NewAttempt(
            task_name=create.task,
            attempt=create.attempt,
            retry_times=create.retry_times,
            state=TaskState.DELAY_EXECUTION if create.delay else TaskState.SUBMITTED,
            priority=task.priority,
            worker_group=self.group(task),
        )
        ti_id = self.w.provisional_id(row)
        for old in [t for t in self.st.tracks.values() if t.task == create.task]:
            del self.st.tracks[old.ti_id]
        track = Track(
            ti_id, create.task, create.attempt, create.retry_times, row.state, "", 0, self.now
        )
        self.st.tracks[ti_id] = track
        self.w.events.append(
            self.event(
                track, row.state, InstanceEventKind.STATE, f"attempt {create.attempt} created"
            )
        )
        # A failure under END carried out earlier in this list cancels it instead of dispatching.
        cancel = self.st.execution.attempt_created(create.task, ti_id, row.state)
        if cancel:
            return list(cancel)
        if create.delay:
            self.fx.timer(create.delay.total_seconds(), AttemptCheck(Check.DELAY, ti_id))
        else:
            self.dispatch(track)
        return []

    def kill(self, track: Track) -> None:
        if track.job is not None:
            # Never (re)send it; if it is on its way, the worker remembers the kill and refuses it.
            track.job.cancelled = True
        target = track.host or (track.job.target if track.job is not None else "")
        self.fx.kill(track.ti_id, track.attempt, target)

    def _cancel(self, action: ex.Cancel) -> list[ex.Action]:
        track = self.st.tracks[action.task_instance_id]
        if track.job is not None and track.job.sent:
            # Already on its way to a worker: it cannot be withdrawn, only killed or left to finish.
            if action.state is TaskState.KILLED:
                self.kill(track)
            return self.st.execution.task_state(track.task, TaskState.DISPATCHED, self.now)
        if track.job is not None:
            track.job.cancelled = True
        if not self.write(
            track,
            {TaskState.SUBMITTED, TaskState.DELAY_EXECUTION},
            action.state,
            {"end_time": self.now},
        ):
            return []
        self.set_state(track, action.state, "cancelled before it reached a worker")
        return self.st.execution.task_state(track.task, action.state, self.now)

    def _finish(self, action: ex.Finish) -> None:
        self.w.path.append(action.state)
        self.w.fields.update({"end_time": self.now, "state_reason": action.reason[:1024]})
        self.w.end_event = NewEvent(
            workflow_instance_id=self.st.id, workflow_state=action.state, message=action.reason
        )

    def phase(self, state: WorkflowState) -> None:
        """The instance passed through ``state`` (a pause or a stop under way)."""
        self.w.path.append(state)

    # ------------------------------------------------------------------------- dispatch

    def dispatch(self, track: Track) -> None:
        """Queues the attempt for a worker and, with a dispatch timeout, arms its deadline."""
        try:
            job = self._job(track)
        except TimeExprError as exc:
            # Only a value stored before templates were checked, or a result beyond the
            # calendar: the attempt fails saying so rather than run with a wrong value.
            self._refuse(track, f"a parameter cannot be expanded: {exc}")
            return
        except ExpandedTooLarge as exc:
            # A run the API did not start (a schedule's, a backfill's) whose values grew past
            # the limits: the attempt fails saying so, once, not at every dispatch.
            self._refuse(track, f"the parameters are too large once expanded: {exc}")
            return
        self.fx.dispatch(job)
        limit = self.dispatch_timeout()
        if limit > 0:
            self.fx.timer(limit, AttemptCheck(Check.DISPATCH, track.ti_id))

    def _refuse(self, track: Track, reason: str) -> None:
        """Fails an attempt that cannot be dispatched (it never reached a worker)."""
        values: TaskValues = {"end_time": self.now, "state_reason": reason[:1024]}
        if self.write(track, {TaskState.SUBMITTED}, TaskState.FAILED, values):
            self.set_state(track, TaskState.FAILED, reason)
            self.apply(self.st.execution.task_state(track.task, TaskState.FAILED, self.now))

    def dispatch_timeout(self) -> float:
        """Seconds a ready attempt may wait for a worker (0: no limit): the run's, else the
        master's default."""
        chosen = self.st.instance.options.dispatch_timeout
        return self.st.settings.dispatch_timeout if chosen is None else chosen.total_seconds()

    def group(self, task: TaskSpec) -> str:
        options = self.st.instance.options
        return task.worker_group or options.worker_group or self.st.settings.default_group

    def _job(self, track: Track) -> DispatchJob:
        st = self.st
        task = st.dag.tasks[track.task]
        # Validated definitions always have a kind, and the master runs the others itself.
        assert isinstance(task.kind, WORKER_KINDS)
        spec = TaskExecution(
            task_instance_id=track.ti_id,
            attempt=track.attempt,
            workflow_instance_id=st.id,
            workflow_code=st.workflow.id,
            workflow_version=st.workflow.version,
            task_name=track.task,
            idempotency_key=idempotency_key(st.id, track.task, track.attempt),
            kind=task.kind,
            params=task_params(
                instance=st.instance,
                identity=RunIdentity(
                    workflow_instance_id=st.id,
                    task_instance_id=track.ti_id,
                    task_name=track.task,
                    workflow_name=st.workflow.spec.name,
                    workflow_code=st.workflow.id,
                    project_name=st.workflow.project,
                    project_code=st.workflow.project_id,
                ),
                global_params=st.workflow.spec.params,
                var_pool=st.var_pool,
                local_params=task.params,
                startup_params=st.instance.options.params,
            ),
            timeout=task.timeout,
            timeout_strategy=task.timeout_strategy,
            dry_run=st.instance.options.dry_run,
            queue_rank=st.instance.queue_rank * 10 + task.priority.rank,
            owner_address=st.settings.cluster_address,
            owner_epoch=st.instance.epoch,
            submit_time=track.submit_time,
            earlier_application_ids=st.lost_applications.get(track.task, ()),
        )
        job = DispatchJob(
            spec=spec,
            worker_group=self.group(task),
            order=(st.instance.queue_rank, task.priority.rank, track.ti_id),
            on_dispatched=st.on_dispatched,
            pinned=st.pins.get(track.ti_id, ""),
        )
        track.job = job
        return job

    def arm_timeout_warning(self, track: Track) -> None:
        task = self.st.dag.tasks[track.task]
        if task.timeout > timedelta(0) and task.timeout_strategy in (
            TimeoutStrategy.WARN,
            TimeoutStrategy.WARN_FAIL,
        ):
            self.fx.timer(
                task.timeout.total_seconds(), AttemptCheck(Check.TIMEOUT_WARNING, track.ti_id)
            )

    # ------------------------------------------------------------------------- writes

    def write(
        self,
        track: Track,
        expected: Collection[TaskState],
        state: TaskState,
        values: TaskValues,
        *,
        worker_epoch: int | None = None,
    ) -> bool:
        """Records a task instance transition if the attempt is in one of ``expected``.

        The runner's view is authoritative while its epoch owns the instance (every batch starts
        with the fence), so the check is made in memory and the rows are written in bulk by the
        commit: one statement per kind of change instead of one per event. The write stays
        conditional on the row's state before the batch; a row that does not match fails the
        batch, which then reloads the instance from the store.
        """
        if track.state not in expected:
            return False
        write = self.w.task_writes.get(track.ti_id)
        if write is None:
            self.w.task_writes[track.ti_id] = TaskWrite(
                task_instance_id=track.ti_id,
                expected=frozenset(expected),
                state=state,
                worker_epoch=worker_epoch,
                values=values.copy(),
            )
        else:  # a later change of the same row in this batch: same precondition, newer values
            if state is not write.state:
                write.via = (*write.via, write.state)  # each step is checked by the store
            write.state = state
            write.values.update(values)
            if worker_epoch is not None:
                write.worker_epoch = worker_epoch
        return True

    def set_state(self, track: Track, state: TaskState, message: str) -> None:
        track.state = state
        self.w.events.append(self.event(track, state, InstanceEventKind.STATE, message))

    def event(
        self, track: Track, state: TaskState | None, kind: InstanceEventKind, message: str
    ) -> NewEvent:
        return NewEvent(
            workflow_instance_id=self.st.id,
            task_instance_id=track.ti_id,
            task_name=track.task,
            task_state=state,
            kind=kind,
            message=message,
        )
