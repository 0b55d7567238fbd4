"""Runs through the real engine (runner, dispatcher, store) with fake workers: no network."""

from __future__ import annotations

from dsched.states import TaskState, WorkflowState
from tests.unit.core.specs import task, workflow
from tests.unit.engine.conftest import Engine


async def test_a_small_dag_runs_to_succeeded(engine: Engine) -> None:
    worker = await engine.workers.add()
    instance_id = await engine.start_run(workflow(task("a"), task("b", "a"), task("c", "a")))

    await engine.workers.wait_for(lambda: len(worker.attempts) == 1)
    ack = await worker.succeed("a")
    assert ack.decision.value == "ACCEPTED"
    await engine.workers.wait_for(lambda: len(worker.attempts) == 3)
    await worker.succeed("b")
    await worker.succeed("c")

    instance = await engine.until(instance_id)
    assert instance.state is WorkflowState.SUCCEEDED
    attempts = await engine.attempts(instance_id)
    assert sorted((a.task_name, a.attempt, a.state) for a in attempts) == [
        ("a", 1, TaskState.SUCCEEDED),
        ("b", 1, TaskState.SUCCEEDED),
        ("c", 1, TaskState.SUCCEEDED),
    ]
    assert {a.host for a in attempts} == {worker.address}
