"""The append-only instance event log: transactional appends and cursor reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsched.states import InstanceEventKind, TaskState, WorkflowState
from dsched_server.store import events, instances
from dsched_server.store.database import Database
from dsched_server.store.events import NewEvent
from tests.integration.store.conftest import (
    NOW,
    at,
    claim_instance,
    make_instance,
    make_workflow,
    read,
    write,
)


class _Boom(Exception):
    pass


async def _two_instances(db: Database) -> tuple[int, int]:
    workflow = await make_workflow(db)
    first = await make_instance(db, workflow)
    second = await make_instance(db, workflow)
    return first, second


async def _append(db: Database, instance_id: int, *messages: str) -> None:
    batch = [NewEvent(workflow_instance_id=instance_id, message=m) for m in messages]
    await write(db, lambda c: events.append(c, batch, NOW))


async def test_an_appended_event_reads_back_with_every_field(db: Database) -> None:
    first, _ = await _two_instances(db)
    event = NewEvent(
        workflow_instance_id=first,
        kind=InstanceEventKind.RETRY_SCHEDULED,
        task_instance_id=77,
        task_name="extract",
        workflow_state=WorkflowState.RUNNING,
        task_state=TaskState.FAILED,
        message="exit code 3 — données 🚀",
    )
    await write(db, lambda c: events.append(c, [event], at(3)))
    (record,) = await read(db, lambda c: events.after(c, first, 0))
    assert record.sequence > 0
    assert record.workflow_instance_id == first
    assert (record.task_instance_id, record.task_name, record.kind) == (
        77,
        "extract",
        InstanceEventKind.RETRY_SCHEDULED,
    )
    assert (record.workflow_state, record.task_state) == (WorkflowState.RUNNING, TaskState.FAILED)
    assert record.message == "exit code 3 — données 🚀"
    assert record.create_time == at(3)


async def test_workflow_level_events_have_no_task_fields(db: Database) -> None:
    first, _ = await _two_instances(db)
    await _append(db, first, "claimed")
    (record,) = await read(db, lambda c: events.after(c, first, 0))
    assert (record.task_instance_id, record.task_name) == (0, "")
    assert (record.workflow_state, record.task_state, record.kind) == (
        None,
        None,
        InstanceEventKind.STATE,
    )


async def test_long_messages_are_cut_to_the_column_length(db: Database) -> None:
    first, _ = await _two_instances(db)
    await _append(db, first, "é" * 5000)
    (record,) = await read(db, lambda c: events.after(c, first, 0))
    assert record.message == "é" * 1024


async def test_events_commit_with_the_change_they_describe(db: Database) -> None:
    first, _ = await _two_instances(db)
    await claim_instance(db, first, epoch=3)
    async with db.transaction() as conn:
        assert await instances.set_state(
            conn,
            first,
            epoch=3,
            expected=[WorkflowState.RUNNING],
            state=WorkflowState.SUCCEEDED,
        )
        await events.append(
            conn,
            [NewEvent(workflow_instance_id=first, workflow_state=WorkflowState.SUCCEEDED)],
            NOW,
        )
    (record,) = await read(db, lambda c: events.after(c, first, 0))
    assert record.workflow_state is WorkflowState.SUCCEEDED
    assert await read(db, lambda c: instances.current_state(c, first)) is WorkflowState.SUCCEEDED


async def test_events_roll_back_with_the_change_they_describe(db: Database) -> None:
    first, _ = await _two_instances(db)
    await claim_instance(db, first, epoch=3)
    await _append(db, first, "claimed")
    with pytest.raises(_Boom):
        async with db.transaction() as conn:
            await instances.set_state(
                conn,
                first,
                epoch=3,
                expected=[WorkflowState.RUNNING],
                state=WorkflowState.FAILED,
            )
            await events.append(
                conn,
                [NewEvent(workflow_instance_id=first, workflow_state=WorkflowState.FAILED)],
                NOW,
            )
            assert len(await events.after(conn, first, 0)) == 2  # visible inside
            raise _Boom
    assert [e.message for e in await read(db, lambda c: events.after(c, first, 0))] == ["claimed"]
    assert await read(db, lambda c: instances.current_state(c, first)) is WorkflowState.RUNNING


async def test_after_reads_one_instances_events_in_strictly_increasing_order(
    db: Database,
) -> None:
    first, second = await _two_instances(db)
    for i in range(4):
        await _append(db, first, f"first-{i}a", f"first-{i}b")
        await _append(db, second, f"second-{i}")

    read_first = await read(db, lambda c: events.after(c, first, 0))
    assert [e.message for e in read_first] == [f"first-{i}{s}" for i in range(4) for s in "ab"]
    sequences = [e.sequence for e in read_first]
    assert sequences == sorted(set(sequences))  # strictly increasing
    assert {e.workflow_instance_id for e in read_first} == {first}
    read_second = await read(db, lambda c: events.after(c, second, 0))
    assert [e.message for e in read_second] == [f"second-{i}" for i in range(4)]


async def test_after_resumes_strictly_after_the_cursor_and_honours_the_limit(
    db: Database,
) -> None:
    first, second = await _two_instances(db)
    for i in range(5):
        await _append(db, first, f"e{i}")
        await _append(db, second, "noise")

    page = await read(db, lambda c: events.after(c, first, 0, limit=2))
    assert [e.message for e in page] == ["e0", "e1"]
    cursor = page[-1].sequence
    rest = await read(db, lambda c: events.after(c, first, cursor, limit=10))
    assert [e.message for e in rest] == ["e2", "e3", "e4"]
    assert all(e.sequence > cursor for e in rest)
    end = rest[-1].sequence
    assert await read(db, lambda c: events.after(c, first, end)) == []


async def test_last_sequence_is_the_newest_event_of_the_instance(db: Database) -> None:
    first, second = await _two_instances(db)
    assert await read(db, lambda c: events.last_sequence(c, first)) == 0
    await _append(db, first, "a", "b")
    await _append(db, second, "later, elsewhere")
    newest = (await read(db, lambda c: events.after(c, first, 0)))[-1].sequence
    assert await read(db, lambda c: events.last_sequence(c, first)) == newest
    # A watcher that starts from last_sequence sees exactly what comes after.
    await _append(db, first, "c")
    tail = await read(db, lambda c: events.after(c, first, newest))
    assert [e.message for e in tail] == ["c"]


async def test_appending_nothing_writes_nothing(db: Database) -> None:
    first, _ = await _two_instances(db)
    await write(db, lambda c: events.append(c, [], NOW))
    assert await read(db, lambda c: events.last_sequence(c, first)) == 0


async def test_a_read_on_sqlite_sees_one_snapshot(tmp_path: Path) -> None:
    """What a watch's read relies on to read an ended instance's events once (app/watches.py):
    on SQLite, events committed while a read is under way are not seen by its later statements
    (PostgreSQL's statements each see what is committed when they start)."""
    db = Database(f"sqlite+aiosqlite:///{tmp_path / 'meta.db'}")
    await db.start()
    try:
        first, _ = await _two_instances(db)
        await _append(db, first, "one")
        async with db.read() as conn:
            before = await events.after(conn, first, 0)
            await _append(db, first, "two")  # committed meanwhile, on another connection
            assert await events.after(conn, first, 0) == before
            assert await instances.current_state(conn, first) is WorkflowState.SUBMITTED
        after = await read(db, lambda c: events.after(c, first, 0))
        assert [e.message for e in after] == ["one", "two"]
    finally:
        await db.stop()
