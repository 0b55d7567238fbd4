"""A DEPENDENT attempt on its runner: it runs on the master and holds no worker slot.

It goes RUNNING as soon as it would have been dispatched, and is checked at once (a timer of no
delay, so that its id is the committed one by then), then every ``check_interval`` and whenever a
run it waits for moves on this master (``dependency_waits.py``). The check (the store read, by the
:class:`~dsched_server.engine.executor.EffectExecutor`) comes back as a
:class:`~dsched_server.engine.messages.DependencyChecked`; the verdict ends the attempt SUCCEEDED
or FAILED, or keeps it waiting. A task timeout that kills ends it FAILED at the deadline; a kill
(stop, failure strategy END) ends it KILLED at once, as there is no process to wait for.
"""

from __future__ import annotations

from datetime import timedelta

from dsched.dependency import DependentSpec
from dsched.states import InstanceEventKind, TaskState
from dsched_server.core.dependent import Result, Verdict, verdict
from dsched_server.core.param_values import time_basis
from dsched_server.engine.actions import Decider
from dsched_server.engine.effects import DependencyQuery
from dsched_server.engine.messages import AttemptCheck, Check, DependencyChecked
from dsched_server.engine.run_state import Track
from dsched_server.store.task_instances import TaskValues


def spec_of(d: Decider, track: Track) -> DependentSpec | None:
    kind = d.st.dag.tasks[track.task].kind
    return kind if isinstance(kind, DependentSpec) else None


def start(d: Decider, track: Track) -> None:
    values: TaskValues = {"start_time": d.now, "state_reason": "checking its dependencies"}
    if not d.write(track, {TaskState.SUBMITTED}, TaskState.RUNNING, values):
        return
    track.started = d.now
    d.set_state(track, TaskState.RUNNING, "checking its dependencies on the master")
    d.fx.timer(0, AttemptCheck(Check.DEPENDENCY, track.ti_id))
    d.arm_timeout_warning(track)
    d.apply(d.st.execution.task_state(track.task, TaskState.RUNNING, d.now))


def on_check(d: Decider, ti_id: int) -> None:
    """A check is due: read the dependencies, or end the attempt if its timeout passed."""
    track = d.st.tracks.get(ti_id)
    if track is None or track.state is not TaskState.RUNNING:
        return
    spec = spec_of(d, track)
    if spec is None:
        return
    if _timed_out(d, track):
        task = d.st.dag.tasks[track.task]
        _end(d, track, TaskState.FAILED, f"timed out after {task.timeout} waiting")
        return
    schedule_time, zone = time_basis(d.st.instance)  # what time parameters count from too
    d.fx.check_dependency(
        DependencyQuery(
            task_instance_id=ti_id,
            spec=spec,
            schedule_time=schedule_time,
            zone=zone,
            check_interval=spec.check_interval.total_seconds(),
        )
    )


def on_checked(d: Decider, msg: DependencyChecked) -> None:
    track = d.st.tracks.get(msg.task_instance_id)
    if track is None or track.state is not TaskState.RUNNING or track.started is None:
        return
    spec = spec_of(d, track)
    if spec is None:
        return
    waited = d.now - track.started
    outcome = verdict(msg.result, spec.on_failure, waited=waited, failure_wait=spec.failure_wait)
    if outcome is Verdict.SUCCEED:
        _end(d, track, TaskState.SUCCEEDED, "its dependencies succeeded")
    elif outcome is Verdict.FAIL:
        _end(d, track, TaskState.FAILED, msg.detail)
    else:
        reason = msg.detail
        if msg.result is Result.FAILED:
            left = spec.failure_wait - waited
            reason = f"{msg.detail}; waiting {left} more for a rerun"
        if reason != track.waiting_for:  # said once, not at every check
            track.waiting_for = reason
            d.write(track, {TaskState.RUNNING}, TaskState.RUNNING, {"state_reason": reason[:1024]})
            d.w.events.append(d.event(track, None, InstanceEventKind.WAITING, reason))
        d.fx.timer(_next_look(d, track, spec, waited), AttemptCheck(Check.DEPENDENCY, track.ti_id))


def kill(d: Decider, track: Track) -> None:
    """Nothing runs anywhere: the attempt ends KILLED in this batch."""
    _end(d, track, TaskState.KILLED, "stopped while waiting for its dependencies")


def _end(d: Decider, track: Track, state: TaskState, reason: str) -> None:
    values: TaskValues = {"end_time": d.now, "state_reason": reason[:1024]}
    if d.write(track, {TaskState.SUBMITTED, TaskState.RUNNING}, state, values):
        d.set_state(track, state, reason)
        d.apply(d.st.execution.task_state(track.task, state, d.now))


def _timed_out(d: Decider, track: Track) -> bool:
    task = d.st.dag.tasks[track.task]
    if track.started is None or task.timeout <= timedelta(0) or not task.timeout_strategy.kills:
        return False
    return d.now - track.started >= task.timeout


def _next_look(d: Decider, track: Track, spec: DependentSpec, waited: timedelta) -> float:
    """The check interval, or sooner if the timeout or the failure wait ends before it."""
    delay = spec.check_interval
    task = d.st.dag.tasks[track.task]
    if task.timeout > timedelta(0) and task.timeout_strategy.kills:
        delay = min(delay, task.timeout - waited)
    if spec.failure_wait > waited:
        delay = min(delay, spec.failure_wait - waited)
    return max(delay.total_seconds(), 0.0)
