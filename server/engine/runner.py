"""Drives one workflow instance on its owning master.

The runner owns the instance's :class:`~dsched.server.core.execution.Execution` and consumes its
messages (worker events, dispatch results, timers, user pause/stop) strictly in order. It drains
whatever is queued into one batch and writes the batch in one transaction that starts with the
ownership fence; side effects (dispatching, killing, acknowledging worker events, waking watchers)
happen only after that transaction committed. If the fence fails the instance belongs to another
epoch: the runner drops it without writing anything. If the batch fails otherwise (the database
went away), the runner stops and asks for a reload (:mod:`dsched.server.engine.reloads`), handing
over where it had sent attempts, so that the rebuilt runner cannot send one to a second worker.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from dsched.errors import DschedError, OwnershipLost, Unavailable
from dsched.options import TimeoutStrategy
from dsched.server.core import execution as ex
from dsched.server.core.dag import Dag
from dsched.server.core.params import idempotency_key, resolve_params
from dsched.server.core.ports import Clock
from dsched.server.core.records import InstanceRecord, TaskInstanceRecord, WorkflowRecord
from dsched.server.core.transitions import OWNED_STATES
from dsched.server.core.var_pool import merge_violation
from dsched.server.engine import control_apply
from dsched.server.engine.dispatcher import DISPATCH_TIMEOUT_S
from dsched.server.engine.effects import Effects
from dsched.server.engine.jobs import DispatchJob
from dsched.server.engine.messages import (
    ApplyControls,
    Control,
    DelayDue,
    DispatchDue,
    Dispatched,
    KillUnanswered,
    Message,
    RetryDue,
    TakeOverResult,
    TimeoutWarning,
    Waiting,
    WorkerEvent,
    WorkerGone,
)
from dsched.server.engine.services import EngineServices
from dsched.server.protocol.ack import Ack, AckDecision
from dsched.server.protocol.event import TaskEventType
from dsched.server.protocol.execution import TaskExecution
from dsched.server.store import events as event_log
from dsched.server.store import instances as instance_repo
from dsched.server.store import task_instances as ti_repo
from dsched.server.store.database import Conn
from dsched.server.store.events import NewEvent
from dsched.server.store.task_instances import NewAttempt, TaskWrite
from dsched.spec import TaskSpec
from dsched.states import InstanceEventKind, TaskState

log = logging.getLogger(__name__)

_EVENT_STATE = {
    TaskEventType.RUNNING: TaskState.RUNNING,
    TaskEventType.SUCCEEDED: TaskState.SUCCEEDED,
    TaskEventType.FAILED: TaskState.FAILED,
    TaskEventType.KILLED: TaskState.KILLED,
}
_BEFORE_RUNNING = frozenset({TaskState.SUBMITTED, TaskState.DISPATCHED})
_BEFORE_END = frozenset({TaskState.SUBMITTED, TaskState.DISPATCHED, TaskState.RUNNING})


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


@dataclass(slots=True)
class _Batch:
    """Writes and effects of one batch; written in one transaction, effects run after commit."""

    conn: Conn
    now: datetime
    effects: Effects
    events: list[NewEvent] = field(default_factory=list)
    creates: list[ex.Create] = field(default_factory=list)
    instance_values: dict[str, Any] = field(default_factory=dict)
    # Task instance writes, coalesced per row and written in bulk at the end (see _write).
    ti_writes: dict[int, TaskWrite] = field(default_factory=dict)


class InstanceRunner:
    """See the module docstring. Created by the command consumer after a successful claim."""

    def __init__(
        self,
        services: EngineServices,
        instance: InstanceRecord,
        workflow: WorkflowRecord,
        execution: ex.Execution,
        attempts: list[TaskInstanceRecord],
        on_exit: Callable[[InstanceRunner], None],
    ) -> None:
        self.s = services
        self.instance = instance
        self.workflow = workflow
        self.dag: Dag = execution.dag
        self.execution = execution
        self.tracks: dict[int, Track] = {
            a.id: Track(
                a.id,
                a.task_name,
                a.attempt,
                a.retry_times,
                a.state,
                a.host,
                a.worker_epoch,
                a.submit_time,
            )
            for a in attempts
        }
        self.var_pool: dict[str, str] = dict(instance.var_pool)
        self._queue: asyncio.Queue[Message] = asyncio.Queue()
        self._timers: list[asyncio.TimerHandle] = []
        self._on_exit = on_exit
        self.done = False
        self.task: asyncio.Task[None] | None = None
        # Task instance id -> the worker a predecessor runner sent the attempt to (see reloads).
        self.pins: dict[int, str] = {}

    @property
    def id(self) -> int:
        return self.instance.id

    @property
    def clock(self) -> Clock:
        return self.s.clock

    def post(self, message: Message) -> None:
        self._queue.put_nowait(message)

    def start(self) -> None:
        self.task = asyncio.create_task(self._run(), name=f"instance-{self.id}")

    async def stop(self) -> None:
        """Stops driving the instance (shutdown); its state stays in the store for a successor."""
        for handle in self._timers:
            handle.cancel()
        for track in self.tracks.values():
            if track.job is not None and not track.job.sent:
                # Not sent yet: the successor dispatches it (the same attempt) itself.
                track.job.cancelled = True
        if self.task is not None and not self.task.done():
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)

    # ------------------------------------------------------------------------- loop

    async def _run(self) -> None:
        try:
            await self._commit(self._begin, [])
            while not self.done:
                batch = [await self._queue.get()]
                # Let whatever else is ready (more events off the stream) land first: one
                # transaction then carries more messages. It costs one loop turn, not a timer.
                await asyncio.sleep(0)
                while not self._queue.empty():
                    batch.append(self._queue.get_nowait())
                await self._commit(functools.partial(self._handle_all, messages=batch), batch)
        except asyncio.CancelledError:
            raise
        finally:
            for handle in self._timers:
                handle.cancel()
            for track in self.tracks.values():
                if track.job is not None:
                    # Nothing may (re)send this runner's jobs now: whoever drives the instance
                    # next dispatches its attempts itself.
                    track.job.cancelled = True
            self._fail_pending(Ack(AckDecision.RETRY_LATER, "instance runner stopped"))
            self._on_exit(self)

    async def _begin(self, b: _Batch) -> None:
        await control_apply.on_start(self, b)
        await self._apply(b, self.execution.start(b.now))

    async def _commit(self, work: Callable[[_Batch], Any], messages: list[Message]) -> None:
        effects = Effects()
        try:
            async with self.s.db.transaction() as conn:
                batch = _Batch(conn, self.clock.now(), effects)
                await instance_repo.fence(conn, self.id, self.instance.epoch)
                await work(batch)
                await self._flush(batch)
        except OwnershipLost:
            # The conditional write changed nothing: another epoch owns the instance now.
            log.warning(
                "stale_write table=workflow_instances instance=%s expected_epoch=%s: ownership "
                "lost; dropping the instance",
                self.id,
                self.instance.epoch,
            )
            self.s.metrics.ownership_lost += 1
            self.s.metrics.stale_writes += 1
            self._answer(
                messages,
                Ack(AckDecision.NOT_OWNER, "ownership moved"),
                OwnershipLost("the instance moved to another master"),
            )
            self.done = True
            return
        except Exception as exc:  # a failed batch left the store as it was; resync from it
            if isinstance(exc, Unavailable):  # an outage, logged once by the store
                log.info("instance %s: database unavailable; reloading when it is back", self.id)
            else:
                log.exception("instance %s: batch failed; reloading from the store", self.id)
            error = exc if isinstance(exc, DschedError) else Unavailable("the batch failed")
            self._answer(
                messages, Ack(AckDecision.RETRY_LATER, "master could not apply the event"), error
            )
            self.done = True
            self.s.reload(self.id, self._sent())
            return
        effects.run(self)
        if self.execution.finished is not None:
            self.done = True
        self.s.notifier.notify(self.id)

    @staticmethod
    def _answer(messages: list[Message], ack: Ack, error: DschedError) -> None:
        """Answers what a batch could not apply: worker events with ``ack``, controls with
        ``error``."""
        for msg in messages:
            if isinstance(msg, WorkerEvent) and not msg.reply.done():
                msg.reply.set_result(ack)
            elif isinstance(msg, (Control, ApplyControls)) and msg.reply and not msg.reply.done():
                msg.reply.set_exception(error)

    def _fail_pending(self, ack: Ack) -> None:
        error = Unavailable("the instance runner stopped; retry")
        while not self._queue.empty():
            self._answer([self._queue.get_nowait()], ack, error)

    def _sent(self) -> dict[int, str]:
        """Task instance id -> worker, for every attempt this runner (or its predecessor) sent."""
        sent = dict(self.pins)
        for track in self.tracks.values():
            if track.job is not None and track.job.sent and track.job.target:
                sent[track.ti_id] = track.job.target
        return sent

    # ------------------------------------------------------------------------- messages

    async def _handle_all(self, b: _Batch, *, messages: list[Message]) -> None:
        for msg in messages:
            if isinstance(msg, WorkerEvent):
                await self._on_worker_event(b, msg)
            elif isinstance(msg, Dispatched):
                await self._on_dispatched(b, msg)
            elif isinstance(msg, RetryDue):
                await self._apply(b, self.execution.retry_due(msg.task))
            elif isinstance(msg, DelayDue):
                await self._on_delay_due(b, msg.task_instance_id)
            elif isinstance(msg, TimeoutWarning):
                self._on_timeout_warning(b, msg.task_instance_id)
            elif isinstance(msg, TakeOverResult):
                await self._on_take_over(b, msg)
            elif isinstance(msg, KillUnanswered):
                await self._on_kill_unanswered(b, msg.task_instance_id)
            elif isinstance(msg, WorkerGone):
                await self._on_worker_gone(b, msg)
            elif isinstance(msg, Waiting | DispatchDue):
                await self._on_no_worker(b, msg)
            elif isinstance(msg, ApplyControls):
                await control_apply.on_apply(self, b, msg)
            else:
                await control_apply.on_control(self, b, msg)

    async def _on_worker_event(self, b: _Batch, msg: WorkerEvent) -> None:
        event = msg.event
        state = _EVENT_STATE[event.type]
        track = self.tracks.get(event.task_instance_id)
        if track is None or track.attempt != event.attempt:
            self.s.metrics.stale_events += 1
            b.effects.ack(msg, Ack(AckDecision.REJECTED_STALE, "attempt superseded"))
            return
        owner = self._owner_check(track, msg)
        if owner is None:
            # Dispatched, but the reply naming the worker has not been applied yet (or this runner
            # was just rebuilt): not stale, only early. The worker keeps it and resends.
            b.effects.ack(msg, Ack(AckDecision.RETRY_LATER, "dispatch not recorded yet"))
            return
        if not owner:
            self.s.metrics.stale_events += 1
            log.warning(
                "stale event %s for task instance %s from %s epoch %s (owner %s epoch %s)",
                event.event_id,
                track.ti_id,
                msg.worker_address,
                msg.worker_epoch,
                track.host,
                track.worker_epoch,
            )
            b.effects.ack(msg, Ack(AckDecision.REJECTED_STALE, "worker epoch does not own attempt"))
            return
        if track.state is state or (state is TaskState.RUNNING and track.state.terminal):
            b.effects.ack(msg, Ack(AckDecision.DUPLICATE))
            return
        if track.state.terminal:
            b.effects.ack(msg, Ack(AckDecision.REJECTED_STALE, f"attempt already {track.state}"))
            return
        values: dict[str, Any] = {"host": msg.worker_address, "worker_epoch": msg.worker_epoch}
        state, message, out_params = self._outcome(state, event.message, event.out_params)
        if state is TaskState.RUNNING:
            values.update(start_time=event.event_time, pid=event.pid, log_path=event.log_path)
        else:
            values.update(
                end_time=event.event_time,
                exit_code=event.exit_code,
                out_params=out_params,
                state_reason=message[:1024],
            )
        expected = _BEFORE_RUNNING if state is TaskState.RUNNING else _BEFORE_END
        if not self._write(b, track, expected, state, values, worker_epoch=msg.worker_epoch):
            self.s.metrics.stale_events += 1
            b.effects.ack(msg, Ack(AckDecision.REJECTED_STALE, "attempt no longer matches"))
            return
        track.host, track.worker_epoch = msg.worker_address, msg.worker_epoch
        self._set_state(b, track, state, message)
        if state is TaskState.SUCCEEDED and out_params:
            self.var_pool.update(out_params)
            b.instance_values["var_pool"] = dict(self.var_pool)
        if state is TaskState.RUNNING:
            track.started = event.event_time
            self._arm_timeout_warning(b, track)
        elif track.started is not None:
            self._late_timeout_warning(b, track, event.event_time - track.started)
        b.effects.ack(msg, Ack(AckDecision.ACCEPTED))
        await self._apply(b, self.execution.task_state(track.task, state, b.now))

    def _outcome(
        self, state: TaskState, message: str, out_params: Mapping[str, str]
    ) -> tuple[TaskState, str, dict[str, str]]:
        """A reported end as it is recorded: a success whose OUT parameters do not fit the var
        pool becomes a failure saying so (:func:`merge_violation`)."""
        if state is TaskState.SUCCEEDED and out_params:
            overflow = merge_violation(self.var_pool, out_params)
            if overflow is not None:
                return TaskState.FAILED, overflow, {}
        return state, message, dict(out_params)

    @staticmethod
    def _owner_check(track: Track, msg: WorkerEvent) -> bool | None:
        """Whether the reporting worker incarnation owns the attempt (the fencing check); None if
        this runner cannot tell yet."""
        if track.worker_epoch:
            return track.worker_epoch == msg.worker_epoch and track.host == msg.worker_address
        if track.job is not None and track.job.target:
            # The RUNNING event overtook the dispatch reply: only the worker we sent it to may
            # report it.
            return track.job.target == msg.worker_address
        return None

    async def _on_dispatched(self, b: _Batch, msg: Dispatched) -> None:
        track = self.tracks.get(msg.task_instance_id)
        if track is None or track.state is not TaskState.SUBMITTED:
            return  # superseded, or its RUNNING event overtook this reply and recorded the host
        values = {
            "host": msg.host,
            "worker_epoch": msg.worker_epoch,
            "log_path": msg.log_path,
            "state_reason": "",  # no longer waiting for a worker
        }
        if self._write(b, track, {TaskState.SUBMITTED}, TaskState.DISPATCHED, values):
            track.host, track.worker_epoch = msg.host, msg.worker_epoch
            self._set_state(b, track, TaskState.DISPATCHED, f"on {msg.host}")
            await self._apply(b, self.execution.task_state(track.task, TaskState.DISPATCHED, b.now))

    async def _on_delay_due(self, b: _Batch, ti_id: int) -> None:
        track = self.tracks.get(ti_id)
        if track is None or track.state is not TaskState.DELAY_EXECUTION:
            return
        if self._write(b, track, {TaskState.DELAY_EXECUTION}, TaskState.SUBMITTED, {}):
            self._set_state(b, track, TaskState.SUBMITTED, "delay elapsed")
            self.execution.task_state(track.task, TaskState.SUBMITTED, b.now)
            self._dispatch(b, track)

    def _on_timeout_warning(self, b: _Batch, ti_id: int) -> None:
        track = self.tracks.get(ti_id)
        if track is not None and track.state is TaskState.RUNNING and not track.warned:
            timeout = self.dag.tasks[track.task].timeout
            track.warned = True
            b.events.append(
                self._event(
                    track, None, InstanceEventKind.TIMEOUT_WARNING, f"running longer than {timeout}"
                )
            )

    def _late_timeout_warning(self, b: _Batch, track: Track, ran: timedelta) -> None:
        # With WARN_FAIL the worker's kill at the deadline can overtake the master's warning timer
        # (armed only when the RUNNING event arrived): an attempt that ran past its timeout
        # unwarned is warned now, as it ends.
        task = self.dag.tasks[track.task]
        if track.warned or not task.timeout_strategy.warns or task.timeout <= timedelta(0):
            return
        if ran >= task.timeout:
            track.warned = True
            b.events.append(
                self._event(
                    track,
                    None,
                    InstanceEventKind.TIMEOUT_WARNING,
                    f"ran longer than {task.timeout}",
                )
            )

    async def _on_take_over(self, b: _Batch, msg: TakeOverResult) -> None:
        track = self.tracks.get(msg.task_instance_id)
        if msg.found or track is None or track.state.terminal:
            return
        await self._fail_over(b, track, "its worker no longer has it")

    def _on_waiting(self, b: _Batch, msg: Waiting) -> None:
        track = self.tracks.get(msg.task_instance_id)
        if track is None or track.state is not TaskState.SUBMITTED:
            return
        if self._write(
            b,
            track,
            {TaskState.SUBMITTED},
            TaskState.SUBMITTED,
            {"state_reason": msg.reason[:1024]},
        ):
            b.events.append(self._event(track, None, InstanceEventKind.WAITING, msg.reason))

    def _dispatch(self, b: _Batch, track: Track) -> None:
        """Queues the attempt for a worker and, with a dispatch timeout, arms its deadline."""
        b.effects.dispatch(self._job(track))
        limit = self._dispatch_timeout()
        if limit > 0:
            b.effects.timer(limit, DispatchDue(track.ti_id))

    def _dispatch_timeout(self) -> float:
        """Seconds a ready attempt may wait for a worker (0: no limit): the run's, else the
        master's default."""
        chosen = self.instance.options.dispatch_timeout
        return self.s.dispatch_timeout if chosen is None else chosen.total_seconds()

    async def _on_no_worker(self, b: _Batch, msg: Waiting | DispatchDue) -> None:
        """An attempt still has no worker: the reason it waits, or its dispatch timeout passed."""
        if isinstance(msg, Waiting):
            self._on_waiting(b, msg)
        else:
            await self._on_dispatch_due(b, msg.task_instance_id)

    async def _on_dispatch_due(self, b: _Batch, ti_id: int) -> None:
        track = self.tracks.get(ti_id)
        if track is None or track.state is not TaskState.SUBMITTED or track.job is None:
            return  # a worker took it (or it was superseded) in time
        if track.job.sent:
            # A send is under way and may be accepted: look again once its outcome is known.
            b.effects.timer(DISPATCH_TIMEOUT_S, DispatchDue(ti_id))
            return
        track.job.cancelled = True
        waited = track.job.waiting_reason.removeprefix("waiting for a worker: ")
        reason = (
            f"no worker took it within the dispatch timeout "
            f"({timedelta(seconds=self._dispatch_timeout())}): {waited or 'none was available'}"
        )
        values = {"end_time": b.now, "state_reason": reason[:1024]}
        if self._write(b, track, {TaskState.SUBMITTED}, TaskState.FAILED, values):
            self._set_state(b, track, TaskState.FAILED, reason)
            await self._apply(b, self.execution.task_state(track.task, TaskState.FAILED, b.now))

    async def _on_worker_gone(self, b: _Batch, msg: WorkerGone) -> None:
        lost = [
            t
            for t in self.tracks.values()
            if t.host == msg.address
            and t.worker_epoch <= msg.epoch
            and t.state in (TaskState.DISPATCHED, TaskState.RUNNING)
        ]
        for track in lost:
            why = f"worker {msg.address} (epoch {track.worker_epoch}) {msg.why}"
            await self._fail_over(b, track, why)

    async def _fail_over(self, b: _Batch, track: Track, reason: str) -> None:
        """Retires an attempt whose worker incarnation is gone (NEED_FAULT_TOLERANCE, not valid)
        and runs the task again as a new attempt. The write is conditional on the attempt's
        worker epoch, and a failover does not count as one of the task's retries."""
        if self._write(
            b,
            track,
            _BEFORE_END,
            TaskState.NEED_FAULT_TOLERANCE,
            {"valid": False, "end_time": b.now},
            worker_epoch=track.worker_epoch or None,
        ):
            self.s.metrics.tasks_failed_over += 1
            log.warning(
                "instance %s: task instance %s attempt %s failed over: %s",
                self.id,
                track.ti_id,
                track.attempt,
                reason,
            )
            self._set_state(b, track, TaskState.NEED_FAULT_TOLERANCE, reason)
            del self.tracks[track.ti_id]
            await self._apply(b, self.execution.replace(track.task))

    async def _on_kill_unanswered(self, b: _Batch, ti_id: int) -> None:
        # The worker had no such attempt (and has remembered the kill, so a late dispatch will not
        # run it); if no result arrived meanwhile, the attempt ends KILLED here.
        track = self.tracks.get(ti_id)
        if track is None or track.state.terminal:
            return
        if self._write(b, track, _BEFORE_END, TaskState.KILLED, {"end_time": b.now}):
            self._set_state(b, track, TaskState.KILLED, "killed before it started")
            await self._apply(b, self.execution.task_state(track.task, TaskState.KILLED, b.now))

    # ------------------------------------------------------------------------- actions

    async def apply_actions(self, b: _Batch, actions: list[ex.Action]) -> None:
        """Carries out what the execution decided, in batch ``b`` (for the control module)."""
        await self._apply(b, actions)

    async def _apply(self, b: _Batch, actions: list[ex.Action]) -> None:
        pending = list(actions)
        while pending:
            action = pending.pop(0)
            if isinstance(action, ex.Create):
                b.creates.append(action)
            elif isinstance(action, ex.Redispatch):
                self._dispatch(b, self.tracks[action.task_instance_id])
            elif isinstance(action, ex.Adopt):
                adopted = self.tracks[action.task_instance_id]
                b.effects.adopt(adopted.ti_id, adopted.attempt, adopted.host, adopted.worker_epoch)
            elif isinstance(action, ex.ScheduleRetry):
                b.effects.timer(action.delay.total_seconds(), RetryDue(action.task))
                failed = self.tracks.get(self.execution.task_instance_of(action.task))
                if failed is not None:
                    b.events.append(
                        self._event(
                            failed,
                            None,
                            InstanceEventKind.RETRY_SCHEDULED,
                            f"retry in {action.delay}",
                        )
                    )
            elif isinstance(action, ex.Kill):
                self._kill(b, self.tracks[action.task_instance_id])
            elif isinstance(action, ex.Cancel):
                pending.extend(await self._cancel(b, action))
            else:
                await self._finish(b, action)

    def _kill(self, b: _Batch, track: Track) -> None:
        if track.job is not None:
            # Never (re)send it; if it is on its way, the worker remembers the kill and refuses it.
            track.job.cancelled = True
        target = track.host or (track.job.target if track.job is not None else "")
        b.effects.kill(track.ti_id, track.attempt, target)

    async def _cancel(self, b: _Batch, action: ex.Cancel) -> list[ex.Action]:
        track = self.tracks[action.task_instance_id]
        if track.job is not None and track.job.sent:
            # Already on its way to a worker: it cannot be withdrawn, only killed or left to finish.
            if action.state is TaskState.KILLED:
                self._kill(b, track)
            return self.execution.task_state(track.task, TaskState.DISPATCHED, b.now)
        if track.job is not None:
            track.job.cancelled = True
        if not self._write(
            b,
            track,
            {TaskState.SUBMITTED, TaskState.DELAY_EXECUTION},
            action.state,
            {"end_time": b.now},
        ):
            return []
        self._set_state(b, track, action.state, "cancelled before it reached a worker")
        return self.execution.task_state(track.task, action.state, b.now)

    async def _finish(self, b: _Batch, action: ex.Finish) -> None:
        # A READY_PAUSE/READY_STOP recorded earlier in this batch must not overwrite the end state.
        b.instance_values.pop("state", None)
        await instance_repo.set_state(
            b.conn,
            self.id,
            epoch=self.instance.epoch,
            expected=OWNED_STATES,
            state=action.state,
            values={"end_time": b.now, "state_reason": action.reason[:1024]},
        )
        # Before the end event, which watchers take as the last one.
        await control_apply.refuse_leftovers(self, b, action.state)
        b.events.append(
            NewEvent(
                workflow_instance_id=self.id, workflow_state=action.state, message=action.reason
            )
        )

    async def _flush(self, b: _Batch) -> None:
        """Writes what the batch accumulated: task instance changes, new attempts (which supersede
        older ones, so they come after the changes), instance fields, event rows."""
        await ti_repo.apply_writes(b.conn, list(b.ti_writes.values()))
        b.ti_writes.clear()
        while b.creates:
            creates, b.creates = b.creates, []
            await self._create_attempts(b, creates)
        if b.instance_values:
            await instance_repo.update_fields(
                b.conn, self.id, self.instance.epoch, b.instance_values
            )
        await event_log.append(b.conn, b.events, b.now)

    async def _create_attempts(self, b: _Batch, creates: list[ex.Create]) -> None:
        rows = [
            NewAttempt(
                task_name=c.task,
                attempt=c.attempt,
                retry_times=c.retry_times,
                state=TaskState.DELAY_EXECUTION if c.delay else TaskState.SUBMITTED,
                priority=self.dag.tasks[c.task].priority,
                worker_group=self._group(self.dag.tasks[c.task]),
            )
            for c in creates
        ]
        ids = await ti_repo.create_attempts(b.conn, self.id, rows, b.now)
        follow_ups: list[ex.Action] = []
        for ti_id, create, row in zip(ids, creates, rows, strict=True):
            for old in [t for t in self.tracks.values() if t.task == create.task]:
                del self.tracks[old.ti_id]  # superseded in the same transaction
            track = Track(
                ti_id, create.task, create.attempt, create.retry_times, row.state, "", 0, b.now
            )
            self.tracks[ti_id] = track
            b.events.append(
                self._event(
                    track, row.state, InstanceEventKind.STATE, f"attempt {create.attempt} created"
                )
            )
            # A pause/stop/END later in this batch cancels the new attempt instead of dispatching.
            cancel = self.execution.attempt_created(create.task, ti_id, row.state)
            if cancel:
                follow_ups.extend(cancel)
            elif create.delay:
                b.effects.timer(create.delay.total_seconds(), DelayDue(ti_id))
            else:
                self._dispatch(b, track)
        await self._apply(b, follow_ups)

    # ------------------------------------------------------------------------- helpers

    @staticmethod
    def _write(
        b: _Batch,
        track: Track,
        expected: Collection[TaskState],
        state: TaskState,
        values: Mapping[str, Any],
        *,
        worker_epoch: int | None = None,
    ) -> bool:
        """Records a task instance transition if the attempt is in one of ``expected``.

        The runner's view is authoritative while its epoch owns the instance (every batch starts
        with the fence), so the check is made in memory and the rows are written in bulk when the
        batch is flushed: one statement per kind of change instead of one per event. The write stays
        conditional on the row's state before the batch; a row that does not match fails the
        batch, which then reloads the instance from the store.
        """
        if track.state not in expected:
            return False
        write = b.ti_writes.get(track.ti_id)
        if write is None:
            b.ti_writes[track.ti_id] = TaskWrite(
                task_instance_id=track.ti_id,
                expected=frozenset(expected),
                state=state,
                worker_epoch=worker_epoch,
                values=dict(values),
            )
        else:  # a later change of the same row in this batch: same precondition, newer values
            write.state = state
            write.values.update(values)
            if worker_epoch is not None:
                write.worker_epoch = worker_epoch
        return True

    def _set_state(self, b: _Batch, track: Track, state: TaskState, message: str) -> None:
        track.state = state
        b.events.append(self._event(track, state, InstanceEventKind.STATE, message))

    def _event(
        self, track: Track, state: TaskState | None, kind: InstanceEventKind, message: str
    ) -> NewEvent:
        return NewEvent(
            workflow_instance_id=self.id,
            task_instance_id=track.ti_id,
            task_name=track.task,
            task_state=state,
            kind=kind,
            message=message,
        )

    def _group(self, task: TaskSpec) -> str:
        return task.worker_group or self.instance.options.worker_group or self.s.default_group

    def _arm_timeout_warning(self, b: _Batch, track: Track) -> None:
        task = self.dag.tasks[track.task]
        if task.timeout > timedelta(0) and task.timeout_strategy in (
            TimeoutStrategy.WARN,
            TimeoutStrategy.WARN_FAIL,
        ):
            b.effects.timer(task.timeout.total_seconds(), TimeoutWarning(track.ti_id))

    def _job(self, track: Track) -> DispatchJob:
        task = self.dag.tasks[track.task]
        assert task.kind is not None  # validated definitions always have a kind
        spec = TaskExecution(
            task_instance_id=track.ti_id,
            attempt=track.attempt,
            workflow_instance_id=self.id,
            workflow_code=self.workflow.id,
            workflow_version=self.workflow.version,
            task_name=track.task,
            idempotency_key=idempotency_key(self.id, track.task, track.attempt),
            kind=task.kind,
            params=self._params(task),
            timeout=task.timeout,
            timeout_strategy=task.timeout_strategy,
            dry_run=self.instance.options.dry_run,
            owner_address=self.s.cluster_address,
            owner_epoch=self.instance.epoch,
            submit_time=track.submit_time,
        )
        job = DispatchJob(
            spec=spec,
            worker_group=self._group(task),
            order=(self.instance.options.priority.rank, task.priority.rank, track.ti_id),
            on_dispatched=self.post,
            pinned=self.pins.get(track.ti_id, ""),
        )
        track.job = job
        return job

    def _params(self, task: TaskSpec) -> Mapping[str, str]:
        return resolve_params(
            global_params=self.workflow.spec.params,
            var_pool=self.var_pool,
            local_params=task.params,
            startup_params=self.instance.options.params,
        )

    def schedule(self, delay: float, message: Message) -> None:
        """Posts ``message`` to this runner after ``delay`` seconds (timers die with the runner)."""
        loop = asyncio.get_running_loop()
        self._timers.append(loop.call_later(max(delay, 0.0), self.post, message))
