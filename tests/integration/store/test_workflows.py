"""Versioned workflow definitions: create, update, get by version, versions, release, delete."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from sqlalchemy import func, select

from dsched.errors import Aborted, AlreadyExists, FailedPrecondition, NotFound
from dsched.options import Priority, ReleaseState, TimeoutStrategy
from dsched.spec import WorkflowSpec
from dsched.states import TaskState, WorkflowState
from dsched_server.core.records import WorkflowRecord
from dsched_server.store import definitions, events, instances, task_instances
from dsched_server.store.database import Conn, Database
from dsched_server.store.events import NewEvent
from dsched_server.store.models import (
    Command,
    InstanceEvent,
    TaskDefinition,
    TaskEdge,
    TaskInstance,
    WorkflowInstance,
    WorkflowVersion,
    table,
)
from dsched_server.store.task_instances import NewAttempt
from tests.integration.store.conftest import (
    NOW,
    at,
    first_attempt,
    make_instance,
    make_project,
    make_workflow,
    overlap,
    put_state,
    put_task_state,
    read,
    shell,
    workflow_spec,
    write,
)


def _second_version() -> WorkflowSpec:
    """A different shape: one task dropped, one added, settings and edges changed."""
    return workflow_spec(
        description="nightly load, v2",
        params={"DAY": "2026-03-15", "MODE": "full"},
        tasks=(
            shell("extract", priority=Priority.HIGHEST, retries=1),
            shell("enrich", "extract", timeout=timedelta(minutes=2)),
            shell("publish", "enrich", "extract", worker_group="io"),
        ),
    )


def _third_version() -> WorkflowSpec:
    return workflow_spec(description="v3", params={}, tasks=(shell("only"),))


async def _update(db: Database, spec: WorkflowSpec, seconds: float) -> WorkflowRecord:
    return await write(db, lambda c: definitions.update_workflow(c, spec, at(seconds)))


async def _release(db: Database, state: ReleaseState) -> WorkflowRecord:
    return await write(db, lambda c: definitions.set_release_state(c, "proj", "wf", state, NOW))


async def _rows(db: Database, model: type) -> int:
    return int(await read(db, lambda c: c.scalar(select(func.count()).select_from(table(model)))))


async def test_create_workflow_stores_version_one_offline_with_the_exact_spec(
    db: Database,
) -> None:
    spec = workflow_spec()
    created = await make_workflow(db, spec)
    assert created.id > 0
    assert (created.project, created.version) == ("proj", 1)
    assert created.release_state is ReleaseState.OFFLINE
    assert created.create_time == created.update_time == NOW
    assert created.spec == spec
    assert await read(db, lambda c: definitions.get_workflow(c, "proj", "wf")) == created
    assert await read(db, lambda c: definitions.get_workflow_by_code(c, created.id)) == created


async def test_a_stored_spec_keeps_task_order_edges_durations_and_priorities(
    db: Database,
) -> None:
    await make_workflow(db)
    loaded = (await read(db, lambda c: definitions.get_workflow(c, "proj", "wf"))).spec
    extract, clean, enrich, load = loaded.tasks
    assert [t.name for t in loaded.tasks] == ["extract", "clean", "enrich", "load"]
    assert (extract.upstream, clean.upstream, load.upstream) == (
        (),
        ("extract",),
        ("clean", "enrich"),
    )
    assert (extract.priority, extract.retries) == (Priority.HIGH, 3)
    assert extract.retry_interval == timedelta(seconds=30)
    assert extract.params == {"SOURCE": "s3://bucket/raw"}
    assert (clean.timeout, clean.worker_group) == (timedelta(minutes=5), "cpu")
    assert enrich.delay == timedelta(milliseconds=1500)
    assert enrich.timeout_strategy is TimeoutStrategy.WARN_FAIL
    assert enrich.priority is Priority.LOWEST
    assert load.disabled and not extract.disabled
    assert loaded.params == {"DAY": "2026-03-14"}
    assert loaded.description == "nightly load"


async def test_creating_a_workflow_twice_is_already_exists(db: Database) -> None:
    await make_workflow(db)
    with pytest.raises(AlreadyExists) as caught:
        await write(db, lambda c: definitions.create_workflow(c, _second_version(), at(1)))
    assert caught.value.metadata == {"project": "proj", "workflow": "wf"}
    assert (await read(db, lambda c: definitions.get_workflow(c, "proj", "wf"))).version == 1


async def test_the_same_workflow_name_may_exist_in_two_projects(db: Database) -> None:
    first = await make_workflow(db, workflow_spec("one"))
    second = await make_workflow(db, workflow_spec("two"))
    assert first.id != second.id
    assert (first.project, second.project) == ("one", "two")


async def test_creating_a_workflow_in_an_unknown_project_is_not_found(db: Database) -> None:
    with pytest.raises(NotFound) as caught:
        await write(db, lambda c: definitions.create_workflow(c, workflow_spec("ghost"), NOW))
    assert caught.value.metadata == {"project": "ghost"}
    assert await _rows(db, WorkflowVersion) == 0


async def test_update_stores_a_new_current_version_and_keeps_the_old_one(db: Database) -> None:
    first = await make_workflow(db)
    v2 = _second_version()
    updated = await _update(db, v2, 60)
    assert (updated.id, updated.version) == (first.id, 2)
    assert updated.spec == v2
    assert updated.create_time == NOW
    assert updated.update_time == at(60)

    current = await read(db, lambda c: definitions.get_workflow(c, "proj", "wf"))
    assert current == updated
    old = await read(db, lambda c: definitions.get_workflow(c, "proj", "wf", 1))
    assert old.version == 1
    assert old.spec == first.spec
    assert old.update_time == NOW
    assert [t.name for t in old.spec.tasks] == ["extract", "clean", "enrich", "load"]
    assert old.spec.tasks[3].upstream == ("clean", "enrich")
    assert old.spec.tasks[0].priority is Priority.HIGH
    assert old.spec.params == {"DAY": "2026-03-14"}


async def test_every_version_stays_readable_by_code_and_number(db: Database) -> None:
    first = await make_workflow(db)
    await _update(db, _second_version(), 60)
    await _update(db, _third_version(), 120)
    specs = [first.spec, _second_version(), _third_version()]
    async with db.read() as conn:
        for number, spec in enumerate(specs, start=1):
            loaded = await definitions.get_workflow_by_code(conn, first.id, number)
            assert (loaded.version, loaded.spec) == (number, spec)
    current = await read(db, lambda c: definitions.get_workflow_by_code(c, first.id))
    assert current.version == 3


async def test_getting_a_version_that_does_not_exist_is_not_found(db: Database) -> None:
    await make_workflow(db)
    with pytest.raises(NotFound) as caught:
        await read(db, lambda c: definitions.get_workflow(c, "proj", "wf", 2))
    assert caught.value.reason == "VERSION_NOT_FOUND"
    assert caught.value.metadata == {"workflow": "wf", "version": "2"}


async def test_getting_an_unknown_workflow_is_not_found(db: Database) -> None:
    await make_project(db)
    with pytest.raises(NotFound) as by_name:
        await read(db, lambda c: definitions.get_workflow(c, "proj", "ghost"))
    assert by_name.value.metadata == {"project": "proj", "workflow": "ghost"}
    with pytest.raises(NotFound):
        await read(db, lambda c: definitions.get_workflow_by_code(c, 999_999))


async def test_updating_an_online_workflow_is_a_failed_precondition(db: Database) -> None:
    await make_workflow(db)
    await _release(db, ReleaseState.ONLINE)
    with pytest.raises(FailedPrecondition) as caught:
        await _update(db, _second_version(), 60)
    assert caught.value.reason == "WORKFLOW_ONLINE"
    current = await read(db, lambda c: definitions.get_workflow(c, "proj", "wf"))
    assert current.version == 1
    assert await _rows(db, WorkflowVersion) == 1


async def test_updating_an_unknown_workflow_is_not_found(db: Database) -> None:
    await make_project(db)
    with pytest.raises(NotFound):
        await _update(db, _second_version(), 60)


async def test_versions_are_listed_newest_first_with_their_task_counts(db: Database) -> None:
    await make_workflow(db)
    await _update(db, _second_version(), 60)
    await _update(db, _third_version(), 120)
    page = await read(db, lambda c: definitions.list_versions(c, 1, None, 50))
    assert [(v.version, v.task_count, v.description) for v in page] == [
        (3, 1, "v3"),
        (2, 3, "nightly load, v2"),
        (1, 4, "nightly load"),
    ]
    assert [v.create_time for v in page] == [at(120), at(60), NOW]


async def test_versions_are_paged(db: Database) -> None:
    await make_workflow(db)
    await _update(db, _second_version(), 60)
    await _update(db, _third_version(), 120)
    code = await read(db, lambda c: definitions.workflow_code(c, "proj", "wf"))
    first = await read(db, lambda c: definitions.list_versions(c, code, None, 2))
    assert [v.version for v in first] == [3, 2]
    rest = await read(db, lambda c: definitions.list_versions(c, code, first[-1].version, 2))
    assert [v.version for v in rest] == [1]


async def test_workflows_of_a_project_are_listed_by_name_with_their_current_version(
    db: Database,
) -> None:
    for name in ["wf-c", "wf-a", "wf-b"]:
        await make_workflow(db, workflow_spec(name=name))
    await make_workflow(db, workflow_spec("other", "wf-z"))
    await write(
        db,
        lambda c: definitions.update_workflow(
            c, workflow_spec(name="wf-b", tasks=(shell("x"),)), NOW
        ),
    )
    project = await read(db, lambda c: definitions.get_project(c, "proj"))
    first = await read(db, lambda c: definitions.workflow_codes(c, project.id, None, 2))
    assert [name for _, name in first] == ["wf-a", "wf-b"]
    async with db.read() as conn:
        current = [await definitions.get_workflow_by_code(conn, code) for code, _ in first]
    assert [(w.spec.name, w.version) for w in current] == [("wf-a", 1), ("wf-b", 2)]
    rest = await read(db, lambda c: definitions.workflow_codes(c, project.id, "wf-b", 2))
    assert [name for _, name in rest] == ["wf-c"]


async def test_release_state_moves_between_offline_and_online(db: Database) -> None:
    await make_workflow(db)
    online = await _release(db, ReleaseState.ONLINE)
    assert online.release_state is ReleaseState.ONLINE
    again = await _release(db, ReleaseState.ONLINE)  # idempotent
    assert again == online
    stored = await read(db, lambda c: definitions.get_workflow(c, "proj", "wf"))
    assert stored.release_state is ReleaseState.ONLINE
    offline = await _release(db, ReleaseState.OFFLINE)
    assert offline.release_state is ReleaseState.OFFLINE
    assert (await _update(db, _second_version(), 60)).version == 2


async def test_deleting_an_online_workflow_is_a_failed_precondition(db: Database) -> None:
    await make_workflow(db)
    await _release(db, ReleaseState.ONLINE)
    with pytest.raises(FailedPrecondition) as caught:
        await write(db, lambda c: definitions.delete_workflow(c, "proj", "wf"))
    assert caught.value.reason == "WORKFLOW_ONLINE"
    assert (await read(db, lambda c: definitions.get_workflow(c, "proj", "wf"))).version == 1


@pytest.mark.parametrize(
    "state",
    [
        WorkflowState.SUBMITTED,
        WorkflowState.RUNNING,
        WorkflowState.READY_PAUSE,
        WorkflowState.READY_STOP,
        WorkflowState.FAILOVER,
    ],
)
async def test_deleting_a_workflow_with_an_unfinished_instance_is_a_failed_precondition(
    db: Database, state: WorkflowState
) -> None:
    workflow = await make_workflow(db)
    instance_id = await make_instance(db, workflow)
    await write(
        db,
        lambda c: put_state(c, instance_id, state),
    )
    with pytest.raises(FailedPrecondition) as caught:
        await write(db, lambda c: definitions.delete_workflow(c, "proj", "wf"))
    assert caught.value.reason == "WORKFLOW_HAS_RUNNING_INSTANCES"
    assert (await read(db, lambda c: instances.get_instance(c, instance_id))).state is state


async def test_deleting_a_workflow_removes_its_versions_and_finished_instances(
    db: Database,
) -> None:
    workflow = await make_workflow(db)
    await _update(db, _second_version(), 60)
    kept = await make_workflow(db, workflow_spec(name="kept"))
    kept_instance = await make_instance(db, kept)
    instance_id = await make_instance(db, workflow)

    async def finish_with_history(conn: Conn) -> None:
        await put_state(conn, instance_id, WorkflowState.SUCCEEDED)
        (ti,) = await task_instances.create_attempts(
            conn,
            instance_id,
            [first_attempt("extract", Priority.HIGH)],
            NOW,
        )
        await put_task_state(conn, ti, TaskState.SUCCEEDED)
        await events.append(
            conn, [NewEvent(workflow_instance_id=instance_id, task_instance_id=ti)], NOW
        )

    await write(db, finish_with_history)
    await write(db, lambda c: definitions.delete_workflow(c, "proj", "wf"))

    with pytest.raises(NotFound):
        await read(db, lambda c: definitions.get_workflow(c, "proj", "wf"))
    with pytest.raises(NotFound):
        await read(db, lambda c: instances.get_instance(c, instance_id))
    # Everything hanging off the workflow and its instance went with it (foreign keys cascade).
    assert await _rows(db, WorkflowVersion) == 1
    assert await _rows(db, TaskDefinition) == 4
    assert await _rows(db, TaskEdge) == 4
    assert await _rows(db, WorkflowInstance) == 1
    assert await _rows(db, Command) == 1  # the other instance's START
    assert await _rows(db, TaskInstance) == 0
    assert await _rows(db, InstanceEvent) == 0
    assert (await read(db, lambda c: instances.get_instance(c, kept_instance))).workflow == "kept"


async def test_ids_of_deleted_rows_are_never_handed_out_again(db: Database) -> None:
    # Workers remember task instance ids (their dispatch dedup key): a reused id would make a new
    # attempt look like one they already ran. SQLite needs AUTOINCREMENT for this guarantee.
    doomed = await make_workflow(db, workflow_spec(name="doomed"))
    old_instance = await make_instance(db, doomed)

    async def one_attempt(conn: Conn, instance_id: int) -> int:
        (ti,) = await task_instances.create_attempts(
            conn,
            instance_id,
            [
                NewAttempt(
                    task_name="extract",
                    attempt=1,
                    retry_times=0,
                    state=TaskState.SUBMITTED,
                    priority=Priority.MEDIUM,
                    worker_group="",
                )
            ],
            NOW,
        )
        await instances.delete_commands(conn, instance_id)
        await instances.set_state(
            conn,
            instance_id,
            epoch=None,
            expected=[WorkflowState.SUBMITTED],
            state=WorkflowState.STOPPED,
        )
        return ti

    old_ti = await write(db, lambda c: one_attempt(c, old_instance))
    await write(db, lambda c: definitions.delete_workflow(c, "proj", "doomed"))

    fresh = await make_workflow(db, workflow_spec(name="fresh"))
    new_instance = await make_instance(db, fresh)
    new_ti = await write(db, lambda c: one_attempt(c, new_instance))

    assert fresh.id > doomed.id
    assert new_instance > old_instance
    assert new_ti > old_ti


async def _edit(db: Database, spec: WorkflowSpec, barrier: asyncio.Barrier) -> WorkflowRecord:
    async with db.transaction() as conn:
        await definitions.get_workflow(conn, "proj", "wf")
        await overlap(db, barrier)
        return await definitions.update_workflow(conn, spec, at(60))


async def test_concurrent_updates_never_leave_a_gap_or_a_duplicate_version(db: Database) -> None:
    first = await make_workflow(db)
    barrier = asyncio.Barrier(2)
    edits = (_second_version(), _third_version())
    results = await asyncio.wait_for(
        asyncio.gather(*(_edit(db, e, barrier) for e in edits), return_exceptions=True),
        timeout=20,
    )
    won = [r for r in results if isinstance(r, WorkflowRecord)]
    lost = [r for r in results if not isinstance(r, WorkflowRecord)]
    assert won, results
    for error in lost:  # on PostgreSQL and MariaDB one of the two may find the head moved
        assert isinstance(error, Aborted)
        assert error.reason == "CONCURRENT_UPDATE"
    code = await read(db, lambda c: definitions.workflow_code(c, "proj", "wf"))
    versions = await read(db, lambda c: definitions.list_versions(c, code, None, 50))
    assert [v.version for v in versions] == list(range(1 + len(won), 0, -1))
    current = await read(db, lambda c: definitions.get_workflow(c, "proj", "wf"))
    assert current.version == 1 + len(won)
    if len(won) == 1:
        assert current == won[0]
    async with db.read() as conn:
        for record in won:
            stored = await definitions.get_workflow_by_code(conn, first.id, record.version)
            assert stored.spec == record.spec


class _Rollback(Exception):
    pass


async def test_a_version_read_by_a_transaction_that_rolls_back_is_not_remembered(
    db: Database,
) -> None:
    # The rolled-back workflow's id may be given again (SQLite, MariaDB), at the same time here:
    # the second workflow must load as itself, not as the version the first transaction read.
    await make_project(db, "proj")
    first = workflow_spec(name="gone", tasks=(shell("first"),))
    with pytest.raises(_Rollback):
        async with db.transaction() as conn:
            created = await definitions.create_workflow(conn, first, NOW)
            assert (await definitions.get_workflow_by_code(conn, created.id)).spec == first
            raise _Rollback
    assert len(db.memo) == 0
    second = workflow_spec(name="kept", tasks=(shell("second"),))
    await write(db, lambda c: definitions.create_workflow(c, second, NOW))
    loaded = await read(db, lambda c: definitions.get_workflow(c, "proj", "kept"))
    assert loaded.spec == second
    assert len(db.memo) == 1  # published by the commit


async def test_a_remembered_version_loads_with_the_head_as_it_is_now(db: Database) -> None:
    workflow = await make_workflow(db)
    before = await read(db, lambda c: definitions.get_workflow_by_code(c, workflow.id))
    await write(
        db, lambda c: definitions.set_release_state(c, "proj", "wf", ReleaseState.ONLINE, NOW)
    )
    after = await read(db, lambda c: definitions.get_workflow(c, "proj", "wf"))
    assert len(db.memo) == 1
    assert (before.release_state, after.release_state) == (
        ReleaseState.OFFLINE,
        ReleaseState.ONLINE,
    )
    assert after.spec == before.spec and after.update_time == before.update_time
    assert after.project_id == before.project_id
