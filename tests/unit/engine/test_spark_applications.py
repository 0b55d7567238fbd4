"""The master's side of Spark application ids (ARCHITECTURE.md §15): a RUNNING event naming an
application is recorded on the running attempt (a resend is a duplicate), the result keeps it,
and the attempt that replaces one lost with its worker carries the lost application's id."""

from __future__ import annotations

from dsched.states import TaskState, WorkflowState
from dsched_server.protocol.ack import AckDecision
from tests.unit.core.specs import task, workflow
from tests.unit.engine.conftest import Engine, World

APP = "app-20261129050216-0000"
APP2 = "app-20261129050217-0001"


async def test_an_application_id_is_recorded_while_the_attempt_runs(engine: Engine) -> None:
    worker = await engine.workers.add()
    instance_id = await engine.start_run(workflow(task("a")))
    await worker.holding(1)
    assert (await worker.running("a")).decision is AckDecision.ACCEPTED
    assert (await worker.running("a", APP)).decision is AckDecision.ACCEPTED
    (running,) = await engine.attempts(instance_id)
    assert (running.state, running.application_id) == (TaskState.RUNNING, APP)
    assert (await worker.running("a", APP)).decision is AckDecision.DUPLICATE
    assert (await worker.running("a")).decision is AckDecision.DUPLICATE
    await worker.succeed("a")
    assert (await engine.until(instance_id)).state is WorkflowState.SUCCEEDED
    (done,) = await engine.attempts(instance_id)
    assert (done.state, done.application_id) == (TaskState.SUCCEEDED, APP)


async def test_the_replacement_of_a_lost_attempt_carries_its_application_id(
    engine: Engine,
) -> None:
    first = await engine.workers.add()
    instance_id = await engine.start_run(workflow(task("a")))
    await first.holding(1)
    await first.running("a")
    await first.running("a", APP)
    second = await engine.workers.add()
    await first.leave(listening=False)  # known dead at once
    await second.holding(1)
    assert second.attempt("a").spec.earlier_application_ids == (APP,)
    await second.running("a", APP2)
    await second.succeed("a")
    assert (await engine.until(instance_id)).state is WorkflowState.SUCCEEDED
    attempts = await engine.attempts(instance_id)
    assert [(a.state, a.application_id) for a in attempts] == [
        (TaskState.NEED_FAULT_TOLERANCE, APP),
        (TaskState.SUCCEEDED, APP2),
    ]


async def test_a_master_that_adopts_the_run_passes_the_lost_application_on(world: World) -> None:
    crashed = await world.master()
    first = await world.workers.add()
    instance_id = await crashed.start_run(workflow(task("a")))
    await first.holding(1)
    await first.running("a", APP)
    await first.leave(listening=False)  # lost: attempt 2 waits for a worker, none is left
    await crashed.until(instance_id, lambda i: True)
    await crashed.crash()

    second = await world.workers.add()
    successor = await world.master()  # restores the run from the store, attempt 2 included
    await second.holding(1)
    assert second.attempt("a").spec.earlier_application_ids == (APP,)
    await second.running("a", APP2)
    await second.succeed("a")
    assert (await successor.until(instance_id)).state is WorkflowState.SUCCEEDED
