"""The application layer drives real runs: a master's engine (runner, dispatcher, command
consumer, store) with fake workers, and no protobuf anywhere. What a scheduler or a backfill will
do: start a run, pause and resume it, stop it, force a failed task to success and recover."""

from __future__ import annotations

from dsched.options import ReleaseState
from dsched.spec import WorkflowSpec
from dsched.states import TaskState, WorkflowState
from dsched_server.app import controls, runs, tasks
from dsched_server.app.context import AppContext
from dsched_server.app.transaction import Transaction, transact
from dsched_server.core.records import InstanceRecord
from dsched_server.store import definitions
from tests.fakes.worker import FakeWorker
from tests.unit.core.specs import task, workflow
from tests.unit.engine.conftest import Engine

W = WorkflowState


async def start(app: AppContext, spec: WorkflowSpec) -> InstanceRecord:
    """Stores ``spec`` online, then starts it through the application layer."""

    async def define(tx: Transaction) -> None:
        await definitions.create_project(tx.conn, spec.project, "", tx.now)
        await definitions.create_workflow(tx.conn, spec, tx.now)
        await definitions.set_release_state(
            tx.conn, spec.project, spec.name, ReleaseState.ONLINE, tx.now
        )

    await transact(app, define)
    return await transact(app, lambda tx: runs.start(tx, runs.StartRun(spec.project, spec.name)))


async def a_running(app: AppContext, engine: Engine) -> tuple[FakeWorker, InstanceRecord]:
    """A worker, and a run of ``a -> b`` started on it: ``a`` dispatched to the worker."""
    worker = await engine.workers.add()
    instance = await start(app, workflow(task("a"), task("b", "a")))
    await worker.holding(1)  # the commit woke the consumer: claimed, dispatched
    return worker, instance


async def test_a_started_run_is_claimed_and_runs_to_succeeded(
    app: AppContext, engine: Engine
) -> None:
    worker, instance = await a_running(app, engine)

    await worker.succeed("a")
    await worker.holding(2)
    await worker.succeed("b")
    assert (await engine.until(instance.id)).state is W.SUCCEEDED


async def test_pause_through_the_owner_then_resume(app: AppContext, engine: Engine) -> None:
    worker, instance = await a_running(app, engine)

    paused = await controls.pause(app, instance.id, "pause-1")

    assert paused.applied  # this master's runner recorded and applied it in one batch
    assert paused.instance.state is W.READY_PAUSE
    await worker.succeed("a")
    assert (await engine.until(instance.id)).state is W.PAUSED
    assert len(worker.attempts) == 1  # b never started

    resumed = await transact(app, lambda tx: runs.resume(tx, instance.id))

    assert resumed.state is W.SUBMITTED
    await worker.holding(2)
    await worker.succeed("b")
    assert (await engine.until(instance.id)).state is W.SUCCEEDED


async def test_stop_kills_the_running_attempt(app: AppContext, engine: Engine) -> None:
    worker, instance = await a_running(app, engine)

    stopped = await controls.stop(app, instance.id, "stop-1")

    assert stopped.applied
    final = await engine.until(instance.id)
    assert final.state is W.STOPPED
    assert len([c for c in engine.workers.calls if c.method == "kill"]) == 1
    assert len(worker.attempts) == 1  # b never started


async def test_force_success_then_recover_runs_what_is_left(
    app: AppContext, engine: Engine
) -> None:
    worker, instance = await a_running(app, engine)
    await worker.fail("a")
    assert (await engine.until(instance.id)).state is W.FAILED
    (failed,) = await engine.attempts(instance.id)

    forced = await transact(app, lambda tx: tasks.force_success(tx, failed.id))

    assert forced.task_instance.state is TaskState.FORCED_SUCCESS
    assert forced.instance.state is W.FAILED  # b never ran

    await transact(app, lambda tx: runs.recover(tx, instance.id))

    await worker.holding(2)
    assert worker.attempt("b").spec.task_name == "b"  # a counts as done: only b runs
    await worker.succeed("b")
    assert (await engine.until(instance.id)).state is W.SUCCEEDED
