"""Group commit (store/group_commit.py) on SQLite, PostgreSQL and MariaDB: the batches of several
instances handed in together commit in one transaction, each caller answered after it; a refused
batch fails alone (refused once) and the others commit; a caller that goes away strands no one."""

from __future__ import annotations

import asyncio

import pytest

from dsched.errors import IllegalTransition, OwnershipLost
from dsched.states import WorkflowState
from dsched_server.core.records import EventRecord
from dsched_server.store import events, guard, instances, task_instances
from dsched_server.store.batch import BatchWrites
from dsched_server.store.database import Conn, Database
from dsched_server.store.events import NewEvent
from dsched_server.store.group_commit import GroupCommit
from tests.integration.store.conftest import (
    at,
    claim_instance,
    first_attempt,
    make_instance,
    make_workflow,
    read,
    shell,
    workflow_spec,
)

W = WorkflowState
EPOCH = 7


async def _instances(db: Database, count: int, name: str = "wf") -> list[int]:
    workflow = await make_workflow(db, workflow_spec(name=name, tasks=(shell("a"),)))
    ids = []
    for _ in range(count):
        instance_id = await make_instance(db, workflow)
        await claim_instance(db, instance_id, epoch=EPOCH)
        ids.append(instance_id)
    return ids


def _start_a(instance_id: int, epoch: int = EPOCH) -> BatchWrites:
    """A batch creating attempt 1 of task ``a``, as a runner's first one does."""
    w = BatchWrites(instance_id=instance_id, epoch=epoch, now=at(1), state_before=W.RUNNING)
    w.provisional_id(first_attempt("a"))
    return w


async def _attempts(db: Database, instance_id: int) -> list[int]:
    rows = await read(db, lambda c: task_instances.valid_attempts(c, instance_id))
    return [r.id for r in rows]


async def test_batches_handed_in_together_commit_in_one_transaction(db: Database) -> None:
    ids = await _instances(db, 3)
    commits = GroupCommit(db)
    results = await asyncio.gather(*(commits.commit(_start_a(i)) for i in reversed(ids)))
    assert (commits.groups, commits.grouped) == (1, 3)
    for instance_id, created in zip(reversed(ids), results, strict=True):
        assert await _attempts(db, instance_id) == created and len(created) == 1
    # One after the other: each alone, as before.
    (lone,) = await _instances(db, 1, "another")
    created = await commits.commit(_start_a(lone))
    assert await _attempts(db, lone) == created
    assert (commits.groups, commits.grouped) == (1, 3)


async def test_a_stale_batch_fails_alone_and_the_others_commit(db: Database) -> None:
    first, stale, last = await _instances(db, 3)
    commits = GroupCommit(db)
    outcomes = await asyncio.gather(
        commits.commit(_start_a(first)),
        commits.commit(_start_a(stale, epoch=EPOCH - 1)),
        commits.commit(_start_a(last)),
        return_exceptions=True,
    )
    assert isinstance(outcomes[1], OwnershipLost)
    assert outcomes[0] == await _attempts(db, first) and outcomes[2] == await _attempts(db, last)
    assert await _attempts(db, stale) == []
    assert (commits.groups, commits.grouped) == (1, 2)


async def test_an_illegal_batch_is_refused_once_and_the_others_commit(db: Database) -> None:
    good, bad = await _instances(db, 2)
    illegal = _start_a(bad)
    illegal.path = [W.SUBMITTED]  # RUNNING -> SUBMITTED: the table forbids it
    before = guard.REFUSALS.workflow_instances
    commits = GroupCommit(db)
    outcomes = await asyncio.gather(
        commits.commit(_start_a(good)), commits.commit(illegal), return_exceptions=True
    )
    assert isinstance(outcomes[1], IllegalTransition)
    assert guard.REFUSALS.workflow_instances == before + 1
    assert outcomes[0] == await _attempts(db, good)
    assert await _attempts(db, bad) == []
    assert (await read(db, lambda c: instances.get_instance(c, bad))).state is W.RUNNING


async def test_the_events_of_a_group_commit_with_their_batch(db: Database) -> None:
    """Each batch's events, appended in one statement after every batch of the group, keep their
    batch's time, their order and the ids of the attempts the batch created; a refused batch's
    are not stored."""
    first, stale, last = await _instances(db, 3)
    batches = {
        first: _start_a(first),
        stale: _start_a(stale, epoch=EPOCH - 1),
        last: _start_a(last),
    }
    for n, (instance_id, w) in enumerate(batches.items()):
        w.now = at(10 + n)
        w.events += [
            NewEvent(workflow_instance_id=instance_id, task_instance_id=-1, message="created"),
            NewEvent(workflow_instance_id=instance_id, message=f"then {n}"),
        ]
    commits = GroupCommit(db)
    outcomes = await asyncio.gather(
        *(commits.commit(w) for w in reversed(batches.values())), return_exceptions=True
    )
    assert isinstance(outcomes[1], OwnershipLost)
    assert (commits.groups, commits.grouped) == (1, 2)

    async def logs(conn: Conn) -> dict[int, list[EventRecord]]:
        return {i: await events.after(conn, i, 0) for i in batches}

    stored = await read(db, logs)
    assert stored[stale] == []
    for n, instance_id in ((0, first), (2, last)):
        (attempt,) = await _attempts(db, instance_id)
        assert [(e.message, e.task_instance_id, e.create_time) for e in stored[instance_id]] == [
            ("created", attempt, at(10 + n)),
            (f"then {n}", 0, at(10 + n)),
        ]
    # In instance order, as the batches were applied.
    assert [e.sequence for e in stored[first]] < [e.sequence for e in stored[last]]


async def test_a_caller_that_goes_away_strands_no_one(db: Database) -> None:
    gone, waiting = await _instances(db, 2)
    commits = GroupCommit(db)
    cancelled = asyncio.ensure_future(commits.commit(_start_a(gone)))
    kept = asyncio.ensure_future(commits.commit(_start_a(waiting)))
    await asyncio.sleep(0)  # both handed in, the drain not run yet
    cancelled.cancel()
    assert await kept == await _attempts(db, waiting)
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    assert await _attempts(db, gone) == []  # its runner is gone: nothing written for it
