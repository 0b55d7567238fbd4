"""Runs through the real engine (runner, dispatcher, store, failover) with fake workers.

No network and no sleeps: each test drives the fake workers and awaits what the engine writes.
What must hold throughout (ARCHITECTURE.md §4): no attempt runs twice, none is lost. An attempt is
a (task instance, attempt) pair; :func:`ran_once` checks that each went to exactly one worker.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import replace
from datetime import timedelta

from dsched.states import TaskState, WorkflowState
from dsched_server.core.controls import ControlKind
from dsched_server.core.records import TaskInstanceRecord
from dsched_server.engine.dispatcher import DISPATCH_TIMEOUT_S
from dsched_server.protocol.ack import AckDecision
from dsched_server.protocol.event import TaskEventType
from dsched_server.store.instances import get_instance
from tests.fakes.worker import FakeWorker, FakeWorkers, Mode
from tests.unit.core.specs import task, workflow
from tests.unit.engine.conftest import Engine, World


def ran_once(workers: FakeWorkers) -> None:
    """Every attempt any worker accepted was accepted by that worker only."""
    held = Counter(key for w in workers.by_address.values() for key in w.attempts)
    assert [key for key, n in held.items() if n > 1] == []


async def one_task_running_on(engine: Engine, mode: Mode = Mode.ACCEPT) -> tuple[FakeWorker, int]:
    """A run of one task ``a`` sent to a new worker answering in ``mode``, which has it now.
    Returns the worker and the instance id."""
    worker = await engine.workers.add(mode=mode)
    instance_id = await engine.start_run(workflow(task("a")))
    await worker.holding(1)
    return worker, instance_id


async def running_when_its_master_crashed(world: World) -> tuple[FakeWorker, int]:
    """A run of one task ``a`` that a master started and dispatched; the worker runs it; the
    master then crashed. Returns the worker and the instance id."""
    crashed = await world.master()
    worker = await world.workers.add()
    instance_id = await crashed.start_run(workflow(task("a")))
    await worker.holding(1)
    await worker.running("a")
    await crashed.crash()
    return worker, instance_id


def summary(attempts: list[TaskInstanceRecord]) -> list[tuple[str, int, TaskState, bool]]:
    return [(a.task_name, a.attempt, a.state, a.valid) for a in attempts]


async def test_a_small_dag_runs_to_succeeded(engine: Engine) -> None:
    worker = await engine.workers.add()
    instance_id = await engine.start_run(workflow(task("a"), task("b", "a"), task("c", "a")))

    await worker.holding(1)
    await worker.running("a")
    ack = await worker.succeed("a")
    assert ack.decision is AckDecision.ACCEPTED
    await worker.holding(3)
    await worker.succeed("b")
    await worker.succeed("c")

    instance = await engine.until(instance_id)
    assert instance.state is WorkflowState.SUCCEEDED
    attempts = await engine.attempts(instance_id)
    assert sorted(summary(attempts)) == [
        ("a", 1, TaskState.SUCCEEDED, True),
        ("b", 1, TaskState.SUCCEEDED, True),
        ("c", 1, TaskState.SUCCEEDED, True),
    ]
    assert {(a.host, a.worker_epoch) for a in attempts} == {(worker.address, worker.epoch)}
    ran_once(engine.workers)


async def test_a_repeated_event_is_a_duplicate(engine: Engine) -> None:
    worker = await engine.workers.add()
    instance_id = await engine.start_run(workflow(task("a"), task("b", "a")))
    await worker.holding(1)
    attempt = worker.attempt("a")
    assert (await worker.succeed("a")).decision is AckDecision.ACCEPTED
    again = await worker.report(attempt, TaskEventType.SUCCEEDED)
    assert again.decision in (AckDecision.DUPLICATE, AckDecision.REJECTED_STALE)
    await worker.holding(2)
    await worker.succeed("b")
    assert (await engine.until(instance_id)).state is WorkflowState.SUCCEEDED


async def test_a_failed_task_is_retried_then_succeeds(engine: Engine) -> None:
    worker = await engine.workers.add()
    instance_id = await engine.start_run(workflow(task("a", retries=2), task("b", "a")))
    await worker.holding(1)
    await worker.fail("a", exit_code=3)
    await worker.holding(2)
    await worker.succeed("a")
    await worker.holding(3)
    await worker.succeed("b")

    assert (await engine.until(instance_id)).state is WorkflowState.SUCCEEDED
    attempts = await engine.attempts(instance_id)
    assert summary(attempts) == [
        ("a", 1, TaskState.FAILED, False),  # its retry replaces it
        ("a", 2, TaskState.SUCCEEDED, True),
        ("b", 1, TaskState.SUCCEEDED, True),
    ]
    assert attempts[0].exit_code == 3
    ran_once(engine.workers)


async def test_a_failure_without_retries_fails_the_run_and_skips_its_successors(
    engine: Engine,
) -> None:
    worker = await engine.workers.add()
    instance_id = await engine.start_run(workflow(task("a"), task("b", "a")))
    await worker.holding(1)
    await worker.fail("a")
    assert (await engine.until(instance_id)).state is WorkflowState.FAILED
    assert summary(await engine.attempts(instance_id)) == [("a", 1, TaskState.FAILED, True)]
    assert len(worker.attempts) == 1  # b never went anywhere


async def test_stop_kills_the_running_attempt_and_starts_nothing_more(engine: Engine) -> None:
    worker = await engine.workers.add()
    instance_id = await engine.start_run(workflow(task("a"), task("b", "a")))
    await worker.holding(1)
    await worker.running("a")

    await engine.control(instance_id, ControlKind.STOP)
    instance = await engine.until(instance_id)
    assert instance.state is WorkflowState.STOPPED
    kills = [c for c in engine.workers.calls if c.method == "kill"]
    assert [(c.address, c.task_instance_ids) for c in kills] == [
        (worker.address, (worker.attempts[next(iter(worker.attempts))].spec.task_instance_id,))
    ]
    assert summary(await engine.attempts(instance_id)) == [("a", 1, TaskState.KILLED, True)]
    assert len(worker.attempts) == 1


async def test_a_kill_left_unanswered_is_sent_again(engine: Engine) -> None:
    worker, instance_id = await one_task_running_on(engine)
    await worker.running("a")
    worker.unanswered["kill"] = 2  # a network blip: the worker is alive and runs it

    await engine.control(instance_id, ControlKind.STOP)
    assert (await engine.until(instance_id)).state is WorkflowState.STOPPED
    assert summary(await engine.attempts(instance_id)) == [("a", 1, TaskState.KILLED, True)]
    assert [c.method for c in engine.workers.calls].count("kill") == 3


async def test_pause_lets_the_running_task_finish_and_resume_runs_the_rest(
    engine: Engine,
) -> None:
    worker = await engine.workers.add()
    instance_id = await engine.start_run(workflow(task("a"), task("b", "a")))
    await worker.holding(1)
    await worker.running("a")

    paused = await engine.control(instance_id, ControlKind.PAUSE)
    assert paused.state is WorkflowState.READY_PAUSE
    await worker.succeed("a")
    assert (await engine.until(instance_id)).state is WorkflowState.PAUSED
    assert len(worker.attempts) == 1  # b did not start
    assert [c.method for c in engine.workers.calls if c.method == "kill"] == []

    await engine.resume(instance_id)
    await worker.holding(2)
    await worker.succeed("b")
    await engine.until(instance_id, lambda i: i.state is WorkflowState.SUCCEEDED)
    assert summary(await engine.attempts(instance_id)) == [
        ("a", 1, TaskState.SUCCEEDED, True),
        ("b", 1, TaskState.SUCCEEDED, True),
    ]
    ran_once(engine.workers)


async def test_stop_while_the_dispatch_has_not_answered_kills_the_attempt_there(
    engine: Engine,
) -> None:
    slow = await engine.workers.add(mode=Mode.HOLD)
    instance_id = await engine.start_run(workflow(task("a"), task("b", "a")))
    await slow.holding(1)  # it has the attempt; its answer is still on the way

    stopping = asyncio.ensure_future(engine.control(instance_id, ControlKind.STOP))
    await engine.workers.wait_for(lambda: "kill" in [c.method for c in engine.workers.calls])
    slow.release()
    await stopping
    assert (await engine.until(instance_id)).state is WorkflowState.STOPPED
    assert summary(await engine.attempts(instance_id)) == [("a", 1, TaskState.KILLED, True)]
    assert slow.ended("a") == [TaskEventType.KILLED]
    assert len(engine.workers.dispatched()) == 1  # b never went out


async def test_a_lost_answer_is_resent_to_the_same_worker_which_runs_it_once(
    engine: Engine,
) -> None:
    first, instance_id = await one_task_running_on(engine, mode=Mode.LOSE_ANSWER)
    await engine.workers.add()  # another worker is there, and must not get it
    await engine.workers.wait_for(lambda: len(engine.workers.dispatched()) >= 2)
    first.mode = Mode.ACCEPT
    [attempt] = await engine.tasks_until(instance_id, lambda ts: ts[0].host != "")
    assert attempt.host == first.address
    await first.succeed("a")
    assert (await engine.until(instance_id)).state is WorkflowState.SUCCEEDED
    ran_once(engine.workers)


async def test_an_event_that_overtakes_the_dispatch_answer_counts_from_that_worker_only(
    engine: Engine,
) -> None:
    slow, instance_id = await one_task_running_on(engine, mode=Mode.HOLD)
    other = await engine.workers.add()
    # Another worker reporting the attempt is not the one it was sent to: refused.
    forged = await other.report(slow.attempt("a"), TaskEventType.RUNNING)
    assert forged.decision is not AckDecision.ACCEPTED
    # The task started before the dispatch answer arrived: its worker's event counts.
    assert (await slow.running("a")).decision is AckDecision.ACCEPTED
    [attempt] = await engine.attempts(instance_id)
    assert (attempt.state, attempt.host) == (TaskState.RUNNING, slow.address)
    slow.release()
    await slow.succeed("a")
    assert (await engine.until(instance_id)).state is WorkflowState.SUCCEEDED


async def test_a_worker_that_dies_before_answering_a_dispatch_is_replaced(engine: Engine) -> None:
    doomed, instance_id = await one_task_running_on(engine, mode=Mode.HOLD)
    other = await engine.workers.add()
    await doomed.leave(listening=False)  # its call fails; it fenced itself, killing the attempt
    await other.holding(1)
    await other.succeed("a")
    assert (await engine.until(instance_id)).state is WorkflowState.SUCCEEDED
    [attempt] = await engine.attempts(instance_id)
    assert (attempt.attempt, attempt.host) == (1, other.address)  # never recorded on doomed


async def test_a_full_worker_gets_the_attempt_once_it_has_room(engine: Engine) -> None:
    worker = await engine.workers.add(mode=Mode.FULL)
    instance_id = await engine.start_run(workflow(task("a")))
    await engine.workers.wait_for(lambda: len(engine.workers.dispatched()) >= 2)
    assert worker.attempts == {}
    worker.mode = Mode.ACCEPT
    await worker.holding(1)
    await worker.succeed("a")
    assert (await engine.until(instance_id)).state is WorkflowState.SUCCEEDED


async def test_a_task_whose_group_has_no_worker_says_why_it_waits(engine: Engine) -> None:
    await engine.workers.add("default")
    instance_id = await engine.start_run(workflow(task("a")), worker_group="gpu")
    [waiting] = await engine.tasks_until(instance_id, lambda ts: bool(ts and ts[0].state_reason))
    assert waiting.state is TaskState.SUBMITTED
    assert "no live worker in group 'gpu'" in waiting.state_reason

    gpu = await engine.workers.add("gpu")
    await gpu.holding(1)
    await gpu.succeed("a")
    assert (await engine.until(instance_id)).state is WorkflowState.SUCCEEDED


async def test_the_dispatch_timeout_fails_an_attempt_no_worker_took(engine: Engine) -> None:
    instance_id = await engine.start_run(
        workflow(task("a")), worker_group="gpu", dispatch_timeout=timedelta(milliseconds=50)
    )
    instance = await engine.until(instance_id)
    assert instance.state is WorkflowState.FAILED
    [attempt] = await engine.attempts(instance_id)
    assert attempt.state is TaskState.FAILED
    assert "no live worker in group 'gpu'" in attempt.state_reason
    assert engine.workers.calls == []


async def test_the_dispatch_timeout_also_fails_an_attempt_every_worker_rejects(
    engine: Engine,
) -> None:
    full, instance_id = await _run_with_a_100_ms_dispatch_timeout(engine, Mode.FULL)
    await _failed_for_want_of_a_worker(engine, instance_id, full)


async def test_a_dispatch_timeout_that_meets_a_send_under_way_fails_soon_after_its_rejection(
    engine: Engine,
) -> None:
    # The timeout fires while the worker has not answered yet: the attempt may still be
    # accepted, so it is looked at again, after the run's own timeout, not the send's 10 s.
    full, instance_id = await _run_with_a_100_ms_dispatch_timeout(engine, Mode.FULL_HELD)
    await asyncio.sleep(0.3)  # the timeout passes while the dispatch waits for its answer
    assert [c.method for c in engine.workers.calls] == ["dispatch"]

    full.release()  # rejected
    released = time.monotonic()
    await _failed_for_want_of_a_worker(engine, instance_id, full)
    assert time.monotonic() - released < DISPATCH_TIMEOUT_S / 2


async def _run_with_a_100_ms_dispatch_timeout(engine: Engine, mode: Mode) -> tuple[FakeWorker, int]:
    """One worker answering dispatches as ``mode`` says, and a one-task run started."""
    worker = await engine.workers.add(mode=mode)
    instance_id = await engine.start_run(
        workflow(task("a")), dispatch_timeout=timedelta(milliseconds=100)
    )
    return worker, instance_id


async def _failed_for_want_of_a_worker(
    engine: Engine, instance_id: int, worker: FakeWorker
) -> None:
    assert (await engine.until(instance_id)).state is WorkflowState.FAILED
    [attempt] = await engine.attempts(instance_id)
    assert attempt.state is TaskState.FAILED
    assert "no worker took it within the dispatch timeout" in attempt.state_reason
    assert worker.attempts == {}


async def test_a_worker_that_is_gone_has_its_attempt_run_again_elsewhere(engine: Engine) -> None:
    first = await engine.workers.add()
    instance_id = await engine.start_run(workflow(task("a"), task("b", "a")))
    await first.holding(1)
    await first.running("a")
    second = await engine.workers.add()

    await first.leave(listening=False)  # its port is closed: known dead at once
    await second.holding(1)
    await second.succeed("a")
    await second.holding(2)
    await second.succeed("b")

    assert (await engine.until(instance_id)).state is WorkflowState.SUCCEEDED
    attempts = await engine.attempts(instance_id)
    assert summary(attempts) == [
        ("a", 1, TaskState.NEED_FAULT_TOLERANCE, False),
        ("a", 2, TaskState.SUCCEEDED, True),
        ("b", 1, TaskState.SUCCEEDED, True),
    ]
    assert attempts[0].host == first.address and attempts[1].host == second.address
    assert attempts[1].retry_times == 0  # a failover is not a user retry
    ran_once(engine.workers)


async def test_a_worker_that_left_but_may_live_gets_the_failover_delay(engine: Engine) -> None:
    first, instance_id = await one_task_running_on(engine)
    second = await engine.workers.add()

    await first.leave(listening=True)  # something still accepts at its address: not proof
    await second.holding(1)
    assert ("refused", first.address) in [(c.method, c.address) for c in engine.workers.calls]
    # Its first attempt stays unfinished on the cut-off worker, which fences itself; the new
    # attempt is the only valid one.
    await second.succeed("a")
    assert (await engine.until(instance_id)).state is WorkflowState.SUCCEEDED
    assert [a.valid for a in await engine.attempts(instance_id)] == [False, True]
    late = await first.succeed("a")
    assert late.decision is not AckDecision.ACCEPTED
    ran_once(engine.workers)


async def test_a_new_incarnation_at_the_same_address_fails_the_old_ones_attempts_over(
    engine: Engine,
) -> None:
    old, instance_id = await one_task_running_on(engine)
    await old.running("a")
    await old.leave(listening=True)
    new = await engine.workers.add(address=old.address)  # restarted: a newer epoch
    await new.holding(1)
    await new.succeed("a")
    assert (await engine.until(instance_id)).state is WorkflowState.SUCCEEDED
    attempts = await engine.attempts(instance_id)
    assert [(a.attempt, a.worker_epoch, a.valid) for a in attempts] == [
        (1, old.epoch, False),
        (2, new.epoch, True),
    ]


async def test_a_master_that_crashed_is_taken_over_without_running_anything_twice(
    world: World,
) -> None:
    crashed = await world.master()
    worker = await world.workers.add()
    instance_id = await crashed.start_run(workflow(task("a"), task("b"), task("c", "a", "b")))
    await worker.holding(2)
    await worker.running("a")
    await worker.succeed("b")
    await crashed.crash()

    successor = await world.master()  # its failover finds the dead epoch's instance
    instance = await successor.until(instance_id, lambda i: i.epoch == successor.epoch)
    # The attempt still running on its live worker is taken over, not run again.
    await world.workers.wait_for(
        lambda: worker.attempt("a").owner_address == successor.services.cluster_address
    )
    assert (await worker.succeed("a")).decision is AckDecision.ACCEPTED
    await worker.holding(3)
    await worker.succeed("c")
    instance = await successor.until(instance_id)
    assert instance.state is WorkflowState.SUCCEEDED
    assert sorted(summary(await successor.attempts(instance_id))) == [
        ("a", 1, TaskState.SUCCEEDED, True),
        ("b", 1, TaskState.SUCCEEDED, True),
        ("c", 1, TaskState.SUCCEEDED, True),
    ]
    ran_once(world.workers)


async def test_a_take_over_left_unanswered_is_asked_again_not_run_twice(world: World) -> None:
    worker, instance_id = await running_when_its_master_crashed(world)
    worker.unanswered["take_over"] = 2  # a network blip: the worker is alive and has it

    successor = await world.master()
    await world.workers.wait_for(
        lambda: worker.attempt("a").owner_address == successor.services.cluster_address
    )
    assert (await worker.succeed("a")).decision is AckDecision.ACCEPTED
    assert (await successor.until(instance_id)).state is WorkflowState.SUCCEEDED
    assert summary(await successor.attempts(instance_id)) == [("a", 1, TaskState.SUCCEEDED, True)]
    assert len(worker.attempts) == 1
    ran_once(world.workers)


async def test_an_adopted_attempt_its_worker_lost_is_run_again(world: World) -> None:
    worker, instance_id = await running_when_its_master_crashed(world)
    worker.attempts.clear()  # the worker restarted its process table: the attempt is lost

    successor = await world.master()
    await worker.holding(1)
    await worker.succeed("a")
    assert (await successor.until(instance_id)).state is WorkflowState.SUCCEEDED
    attempts = await successor.attempts(instance_id)
    assert [(a.attempt, a.state, a.valid) for a in attempts] == [
        (1, TaskState.NEED_FAULT_TOLERANCE, False),
        (2, TaskState.SUCCEEDED, True),
    ]


async def test_a_first_starts_runner_holds_the_instance_as_stored(engine: Engine) -> None:
    """A START's claim builds the runner from the record it read before the claim and what the
    claim wrote, without reading the instance again: that record is the stored one."""
    _worker, instance_id = await one_task_running_on(engine)
    runner = engine.runners.get(instance_id)
    assert runner is not None
    held = runner.state.instance
    async with engine.db.read() as conn:
        stored = await get_instance(conn, instance_id)
    assert held.state is WorkflowState.RUNNING
    assert held == replace(stored, state=held.state)  # the runner's own later moves aside
