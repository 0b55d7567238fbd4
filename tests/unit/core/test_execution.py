"""The per-instance state machine, driven like the engine drives it (see driver.py for the
invariants checked on every step)."""

from __future__ import annotations

import dataclasses
import random
from datetime import timedelta

import pytest

from dsched.options import FailureStrategy, Priority, TaskDependType
from dsched.spec import TaskSpec
from dsched.states import TaskState, WorkflowState
from dsched_server.core.execution import Cancel, Create, Finish, Kill, ScheduleRetry

from .driver import Driver
from .specs import chain, task, workflow

W, T = WorkflowState, TaskState
END = FailureStrategy.END
SEC = timedelta(seconds=1)
ZERO = timedelta(0)


def fan(n: int) -> Driver:
    """src -> b0..b{n-1} -> sink"""
    branches = [task(f"b{i}", "src") for i in range(n)]
    return Driver.fresh(workflow(task("src"), *branches, task("sink", *(b.name for b in branches))))


# ------------------------------------------------------------------------------- success paths


def test_a_chain_runs_in_order_and_succeeds() -> None:
    d = Driver.fresh(workflow(*chain(4)))
    assert d.created() == ["t0"]
    for i in range(3):
        actions = d.complete(f"t{i}")
        assert actions == [Create(f"t{i + 1}", 1, 0, timedelta(0))]
    assert d.complete("t3") == [Finish(W.SUCCEEDED, "")]
    assert d.created() == ["t0", "t1", "t2", "t3"]


def test_roots_are_released_together_in_topological_order() -> None:
    d = Driver.fresh(workflow(task("x"), task("y", "x"), task("a"), task("b")))
    assert d.created() == ["x", "a", "b"]


def test_running_and_dispatch_events_release_nothing() -> None:
    d = Driver.fresh(workflow(*chain(2)))
    assert d.dispatch("t0") == []
    assert d.run("t0") == []
    assert d.created() == ["t0"]


def test_fan_in_releases_the_sink_exactly_once_after_every_branch() -> None:
    d = fan(6)
    d.complete("src")
    assert sorted(d.created()) == ["b0", "b1", "b2", "b3", "b4", "b5", "src"]
    order = [f"b{i}" for i in range(6)]
    random.Random(7).shuffle(order)
    for name in order[:-1]:
        d.run(name)
        assert d.succeed(name) == []
    assert d.complete(order[-1]) == [Create("sink", 1, 0, timedelta(0))]
    assert d.complete("sink") == [Finish(W.SUCCEEDED, "")]
    assert d.created().count("sink") == 1


def test_priorities_do_not_change_what_is_released() -> None:
    plain = [task("a"), task("b"), task("c", "a", "b"), task("d", "a")]
    ranked = [
        dataclasses.replace(t, priority=p)
        for t, p in zip(
            plain, [Priority.LOWEST, Priority.HIGHEST, Priority.HIGH, Priority.LOW], strict=True
        )
    ]
    runs = []
    for tasks in (plain, ranked):
        d = Driver.fresh(workflow(*tasks))
        d.complete("b", "a", "c", "d")
        runs.append((d.created(), d.finish))
    assert runs[0] == runs[1]
    assert runs[0][0] == ["a", "b", "c", "d"]  # c and d both become ready when a succeeds


def test_create_carries_the_task_delay_and_the_attempt_waits_in_delay_execution() -> None:
    d = Driver.fresh(workflow(task("a", delay=90 * SEC)))
    assert d.creates() == [Create("a", 1, 0, 90 * SEC)]
    assert d.state("a") is T.DELAY_EXECUTION
    d.complete("a")
    assert d.finish.state is W.SUCCEEDED


def test_a_single_task_workflow_finishes_when_its_task_does() -> None:
    d = Driver.fresh(workflow(task("only")))
    assert not d.finished
    d.complete("only")
    assert d.finish == Finish(W.SUCCEEDED, "")
    assert d.ex.finished is W.SUCCEEDED
    assert not d.ex.active


def test_a_long_chain_completes() -> None:
    d = Driver.fresh(workflow(*chain(2000)))
    for i in range(2000):
        d.complete(f"t{i}")
    assert d.finish.state is W.SUCCEEDED
    assert len(d.creates()) == 2000


# ------------------------------------------------------------------------------- failure strategy


def continue_spec() -> list[TaskSpec]:
    #  f -> g -> h        (f fails)
    #  ok1 -> ok2
    #  f, ok1 -> both
    return [
        task("f"),
        task("g", "f"),
        task("h", "g"),
        task("ok1"),
        task("ok2", "ok1"),
        task("both", "f", "ok1"),
    ]


def test_continue_lets_independent_branches_finish_and_blocks_downstream() -> None:
    d = Driver.fresh(workflow(*continue_spec()))
    assert d.fail("f") == []  # ok1 is still queued: not finished yet
    d.complete("ok1")
    assert d.complete("ok2") == [Finish(W.FAILED, "task f failed")]
    assert set(d.created()) == {"f", "ok1", "ok2"}
    assert not d.of_type(Kill) and not d.of_type(Cancel)


def test_continue_finishes_failed_as_soon_as_the_last_branch_ends() -> None:
    d = Driver.fresh(workflow(*continue_spec()))
    d.complete("ok1", "ok2")
    assert d.fail("f") == [Finish(W.FAILED, "task f failed")]


def test_continue_reason_names_the_first_failure() -> None:
    d = Driver.fresh(workflow(task("a"), task("b"), task("c")))
    d.fail("b")
    d.fail("a")
    d.complete("c")
    assert d.finish == Finish(W.FAILED, "task b failed")


def test_end_kills_running_cancels_queued_and_starts_nothing() -> None:
    spec = workflow(task("a"), task("b"), task("c"), task("after_b", "b"), task("after_a", "a"))
    d = Driver.fresh(spec, strategy=END)
    d.run("b")
    actions = d.fail("a")
    b_id, c_id = d.attempt("b").id, d.attempt("c").id
    assert actions == [Kill("b", b_id), Cancel("c", c_id, T.KILLED)]
    assert d.state("c") is T.KILLED
    assert d.killed("b") == [Finish(W.FAILED, "task a failed")]
    assert set(d.created()) == {"a", "b", "c"}


def test_end_keeps_failed_even_if_a_killed_task_succeeds_in_a_race() -> None:
    d = Driver.fresh(workflow(task("a"), task("b"), task("after_b", "b")), strategy=END)
    d.run("b")
    assert d.fail("a") == [Kill("b", d.attempt("b").id)]
    assert d.succeed("b") == [Finish(W.FAILED, "task a failed")]
    assert "after_b" not in d.created()


def test_end_cancels_pending_retries_of_other_tasks() -> None:
    spec = workflow(task("a"), task("flaky", retries=3, retry_interval=60 * SEC))
    d = Driver.fresh(spec, strategy=END)
    d.fail("flaky")
    assert "flaky" in d.retries
    assert d.fail("a") == [Finish(W.FAILED, "task a failed")]
    assert d.fire_retry("flaky") == []
    assert len(d.creates("flaky")) == 1


def test_end_with_nothing_else_active_finishes_at_once() -> None:
    d = Driver.fresh(workflow(*chain(3)), strategy=END)
    assert d.fail("t0") == [Finish(W.FAILED, "task t0 failed")]


# ------------------------------------------------------------------------------- retries


def test_a_task_is_retried_until_it_succeeds() -> None:
    spec = workflow(task("a", retries=2, retry_interval=30 * SEC), task("b", "a"))
    d = Driver.fresh(spec)
    assert d.fail("a") == [ScheduleRetry("a", 30 * SEC)]
    assert d.fire_retry("a") == [Create("a", 2, 1, timedelta(0))]
    assert d.fail("a") == [ScheduleRetry("a", 30 * SEC)]
    assert d.fire_retry("a") == [Create("a", 3, 2, timedelta(0))]
    assert d.complete("a") == [Create("b", 1, 0, timedelta(0))]
    assert [(a.attempt, a.retry_times) for a in d.attempts("a")] == [(1, 0), (2, 1), (3, 2)]
    assert [a.state for a in d.attempts("a")] == [T.FAILED, T.FAILED, T.SUCCEEDED]
    d.complete("b")
    assert d.finish.state is W.SUCCEEDED


def test_a_retry_waits_while_the_instance_counts_as_active() -> None:
    d = Driver.fresh(workflow(task("a", retries=1, retry_interval=30 * SEC)))
    d.fail("a")
    assert d.ex.active
    assert not d.finished


def test_a_retry_keeps_the_task_delay() -> None:
    d = Driver.fresh(workflow(task("a", retries=1, delay=5 * SEC)))
    d.fail("a")
    assert d.fire_retry("a") == [Create("a", 2, 1, 5 * SEC)]


def test_exhausted_retries_are_a_final_failure() -> None:
    spec = workflow(task("a", retries=1, retry_interval=10 * SEC), task("b", "a"))
    d = Driver.fresh(spec)
    d.fail("a")
    d.fire_retry("a")
    assert d.fail("a") == [Finish(W.FAILED, "task a failed")]
    assert len(d.creates("a")) == 2
    assert "b" not in d.created()


def test_a_killed_attempt_is_never_retried() -> None:
    d = Driver.fresh(workflow(task("a", retries=5, retry_interval=SEC), task("b", "a")))
    d.run("a")
    assert d.killed("a") == [Finish(W.FAILED, "task a failed")]
    assert not d.of_type(ScheduleRetry)
    assert len(d.creates("a")) == 1


def test_a_stale_retry_timer_creates_nothing() -> None:
    d = Driver.fresh(workflow(task("a", retries=1)))
    d.fail("a")
    d.fire_retry("a")
    assert d.ex.retry_due("a") == []  # fired a second time
    assert len(d.creates("a")) == 2


# ------------------------------------------------------------------------------- pause


def test_pause_cancels_queued_lets_running_finish_and_releases_nothing() -> None:
    d = Driver.fresh(workflow(task("a"), task("b"), task("c", "a")))
    d.run("a")
    actions = d.pause()
    assert actions == [Cancel("b", d.attempt("b").id, T.PAUSED)]
    assert d.state("b") is T.PAUSED
    assert d.ex.phase is W.READY_PAUSE
    assert not d.of_type(Kill)
    assert d.succeed("a") == [Finish(W.PAUSED, "paused by user")]
    assert "c" not in d.created()


def test_pause_with_nothing_queued_waits_for_running_tasks() -> None:
    d = Driver.fresh(workflow(task("a"), task("b", "a")))
    d.run("a")
    assert d.pause() == []
    assert not d.finished
    d.succeed("a")
    assert d.finish == Finish(W.PAUSED, "paused by user")


def test_pause_ends_succeeded_when_everything_is_done() -> None:
    d = Driver.fresh(workflow(task("a"), task("b")))
    d.complete("a")
    d.run("b")
    d.pause()
    assert d.succeed("b") == [Finish(W.SUCCEEDED, "")]


def test_pause_ends_succeeded_when_only_disabled_tasks_are_left() -> None:
    # Passing a disabled task through starts nothing, so it happens while pausing too.
    d = Driver.fresh(
        workflow(task("a"), task("b", "a", disabled=True), task("c", "b", disabled=True))
    )
    d.run("a")
    d.pause()
    assert d.succeed("a") == [Finish(W.SUCCEEDED, "")]


def test_pause_ends_failed_when_a_task_failed() -> None:
    d = Driver.fresh(workflow(task("a"), task("b")))
    d.run("a")
    d.pause()
    assert d.fail("a") == [Finish(W.FAILED, "task a failed")]


def test_a_failure_with_retries_left_during_pause_is_retried_on_resume_not_now() -> None:
    d = Driver.fresh(workflow(task("a", retries=1, retry_interval=SEC)))
    d.run("a")
    d.pause()
    assert d.fail("a") == [Finish(W.PAUSED, "paused by user")]
    assert not d.retries


def test_pause_drops_an_outstanding_retry() -> None:
    d = Driver.fresh(workflow(task("a", retries=1, retry_interval=60 * SEC)))
    d.fail("a")
    assert d.pause() == [Finish(W.PAUSED, "paused by user")]
    assert d.fire_retry("a") == []
    assert len(d.creates("a")) == 1


def test_pause_is_ignored_twice_and_after_the_end() -> None:
    d = Driver.fresh(workflow(task("a")))
    d.run("a")
    d.pause()
    assert d.pause() == []
    d.succeed("a")
    assert d.pause() == []
    assert d.ex.phase is W.READY_PAUSE
    assert d.finish.state is W.SUCCEEDED


# ------------------------------------------------------------------------------- stop


def test_stop_kills_running_and_cancels_queued() -> None:
    d = Driver.fresh(workflow(task("a"), task("b"), task("c", "a")))
    d.run("a")
    assert d.stop() == [Kill("a", d.attempt("a").id), Cancel("b", d.attempt("b").id, T.KILLED)]
    assert d.ex.phase is W.READY_STOP
    assert d.killed("a") == [Finish(W.STOPPED, "stopped by user")]
    assert "c" not in d.created()


@pytest.mark.parametrize("outcome", [T.SUCCEEDED, T.FAILED, T.KILLED])
def test_stop_ends_stopped_whatever_the_killed_task_reports(outcome: TaskState) -> None:
    d = Driver.fresh(workflow(task("a", retries=3), task("b", "a")))
    d.run("a")
    d.stop()
    assert d.end("a", outcome) == [Finish(W.STOPPED, "stopped by user")]
    assert d.created() == ["a"]
    assert not d.retries


def test_stop_with_nothing_live_finishes_at_once() -> None:
    d = Driver.fresh(workflow(task("a", retries=1, retry_interval=60 * SEC)))
    d.fail("a")
    assert d.stop() == [Finish(W.STOPPED, "stopped by user")]
    assert d.fire_retry("a") == []


def test_stop_during_pause_kills_what_still_runs() -> None:
    d = Driver.fresh(workflow(task("a"), task("b")))
    d.run("a")
    d.pause()
    assert d.stop() == [Kill("a", d.attempt("a").id)]
    assert d.killed("a") == [Finish(W.STOPPED, "stopped by user")]
    assert d.attempt("b").state is T.PAUSED


def test_stop_after_an_end_failure_still_ends_stopped() -> None:
    d = Driver.fresh(workflow(task("a"), task("b")), strategy=END)
    d.run("b")
    d.fail("a")
    d.stop()
    assert d.killed("b") == [Finish(W.STOPPED, "stopped by user")]


def test_stop_is_ignored_twice_and_after_the_end() -> None:
    d = Driver.fresh(workflow(task("a")))
    d.run("a")
    assert len(d.stop()) == 1
    assert d.stop() == []
    d.killed("a")
    assert d.stop() == []
    assert d.finish.state is W.STOPPED


# ------------------------------------------------------------------------------- disabled tasks


def test_a_disabled_task_is_passed_through_and_its_downstream_runs() -> None:
    d = Driver.fresh(workflow(task("a"), task("b", "a", disabled=True), task("c", "b")))
    assert d.complete("a") == [Create("c", 1, 0, timedelta(0))]
    d.complete("c")
    assert d.finish.state is W.SUCCEEDED
    assert "b" not in d.created()


def test_a_chain_of_disabled_roots_passes_at_start() -> None:
    d = Driver.fresh(
        workflow(task("a", disabled=True), task("b", "a", disabled=True), task("c", "b"))
    )
    assert d.created() == ["c"]


def test_a_workflow_of_disabled_tasks_succeeds_without_running_anything() -> None:
    d = Driver.fresh(workflow(task("a", disabled=True), task("b", "a", disabled=True)))
    assert d.actions == [Finish(W.SUCCEEDED, "")]


def test_a_disabled_task_does_not_pass_a_failure_through() -> None:
    d = Driver.fresh(workflow(task("a"), task("b", "a", disabled=True), task("c", "b")))
    assert d.fail("a") == [Finish(W.FAILED, "task a failed")]
    assert d.created() == ["a"]


def test_a_disabled_task_in_a_fan_in_waits_for_the_other_branch() -> None:
    spec = workflow(
        task("a"), task("skip", "a", disabled=True), task("b", "a"), task("z", "skip", "b")
    )
    d = Driver.fresh(spec)
    assert d.complete("a") == [Create("b", 1, 0, timedelta(0))]
    assert d.complete("b") == [Create("z", 1, 0, timedelta(0))]


# ------------------------------------------------------------------------------- scope


def scoped(start: list[str], depend: TaskDependType) -> Driver:
    #  a -> b -> c ;  x -> b
    spec = workflow(task("a"), task("x"), task("b", "a", "x"), task("c", "b"))
    return Driver.fresh(spec, start=start, depend=depend)


def test_task_only_runs_just_the_start_task() -> None:
    d = scoped(["b"], TaskDependType.TASK_ONLY)
    assert d.created() == ["b"]  # upstream out of scope is ignored
    assert d.complete("b") == [Finish(W.SUCCEEDED, "")]


def test_task_post_runs_the_start_task_and_its_descendants() -> None:
    d = scoped(["b"], TaskDependType.TASK_POST)
    assert d.created() == ["b"]
    d.complete("b", "c")
    assert d.created() == ["b", "c"]
    assert d.finish.state is W.SUCCEEDED


def test_task_pre_runs_the_start_task_after_its_ancestors() -> None:
    d = scoped(["b"], TaskDependType.TASK_PRE)
    assert d.created() == ["a", "x"]
    d.complete("a")
    assert d.complete("x") == [Create("b", 1, 0, timedelta(0))]
    assert d.complete("b") == [Finish(W.SUCCEEDED, "")]
    assert "c" not in d.created()


def test_an_out_of_scope_failure_cannot_happen_and_in_scope_failure_fails_the_run() -> None:
    d = scoped(["a"], TaskDependType.TASK_ONLY)
    assert d.fail("a") == [Finish(W.FAILED, "task a failed")]
    assert d.created() == ["a"]


# ------------------------------------------------------------------------------- engine batches


def test_a_stop_in_the_batch_that_created_an_attempt_cancels_it() -> None:
    # The engine creates a batch's attempts after handling all its messages: the stop arrives while
    # b's Create is pending, so b gets an id only afterwards and must not be left queued.
    d = Driver.fresh(workflow(task("a"), task("b", "a")))
    with d.batch():
        d.succeed("a")
        assert d.stop() == []
        assert not d.finished
    b_id = d.attempt("b").id
    assert d.actions[-2:] == [Cancel("b", b_id, T.KILLED), Finish(W.STOPPED, "stopped by user")]
    assert d.state("b") is T.KILLED


def test_a_pause_in_the_batch_that_created_an_attempt_pauses_it() -> None:
    d = Driver.fresh(workflow(task("a"), task("b", "a"), task("c")))
    d.run("c")
    with d.batch():
        d.succeed("a")
        d.pause()
    assert d.state("b") is T.PAUSED
    assert Cancel("b", d.attempt("b").id, T.PAUSED) in d.actions
    assert d.succeed("c") == [Finish(W.PAUSED, "paused by user")]


def test_an_end_failure_in_the_batch_that_created_an_attempt_kills_it() -> None:
    d = Driver.fresh(workflow(task("a"), task("b", "a"), task("x")), strategy=END)
    with d.batch():
        d.succeed("a")
        d.fail("x")
    assert d.state("b") is T.KILLED
    assert d.finish == Finish(W.FAILED, "task x failed")


def test_attempts_created_in_a_quiet_batch_are_left_to_run() -> None:
    d = Driver.fresh(workflow(task("a"), task("b", "a"), task("c", "a")))
    with d.batch():
        d.succeed("a")
    assert d.queued() == {"b", "c"}
    d.complete("b", "c")
    assert d.finish.state is W.SUCCEEDED


# ------------------------------------------------------------------------------- lost attempts


def test_a_lost_attempt_is_replaced_without_using_a_retry() -> None:
    d = Driver.fresh(workflow(task("a", retries=1), task("b", "a")))
    d.fail("a")
    d.fire_retry("a")
    d.run("a")
    assert d.lose("a") == [Create("a", 3, 1, ZERO)]
    assert d.fail("a") == [Finish(W.FAILED, "task a failed")]  # the retry was already used


def test_a_lost_attempt_of_a_task_without_retries_is_replaced() -> None:
    d = Driver.fresh(workflow(task("a"), task("b", "a")))
    d.dispatch("a")
    assert d.lose("a") == [Create("a", 2, 0, ZERO)]
    d.complete("a", "b")
    assert d.finish.state is W.SUCCEEDED


def test_a_lost_attempt_is_not_replaced_while_pausing_and_runs_on_resume() -> None:
    d = Driver.fresh(workflow(task("a"), task("b")))
    d.run("a")
    d.run("b")
    d.pause()
    assert d.lose("a") == []
    assert d.succeed("b") == [Finish(W.PAUSED, "paused by user")]
    resumed = d.restored()
    assert resumed.actions == [Create("a", 2, 0, ZERO)]


def test_a_lost_attempt_while_stopping_ends_the_stop() -> None:
    d = Driver.fresh(workflow(task("a")))
    d.run("a")
    d.stop()
    assert d.lose("a") == [Finish(W.STOPPED, "stopped by user")]


def test_replace_ignores_attempts_that_already_ended() -> None:
    d = Driver.fresh(workflow(task("a"), task("b")))
    d.complete("a")
    assert d.ex.replace("a") == []
    assert d.creates("a") == [Create("a", 1, 0, ZERO)]
