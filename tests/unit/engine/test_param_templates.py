"""Parameter templates expanded at dispatch through the real engine (fake workers): what an
attempt receives, and an attempt whose value cannot be expanded failing without reaching a
worker."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, timedelta

from dsched.states import TaskState, WorkflowState
from tests.unit.core.specs import task, workflow
from tests.unit.engine.conftest import Engine


async def test_templates_are_expanded_against_the_run_and_out_values_are_not(
    engine: Engine,
) -> None:
    worker = await engine.workers.add()
    a = replace(task("a"), params={"L": "${system.task.definition.name}@$[HH:mm]"})
    b = replace(task("b", "a"), params={"B": "$[yyyyMMdd+1]"})
    spec = replace(
        workflow(a, b),
        params={"DT": "$[yyyyMMdd-1]", "ID": "${system.workflow.instance.id}", "RAW": "$$[x]"},
    )
    instance_id = await engine.start_run(spec, params={"S": "${system.biz.curdate}"})
    await worker.holding(1)
    submitted = (await engine.instance(instance_id)).submit_time.astimezone(UTC)
    day = submitted.date()
    got = dict(worker.attempt("a").spec.params)
    assert got == {
        "DT": (day - timedelta(days=1)).strftime("%Y%m%d"),
        "ID": str(instance_id),
        "RAW": "$[x]",
        "L": f"a@{submitted:%H:%M}",
        "S": day.strftime("%Y%m%d"),
    }
    await worker.running("a")
    await worker.succeed("a", {"OUT": "$[yyyy] ${system.biz.date}"})
    await worker.holding(2)
    got_b = dict(worker.attempt("b").spec.params)
    assert got_b["OUT"] == "$[yyyy] ${system.biz.date}"  # a task's output is data, not a template
    assert got_b["B"] == (day + timedelta(days=1)).strftime("%Y%m%d")
    assert got_b["DT"] == got["DT"]


async def test_a_value_that_cannot_be_expanded_fails_the_attempt_before_any_worker(
    engine: Engine,
) -> None:
    # Stored without the API's check (as a definition stored before templates were checked).
    worker = await engine.workers.add()
    bad = replace(task("a", retries=1), params={"X": "$[yyyyMMDD]"})
    instance_id = await engine.start_run(workflow(bad, task("b", "a"), validate=False))

    done = await engine.until(instance_id)

    assert done.state is WorkflowState.FAILED
    attempts = await engine.attempts(instance_id)
    assert [(t.task_name, t.state) for t in attempts] == [
        ("a", TaskState.FAILED),
        ("a", TaskState.FAILED),  # the retry meets the same value
    ]
    assert all("a parameter cannot be expanded" in t.state_reason for t in attempts)
    assert "day of the year" in attempts[0].state_reason
    assert worker.attempts == {}
