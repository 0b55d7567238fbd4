"""Illegal transitions are refused at write time (issue 9, acceptance 2; ARCHITECTURE.md §8.3).

For every pair of states the transition tables forbid, the row is put in the source state, the
write the engine or the API would make is tried through the store (the runner's one-call batch
commit, the repository functions under it, the API's), and the test asserts that it
raised IllegalTransition, was counted, and stored nothing (the row reads back byte for byte as
before; a claim's command is still there). The allowed pairs go through the same calls and are
stored, so the guard is not simply refusing everything. Runs on SQLite, PostgreSQL and MariaDB.

A write that keeps a live state (a waiting reason on a SUBMITTED attempt) is a field update, not a
transition (core/transitions.py); those pairs are checked as stored, the terminal ones as
refused.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

import pytest
from sqlalchemy import update

from dsched.errors import IllegalTransition
from dsched.options import CommandType, Priority
from dsched.states import TaskState, WorkflowState
from dsched_server.core.records import CommandRecord
from dsched_server.core.transitions import task_path_allowed, workflow_path_allowed
from dsched_server.store import batch, guard, instances, task_instances
from dsched_server.store.batch import BatchWrites
from dsched_server.store.database import Conn, Database
from dsched_server.store.models import TaskInstance, WorkflowInstance, table
from dsched_server.store.task_instances import NewAttempt, TaskWrite
from tests.integration.store.conftest import (
    NOW,
    at,
    claim_instance,
    make_instance,
    make_workflow,
    read,
    shell,
    workflow_spec,
    write,
)

T = TaskState
W = WorkflowState
EPOCH = 7
TASK_PAIRS = list(itertools.product(TaskState, TaskState))
WORKFLOW_PAIRS = list(itertools.product(WorkflowState, WorkflowState))
S = TypeVar("S", TaskState, WorkflowState)


async def _instance(db: Database) -> int:
    workflow = await make_workflow(db, workflow_spec(tasks=(shell("a"),)))
    instance_id = await make_instance(db, workflow)
    await claim_instance(db, instance_id, epoch=EPOCH)
    return instance_id


async def _attempt(db: Database, instance_id: int) -> int:
    row = NewAttempt(
        task_name="a",
        attempt=1,
        retry_times=0,
        state=T.SUBMITTED,
        priority=Priority.MEDIUM,
        worker_group="",
    )
    (ti,) = await write(db, lambda c: task_instances.create_attempts(c, instance_id, [row], NOW))
    return ti


async def _put_task(db: Database, ti: int, state: TaskState) -> None:
    """Puts the row in ``state`` behind the repositories' back (the test's starting point)."""
    TI = table(TaskInstance)
    stmt = update(TI).where(TI.c.id == ti).values(state=state.value, state_reason="before")
    await write(db, lambda c: c.execute(stmt))


async def _put_instance(db: Database, instance_id: int, state: WorkflowState) -> None:
    WI = table(WorkflowInstance)
    stmt = (
        update(WI)
        .where(WI.c.id == instance_id)
        .values(state=state.value, state_reason="before", epoch=EPOCH)
    )
    await write(db, lambda c: c.execute(stmt))


async def _refused(db: Database, fn: Callable[[Conn], Awaitable[object]]) -> bool:
    """Runs ``fn`` in a transaction; True if it raised IllegalTransition (and so rolled back)."""
    return await _refused_call(db, lambda: write(db, fn))


async def _refused_call(db: Database, call: Callable[[], Awaitable[object]]) -> bool:
    try:
        await call()
    except IllegalTransition:
        return True
    return False


def _in_transaction(fn: Callable[[Conn], Awaitable[object]]) -> Write:
    return lambda db: write(db, fn)


Write = Callable[[Database], Awaitable[object]]


def _task_writes(ti: int, instance_id: int, src: TaskState, dst: TaskState) -> dict[str, Write]:
    """The task state write paths: the runner's batch commit (one store call), the bulk write it
    uses, and the API's single transition."""
    values: task_instances.TaskValues = {"state_reason": "after", "end_time": at(5)}

    def task_write() -> TaskWrite:
        return TaskWrite(
            task_instance_id=ti,
            expected=frozenset({src}),
            state=dst,
            worker_epoch=None,
            values=values.copy(),
        )

    writes = BatchWrites(
        instance_id=instance_id,
        epoch=EPOCH,
        now=at(5),
        state_before=W.RUNNING,
        task_writes={ti: task_write()},
    )
    return {
        "commit": lambda db: batch.commit(db, writes),
        "apply_writes": _in_transaction(lambda c: task_instances.apply_writes(c, [task_write()])),
        "transition": _in_transaction(
            lambda c: task_instances.transition(c, ti, expected={src}, state=dst, values=values)
        ),
    }


@dataclass(slots=True)
class Sweep:
    """What trying every pair of one table found."""

    illegal: int = 0
    stored_wrongly: list[str] = field(default_factory=list)
    refused_legal: list[str] = field(default_factory=list)


class _Row(Protocol):
    @property
    def state(self) -> TaskState | WorkflowState: ...

    @property
    def state_reason(self) -> str: ...


async def _sweep(
    db: Database,
    pairs: Sequence[tuple[S, S]],
    allowed: Callable[[S, Sequence[S]], bool],
    put: Callable[[S], Awaitable[None]],
    get: Callable[[], Awaitable[_Row]],
    writes: Callable[[S, S], dict[str, Write]],
) -> Sweep:
    """Puts the row in each source state and tries each write path to each destination."""
    found = Sweep()
    for src, dst in pairs:
        for path_name, call in writes(src, dst).items():
            await put(src)
            before = await get()
            refused = await _refused_call(db, functools.partial(call, db))
            after = await get()
            edge = f"{path_name}: {src} -> {dst}"
            if allowed(src, [dst]):
                if refused or after.state is not dst or after.state_reason != "after":
                    found.refused_legal.append(edge)
                continue
            found.illegal += 1
            if not refused or after != before:
                found.stored_wrongly.append(edge)
    return found


async def test_every_illegal_task_edge_is_refused_and_stores_nothing(db: Database) -> None:
    instance_id = await _instance(db)
    ti = await _attempt(db, instance_id)
    refusals = guard.REFUSALS.task_instances
    found = await _sweep(
        db,
        TASK_PAIRS,
        task_path_allowed,
        lambda state: _put_task(db, ti, state),
        lambda: read(db, lambda c: task_instances.get(c, ti)),
        lambda src, dst: _task_writes(ti, instance_id, src, dst),
    )
    assert found.stored_wrongly == []
    assert found.refused_legal == []
    # 100 pairs, of which the table allows 22 and 4 are live same-state writes; three paths.
    assert found.illegal == 3 * (len(TASK_PAIRS) - 22 - 4)
    assert guard.REFUSALS.task_instances - refusals == found.illegal


async def test_a_coalesced_task_write_is_checked_step_by_step(db: Database) -> None:
    instance_id = await _instance(db)
    ti = await _attempt(db, instance_id)
    await _put_task(db, ti, T.DELAY_EXECUTION)

    def coalesced(via: tuple[TaskState, ...]) -> Callable[[Conn], Awaitable[None]]:
        write_ = TaskWrite(
            task_instance_id=ti,
            expected=frozenset({T.DELAY_EXECUTION}),
            state=T.FAILED,
            worker_epoch=None,
            values={"state_reason": "after"},
            via=via,
        )
        return lambda c: task_instances.apply_writes(c, [write_])

    # DELAY_EXECUTION -> FAILED is not an edge; through SUBMITTED (the delay ran out, then the
    # dispatch timeout) it is two.
    assert await _refused(db, coalesced(()))
    assert (await read(db, lambda c: task_instances.get(c, ti))).state is T.DELAY_EXECUTION
    assert not await _refused(db, coalesced((T.SUBMITTED,)))
    assert (await read(db, lambda c: task_instances.get(c, ti))).state is T.FAILED


@pytest.mark.parametrize(
    "state", [s for s in TaskState if s not in (T.SUBMITTED, T.DELAY_EXECUTION)]
)
async def test_an_attempt_is_created_queued_only(db: Database, state: TaskState) -> None:
    instance_id = await _instance(db)
    row = NewAttempt(
        task_name="a",
        attempt=1,
        retry_times=0,
        state=state,
        priority=Priority.MEDIUM,
        worker_group="",
    )
    assert await _refused(db, lambda c: task_instances.create_attempts(c, instance_id, [row], NOW))
    assert await read(db, lambda c: task_instances.valid_attempts(c, instance_id)) == []


def _workflow_writes(instance_id: int, src: WorkflowState, dst: WorkflowState) -> dict[str, Write]:
    """The workflow state write paths: the runner's batch commit, the owner's fenced write it
    uses, and the API's unfenced one."""
    values: instances.InstanceValues = {"state_reason": "after"}
    writes = BatchWrites(
        instance_id=instance_id,
        epoch=EPOCH,
        now=at(5),
        state_before=src,
        path=[dst],
        fields=values.copy(),
    )
    return {
        "commit": lambda db: batch.commit(db, writes),
        "owner": _in_transaction(
            lambda c: instances.set_state(
                c, instance_id, epoch=EPOCH, expected={src}, state=dst, values=values
            )
        ),
        "api": _in_transaction(
            lambda c: instances.set_state(
                c, instance_id, epoch=None, expected={src}, state=dst, values=values
            )
        ),
    }


async def test_every_illegal_workflow_edge_is_refused_and_stores_nothing(db: Database) -> None:
    instance_id = await _instance(db)
    refusals = guard.REFUSALS.workflow_instances
    found = await _sweep(
        db,
        WORKFLOW_PAIRS,
        workflow_path_allowed,
        lambda state: _put_instance(db, instance_id, state),
        lambda: read(db, lambda c: instances.get_instance(c, instance_id)),
        lambda src, dst: _workflow_writes(instance_id, src, dst),
    )
    assert found.stored_wrongly == []
    assert found.refused_legal == []
    # 81 pairs, 28 in the table, 5 live same-state writes; three write paths each.
    assert found.illegal == 3 * (len(WORKFLOW_PAIRS) - 28 - 5)
    assert guard.REFUSALS.workflow_instances - refusals == found.illegal


@pytest.mark.parametrize("dst", [W.RUNNING, W.READY_PAUSE, W.READY_STOP])
async def test_a_claim_into_an_illegal_state_is_refused_and_keeps_its_command(
    db: Database, dst: WorkflowState
) -> None:
    instance_id = await _instance(db)
    for src in WorkflowState:
        if workflow_path_allowed(src, [dst]):
            continue
        await _put_instance(db, instance_id, src)
        await write(
            db,
            lambda c: instances.add_command(c, instance_id, CommandType.START, 0, None, NOW),
        )
        before = await read(db, lambda c: instances.get_instance(c, instance_id))
        (command,) = await read(db, lambda c: instances.pending_commands(c, 10))

        def claim(c: Conn, command: CommandRecord = command) -> Awaitable[bool]:
            return instances.claim(c, command, host="m2:1", epoch=8, state=dst, values={})

        assert await _refused(db, claim), f"{src} -> {dst}"
        assert await read(db, lambda c: instances.get_instance(c, instance_id)) == before
        assert await read(db, lambda c: instances.pending_commands(c, 10)) == [command]
        await write(db, lambda c: instances.delete_commands(c, instance_id))


async def test_a_failover_of_states_that_cannot_fail_over_is_refused(db: Database) -> None:
    instance_id = await _instance(db)
    await _put_instance(db, instance_id, W.PAUSED)
    before = await read(db, lambda c: instances.get_instance(c, instance_id))
    assert await _refused(db, lambda c: instances.fail_over_epoch(c, EPOCH, [W.PAUSED], at(1)))
    assert await read(db, lambda c: instances.get_instance(c, instance_id)) == before
    assert await read(db, lambda c: instances.pending_commands(c, 10)) == []


async def test_the_state_is_no_plain_field(db: Database) -> None:
    instance_id = await _instance(db)
    with pytest.raises(ValueError, match="set_state"):
        await write(
            db,
            lambda c: instances.update_fields(
                c,
                instance_id,
                EPOCH,
                {"state": "SUCCEEDED"},  # type: ignore[typeddict-unknown-key]
            ),
        )
    assert (await read(db, lambda c: instances.get_instance(c, instance_id))).state is W.RUNNING
