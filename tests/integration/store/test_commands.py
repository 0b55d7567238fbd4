"""Instances and their commands: creation in one transaction, the pending queue, and claims."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from sqlalchemy import func, select

from dsched.errors import Aborted
from dsched.options import CommandType, FailureStrategy, Priority, RunTrigger, TaskDependType
from dsched.states import WorkflowState
from dsched_server.core.records import CommandRecord, InstanceRecord, RunOptions, RunScope
from dsched_server.store import instances
from dsched_server.store.database import Conn, Database
from dsched_server.store.models import Command, WorkflowInstance, table
from tests.integration.store.conftest import (
    NOW,
    at,
    make_instance,
    make_workflow,
    overlap,
    read,
    write,
)


class _Boom(Exception):
    pass


async def _count(db: Database, model: type) -> int:
    return int(await read(db, lambda c: c.scalar(select(func.count()).select_from(table(model)))))


async def _pending(db: Database) -> list[CommandRecord]:
    return await read(db, lambda c: instances.pending_commands(c, 100))


async def _command_of(db: Database, instance_id: int) -> CommandRecord:
    (command,) = [c for c in await _pending(db) if c.workflow_instance_id == instance_id]
    return command


async def test_create_instance_writes_a_submitted_instance_and_its_start_command(
    db: Database,
) -> None:
    workflow = await make_workflow(db)
    options = RunOptions(
        params={"DAY": "2026-03-15"},
        scope=RunScope(start_tasks=("clean",), depend_type=TaskDependType.TASK_PRE),
        failure_strategy=FailureStrategy.END,
        priority=Priority.HIGH,
        worker_group="cpu",
        dry_run=True,
    )
    instance_id = await make_instance(db, workflow, options=options)

    instance = await read(db, lambda c: instances.get_instance(c, instance_id))
    assert instance.id == instance_id
    assert (instance.project, instance.workflow) == ("proj", "wf")
    assert (instance.workflow_code, instance.workflow_version) == (workflow.id, 1)
    assert instance.state is WorkflowState.SUBMITTED
    assert instance.command_type is CommandType.START
    assert instance.options == options
    assert instance.run_scope == options.scope
    assert (instance.host, instance.epoch, instance.run_times) == ("", 0, 1)
    assert (instance.submit_time, instance.start_time, instance.end_time) == (NOW, None, None)
    assert (instance.state_reason, instance.var_pool) == ("", {})

    (command,) = await _pending(db)
    assert command.type is CommandType.START
    assert command.workflow_instance_id == instance_id
    assert command.priority is Priority.HIGH
    assert (command.scope, command.restore_state) == (None, None)
    assert command.create_time == NOW


@pytest.mark.parametrize("count", [1, 3])
async def test_create_runs_returns_the_rows_as_reading_them_back_does(
    db: Database, count: int
) -> None:
    """One INSERT per table returns the instances and commands as written, which the claim and
    StartWorkflow's answer use without reading them back: repr compares the zones of the times
    and the types of every value, not only what == sees."""
    workflow = await make_workflow(db)
    kolkata = ZoneInfo("Asia/Kolkata")
    runs = [
        instances.NewRun(
            workflow,
            RunOptions(
                params={"DAY": f"2026-03-{i + 10}"},
                scope=RunScope(start_tasks=("clean",), depend_type=TaskDependType.TASK_PRE),
                priority=Priority.HIGH if i else Priority.LOW,
                worker_group="cpu",
                dispatch_timeout=timedelta(seconds=90.000123),
            ),
            instances.RunTime(
                schedule_time=datetime(2026, 3, 14, 9, 30, 0, 123456, tzinfo=kolkata)
                + timedelta(days=i),
                time_zone="Asia/Kolkata",
                trigger=RunTrigger.SCHEDULE if i else RunTrigger.MANUAL,
            ),
        )
        for i in range(count)
    ]
    written_at = NOW.astimezone(kolkata)  # the caller's clock may be in any zone

    created = await write(db, lambda c: instances.create_runs(c, runs, written_at))

    async def read_back(conn: Conn) -> list[InstanceRecord]:
        return [await instances.get_instance(conn, c.instance.id) for c in created]

    stored = await read(db, read_back)
    assert [repr(c.instance) for c in created] == [repr(s) for s in stored]
    pending = sorted(await _pending(db), key=lambda p: p.id)  # the queue's order is by priority
    assert [repr(c.command) for c in created] == [repr(p) for p in pending]
    assert [c.instance.id for c in created] == sorted(c.instance.id for c in created)


async def test_an_instance_and_its_command_roll_back_together(db: Database) -> None:
    workflow = await make_workflow(db)
    with pytest.raises(_Boom):
        async with db.transaction() as conn:
            instance_id = await instances.create_instance(conn, workflow, RunOptions(), NOW)
            assert await instances.current_state(conn, instance_id) is WorkflowState.SUBMITTED
            raise _Boom
    assert await _count(db, WorkflowInstance) == 0
    assert await _count(db, Command) == 0
    assert await read(db, lambda c: instances.current_state(c, instance_id)) is None


async def test_a_second_command_for_an_instance_is_aborted_while_one_is_pending(
    db: Database,
) -> None:
    workflow = await make_workflow(db)
    instance_id = await make_instance(db, workflow)
    before = await _command_of(db, instance_id)
    with pytest.raises(Aborted) as caught:
        await write(
            db,
            lambda c: instances.add_command(c, instance_id, CommandType.RERUN, 0, None, at(1)),
        )
    assert caught.value.reason == "COMMAND_PENDING"
    assert caught.value.metadata == {"instance": str(instance_id)}
    assert await _pending(db) == [before]


async def test_a_new_command_can_be_queued_once_the_previous_one_was_claimed(
    db: Database,
) -> None:
    workflow = await make_workflow(db)
    instance_id = await make_instance(db, workflow)
    command = await _command_of(db, instance_id)
    await write(
        db,
        lambda c: instances.claim(
            c, command, host="m1", epoch=3, state=WorkflowState.RUNNING, values={}
        ),
    )
    scope = RunScope(start_tasks=("enrich", "load"), depend_type=TaskDependType.TASK_ONLY)
    command_id = await write(
        db,
        lambda c: instances.add_command(
            c, instance_id, CommandType.EXECUTE_FROM_TASK, Priority.LOW.rank, scope, at(9)
        ),
    )
    (queued,) = await _pending(db)
    assert queued == CommandRecord(
        id=command_id,
        type=CommandType.EXECUTE_FROM_TASK,
        workflow_instance_id=instance_id,
        priority=Priority.LOW,
        scope=scope,
        restore_state=None,
        create_time=at(9),
    )


async def test_pending_commands_come_by_priority_then_by_age(db: Database) -> None:
    workflow = await make_workflow(db)
    priorities = [
        Priority.LOW,
        Priority.HIGHEST,
        Priority.MEDIUM,
        Priority.HIGHEST,
        Priority.LOWEST,
    ]
    ids = [await make_instance(db, workflow, options=RunOptions(priority=p)) for p in priorities]
    pending = await _pending(db)
    assert [c.workflow_instance_id for c in pending] == [ids[1], ids[3], ids[2], ids[0], ids[4]]
    assert [c.priority for c in pending] == sorted(priorities, key=lambda p: p.rank)
    assert pending[0].id < pending[1].id
    limited = await read(db, lambda c: instances.pending_commands(c, 2))
    assert limited == pending[:2]


async def test_claim_deletes_the_command_and_stamps_the_instance(db: Database) -> None:
    workflow = await make_workflow(db)
    instance_id = await make_instance(db, workflow)
    other = await make_instance(db, workflow)
    command = await _command_of(db, instance_id)

    claimed = await write(
        db,
        lambda c: instances.claim(
            c,
            command,
            host="master-a:5678",
            epoch=41,
            state=WorkflowState.RUNNING,
            values={"start_time": at(2), "run_times": 2},
        ),
    )

    assert claimed is True
    instance = await read(db, lambda c: instances.get_instance(c, instance_id))
    assert (instance.host, instance.epoch, instance.state) == (
        "master-a:5678",
        41,
        WorkflowState.RUNNING,
    )
    assert (instance.start_time, instance.run_times) == (at(2), 2)
    assert [c.workflow_instance_id for c in await _pending(db)] == [other]


async def test_claiming_a_command_that_is_gone_returns_false_and_changes_nothing(
    db: Database,
) -> None:
    workflow = await make_workflow(db)
    instance_id = await make_instance(db, workflow)
    command = await _command_of(db, instance_id)
    await write(
        db,
        lambda c: instances.claim(
            c, command, host="winner", epoch=1, state=WorkflowState.RUNNING, values={}
        ),
    )
    again = await write(
        db,
        lambda c: instances.claim(
            c, command, host="late", epoch=2, state=WorkflowState.READY_STOP, values={}
        ),
    )
    assert again is False
    instance = await read(db, lambda c: instances.get_instance(c, instance_id))
    assert (instance.host, instance.epoch, instance.state) == ("winner", 1, WorkflowState.RUNNING)


async def _contend(
    db: Database, command: CommandRecord, barrier: asyncio.Barrier, host: str, epoch: int
) -> bool:
    async with db.transaction() as conn:
        # Both transactions have read the instance before either claims.
        state = await instances.current_state(conn, command.workflow_instance_id)
        assert state in (WorkflowState.SUBMITTED, WorkflowState.RUNNING)  # SQLite: serial
        await overlap(db, barrier)
        return await instances.claim(
            conn, command, host=host, epoch=epoch, state=WorkflowState.RUNNING, values={}
        )


async def test_of_two_concurrent_claims_of_one_command_exactly_one_wins(db: Database) -> None:
    workflow = await make_workflow(db)
    for _ in range(3):
        instance_id = await make_instance(db, workflow)
        command = await _command_of(db, instance_id)
        barrier = asyncio.Barrier(2)

        results = await asyncio.wait_for(
            asyncio.gather(
                _contend(db, command, barrier, "master-a", 10),
                _contend(db, command, barrier, "master-b", 20),
            ),
            timeout=20,
        )

        assert sorted(results) == [False, True]
        winner = ("master-a", 10) if results[0] else ("master-b", 20)
        async with db.read() as conn:
            instance = await instances.get_instance(conn, instance_id)
        assert (instance.host, instance.epoch) == winner
        assert instance.state is WorkflowState.RUNNING
        assert await _pending(db) == []


async def test_delete_commands_drops_only_that_instances_command(db: Database) -> None:
    workflow = await make_workflow(db)
    stopped = await make_instance(db, workflow)
    other = await make_instance(db, workflow)
    await write(db, lambda c: instances.delete_commands(c, stopped))
    assert [c.workflow_instance_id for c in await _pending(db)] == [other]
    await write(db, lambda c: instances.delete_commands(c, stopped))  # nothing left: a no-op
    assert len(await _pending(db)) == 1


async def test_a_stale_claim_never_takes_a_newer_command_that_reuses_the_id(
    db: Database,
) -> None:
    # SQLite hands out max(id) + 1, so once the table is empty the next command gets the id of
    # one that was claimed before. A master still holding the old record must lose, not delete
    # the new command and take over the old instance.
    workflow = await make_workflow(db)
    first = await make_instance(db, workflow)
    stale = await _command_of(db, first)
    await write(
        db,
        lambda c: instances.claim(
            c, stale, host="owner", epoch=1, state=WorkflowState.RUNNING, values={}
        ),
    )
    second = await make_instance(db, workflow, now=at(1))
    fresh = await _command_of(db, second)

    taken = await write(
        db,
        lambda c: instances.claim(
            c, stale, host="late", epoch=2, state=WorkflowState.RUNNING, values={}
        ),
    )

    assert taken is False
    assert await _pending(db) == [fresh]
    owner = await read(db, lambda c: instances.get_instance(c, first))
    assert (owner.host, owner.epoch) == ("owner", 1)
    waiting = await read(db, lambda c: instances.get_instance(c, second))
    assert (waiting.state, waiting.epoch) == (WorkflowState.SUBMITTED, 0)
