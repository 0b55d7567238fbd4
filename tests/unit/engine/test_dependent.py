"""DEPENDENT tasks through the real engine with fake workers: evaluated on the master, holding no
worker slot, woken when the run they wait for ends, failing or waiting as their policy says."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from dsched.dependency import (
    Cycle,
    DependencyFailure,
    DependencyGroup,
    DependencyItem,
    DependentSpec,
)
from dsched.spec import TaskSpec, WorkflowSpec, check_workflow
from dsched.states import TaskState, WorkflowState
from dsched_server.core.controls import ControlKind
from tests.unit.core.specs import task
from tests.unit.engine.conftest import Engine
from tests.unit.engine.test_engine_runs import ran_once

UPSTREAM = WorkflowSpec(project="proj", name="upstream", tasks=(task("load"),))


def waiting_on(
    *items: DependencyItem,
    on_failure: DependencyFailure = DependencyFailure.FAIL,
    failure_wait: timedelta = timedelta(0),
    timeout: timedelta = timedelta(0),
    check_interval: timedelta = timedelta(seconds=1),
) -> WorkflowSpec:
    """A workflow ``report``: a DEPENDENT ``wait`` on ``items``, then a shell task ``publish``."""
    wait = TaskSpec(
        name="wait",
        kind=DependentSpec(
            groups=(DependencyGroup(items=items),),
            on_failure=on_failure,
            failure_wait=failure_wait,
            check_interval=check_interval,
        ),
        timeout=timeout,
    )
    spec = WorkflowSpec(project="proj", name="report", tasks=(wait, task("publish", "wait")))
    check_workflow(spec)
    return spec


TODAY = DependencyItem(project="proj", workflow="upstream", cycle=Cycle.DAY, date_value="today")


async def test_it_waits_without_a_worker_slot_and_succeeds_when_the_upstream_does(
    engine: Engine,
) -> None:
    worker = await engine.workers.add()
    upstream = await engine.start_run(UPSTREAM)
    await worker.holding(1)
    # Checked again only in an hour: what ends the wait below is the upstream's end waking it.
    report = await engine.start_run(waiting_on(TODAY, check_interval=timedelta(hours=1)))

    attempts = await engine.tasks_until(
        report, lambda a: bool(a) and a[0].state is TaskState.RUNNING
    )
    assert attempts[0].task_name == "wait"
    assert attempts[0].host == ""  # on the master
    assert "waiting for proj/upstream" in (await _reason(engine, report))
    assert len(worker.attempts) == 1  # only the upstream's task reached a worker

    await worker.succeed("load")
    await engine.until(upstream)
    await worker.holding(2)  # publish, once wait succeeded
    await worker.succeed("publish")
    done = await engine.until(report)
    assert done.state is WorkflowState.SUCCEEDED
    states = {a.task_name: a.state for a in await engine.attempts(report)}
    assert states == {"wait": TaskState.SUCCEEDED, "publish": TaskState.SUCCEEDED}
    ran_once(engine.workers)


async def test_a_failed_upstream_fails_it_at_once(engine: Engine) -> None:
    worker = await engine.workers.add()
    upstream = await engine.start_run(UPSTREAM)
    await worker.holding(1)
    await worker.fail("load")
    assert (await engine.until(upstream)).state is WorkflowState.FAILED

    report = await engine.start_run(waiting_on(TODAY))
    done = await engine.until(report)
    assert done.state is WorkflowState.FAILED
    (wait,) = [a for a in await engine.attempts(report) if a.task_name == "wait"]
    assert wait.state is TaskState.FAILED
    assert "proj/upstream did not succeed for today" in wait.state_reason
    assert len(worker.attempts) == 1


async def test_keep_waiting_after_a_failure_then_fail_after_the_limit(engine: Engine) -> None:
    worker = await engine.workers.add()
    upstream = await engine.start_run(UPSTREAM)
    await worker.holding(1)
    await worker.fail("load")
    await engine.until(upstream)

    spec = waiting_on(TODAY, on_failure=DependencyFailure.WAIT, failure_wait=timedelta(seconds=0.5))
    report = await engine.start_run(spec)
    running = await engine.tasks_until(report, lambda a: bool(a) and a[0].state.terminal is False)
    assert running[0].state is TaskState.RUNNING
    done = await engine.until(report)
    (wait,) = [a for a in await engine.attempts(report) if a.task_name == "wait"]
    assert (done.state, wait.state) == (WorkflowState.FAILED, TaskState.FAILED)
    assert wait.end_time is not None and wait.start_time is not None
    assert wait.end_time - wait.start_time >= timedelta(seconds=0.5)


async def test_a_workflow_that_does_not_exist_fails_it(engine: Engine) -> None:
    missing = replace(TODAY, workflow="nowhere")
    report = await engine.start_run(waiting_on(missing))
    done = await engine.until(report)
    assert done.state is WorkflowState.FAILED
    (wait,) = [a for a in await engine.attempts(report) if a.task_name == "wait"]
    assert "proj/nowhere: no such workflow" in wait.state_reason


async def test_a_stop_kills_it_at_once(engine: Engine) -> None:
    await engine.start_run(UPSTREAM)  # no worker: it never ends
    report = await engine.start_run(waiting_on(TODAY))
    await engine.tasks_until(report, lambda a: bool(a) and a[0].state is TaskState.RUNNING)
    stopped = await engine.control(report, ControlKind.STOP)
    assert stopped.state in (WorkflowState.READY_STOP, WorkflowState.STOPPED)
    done = await engine.until(report)
    assert done.state is WorkflowState.STOPPED
    states = {a.task_name: a.state for a in await engine.attempts(report)}
    assert states == {"wait": TaskState.KILLED}


async def test_the_task_timeout_bounds_the_wait(engine: Engine) -> None:
    await engine.start_run(UPSTREAM)  # no worker: it never ends
    report = await engine.start_run(waiting_on(TODAY, timeout=timedelta(seconds=0.3)))
    done = await engine.until(report)
    (wait,) = [a for a in await engine.attempts(report) if a.task_name == "wait"]
    assert (done.state, wait.state) == (WorkflowState.FAILED, TaskState.FAILED)
    assert "timed out" in wait.state_reason


async def _reason(engine: Engine, instance_id: int) -> str:
    """The wait task's state reason once its first check has been recorded."""
    attempts = await engine.tasks_until(
        instance_id, lambda a: bool(a) and "waiting for proj" in a[0].state_reason
    )
    return attempts[0].state_reason
