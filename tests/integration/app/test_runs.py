"""Starting and restarting runs through the application layer: domain values in, records out,
domain errors, and nothing stored or woken when it refuses."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from dsched.errors import FailedPrecondition, IllegalTransition, InvalidArgument, NotFound
from dsched.options import CommandType, Priority, TaskDependType
from dsched.states import TaskState, WorkflowState
from dsched_server.app import runs
from dsched_server.app.context import AppContext
from dsched_server.app.runs import StartRun
from dsched_server.app.transaction import Transaction, transact
from dsched_server.core.records import InstanceRecord, RunOptions, RunScope
from dsched_server.engine.notifier import COMMANDS
from dsched_server.store import events, instances

from .conftest import commands_of, count_instances, make_workflow, ran, read, started

Restart = Callable[[Transaction, int], Awaitable[InstanceRecord]]

W = WorkflowState


async def test_start_writes_the_instance_its_command_and_event_then_wakes_the_consumer(
    app: AppContext,
) -> None:
    await make_workflow(app)
    woken = app.notifier.signal(COMMANDS)
    options = RunOptions(
        params={"DAY": "2026-11-26"},
        scope=RunScope(start_tasks=("load",), depend_type=TaskDependType.TASK_ONLY),
        priority=Priority.HIGH,
    )

    kolkata = ZoneInfo("Asia/Kolkata")
    start = StartRun(
        "proj",
        "etl",
        options,
        schedule_time=datetime(2026, 11, 26, 9, 30, 0, 123456, tzinfo=kolkata),
        time_zone="Asia/Kolkata",
    )

    instance = await transact(app, lambda tx: runs.start(tx, start))

    assert (instance.project, instance.workflow, instance.workflow_version) == ("proj", "etl", 1)
    assert instance.state is W.SUBMITTED
    assert instance.command_type is CommandType.START
    assert instance.options == options
    stored = await read(app, lambda c: instances.get_instance(c, instance.id))
    # The answer is built from what was written, not read back: repr also compares the zones of
    # the times (the store keeps instants, in UTC) and the types of the values.
    assert repr(stored) == repr(instance)
    (command,) = await commands_of(app, instance.id)
    assert (command.type, command.priority) == (CommandType.START, Priority.HIGH)
    (event,) = await read(app, lambda c: events.after(c, instance.id, 0))
    assert (event.workflow_state, event.message) == (W.SUBMITTED, "submitted")
    assert woken.is_set()
    # This master claims it whatever its slot, without reading back what was just written.
    handover = app.notifier.handovers[instance.id]
    assert (handover.instance, handover.command) == (instance, command)
    assert (handover.workflow.id, handover.workflow.version) == (instance.workflow_code, 1)


async def test_nothing_is_stored_or_woken_when_the_callers_transaction_fails(
    app: AppContext,
) -> None:
    await make_workflow(app)
    woken = app.notifier.signal(COMMANDS)

    async def start_then_fail(tx: Transaction) -> None:
        await runs.start(tx, StartRun("proj", "etl"))
        raise RuntimeError("the caller's own write failed")

    with pytest.raises(RuntimeError):
        await transact(app, start_then_fail)

    assert await count_instances(app) == 0
    assert await read(app, lambda c: instances.pending_commands(c, 10)) == []
    assert not woken.is_set()
    assert not app.notifier.local_commands and not app.notifier.handovers


async def test_start_of_an_offline_workflow_is_refused(app: AppContext) -> None:
    await make_workflow(app, online=False)

    with pytest.raises(FailedPrecondition) as refused:
        await transact(app, lambda tx: runs.start(tx, StartRun("proj", "etl")))

    assert refused.value.reason == "WORKFLOW_OFFLINE"
    assert refused.value.metadata == {"project": "proj", "workflow": "etl"}
    assert await count_instances(app) == 0


async def test_start_of_an_unknown_workflow_is_not_found(app: AppContext) -> None:
    await make_workflow(app)

    with pytest.raises(NotFound):
        await transact(app, lambda tx: runs.start(tx, StartRun("proj", "nope")))


async def test_start_with_unknown_start_tasks_names_each(app: AppContext) -> None:
    await make_workflow(app)
    scope = RunScope(start_tasks=("load", "transform", "publish"))

    with pytest.raises(InvalidArgument) as refused:
        await transact(
            app, lambda tx: runs.start(tx, StartRun("proj", "etl", RunOptions(scope=scope)))
        )

    assert [v.field for v in refused.value.violations] == ["start_tasks[1]", "start_tasks[2]"]
    assert await read(app, lambda c: instances.pending_commands(c, 10)) == []


@pytest.mark.parametrize(
    ("restart", "action"),
    [(runs.resume, "resume"), (runs.rerun, "rerun"), (runs.recover, "recover")],
)
async def test_a_restart_of_an_unfinished_instance_is_an_illegal_transition(
    app: AppContext, restart: Restart, action: str
) -> None:
    await make_workflow(app)
    instance = await started(app)

    with pytest.raises(IllegalTransition) as refused:
        await transact(app, lambda tx: restart(tx, instance.id))

    assert refused.value.reason == "ILLEGAL_TRANSITION"
    assert refused.value.metadata == {
        "instance": str(instance.id),
        "state": "SUBMITTED",
        "action": action,
    }
    assert await read(app, lambda c: instances.get_instance(c, instance.id)) == instance
    assert len(await commands_of(app, instance.id)) == 1  # its START, nothing more


async def test_recover_puts_a_failed_instance_back_in_the_queue(app: AppContext) -> None:
    await make_workflow(app)
    instance, _ = await ran(
        app, W.FAILED, {"extract": TaskState.SUCCEEDED, "load": TaskState.FAILED}
    )
    woken = app.notifier.signal(COMMANDS)
    watched = app.notifier.signal(instance.id)

    again = await transact(app, lambda tx: runs.recover(tx, instance.id))

    assert again.state is W.SUBMITTED
    assert again.command_type is CommandType.RECOVER_FAILED
    assert again.end_time is None
    (command,) = await commands_of(app, instance.id)
    assert command.type is CommandType.RECOVER_FAILED
    last = (await read(app, lambda c: events.after(c, instance.id, 0)))[-1]
    assert (last.workflow_state, last.message) == (W.SUBMITTED, "recover requested")
    assert woken.is_set() and watched.is_set()


async def test_resume_applies_only_to_a_paused_instance(app: AppContext) -> None:
    await make_workflow(app)
    instance, _ = await ran(app, W.SUCCEEDED, {"extract": TaskState.SUCCEEDED})

    with pytest.raises(IllegalTransition):
        await transact(app, lambda tx: runs.resume(tx, instance.id))

    assert (await read(app, lambda c: instances.get_instance(c, instance.id))).state is W.SUCCEEDED
    assert await commands_of(app, instance.id) == []


async def test_execute_from_tasks_of_the_instances_version(app: AppContext) -> None:
    await make_workflow(app)
    instance, _ = await ran(
        app, W.FAILED, {"extract": TaskState.SUCCEEDED, "load": TaskState.FAILED}
    )
    unknown = RunScope(start_tasks=("load", "nope"))

    with pytest.raises(InvalidArgument) as refused:
        await transact(app, lambda tx: runs.execute_from(tx, instance.id, unknown))
    assert [v.field for v in refused.value.violations] == ["start_tasks[1]"]
    assert await commands_of(app, instance.id) == []

    scope = RunScope(start_tasks=("load",), depend_type=TaskDependType.TASK_ONLY)
    again = await transact(app, lambda tx: runs.execute_from(tx, instance.id, scope))

    assert (again.state, again.command_type) == (W.SUBMITTED, CommandType.EXECUTE_FROM_TASK)
    (command,) = await commands_of(app, instance.id)
    assert (command.type, command.scope) == (CommandType.EXECUTE_FROM_TASK, scope)
