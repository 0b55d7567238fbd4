"""Property-style runs of Execution over random DAGs and random outcomes (seeded, reproducible).

The driver checks the step invariants (creates only after in-scope upstream succeeded, never twice
at once, attempt numbers increasing, exactly one legal Finish); these tests check the outcome.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest

from dsched.options import FailureStrategy, TaskDependType
from dsched.states import TaskState, WorkflowState
from dsched_server.core.execution import Finish

from .driver import QUEUED, Driver
from .specs import task, workflow

W, T = WorkflowState, TaskState
RUNS = 200


def random_driver(rng: random.Random, strategy: FailureStrategy) -> Driver:
    n = rng.randint(1, 30)
    names = [f"n{i}" for i in range(n)]
    specs = [
        task(
            names[i],
            *rng.sample(names[:i], rng.randint(0, min(i, 3))),
            retries=rng.choice([0, 0, 1, 2]),
            disabled=rng.random() < 0.1,
        )
        for i in range(n)
    ]
    rng.shuffle(specs)
    start: list[str] = []
    depend = TaskDependType.TASK_POST
    if rng.random() < 0.3:
        start = rng.sample(names, rng.randint(1, min(3, n)))
        depend = rng.choice(list(TaskDependType))
    return Driver.fresh(workflow(*specs), start=start, depend=depend, strategy=strategy)


def step(d: Driver, rng: random.Random, p_fail: float, p_lose: float = 0.0) -> bool:
    """Advances one random live attempt or due retry; False if there is nothing to advance."""
    choices = [("task", t) for t in sorted(d.live())] + [("retry", t) for t in sorted(d.retries)]
    if not choices:
        return False
    kind, name = rng.choice(choices)
    if kind == "retry":
        d.fire_retry(name)
    elif rng.random() < p_lose:
        d.lose(name)  # its worker died
    elif d.state(name) in QUEUED and rng.random() < 0.4:
        d.run(name)
    else:
        roll = rng.random()
        if roll < p_fail:
            d.fail(name)
        elif roll < p_fail + 0.03:
            d.killed(name)
        else:
            d.succeed(name)
    return True


def fact(d: Driver, rng: random.Random, p: Odds) -> bool:
    """Feeds one random fact (a user pause or stop, or a step); False if nothing could happen."""
    roll = rng.random()
    if roll < p.pause:
        d.pause()
        return True
    if roll < p.pause + p.stop:
        d.stop()
        return True
    return step(d, rng, p.fail, p.lose)


@dataclass(frozen=True)
class Odds:
    fail: float
    pause: float = 0.0
    stop: float = 0.0
    lose: float = 0.0
    failover: float = 0.0


def run_to_end(d: Driver, rng: random.Random, p: Odds) -> Driver:
    """Feeds random facts, sometimes several per engine batch, until the execution finishes; returns
    the driver that finished it (a failover hands the instance to a new one)."""
    for _ in range(10_000):
        if d.finished:
            return d
        if rng.random() < p.failover:
            d = d.restored(phase=d.ex.phase)  # another master restores it in the phase it had
        elif rng.random() < 0.3:
            with d.batch():
                for _ in range(rng.randint(1, 3)):
                    if d.finished or not fact(d, rng, p):
                        break
        else:
            assert fact(d, rng, p), "stuck: nothing live, no retry due and no Finish"
    raise AssertionError("did not finish")


def done_ok(d: Driver, name: str) -> bool:
    """Succeeded, or disabled and passed through (every in-scope upstream done ok)."""
    if d.dag.tasks[name].disabled:
        return all(done_ok(d, up) for up in d.dag.upstream[name] if up in d.ex.scope)
    state = d.state(name)
    return state is not None and state.successful


def final_failure(d: Driver, name: str) -> bool:
    state = d.state(name)
    if state is T.KILLED:
        return True
    return state is T.FAILED and d.attempt(name).retry_times >= d.dag.tasks[name].retries


def check_common(d: Driver) -> Finish:
    finish = d.finish  # exactly one
    assert not d.live()
    for name in d.dag.tasks:
        attempts = d.attempts(name)
        if name not in d.ex.scope or d.dag.tasks[name].disabled:
            assert not attempts, name
            continue
        numbers = [a.attempt for a in attempts]
        assert numbers == list(range(1, len(numbers) + 1)), (name, numbers)
        assert all(a.retry_times <= d.dag.tasks[name].retries for a in attempts), name
    return finish


@pytest.mark.parametrize("seed", range(RUNS))
def test_continue_always_finishes_with_the_right_outcome(seed: int) -> None:
    rng = random.Random(seed)
    d = random_driver(rng, FailureStrategy.CONTINUE)
    d = run_to_end(d, rng, Odds(fail=rng.choice([0.0, 0.1, 0.3])))
    finish = check_common(d)
    scope = d.ex.scope
    all_ok = all(done_ok(d, name) for name in scope)
    failed = [name for name in d.dag.order if name in scope and final_failure(d, name)]
    assert (finish.state is W.SUCCEEDED) == all_ok
    assert (finish.state is W.FAILED) == bool(failed)
    if failed:
        culprit = finish.reason.removeprefix("task ").removesuffix(" failed")
        assert culprit in failed
    # Nothing runnable was left behind: an enabled in-scope task never created is blocked upstream.
    for name in scope:
        if not d.dag.tasks[name].disabled and not d.attempts(name):
            assert not all(done_ok(d, up) for up in d.dag.upstream[name] if up in scope), name


@pytest.mark.parametrize("seed", range(RUNS))
def test_pause_stop_failover_lost_workers_and_resume_always_converge(seed: int) -> None:
    rng = random.Random(10_000 + seed)
    strategy = rng.choice(list(FailureStrategy))
    d = random_driver(rng, strategy)
    odds = Odds(fail=rng.choice([0.0, 0.1, 0.2]), pause=0.04, stop=0.01, lose=0.03, failover=0.05)
    for _ in range(50):
        d = run_to_end(d, rng, odds)
        finish = check_common(d)
        scope = d.ex.scope
        if d.ex.phase is W.READY_STOP:
            assert finish == Finish(W.STOPPED, "stopped by user")
        elif any(final_failure(d, name) for name in scope):
            assert finish.state is W.FAILED
        elif all(done_ok(d, name) for name in scope):
            assert finish == Finish(W.SUCCEEDED, "")
        else:
            assert d.ex.phase is W.READY_PAUSE
            assert finish == Finish(W.PAUSED, "paused by user")
            d = d.restored()  # resume
            continue
        return
    raise AssertionError("never stopped pausing")
