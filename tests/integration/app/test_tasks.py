"""Force success through the application layer."""

from __future__ import annotations

import pytest

from dsched.errors import FailedPrecondition, NotFound
from dsched.states import TaskState, WorkflowState
from dsched_server.app import tasks
from dsched_server.app.context import AppContext
from dsched_server.app.transaction import transact
from dsched_server.store import events, instances
from dsched_server.store import task_instances as ti_repo

from .conftest import make_workflow, ran, read, started

W = WorkflowState


async def test_forcing_the_last_failed_task_succeeds_the_instance(app: AppContext) -> None:
    await make_workflow(app)
    instance, ids = await ran(
        app, W.FAILED, {"extract": TaskState.SUCCEEDED, "load": TaskState.FAILED}
    )
    watched = app.notifier.signal(instance.id)

    forced = await transact(app, lambda tx: tasks.force_success(tx, ids["load"]))

    assert forced.task_instance.state is TaskState.FORCED_SUCCESS
    assert forced.task_instance.end_time is not None
    assert forced.instance.state is W.SUCCEEDED
    assert forced.instance.state_reason == "all tasks succeeded (forced)"
    assert await read(app, lambda c: ti_repo.get(c, ids["load"])) == forced.task_instance
    tail = (await read(app, lambda c: events.after(c, instance.id, 0)))[-2:]
    assert [(e.task_state, e.workflow_state) for e in tail] == [
        (TaskState.FORCED_SUCCESS, None),
        (None, W.SUCCEEDED),
    ]
    assert watched.is_set()


async def test_forcing_one_of_two_failed_tasks_leaves_the_instance_failed(
    app: AppContext,
) -> None:
    await make_workflow(app)
    _, ids = await ran(app, W.FAILED, {"extract": TaskState.KILLED, "load": TaskState.FAILED})

    forced = await transact(app, lambda tx: tasks.force_success(tx, ids["extract"]))

    assert forced.task_instance.state is TaskState.FORCED_SUCCESS
    assert forced.instance.state is W.FAILED


async def test_force_success_of_a_running_instances_task_is_refused(app: AppContext) -> None:
    await make_workflow(app)
    _, ids = await ran(app, W.RUNNING, {"extract": TaskState.FAILED})

    with pytest.raises(FailedPrecondition) as refused:
        await transact(app, lambda tx: tasks.force_success(tx, ids["extract"]))

    assert refused.value.reason == "INSTANCE_NOT_FINISHED"
    assert (await read(app, lambda c: ti_repo.get(c, ids["extract"]))).state is TaskState.FAILED


async def test_force_success_of_a_succeeded_task_is_an_illegal_transition(
    app: AppContext,
) -> None:
    await make_workflow(app)
    instance, ids = await ran(
        app, W.FAILED, {"extract": TaskState.SUCCEEDED, "load": TaskState.FAILED}
    )

    with pytest.raises(FailedPrecondition) as refused:
        await transact(app, lambda tx: tasks.force_success(tx, ids["extract"]))

    assert refused.value.reason == "ILLEGAL_TRANSITION"
    assert refused.value.metadata == {"task_instance": str(ids["extract"]), "state": "SUCCEEDED"}
    assert (await read(app, lambda c: instances.get_instance(c, instance.id))).state is W.FAILED


async def test_force_success_of_an_unknown_task_instance_is_not_found(app: AppContext) -> None:
    await make_workflow(app)
    await started(app)

    with pytest.raises(NotFound):
        await transact(app, lambda tx: tasks.force_success(tx, 10_000))
