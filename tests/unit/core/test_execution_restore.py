"""Execution built from stored attempts: failover, resume after pause, recover-failed."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta

from dsched.options import FailureStrategy, TaskDependType
from dsched.spec import WorkflowSpec
from dsched.states import TaskState, WorkflowState
from dsched_server.core.dag import Dag
from dsched_server.core.execution import (
    Adopt,
    Cancel,
    Create,
    Execution,
    Finish,
    Kill,
    Redispatch,
    ScheduleRetry,
)

from .driver import T0, Attempt, Driver
from .specs import task, workflow

W, T = WorkflowState, TaskState
CONTINUE, END = FailureStrategy.CONTINUE, FailureStrategy.END
SEC = timedelta(seconds=1)
ZERO = timedelta(0)


def restore(
    spec: WorkflowSpec,
    store: Sequence[Attempt],
    *,
    last: Mapping[str, int] | None = None,
    phase: WorkflowState = W.RUNNING,
    strategy: FailureStrategy = CONTINUE,
) -> Driver:
    """An Execution restored from ``store`` (its valid attempts), started at ``T0``."""
    dag = Dag(spec)
    last_attempts: dict[str, int] = {}
    for a in store:
        last_attempts[a.task] = max(last_attempts.get(a.task, 0), a.attempt)
    last_attempts.update(last or {})
    views = [a for a in store if a.valid]
    scope = dag.scope([], TaskDependType.TASK_POST)
    ex = Execution.restore(dag, scope, strategy, views, last_attempts, phase=phase)
    d = Driver(ex, now=T0, store=store)
    d.start()
    return d


# ------------------------------------------------------------------------------- failover restore


def test_restore_resumes_every_kind_of_stored_attempt() -> None:
    spec = workflow(
        task("a"),
        task("b", "a"),
        task("c"),
        task("d"),
        task("e", retries=2, retry_interval=60 * SEC),
        task("g", retries=1, retry_interval=10 * SEC),
        task("h", retries=1, retry_interval=60 * SEC),
        task("p"),
        task("q", "a"),
    )
    store = [
        Attempt(1, "a", 1, 0, T.SUCCEEDED, end_time=T0 - 90 * SEC),
        Attempt(2, "b", 1, 0, T.SUBMITTED),
        Attempt(3, "c", 1, 0, T.RUNNING),
        Attempt(4, "d", 1, 0, T.DISPATCHED),
        Attempt(5, "e", 1, 0, T.FAILED, end_time=T0 - 20 * SEC),
        Attempt(6, "g", 1, 0, T.FAILED, end_time=T0 - 60 * SEC),
        Attempt(7, "h", 1, 0, T.FAILED, end_time=None),
        Attempt(8, "p", 2, 0, T.PAUSED, end_time=T0 - 5 * SEC),
    ]
    d = restore(spec, store, last={"p": 5})
    assert d.actions == [  # in topological order, then the releases
        Adopt("c", 3),
        Adopt("d", 4),
        ScheduleRetry("e", 40 * SEC),  # what is left of the interval since the failure
        ScheduleRetry("g", ZERO),  # the interval already elapsed
        ScheduleRetry("h", 60 * SEC),  # no end time: the whole interval
        Redispatch("b", 2),
        Create("p", 6, 0, ZERO),  # above every number ever used, superseded ones included
        Create("q", 1, 0, ZERO),  # a succeeded before the crash; its other downstream never started
    ]
    assert d.state("a") is T.SUCCEEDED
    for name in ("e", "g", "h"):
        assert d.fire_retry(name)[0] == Create(name, 2, 1, ZERO)
    d.complete("b", "c", "d", "e", "g", "h", "p", "q")
    assert d.finish.state is W.SUCCEEDED
    assert d.creates("a") == []


def test_restore_never_waits_longer_than_the_retry_interval() -> None:
    # The stored end time may come from another host's clock; one running ahead must not stretch
    # the wait beyond the interval.
    spec = workflow(task("a", retries=1, retry_interval=60 * SEC))
    d = restore(spec, [Attempt(1, "a", 1, 0, T.FAILED, end_time=T0 + timedelta(hours=1))])
    assert d.actions == [ScheduleRetry("a", 60 * SEC)]


def test_restore_of_a_final_failure_finishes_failed_without_its_downstream() -> None:
    spec = workflow(task("a", retries=1), task("b", "a"))
    store = [Attempt(1, "a", 1, 0, T.FAILED), Attempt(2, "a", 2, 1, T.FAILED, end_time=T0)]
    d = restore(spec, store)
    assert d.actions == [Finish(W.FAILED, "task a failed")]


def test_restore_of_a_killed_attempt_is_a_final_failure() -> None:
    d = restore(workflow(task("a", retries=3)), [Attempt(1, "a", 1, 0, T.KILLED)])
    assert d.actions == [Finish(W.FAILED, "task a failed")]


def test_restore_of_a_forced_success_releases_downstream() -> None:
    d = restore(workflow(task("a"), task("b", "a")), [Attempt(1, "a", 1, 0, T.FORCED_SUCCESS)])
    assert d.actions == [Create("b", 1, 0, ZERO)]


def test_restore_of_a_finished_run_finishes_at_once() -> None:
    store = [Attempt(1, "a", 1, 0, T.SUCCEEDED), Attempt(2, "b", 1, 0, T.SUCCEEDED)]
    d = restore(workflow(task("a"), task("b", "a")), store)
    assert d.actions == [Finish(W.SUCCEEDED, "")]


def test_a_failover_mid_run_carries_on_where_it_stopped() -> None:
    first = Driver.fresh(workflow(task("a"), task("b"), task("c", "a", "b"), task("z", "c")))
    first.complete("a")
    first.run("b")
    second = first.restored(later=30 * SEC)
    assert second.actions == [Adopt("b", first.attempt("b").id)]
    assert second.complete("b") == [Create("c", 1, 0, ZERO)]
    second.complete("c", "z")
    assert second.finish.state is W.SUCCEEDED
    assert [c.task for c in second.creates()] == ["c", "z"]


# ------------------------------------------------------------------------------- restore in a phase


def test_restore_while_stopping_cancels_queued_and_kills_running() -> None:
    # A master died after the user's stop was persisted (READY_STOP) but before it was carried out.
    spec = workflow(task("a"), task("b"), task("c", retries=2), task("d", "a"))
    store = [
        Attempt(1, "a", 1, 0, T.SUBMITTED),
        Attempt(2, "b", 1, 0, T.RUNNING),
        Attempt(3, "c", 1, 0, T.FAILED, end_time=T0),
    ]
    d = restore(spec, store, phase=W.READY_STOP)
    assert not d.of_type(Redispatch)
    assert not d.of_type(ScheduleRetry)
    assert not d.creates()
    assert Cancel("a", 1, T.KILLED) in d.actions
    assert Kill("b", 2) in d.actions
    assert d.killed("b") == [Finish(W.STOPPED, "stopped by user")]


def test_restore_while_pausing_cancels_queued_and_lets_running_finish() -> None:
    spec = workflow(task("a"), task("b"), task("c", retries=2), task("d", "b"))
    store = [
        Attempt(1, "a", 1, 0, T.SUBMITTED),
        Attempt(2, "b", 1, 0, T.RUNNING),
        Attempt(3, "c", 1, 0, T.FAILED, end_time=T0),
    ]
    d = restore(spec, store, phase=W.READY_PAUSE)
    assert Cancel("a", 1, T.PAUSED) in d.actions
    assert Adopt("b", 2) in d.actions
    assert not d.of_type(Kill)
    assert not d.of_type(Redispatch)
    assert not d.of_type(ScheduleRetry)  # the retry happens on resume
    assert d.succeed("b") == [Finish(W.PAUSED, "paused by user")]
    assert not d.creates()


def test_restore_after_an_end_failure_finishes_winding_down() -> None:
    # The failure was persisted but the master died before its kills and cancels went out.
    spec = workflow(task("a"), task("b"), task("c"), task("after_c", "c"))
    store = [
        Attempt(1, "a", 1, 0, T.FAILED, end_time=T0),
        Attempt(2, "b", 1, 0, T.SUBMITTED),
        Attempt(3, "c", 1, 0, T.RUNNING),
    ]
    d = restore(spec, store, strategy=END)
    assert Cancel("b", 2, T.KILLED) in d.actions
    assert Kill("c", 3) in d.actions
    assert not d.of_type(Redispatch)
    assert d.succeed("c") == [Finish(W.FAILED, "task a failed")]
    assert not d.creates()


# ------------------------------------------------------------------------------- resume after pause


def test_resume_after_pause_completes_the_run() -> None:
    first = Driver.fresh(workflow(task("a"), task("b"), task("c", "a", "b"), task("d", "c")))
    first.run("a")
    first.pause()  # b was queued: PAUSED
    first.succeed("a")
    assert first.finish.state is W.PAUSED

    second = first.restored(later=timedelta(hours=2))
    # b is re-created as a new attempt; a is kept; c waits for b
    assert second.actions == [Create("b", 2, 0, ZERO)]
    assert second.complete("b") == [Create("c", 1, 0, ZERO)]
    second.complete("c", "d")
    assert second.finish == Finish(W.SUCCEEDED, "")
    assert [a.state for a in second.attempts("b")] == [T.PAUSED, T.SUCCEEDED]
    assert len(second.attempts("a")) == 1


def test_resume_retries_a_task_that_failed_while_pausing() -> None:
    first = Driver.fresh(workflow(task("a", retries=1, retry_interval=60 * SEC), task("b", "a")))
    first.run("a")
    first.pause()
    first.fail("a")
    assert first.finish.state is W.PAUSED

    second = first.restored(later=15 * SEC)
    assert second.actions == [ScheduleRetry("a", 45 * SEC)]
    assert second.fire_retry("a") == [Create("a", 2, 1, ZERO)]
    second.complete("a", "b")
    assert second.finish.state is W.SUCCEEDED


def test_pause_and_resume_do_not_reset_the_retry_budget() -> None:
    # retries=1 allows two attempts in all. The retry attempt is paused while queued and re-created
    # on resume: it is still the retry, so its failure is final.
    first = Driver.fresh(workflow(task("a", retries=1)))
    first.fail("a")
    first.fire_retry("a")
    assert first.attempt("a").retry_times == 1
    first.pause()
    assert first.finish.state is W.PAUSED

    second = first.restored()
    assert second.actions == [Create("a", 3, 1, ZERO)]
    assert second.fail("a") == [Finish(W.FAILED, "task a failed")]
    assert not second.of_type(ScheduleRetry)


def test_pause_resume_cycles_converge() -> None:
    d = Driver.fresh(workflow(task("a"), task("b"), task("c", "a"), task("e", "c", "b")))
    rounds = 0
    while True:
        if not d.live():
            break
        name = sorted(d.live())[0]
        d.run(name)
        d.pause()
        d.succeed(name)
        if d.finish.state is W.SUCCEEDED:
            break
        assert d.finish.state is W.PAUSED
        d = d.restored()
        rounds += 1
    assert d.finish.state is W.SUCCEEDED
    assert rounds >= 3
    for name in "abce":
        numbers = [a.attempt for a in d.attempts(name)]
        assert numbers == sorted(set(numbers))


# ------------------------------------------------------------------------------- recover failed


def test_recover_failed_reruns_the_failed_task_and_its_downstream() -> None:
    first = Driver.fresh(workflow(task("a"), task("b", "a"), task("c", "b"), task("ok")))
    first.complete("ok")
    first.fail("a")
    assert first.finish == Finish(W.FAILED, "task a failed")

    first.invalidate(T.FAILED, T.KILLED)  # what the store does for RECOVER_FAILED
    second = first.restored()
    assert second.actions == [Create("a", 2, 0, ZERO)]
    second.complete("a", "b", "c")
    assert second.finish.state is W.SUCCEEDED
    assert second.creates("ok") == []


def test_recover_after_stop_reruns_killed_and_cancelled_tasks() -> None:
    first = Driver.fresh(workflow(task("a"), task("b"), task("c", "a", "b"), task("done")))
    first.complete("done")
    first.run("a")
    first.stop()
    first.killed("a")
    assert first.finish.state is W.STOPPED
    assert first.attempt("b").state is T.KILLED

    first.invalidate(T.FAILED, T.KILLED)
    second = first.restored()
    assert second.actions == [Create("a", 2, 0, ZERO), Create("b", 2, 0, ZERO)]
    second.complete("a", "b", "c")
    assert second.finish.state is W.SUCCEEDED


def test_recover_under_end_reruns_everything_that_was_killed() -> None:
    first = Driver.fresh(workflow(task("a"), task("b"), task("c", "b")), strategy=END)
    first.run("b")
    first.fail("a")
    first.killed("b")
    assert first.finish.state is W.FAILED

    first.invalidate(T.FAILED, T.KILLED)
    second = first.restored()
    assert {c.task for c in second.creates()} == {"a", "b"}
    second.complete("a", "b", "c")
    assert second.finish.state is W.SUCCEEDED
