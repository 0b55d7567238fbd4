"""Task instances (attempts): creation superseding earlier attempts, conditional transitions,
queries."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pytest
from sqlalchemy.exc import IntegrityError

from dsched.errors import NotFound
from dsched.options import Priority
from dsched.states import TaskState
from dsched_server.core.records import TaskInstanceRecord
from dsched_server.core.transitions import TASK_INITIAL
from dsched_server.store import task_instances
from dsched_server.store.database import Conn, Database
from dsched_server.store.task_instances import NewAttempt
from tests.integration.store.conftest import (
    NOW,
    at,
    claim_instance,
    make_instance,
    make_workflow,
    put_task_state,
    read,
    workflow_spec,
    write,
)

T = TaskState


def _attempt(
    name: str,
    attempt: int = 1,
    *,
    state: TaskState = T.SUBMITTED,
    priority: Priority = Priority.MEDIUM,
    worker_group: str = "",
) -> NewAttempt:
    return NewAttempt(
        task_name=name,
        attempt=attempt,
        retry_times=attempt - 1,
        state=state,
        priority=priority,
        worker_group=worker_group,
    )


async def _instance(db: Database, workflow: str = "wf") -> int:
    record = await make_workflow(db, workflow_spec(name=workflow))
    instance_id = await make_instance(db, record)
    await claim_instance(db, instance_id)
    return instance_id


async def _create(
    db: Database, instance_id: int, attempts: Sequence[NewAttempt], seconds: float = 0
) -> list[int]:
    """Creates the attempts queued, then puts those of other states in them (a starting point:
    an attempt is only ever created queued)."""
    queued = [replace(a, state=T.SUBMITTED) if a.state not in TASK_INITIAL else a for a in attempts]

    async def run(conn: Conn) -> list[int]:
        ids = await task_instances.create_attempts(conn, instance_id, queued, at(seconds))
        for ti, a in zip(ids, attempts, strict=True):
            if a.state not in TASK_INITIAL:
                await put_task_state(conn, ti, a.state)
        return ids

    return await write(db, run)


async def _get(db: Database, ti: int) -> TaskInstanceRecord:
    return await read(db, lambda c: task_instances.get(c, ti))


async def _valid(db: Database, instance_id: int) -> list[tuple[str, int]]:
    rows = await read(db, lambda c: task_instances.valid_attempts(c, instance_id))
    return sorted((r.task_name, r.attempt) for r in rows)


async def _transition(
    db: Database,
    ti: int,
    expected: Sequence[TaskState],
    state: TaskState,
    *,
    worker_epoch: int | None = None,
    values: task_instances.TaskValues | None = None,
) -> bool:
    return await write(
        db,
        lambda c: task_instances.transition(
            c, ti, expected=expected, state=state, worker_epoch=worker_epoch, values=values
        ),
    )


async def _listed(
    db: Database, instance_id: int, *, include_superseded: bool, size: int
) -> list[list[tuple[str, int]]]:
    """Pages of ``size`` rows (0: 50), each after the last id of the previous one (keyset)."""
    pages: list[list[tuple[str, int]]] = []
    after: int | None = None
    limit = size or 50
    async with db.read() as conn:
        while True:
            rows = await task_instances.list_for_instance(
                conn,
                instance_id,
                include_superseded=include_superseded,
                after=after,
                limit=limit + 1,
            )
            pages.append([(r.task_name, r.attempt) for r in rows[:limit]])
            if len(rows) <= limit:
                return pages
            after = rows[limit - 1].id


async def test_create_attempts_returns_the_ids_in_the_given_order(db: Database) -> None:
    instance_id = await _instance(db)
    names = ["load", "extract", "enrich", "clean"]
    ids = await _create(db, instance_id, [_attempt(n) for n in names])
    assert len(set(ids)) == 4
    assert [(await _get(db, i)).task_name for i in ids] == names
    assert await _create(db, instance_id, []) == []


async def test_a_new_attempt_is_stored_with_its_settings_and_blank_runtime_fields(
    db: Database,
) -> None:
    instance_id = await _instance(db)
    new = _attempt("extract", 3, state=T.DELAY_EXECUTION, priority=Priority.HIGH, worker_group="io")
    (ti,) = await _create(db, instance_id, [new], seconds=5)
    assert await _get(db, ti) == TaskInstanceRecord(
        id=ti,
        workflow_instance_id=instance_id,
        task_name="extract",
        attempt=3,
        retry_times=2,
        state=T.DELAY_EXECUTION,
        valid=True,
        host="",
        worker_epoch=0,
        pid=0,
        log_path="",
        exit_code=None,
        submit_time=at(5),
        start_time=None,
        end_time=None,
        out_params={},
        priority=Priority.HIGH,
        worker_group="io",
        state_reason="",
    )


async def test_a_new_attempt_supersedes_the_earlier_valid_attempt_of_the_same_task(
    db: Database,
) -> None:
    instance_id = await _instance(db)
    first_extract, first_clean = await _create(
        db, instance_id, [_attempt("extract"), _attempt("clean")]
    )
    (second_extract,) = await _create(db, instance_id, [_attempt("extract", 2)])

    assert (await _get(db, first_extract)).valid is False
    assert (await _get(db, first_clean)).valid is True
    assert (await _get(db, second_extract)).valid is True
    assert await _valid(db, instance_id) == [("clean", 1), ("extract", 2)]


async def test_attempts_created_in_one_transaction_leave_one_valid_attempt_per_task(
    db: Database,
) -> None:
    instance_id = await _instance(db)
    async with db.transaction() as conn:
        for attempt in (1, 2, 3):
            await task_instances.create_attempts(
                conn, instance_id, [_attempt("extract", attempt), _attempt("clean", attempt)], NOW
            )
    assert await _valid(db, instance_id) == [("clean", 3), ("extract", 3)]
    (every,) = await _listed(db, instance_id, include_superseded=True, size=0)
    assert len(every) == 6


async def test_attempts_of_other_instances_are_not_superseded(db: Database) -> None:
    one = await _instance(db, "one")
    two = await _instance(db, "two")
    await _create(db, one, [_attempt("extract")])
    await _create(db, two, [_attempt("extract")])
    await _create(db, two, [_attempt("extract", 2)])
    assert await _valid(db, one) == [("extract", 1)]
    assert await _valid(db, two) == [("extract", 2)]


async def test_a_duplicate_attempt_number_is_an_integrity_error_and_changes_nothing(
    db: Database,
) -> None:
    instance_id = await _instance(db)
    (first,) = await _create(db, instance_id, [_attempt("extract")])
    with pytest.raises(IntegrityError):
        await _create(db, instance_id, [_attempt("clean"), _attempt("extract")])
    # The supersede of the same transaction rolled back with the failed insert.
    assert await _valid(db, instance_id) == [("extract", 1)]
    assert (await _get(db, first)).valid is True


async def test_transition_moves_a_valid_attempt_from_an_expected_state(db: Database) -> None:
    instance_id = await _instance(db)
    (ti,) = await _create(db, instance_id, [_attempt("extract")])
    values: task_instances.TaskValues = {
        "host": "worker-1:1234",
        "worker_epoch": 5,
        "pid": 4242,
        "start_time": at(1),
    }
    moved = await _transition(db, ti, [T.SUBMITTED, T.DISPATCHED], T.RUNNING, values=values)
    assert moved is True
    record = await _get(db, ti)
    assert (record.state, record.host, record.worker_epoch, record.pid, record.start_time) == (
        T.RUNNING,
        "worker-1:1234",
        5,
        4242,
        at(1),
    )


async def test_transition_from_an_unexpected_state_returns_false_and_changes_nothing(
    db: Database,
) -> None:
    instance_id = await _instance(db)
    (ti,) = await _create(db, instance_id, [_attempt("extract", state=T.RUNNING)])
    before = await _get(db, ti)
    moved = await _transition(db, ti, [T.SUBMITTED, T.DISPATCHED], T.KILLED)
    assert moved is False
    assert await _get(db, ti) == before


async def test_a_worker_report_applies_for_an_unowned_attempt_or_the_owning_worker_epoch(
    db: Database,
) -> None:
    instance_id = await _instance(db)
    (ti,) = await _create(db, instance_id, [_attempt("extract", state=T.DISPATCHED)])
    # Worker epoch 0: not yet stamped, so any worker incarnation's report applies.
    assert await _transition(
        db, ti, [T.DISPATCHED], T.RUNNING, worker_epoch=5, values={"worker_epoch": 5}
    )
    # Now only epoch 5 (or a master-side write without an epoch) applies.
    assert not await _transition(db, ti, [T.RUNNING], T.FAILED, worker_epoch=6)
    assert (await _get(db, ti)).state is T.RUNNING
    out: task_instances.TaskValues = {
        "out_params": {"ROWS": "42"},
        "exit_code": 3,
        "end_time": at(9),
    }
    assert await _transition(db, ti, [T.RUNNING], T.FAILED, worker_epoch=5, values=out)
    assert await _transition(db, ti, [T.FAILED], T.FORCED_SUCCESS)  # master: no epoch
    record = await _get(db, ti)
    assert (record.state, record.out_params, record.exit_code, record.end_time) == (
        T.FORCED_SUCCESS,
        {"ROWS": "42"},
        3,
        at(9),
    )


async def test_a_superseded_attempt_never_transitions(db: Database) -> None:
    instance_id = await _instance(db)
    (old,) = await _create(db, instance_id, [_attempt("extract", state=T.RUNNING)])
    await _create(db, instance_id, [_attempt("extract", 2)])
    assert not await _transition(db, old, [T.RUNNING], T.SUCCEEDED)
    assert not await _transition(db, old, [T.RUNNING], T.SUCCEEDED, worker_epoch=0)
    record = await _get(db, old)
    assert (record.state, record.valid) == (T.RUNNING, False)


async def test_supersede_invalidates_exactly_the_given_attempts(db: Database) -> None:
    instance_id = await _instance(db)
    extract, clean, load = await _create(
        db, instance_id, [_attempt("extract"), _attempt("clean"), _attempt("load")]
    )
    await write(db, lambda c: task_instances.supersede(c, [extract, load]))
    await write(db, lambda c: task_instances.supersede(c, []))  # a no-op
    assert [(await _get(db, i)).valid for i in (extract, clean, load)] == [False, True, False]
    assert await _valid(db, instance_id) == [("clean", 1)]


async def test_last_attempts_counts_superseded_attempts_too(db: Database) -> None:
    instance_id = await _instance(db)
    other = await _instance(db, "other")
    await _create(db, instance_id, [_attempt("extract"), _attempt("clean")])
    await _create(db, instance_id, [_attempt("extract", 2)])
    (third,) = await _create(db, instance_id, [_attempt("extract", 3)])
    await write(db, lambda c: task_instances.supersede(c, [third]))
    await _create(db, other, [_attempt("extract", 9)])
    last = await read(db, lambda c: task_instances.last_attempts(c, instance_id))
    assert last == {"extract": 3, "clean": 1}
    assert await read(db, lambda c: task_instances.last_attempts(c, 999_999)) == {}


async def test_list_for_instance_pages_valid_or_all_attempts_by_id(db: Database) -> None:
    instance_id = await _instance(db)
    other = await _instance(db, "other")
    await _create(db, instance_id, [_attempt("extract"), _attempt("clean")])
    await _create(db, other, [_attempt("extract")])
    await _create(db, instance_id, [_attempt("extract", 2), _attempt("enrich")])
    await _create(db, instance_id, [_attempt("clean", 2)])

    assert await _listed(db, instance_id, include_superseded=False, size=2) == [
        [("extract", 2), ("enrich", 1)],
        [("clean", 2)],
    ]
    assert await _listed(db, instance_id, include_superseded=True, size=2) == [
        [("extract", 1), ("clean", 1)],
        [("extract", 2), ("enrich", 1)],
        [("clean", 2)],
    ]
    assert await _listed(db, instance_id, include_superseded=True, size=5) == [
        [("extract", 1), ("clean", 1), ("extract", 2), ("enrich", 1), ("clean", 2)]
    ]


async def test_count_unfinished_failures_counts_valid_failed_and_killed_attempts(
    db: Database,
) -> None:
    instance_id = await _instance(db)
    other = await _instance(db, "other")
    await _create(
        db,
        instance_id,
        [
            _attempt("extract", state=T.FAILED),
            _attempt("clean", state=T.KILLED),
            _attempt("enrich", state=T.SUCCEEDED),
            _attempt("load", state=T.FAILED),
        ],
    )
    await _create(db, instance_id, [_attempt("load", 2, state=T.RUNNING)])  # replaces a failure
    await _create(db, other, [_attempt("extract", state=T.FAILED)])
    count = await read(db, lambda c: task_instances.count_unfinished_failures(c, instance_id))
    assert count == 2
    none = await read(db, lambda c: task_instances.count_unfinished_failures(c, 999_999))
    assert none == 0


async def test_getting_an_unknown_attempt_is_not_found(db: Database) -> None:
    with pytest.raises(NotFound) as caught:
        await _get(db, 31337)
    assert caught.value.metadata == {"task_instance": "31337"}
