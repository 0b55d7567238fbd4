"""The pure decision of an instance runner: its state and a batch of messages in, a plan out.

:func:`begin` decides a (re)started runner's first batch, :func:`decide` every later one. Each
returns a :class:`~dsched_server.engine.actions.Plan`: the writes (applied by the runner in one
store call, ``dsched_server/store/batch.py``) and the effects (run after the commit by the
:class:`~dsched_server.engine.executor.EffectExecutor`). Nothing here awaits, reads the store or
calls a worker; the controls a batch needs are read before it and passed in.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta

from dsched.states import InstanceEventKind, TaskState
from dsched_server.core.controls import ControlRecord
from dsched_server.core.var_pool import merge_violation
from dsched_server.engine import control_apply, dependent_apply
from dsched_server.engine.actions import Decider, Plan
from dsched_server.engine.dispatcher import DISPATCH_TIMEOUT_S
from dsched_server.engine.messages import (
    ApplyControls,
    AttemptCheck,
    Check,
    DependencyChecked,
    Dispatched,
    Message,
    Waiting,
    WorkerEvent,
    WorkerGone,
)
from dsched_server.engine.run_state import RunState, Track
from dsched_server.protocol.ack import Ack, AckDecision
from dsched_server.protocol.event import TaskEventType
from dsched_server.store.task_instances import MAX_LOST_APPLICATIONS, TaskValues

log = logging.getLogger(__name__)

_EVENT_STATE = {
    TaskEventType.RUNNING: TaskState.RUNNING,
    TaskEventType.SUCCEEDED: TaskState.SUCCEEDED,
    TaskEventType.FAILED: TaskState.FAILED,
    TaskEventType.KILLED: TaskState.KILLED,
}
# The shortest wait before a dispatch timeout that found a send under way looks again.
RECHECK_MIN_S = 0.05
_BEFORE_RUNNING = frozenset({TaskState.SUBMITTED, TaskState.DISPATCHED})
_BEFORE_END = frozenset({TaskState.SUBMITTED, TaskState.DISPATCHED, TaskState.RUNNING})


def begin(state: RunState, now: datetime, pending: Sequence[ControlRecord]) -> Plan:
    """The first batch: pending controls set the phase, then the execution starts."""
    d = _Messages(state, now)
    control_apply.on_start(d, pending)
    d.apply(state.execution.start(now))
    return d.plan


def decide(
    state: RunState,
    now: datetime,
    messages: Sequence[Message],
    controls: Sequence[ControlRecord] = (),
) -> Plan:
    """A batch of messages. ``controls``: what the store said when the batch's control message
    (at most one per batch) was read: the pending controls, and for a :class:`Control` the one
    recorded under its request id."""
    d = _Messages(state, now)
    for msg in messages:
        d.handle(msg, controls)
    return d.plan


class _Messages(Decider):
    def handle(self, msg: Message, controls: Sequence[ControlRecord]) -> None:
        if isinstance(msg, WorkerEvent):
            self._on_worker_event(msg)
        elif isinstance(msg, Dispatched):
            self._on_dispatched(msg)
        elif isinstance(msg, AttemptCheck):
            self._on_check(msg)
        elif isinstance(msg, WorkerGone):
            self._on_worker_gone(msg)
        elif isinstance(msg, Waiting):
            self._on_waiting(msg)
        elif isinstance(msg, DependencyChecked):
            dependent_apply.on_checked(self, msg)
        elif isinstance(msg, ApplyControls):
            control_apply.on_apply(self, msg, controls)
        else:
            control_apply.on_control(self, msg, controls)

    def _on_check(self, msg: AttemptCheck) -> None:
        ti_id = msg.task_instance_id
        match msg.check:
            case Check.DELAY:
                self._on_delay_due(ti_id)
            case Check.DISPATCH:
                self._on_dispatch_due(ti_id)
            case Check.TIMEOUT_WARNING:
                self._on_timeout_warning(ti_id)
            case Check.KILL_UNANSWERED:
                self._on_kill_unanswered(ti_id)
            case Check.NOT_ON_WORKER:
                self._on_not_on_worker(ti_id)
            case Check.DEPENDENCY:
                dependent_apply.on_check(self, ti_id)
            case Check.RETRY:
                self._on_retry_due(ti_id)

    def dispatch(self, track: Track) -> None:
        # A DEPENDENT task runs here, on the master: it never reaches the dispatcher.
        if dependent_apply.spec_of(self, track) is not None:
            dependent_apply.start(self, track)
        else:
            super().dispatch(track)

    def kill(self, track: Track) -> None:
        if dependent_apply.spec_of(self, track) is not None:
            dependent_apply.kill(self, track)
        else:
            super().kill(track)

    def _on_worker_event(self, msg: WorkerEvent) -> None:
        event = msg.event
        state = _EVENT_STATE[event.type]
        track = self.st.tracks.get(event.task_instance_id)
        if track is None or track.attempt != event.attempt:
            self.fx.count("stale_events")
            self.fx.ack(msg, Ack(AckDecision.REJECTED_STALE, "attempt superseded"))
            return
        owner = _owner_check(track, msg)
        if owner is None:
            # Dispatched, but the reply naming the worker has not been applied yet (or this runner
            # was just rebuilt): not stale, only early. The worker keeps it and resends.
            self.fx.ack(msg, Ack(AckDecision.RETRY_LATER, "dispatch not recorded yet"))
            return
        if not owner:
            self.fx.count("stale_events")
            log.warning(
                "stale event %s for task instance %s from %s epoch %s (owner %s epoch %s)",
                event.event_id,
                track.ti_id,
                msg.worker_address,
                msg.worker_epoch,
                track.host,
                track.worker_epoch,
            )
            self.fx.ack(msg, Ack(AckDecision.REJECTED_STALE, "worker epoch does not own attempt"))
            return
        if state is TaskState.RUNNING and track.state is TaskState.RUNNING:
            self._record_application(track, msg)
            return
        if track.state is state or (state is TaskState.RUNNING and track.state.terminal):
            self.fx.ack(msg, Ack(AckDecision.DUPLICATE))
            return
        if track.state.terminal:
            self.fx.ack(msg, Ack(AckDecision.REJECTED_STALE, f"attempt already {track.state}"))
            return
        state, message, out_params = self._outcome(state, event.message, event.out_params)
        values = _event_values(msg, state, message, out_params)
        expected = _BEFORE_RUNNING if state is TaskState.RUNNING else _BEFORE_END
        if not self.write(track, expected, state, values, worker_epoch=msg.worker_epoch):
            self.fx.count("stale_events")
            self.fx.ack(msg, Ack(AckDecision.REJECTED_STALE, "attempt no longer matches"))
            return
        track.host, track.worker_epoch = msg.worker_address, msg.worker_epoch
        track.application_id = event.application_id or track.application_id
        self.set_state(track, state, message)
        if state is TaskState.SUCCEEDED and out_params:
            self.st.var_pool.update(out_params)
            self.w.fields["var_pool"] = dict(self.st.var_pool)
        if state is TaskState.RUNNING:
            track.started = event.event_time
            self.arm_timeout_warning(track)
        elif track.started is not None:
            self._late_timeout_warning(track, event.event_time - track.started)
        self.fx.ack(msg, Ack(AckDecision.ACCEPTED))
        self.apply(self.st.execution.task_state(track.task, state, self.now))

    def _record_application(self, track: Track, msg: WorkerEvent) -> None:
        """A RUNNING event of a running attempt: a resend (DUPLICATE), or the id of the Spark
        application it runs, recorded as a field update of the running attempt."""
        app = msg.event.application_id
        if not app or app == track.application_id:
            self.fx.ack(msg, Ack(AckDecision.DUPLICATE))
            return
        values: TaskValues = {"application_id": app}
        if not self.write(
            track, {TaskState.RUNNING}, TaskState.RUNNING, values, worker_epoch=msg.worker_epoch
        ):
            self.fx.ack(msg, Ack(AckDecision.REJECTED_STALE, "attempt no longer matches"))
            return
        track.application_id = app
        self.st.lost_applications.pop(track.task, None)  # killed before this one was submitted
        self.fx.ack(msg, Ack(AckDecision.ACCEPTED))

    def _outcome(
        self, state: TaskState, message: str, out_params: Mapping[str, str]
    ) -> tuple[TaskState, str, dict[str, str]]:
        """A reported end as it is recorded: a success whose OUT parameters do not fit the var
        pool becomes a failure saying so (:func:`merge_violation`)."""
        if state is TaskState.SUCCEEDED and out_params:
            overflow = merge_violation(self.st.var_pool, out_params)
            if overflow is not None:
                return TaskState.FAILED, overflow, {}
        return state, message, dict(out_params)

    def _on_dispatched(self, msg: Dispatched) -> None:
        track = self.st.tracks.get(msg.task_instance_id)
        if track is None or track.state is not TaskState.SUBMITTED:
            return  # superseded, or its RUNNING event overtook this reply and recorded the host
        values: TaskValues = {
            "host": msg.host,
            "worker_epoch": msg.worker_epoch,
            "log_path": msg.log_path,
            "state_reason": "",  # no longer waiting for a worker
        }
        if self.write(track, {TaskState.SUBMITTED}, TaskState.DISPATCHED, values):
            track.host, track.worker_epoch = msg.host, msg.worker_epoch
            self.set_state(track, TaskState.DISPATCHED, f"on {msg.host}")
            self.apply(self.st.execution.task_state(track.task, TaskState.DISPATCHED, self.now))

    def _on_delay_due(self, ti_id: int) -> None:
        track = self.st.tracks.get(ti_id)
        if track is None or track.state is not TaskState.DELAY_EXECUTION:
            return
        if self.write(track, {TaskState.DELAY_EXECUTION}, TaskState.SUBMITTED, {}):
            self.set_state(track, TaskState.SUBMITTED, "delay elapsed")
            self.st.execution.task_state(track.task, TaskState.SUBMITTED, self.now)
            self.dispatch(track)

    def _on_timeout_warning(self, ti_id: int) -> None:
        track = self.st.tracks.get(ti_id)
        if track is not None and track.state is TaskState.RUNNING and not track.warned:
            timeout = self.st.dag.tasks[track.task].timeout
            track.warned = True
            self.w.events.append(
                self.event(
                    track, None, InstanceEventKind.TIMEOUT_WARNING, f"running longer than {timeout}"
                )
            )

    def _late_timeout_warning(self, track: Track, ran: timedelta) -> None:
        # With WARN_FAIL the worker's kill at the deadline can overtake the master's warning timer
        # (armed only when the RUNNING event arrived): an attempt that ran past its timeout
        # unwarned is warned now, as it ends.
        task = self.st.dag.tasks[track.task]
        if track.warned or not task.timeout_strategy.warns or task.timeout <= timedelta(0):
            return
        if ran >= task.timeout:
            track.warned = True
            self.w.events.append(
                self.event(
                    track,
                    None,
                    InstanceEventKind.TIMEOUT_WARNING,
                    f"ran longer than {task.timeout}",
                )
            )

    def _on_retry_due(self, ti_id: int) -> None:
        track = self.st.tracks.get(ti_id)
        if track is None:
            return  # a newer attempt of its task superseded it: that retry is not wanted any more
        self.apply(self.st.execution.retry_due(track.task))

    def _on_not_on_worker(self, ti_id: int) -> None:
        track = self.st.tracks.get(ti_id)
        if track is None or track.state.terminal:
            return
        self._fail_over(track, "its worker no longer has it")

    def _on_waiting(self, msg: Waiting) -> None:
        track = self.st.tracks.get(msg.task_instance_id)
        if track is None or track.state is not TaskState.SUBMITTED:
            return
        reason: TaskValues = {"state_reason": msg.reason[:1024]}
        if self.write(track, {TaskState.SUBMITTED}, TaskState.SUBMITTED, reason):
            self.w.events.append(self.event(track, None, InstanceEventKind.WAITING, msg.reason))

    def _on_dispatch_due(self, ti_id: int) -> None:
        track = self.st.tracks.get(ti_id)
        if track is None or track.state is not TaskState.SUBMITTED or track.job is None:
            return  # a worker took it (or it was superseded) in time
        if track.job.sent:
            # A send is under way and may be accepted: look again after the run's own timeout
            # (at least RECHECK_MIN_S, at most the send's bound). Not after the send's bound
            # alone: a 100 ms timeout that met a send rejected a moment later waited 10 s more.
            again = min(DISPATCH_TIMEOUT_S, max(self.dispatch_timeout(), RECHECK_MIN_S))
            self.fx.timer(again, AttemptCheck(Check.DISPATCH, ti_id))
            return
        track.job.cancelled = True
        waited = track.job.waiting_reason.removeprefix("waiting for a worker: ")
        reason = (
            f"no worker took it within the dispatch timeout "
            f"({timedelta(seconds=self.dispatch_timeout())}): {waited or 'none was available'}"
        )
        values: TaskValues = {"end_time": self.now, "state_reason": reason[:1024]}
        if self.write(track, {TaskState.SUBMITTED}, TaskState.FAILED, values):
            self.set_state(track, TaskState.FAILED, reason)
            self.apply(self.st.execution.task_state(track.task, TaskState.FAILED, self.now))

    def _on_worker_gone(self, msg: WorkerGone) -> None:
        lost = [
            t
            for t in self.st.tracks.values()
            if t.host == msg.address
            and t.worker_epoch <= msg.epoch
            and t.state in (TaskState.DISPATCHED, TaskState.RUNNING)
        ]
        for track in lost:
            self._fail_over(track, f"worker {msg.address} (epoch {track.worker_epoch}) {msg.why}")

    def _fail_over(self, track: Track, reason: str) -> None:
        """Retires an attempt whose worker incarnation is gone (NEED_FAULT_TOLERANCE, not valid)
        and runs the task again as a new attempt. The write is conditional on the attempt's
        worker epoch, and a failover does not count as one of the task's retries."""
        if self.write(
            track,
            _BEFORE_END,
            TaskState.NEED_FAULT_TOLERANCE,
            {"valid": False, "end_time": self.now},
            worker_epoch=track.worker_epoch or None,
        ):
            self.fx.count("tasks_failed_over")
            log.warning(
                "instance %s: task instance %s attempt %s failed over: %s",
                self.st.id,
                track.ti_id,
                track.attempt,
                reason,
            )
            self.set_state(track, TaskState.NEED_FAULT_TOLERANCE, reason)
            if track.application_id:
                lost = self.st.lost_applications.get(track.task, ())
                self.st.lost_applications[track.task] = (*lost, track.application_id)[
                    -MAX_LOST_APPLICATIONS:
                ]
            del self.st.tracks[track.ti_id]
            self.apply(self.st.execution.replace(track.task))

    def _on_kill_unanswered(self, ti_id: int) -> None:
        # The worker had no such attempt (and has remembered the kill, so a late dispatch will not
        # run it); if no result arrived meanwhile, the attempt ends KILLED here.
        track = self.st.tracks.get(ti_id)
        if track is None or track.state.terminal:
            return
        if self.write(track, _BEFORE_END, TaskState.KILLED, {"end_time": self.now}):
            self.set_state(track, TaskState.KILLED, "killed before it started")
            self.apply(self.st.execution.task_state(track.task, TaskState.KILLED, self.now))


def _owner_check(track: Track, msg: WorkerEvent) -> bool | None:
    """Whether the reporting worker incarnation owns the attempt (the fencing check); None if this
    runner cannot tell yet."""
    if track.worker_epoch:
        return track.worker_epoch == msg.worker_epoch and track.host == msg.worker_address
    if track.job is not None and track.job.target:
        # The RUNNING event overtook the dispatch reply: only the worker we sent it to may
        # report it.
        if track.job.target != msg.worker_address:
            return False
        # And only the incarnation we sent it to. Another epoch at that address (a restarted
        # worker resends its predecessor's events from the outbox under its own address) waits
        # for the reply, which names the incarnation that took the attempt.
        return True if track.job.target_epoch == msg.worker_epoch else None
    return None


def _event_values(
    msg: WorkerEvent, state: TaskState, message: str, out_params: Mapping[str, str]
) -> TaskValues:
    """The columns a worker's event sets with the attempt's new ``state``."""
    event = msg.event
    values: TaskValues = {"host": msg.worker_address, "worker_epoch": msg.worker_epoch}
    if event.application_id:
        values["application_id"] = event.application_id
    if state is TaskState.RUNNING:
        values.update(
            {"start_time": event.event_time, "pid": event.pid, "log_path": event.log_path}
        )
    else:
        values.update(
            {
                "end_time": event.event_time,
                "exit_code": event.exit_code,
                "out_params": out_params,
                "state_reason": message[:1024],
            }
        )
    return values
