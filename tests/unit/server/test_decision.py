"""The runner's decision with plain values: state and messages in, writes and effects out.

No store, no worker, no network: ``decision.begin`` / ``decision.decide`` are plain functions, and
what they return is checked field by field. (The commit of such a plan is tested against real
databases in tests/integration/store; the whole runner in tests/integration/engine.)
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from dsched.options import CommandType, ReleaseState
from dsched.spec import TaskSpec
from dsched.states import InstanceEventKind, TaskState, WorkflowState
from dsched_server.core.controls import ControlKind
from dsched_server.core.dag import Dag
from dsched_server.core.execution import Execution
from dsched_server.core.records import InstanceRecord, RunOptions, RunScope, WorkflowRecord
from dsched_server.engine import decision
from dsched_server.engine.actions import Plan
from dsched_server.engine.messages import (
    AttemptCheck,
    Check,
    Control,
    Dispatched,
    Message,
    WorkerEvent,
)
from dsched_server.engine.run_state import RunState, Settings
from dsched_server.protocol.ack import Ack, AckDecision
from dsched_server.protocol.event import TaskEvent, TaskEventType
from tests.unit.core.specs import task, workflow

T = TaskState
W = WorkflowState
NOW = datetime(2026, 3, 14, 15, 9, 26, tzinfo=UTC)
SETTINGS = Settings(
    address="m1:1", cluster_address="m1:2", default_group="default", dispatch_timeout=0.0
)


def _state(*, epoch: int = 7, a: TaskSpec | None = None) -> RunState:
    spec = workflow(a or task("a"), task("b", "a"))
    dag = Dag(spec)
    record = WorkflowRecord(
        id=3,
        project="proj",
        project_id=1,
        spec=spec,
        version=1,
        release_state=ReleaseState.ONLINE,
        create_time=NOW,
        update_time=NOW,
    )
    instance = InstanceRecord(
        id=42,
        project="proj",
        workflow="wf",
        workflow_code=3,
        workflow_version=1,
        state=W.RUNNING,
        command_type=CommandType.START,
        options=RunOptions(),
        run_scope=RunScope(),
        host="m1:1",
        epoch=epoch,
        run_times=1,
        submit_time=NOW,
        start_time=NOW,
        end_time=None,
        state_reason="",
        var_pool={},
    )
    execution = Execution.restore(dag, frozenset(dag.order), RunOptions().failure_strategy, [], {})
    posted: list[object] = []
    return RunState.restore(instance, record, execution, [], SETTINGS, posted.append)


def _committed(state: RunState, plan: Plan, *ids: int) -> None:
    """What the runner does once the store committed ``plan`` and gave the new attempts ids."""
    state.bind(list(ids), plan.writes.path)
    plan.effects.bind({-(i + 1): ti for i, ti in enumerate(ids)})


def _event(
    ti: int, kind: TaskEventType, reply: asyncio.Future[Ack], *, epoch: int = 5
) -> WorkerEvent:
    data = TaskEvent(
        event_id=f"e-{ti}-{kind}",
        task_instance_id=ti,
        attempt=1,
        workflow_instance_id=42,
        type=kind,
        event_time=NOW + timedelta(seconds=1),
    )
    return WorkerEvent(data, "w1:1", epoch, reply)


def _taken_and_ended(ti: int, kind: TaskEventType, reply: asyncio.Future[Ack]) -> list[Message]:
    """The dispatcher's news that w1 took the attempt, then w1's report that it ended."""
    return [Dispatched(ti, "w1:1", 5, f"/logs/{ti}"), _event(ti, kind, reply)]


def test_begin_creates_the_ready_task_and_dispatches_it_after_the_commit() -> None:
    state = _state()
    plan = decision.begin(state, NOW, [])
    w, fx = plan.writes, plan.effects
    assert [(c.task_name, c.attempt, c.state) for c in w.creates] == [("a", 1, T.SUBMITTED)]
    assert (w.instance_id, w.epoch, w.state_before, w.path) == (42, 7, W.RUNNING, [])
    assert [(e.task_instance_id, e.task_state, e.message) for e in w.events] == [
        (-1, T.SUBMITTED, "attempt 1 created")
    ]
    (job,) = fx.dispatches
    assert job.spec.task_instance_id == -1  # provisional until the commit
    assert (fx.acks, fx.kills, fx.adopts, w.task_writes, w.end_event) == ([], [], [], {}, None)

    _committed(state, plan, 101)
    assert job.spec.task_instance_id == 101 and job.order[2] == 101
    assert list(state.tracks) == [101]
    assert state.execution.task_instance_of("a") == 101


async def test_dispatch_then_success_coalesce_into_one_checked_write_and_release_b() -> None:
    state = _state()
    _committed(state, decision.begin(state, NOW, []), 101)
    reply: asyncio.Future[Ack] = asyncio.get_running_loop().create_future()
    messages = _taken_and_ended(101, TaskEventType.SUCCEEDED, reply)
    plan = decision.decide(state, NOW, messages)
    write = plan.writes.task_writes[101]
    assert (write.expected, write.via, write.state) == (
        frozenset({T.SUBMITTED}),
        (T.DISPATCHED,),  # SUBMITTED -> DISPATCHED -> SUCCEEDED, each step checked by the store
        T.SUCCEEDED,
    )
    assert write.values["host"] == "w1:1" and write.values["worker_epoch"] == 5
    assert [c.task_name for c in plan.writes.creates] == ["b"]
    assert plan.effects.acks == [(messages[1], Ack(AckDecision.ACCEPTED))]
    assert not reply.done()  # acknowledged only when the executor runs, after the commit


async def test_a_stale_worker_event_is_rejected_and_counted_without_writes() -> None:
    state = _state()
    _committed(state, decision.begin(state, NOW, []), 101)
    reply: asyncio.Future[Ack] = asyncio.get_running_loop().create_future()
    state.tracks[101].host, state.tracks[101].worker_epoch = "w1:1", 5
    msg = _event(101, TaskEventType.RUNNING, reply, epoch=4)  # an older incarnation of the worker
    plan = decision.decide(state, NOW, [msg])
    assert plan.writes.task_writes == {} and plan.writes.events == []
    assert plan.effects.acks == [
        (msg, Ack(AckDecision.REJECTED_STALE, "worker epoch does not own attempt"))
    ]
    assert plan.effects.counters == {"stale_events": 1}


async def test_an_early_event_counts_from_the_incarnation_the_attempt_was_sent_to() -> None:
    # A worker restarted on the address the attempt was sent to resends its predecessor's events
    # under that address: the epoch tells them apart. Until the reply names the incarnation that
    # took the attempt, such an event waits (RETRY_LATER); it is never recorded as the owner's.
    state = _state()
    plan = decision.begin(state, NOW, [])
    _committed(state, plan, 101)
    (job,) = plan.effects.dispatches
    job.sent, job.target, job.target_epoch = True, "w1:1", 5
    loop = asyncio.get_running_loop()
    early: asyncio.Future[Ack] = loop.create_future()
    predecessor = _event(101, TaskEventType.RUNNING, early, epoch=4)
    plan = decision.decide(state, NOW, [predecessor])
    assert plan.writes.task_writes == {}
    assert plan.effects.acks == [
        (predecessor, Ack(AckDecision.RETRY_LATER, "dispatch not recorded yet"))
    ]
    own: asyncio.Future[Ack] = loop.create_future()
    mine = _event(101, TaskEventType.RUNNING, own, epoch=5)
    plan = decision.decide(state, NOW, [mine])
    assert plan.writes.task_writes[101].values["worker_epoch"] == 5
    assert plan.effects.acks == [(mine, Ack(AckDecision.ACCEPTED))]


async def test_a_stop_after_a_success_in_one_batch_cancels_the_new_attempt_and_ends_stopped() -> (
    None
):
    state = _state()
    _committed(state, decision.begin(state, NOW, []), 101)
    loop = asyncio.get_running_loop()
    ack: asyncio.Future[Ack] = loop.create_future()
    stopped: asyncio.Future[InstanceRecord] = loop.create_future()
    messages = [
        *_taken_and_ended(101, TaskEventType.SUCCEEDED, ack),
        Control(ControlKind.STOP, "req-1", "m1:1", stopped),
    ]
    plan = decision.decide(state, NOW, messages, [])
    w = plan.writes
    # b was created by the success and cancelled by the stop in the same batch: its write names it
    # by its provisional id, and the instance goes RUNNING -> READY_STOP -> STOPPED.
    assert [c.task_name for c in w.creates] == ["b"]
    cancelled = w.task_writes[-1]
    assert (cancelled.expected, cancelled.state) == (
        frozenset({T.SUBMITTED, T.DELAY_EXECUTION}),
        T.KILLED,
    )
    assert plan.effects.dispatches[0].cancelled  # never sent
    assert (w.state_before, w.path) == (W.RUNNING, [W.READY_STOP, W.STOPPED])
    assert w.end_event is not None and w.end_event.workflow_state is W.STOPPED
    assert [(a.request_id, a.kind, a.state) for a in w.adds] == [
        ("req-1", ControlKind.STOP, W.READY_STOP)
    ]
    assert plan.effects.replies == [stopped]
    kinds = [(e.task_instance_id, e.task_state, e.kind) for e in w.events]
    assert (-1, T.KILLED, InstanceEventKind.STATE) in kinds


async def test_a_pause_of_a_queued_attempt_ends_paused_through_ready_pause() -> None:
    state = _state()
    _committed(state, decision.begin(state, NOW, []), 101)
    paused: asyncio.Future[InstanceRecord] = asyncio.get_running_loop().create_future()
    plan = decision.decide(state, NOW, [Control(ControlKind.PAUSE, "req-2", "m2:1", paused)], [])
    w = plan.writes
    assert w.task_writes[101].state is T.PAUSED
    assert w.path == [W.READY_PAUSE, W.PAUSED]
    assert w.fields["state_reason"] == "paused by user"
    assert w.end_event is not None and w.end_event.workflow_state is W.PAUSED
    _committed(state, plan)
    assert state.stored_state is W.PAUSED


async def test_a_failed_attempt_with_retries_left_is_retried_when_its_timer_comes_due() -> None:
    state = _state(a=task("a", retries=1, retry_interval=timedelta(minutes=1)))
    _committed(state, decision.begin(state, NOW, []), 101)
    failed: asyncio.Future[Ack] = asyncio.get_running_loop().create_future()
    plan = decision.decide(state, NOW, _taken_and_ended(101, TaskEventType.FAILED, failed))
    assert plan.writes.task_writes[101].state is T.FAILED and plan.writes.creates == []
    retry = AttemptCheck(Check.RETRY, 101)  # keyed by the failed attempt, like every timer
    assert plan.effects.timers == [(60.0, retry)]
    kinds = [(e.task_instance_id, e.kind) for e in plan.writes.events]
    assert (101, InstanceEventKind.RETRY_SCHEDULED) in kinds
    _committed(state, plan)

    plan = decision.decide(state, NOW + timedelta(minutes=1), [retry])
    assert [(c.task_name, c.attempt, c.retry_times) for c in plan.writes.creates] == [("a", 2, 1)]
    _committed(state, plan, 102)
    assert list(state.tracks) == [102]  # the new attempt supersedes the failed one
    again = decision.decide(state, NOW + timedelta(minutes=2), [retry])  # a stale timer
    assert (again.writes.creates, again.writes.task_writes) == ([], {})


def test_the_decision_modules_await_nothing() -> None:
    # Pure means no coroutine anywhere in them: nothing can reach the store or a worker from a
    # function that cannot await (the runner reads what a batch needs before, and commits after).
    import ast
    import inspect

    from dsched_server.engine import actions, control_apply

    for module in (decision, actions, control_apply):
        tree = ast.parse(inspect.getsource(module))
        coroutines = [n.name for n in ast.walk(tree) if isinstance(n, ast.AsyncFunctionDef)]
        awaits = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Await)]
        assert (module.__name__, coroutines, awaits) == (module.__name__, [], [])
