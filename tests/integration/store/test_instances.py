"""Workflow instances: fenced owner writes, failover of dead epochs, queries and listing."""

from __future__ import annotations

import asyncio
import itertools
from functools import partial
from typing import Any

import pytest
from sqlalchemy import update

from dsched.errors import Aborted, OwnershipLost
from dsched.options import CommandType, Priority
from dsched.states import WorkflowState
from dsched_server.core.records import InstanceRecord
from dsched_server.core.transitions import OWNED_STATES
from dsched_server.store import instances
from dsched_server.store.database import Conn, Database
from dsched_server.store.models import WorkflowInstance, table
from tests.integration.store.conftest import (
    NOW,
    at,
    claim_instance,
    make_instance,
    make_workflow,
    overlap,
    read,
    until_a_transaction_waits_for_a_lock,
    workflow_spec,
    write,
)

W = WorkflowState


async def _get(db: Database, instance_id: int) -> InstanceRecord:
    return await read(db, lambda c: instances.get_instance(c, instance_id))


async def _owned(db: Database, *, epoch: int = 7, state: W = W.RUNNING) -> int:
    workflow = await make_workflow(db)
    instance_id = await make_instance(db, workflow)
    await claim_instance(db, instance_id, host="master-1:5678", epoch=epoch, state=state)
    return instance_id


async def test_fence_passes_for_the_owner_epoch_and_changes_nothing(db: Database) -> None:
    instance_id = await _owned(db, epoch=7)
    before = await _get(db, instance_id)
    await write(db, lambda c: instances.fence(c, instance_id, 7))
    assert await _get(db, instance_id) == before


@pytest.mark.parametrize("epoch", [0, 6, 8])
async def test_fence_raises_ownership_lost_for_any_other_epoch(db: Database, epoch: int) -> None:
    instance_id = await _owned(db, epoch=7)
    with pytest.raises(OwnershipLost) as caught:
        await write(db, lambda c: instances.fence(c, instance_id, epoch))
    assert caught.value.metadata == {"instance": str(instance_id), "epoch": str(epoch)}
    assert (await _get(db, instance_id)).epoch == 7


async def test_fence_of_an_unknown_instance_raises_ownership_lost(db: Database) -> None:
    with pytest.raises(OwnershipLost):
        await write(db, lambda c: instances.fence(c, 424242, 7))


async def test_set_state_moves_an_owned_instance_from_an_expected_state(db: Database) -> None:
    instance_id = await _owned(db, epoch=7)
    moved = await write(
        db,
        lambda c: instances.set_state(
            c,
            instance_id,
            epoch=7,
            expected=[W.RUNNING, W.READY_PAUSE],
            state=W.SUCCEEDED,
            values={"end_time": at(30), "state_reason": "all tasks succeeded"},
        ),
    )
    assert moved is True
    after = await _get(db, instance_id)
    assert (after.state, after.end_time, after.state_reason) == (
        W.SUCCEEDED,
        at(30),
        "all tasks succeeded",
    )
    assert (after.host, after.epoch) == ("master-1:5678", 7)


async def test_set_state_from_an_unexpected_state_returns_false_and_changes_nothing(
    db: Database,
) -> None:
    instance_id = await _owned(db, epoch=7)
    before = await _get(db, instance_id)
    moved = await write(
        db,
        lambda c: instances.set_state(
            c, instance_id, epoch=7, expected=[W.READY_STOP], state=W.STOPPED
        ),
    )
    assert moved is False
    assert await _get(db, instance_id) == before


async def test_set_state_by_a_stale_epoch_raises_ownership_lost(db: Database) -> None:
    instance_id = await _owned(db, epoch=7)
    before = await _get(db, instance_id)
    for expected in ([W.RUNNING], [W.READY_STOP]):  # whether or not the state matches
        with pytest.raises(OwnershipLost):
            async with db.transaction() as conn:
                await instances.set_state(
                    conn, instance_id, epoch=6, expected=expected, state=W.FAILED
                )
    assert await _get(db, instance_id) == before


async def test_set_state_without_an_epoch_is_conditional_on_the_state_only(db: Database) -> None:
    workflow = await make_workflow(db)
    instance_id = await make_instance(db, workflow)
    stop = await write(
        db,
        lambda c: instances.set_state(
            c, instance_id, epoch=None, expected=[W.SUBMITTED, W.PAUSED], state=W.STOPPED
        ),
    )
    again = await write(
        db,
        lambda c: instances.set_state(
            c, instance_id, epoch=None, expected=[W.SUBMITTED, W.PAUSED], state=W.STOPPED
        ),
    )
    assert (stop, again) == (True, False)
    assert (await _get(db, instance_id)).state is W.STOPPED


async def test_update_fields_writes_for_the_owner_only(db: Database) -> None:
    instance_id = await _owned(db, epoch=7)
    await write(
        db,
        lambda c: instances.update_fields(
            c, instance_id, 7, {"var_pool": {"ROWS": "42"}, "state_reason": "halfway"}
        ),
    )
    with pytest.raises(OwnershipLost):
        await write(
            db, lambda c: instances.update_fields(c, instance_id, 8, {"var_pool": {"ROWS": "0"}})
        )
    after = await _get(db, instance_id)
    assert (after.var_pool, after.state_reason) == ({"ROWS": "42"}, "halfway")


async def test_fail_over_epoch_moves_the_dead_epochs_owned_instances_once(
    db: Database,
) -> None:
    workflow = await make_workflow(db)
    ids: dict[str, int] = {}
    for key, epoch, state in [
        ("running", 7, W.RUNNING),
        ("pausing", 7, W.READY_PAUSE),
        ("other-epoch", 8, W.RUNNING),
        ("finished", 7, W.SUCCEEDED),
    ]:
        ids[key] = await make_instance(db, workflow)
        await claim_instance(db, ids[key], epoch=epoch, state=state)

    taken = await write(db, lambda c: instances.fail_over_epoch(c, 7, OWNED_STATES, at(60)))
    assert sorted(taken) == sorted([(ids["running"], W.RUNNING), (ids["pausing"], W.READY_PAUSE)])
    for key in ("running", "pausing"):
        after = await _get(db, ids[key])
        assert (after.state, after.epoch) == (W.FAILOVER, 7)  # the claimer stamps its epoch
    assert (await _get(db, ids["other-epoch"])).state is W.RUNNING
    assert (await _get(db, ids["finished"])).state is W.SUCCEEDED
    commands = await read(db, lambda c: instances.pending_commands(c, 10))
    assert {c.workflow_instance_id: c.restore_state for c in commands} == {
        ids["running"]: W.RUNNING,
        ids["pausing"]: W.READY_PAUSE,
    }
    assert all(c.type is CommandType.FAILOVER and c.scope is None for c in commands)
    assert all(c.priority is Priority.HIGHEST and c.create_time == at(60) for c in commands)

    again = await write(db, lambda c: instances.fail_over_epoch(c, 7, OWNED_STATES, at(61)))
    assert again == []
    assert len(await read(db, lambda c: instances.pending_commands(c, 10))) == 2


async def test_a_failover_that_crashes_before_commit_leaves_everything_for_the_next_one(
    db: Database,
) -> None:
    workflow = await make_workflow(db)
    ids = [await make_instance(db, workflow) for _ in range(3)]
    for instance_id in ids:
        await claim_instance(db, instance_id, epoch=7, state=W.RUNNING)

    class Crash(Exception):
        pass

    with pytest.raises(Crash):
        async with db.transaction() as conn:
            taken = await instances.fail_over_epoch(conn, 7, OWNED_STATES, at(60))
            assert len(taken) == 3
            raise Crash  # the process dies between the updates and the commit
    assert all([(await _get(db, i)).state is W.RUNNING for i in ids])
    assert await read(db, lambda c: instances.pending_commands(c, 10)) == []

    again = await write(db, lambda c: instances.fail_over_epoch(c, 7, OWNED_STATES, at(61)))
    assert sorted(i for i, _ in again) == sorted(ids)
    assert len(await read(db, lambda c: instances.pending_commands(c, 10))) == 3


async def test_fail_over_epoch_leaves_an_instance_with_a_pending_command_to_it(
    db: Database,
) -> None:
    instance_id = await _owned(db, epoch=7)
    await write(
        db,
        lambda c: instances.add_command(c, instance_id, CommandType.RECOVER_FAILED, 1, None, at(5)),
    )
    assert await write(db, lambda c: instances.fail_over_epoch(c, 7, OWNED_STATES, at(60))) == []
    assert (await _get(db, instance_id)).state is W.RUNNING


async def test_dead_owner_epochs_lists_epochs_of_owned_instances_not_alive(
    db: Database,
) -> None:
    workflow = await make_workflow(db)
    for epoch, state in [
        (7, W.RUNNING),
        (7, W.RUNNING),
        (8, W.READY_STOP),
        (9, W.READY_PAUSE),
        (10, W.SUCCEEDED),
    ]:
        await claim_instance(db, await make_instance(db, workflow), epoch=epoch, state=state)
    await make_instance(db, workflow)  # unclaimed

    assert await read(db, lambda c: instances.dead_owner_epochs(c, [8, 11], OWNED_STATES)) == [
        7,
        9,
    ]
    assert await read(db, lambda c: instances.dead_owner_epochs(c, [], OWNED_STATES)) == [7, 8, 9]
    assert await read(db, lambda c: instances.dead_owner_epochs(c, [7, 8, 9], OWNED_STATES)) == []


async def test_current_state_reads_the_state_or_none(db: Database) -> None:
    instance_id = await _owned(db, state=W.READY_STOP)
    assert await read(db, lambda c: instances.current_state(c, instance_id)) is W.READY_STOP
    assert await read(db, lambda c: instances.current_state(c, instance_id + 1000)) is None


async def test_list_instances_filters_and_pages_newest_first(db: Database) -> None:
    etl = await make_workflow(db)
    report = await make_workflow(db, workflow_spec(name="report"))
    other = await make_workflow(db, workflow_spec("other", "etl"))
    made = [
        await make_instance(db, etl, now=at(0)),  # 0
        await make_instance(db, report, now=at(10)),  # 1
        await make_instance(db, etl, now=at(20)),  # 2
        await make_instance(db, other, now=at(30)),  # 3
        await make_instance(db, etl, now=at(40)),  # 4
    ]
    await claim_instance(db, made[2], state=W.RUNNING)
    await write(
        db,
        lambda c: instances.set_state(
            c, made[4], epoch=None, expected=[W.SUBMITTED], state=W.STOPPED
        ),
    )

    async def ids(
        project: str = "",
        workflow: str = "",
        states: tuple[W, ...] = (),
        after: int | None = None,
    ) -> list[int]:
        page = await read(
            db,
            lambda c: instances.list_instances(
                c,
                project=project,
                workflow=workflow,
                states=states,
                submitted_after=None if after is None else at(after),
                after=None,
                limit=50,
            ),
        )
        return [i.id for i in page]

    assert await ids() == made[::-1]
    assert await ids(project="proj") == [made[4], made[2], made[1], made[0]]
    assert await ids(project="proj", workflow="wf") == [made[4], made[2], made[0]]
    assert await ids(workflow="etl") == [made[3]]
    assert await ids(states=(W.RUNNING, W.STOPPED)) == [made[4], made[2]]
    assert await ids(states=(W.SUBMITTED,)) == [made[3], made[1], made[0]]
    assert await ids(after=20) == [made[4], made[3], made[2]]  # inclusive
    assert await ids(project="proj", states=(W.SUBMITTED,), after=5) == [made[1]]
    assert await ids(project="ghost") == []

    pages: list[list[int]] = []
    before: int | None = None
    async with db.read() as conn:
        while True:
            page = await instances.list_instances(
                conn,
                project="",
                workflow="",
                states=(),
                submitted_after=None,
                after=before,
                limit=2,
            )
            pages.append([i.id for i in page])
            if len(page) < 2:
                break
            before = page[-1].id
    assert pages == [[made[4], made[3]], [made[2], made[1]], [made[0]]]


async def test_get_instance_reads_back_the_claimed_instance(db: Database) -> None:
    instance_id = await _owned(db, epoch=12)
    instance = await _get(db, instance_id)
    assert (instance.state, instance.host, instance.epoch) == (W.RUNNING, "master-1:5678", 12)
    assert instance.start_time == NOW


async def _owner_finishes(db: Database, instance_id: int, fenced: asyncio.Barrier) -> bool:
    async with db.transaction() as conn:
        await instances.fence(conn, instance_id, 7)
        await overlap(db, fenced)
        if not db.is_sqlite:  # (SQLite runs the two transactions one after the other)
            await until_a_transaction_waits_for_a_lock(db)
        return await instances.set_state(
            conn, instance_id, epoch=7, expected=[W.RUNNING], state=W.SUCCEEDED
        )


async def _failover(db: Database, instance_id: int, fenced: asyncio.Barrier) -> bool:
    await overlap(db, fenced)
    try:
        async with db.transaction() as conn:
            taken = await instances.fail_over_epoch(conn, 7, OWNED_STATES, at(60))
    except Aborted:
        return False  # read RUNNING, then the update waited and no longer matched: retry later
    return bool(taken)


async def test_a_failover_racing_the_owners_fenced_transaction_waits_and_then_does_nothing(
    db: Database,
) -> None:
    # fence() locks the row: the failover's conditional update waits for the owner's commit and
    # then no longer matches, instead of moving the instance under the owner's feet.
    instance_id = await _owned(db, epoch=7)
    fenced = asyncio.Barrier(2)
    owner, failover = await asyncio.wait_for(
        asyncio.gather(
            _owner_finishes(db, instance_id, fenced), _failover(db, instance_id, fenced)
        ),
        timeout=30,
    )
    assert (owner, failover) == (True, False)
    assert (await _get(db, instance_id)).state is W.SUCCEEDED
    assert await read(db, lambda c: instances.pending_commands(c, 10)) == []


async def _force_state(conn: Conn, *, instance_id: int, state: W) -> None:
    wi = table(WorkflowInstance)
    await conn.execute(update(wi).where(wi.c.id == instance_id).values(state=state.value))


async def test_list_instances_pages_every_filter_combination_like_a_scan(db: Database) -> None:
    """Each index path of list_instances (a workflow's, a workflow name's in every project, a
    project's, one state's, several states merged, the time window's, the primary key's) pages to
    what filtering every row would give, with a clock that steps back once."""
    workflows = [
        await make_workflow(db),
        await make_workflow(db, workflow_spec(name="etl")),
        await make_workflow(db, workflow_spec("other", "etl")),
    ]
    cycle = [W.SUBMITTED, W.RUNNING, W.SUCCEEDED, W.FAILED, W.SUCCEEDED]
    for i in range(24):
        submitted = at(5 if i == 13 else i * 10)  # instance 13 is stamped before 12 (clock reset)
        made = await make_instance(db, workflows[i % 3], now=submitted)
        await write(db, partial(_force_state, instance_id=made, state=cycle[i % len(cycle)]))
    everything = await read(
        db,
        lambda c: instances.list_instances(
            c, project="", workflow="", states=(), submitted_after=None, after=None, limit=100
        ),
    )
    assert len(everything) == 24

    async def paged(**filters: Any) -> list[int]:
        found: list[int] = []
        before: int | None = None
        while True:
            page = await read(
                db, partial(instances.list_instances, **filters, after=before, limit=3)
            )
            found += [i.id for i in page]
            if len(page) < 3:
                return found
            before = page[-1].id

    projects, names = ["", "proj", "other", "ghost"], ["", "etl", "wf"]
    state_sets: list[tuple[W, ...]] = [(), (W.FAILED,), (W.RUNNING, W.SUCCEEDED)]
    for project, name, states, after in itertools.product(
        projects, names, state_sets, [None, at(125)]
    ):
        expected = [
            i.id
            for i in everything
            if project in ("", i.project)
            and name in ("", i.workflow)
            and (not states or i.state in states)
            and (after is None or i.submit_time >= after)
        ]
        filters = {"project": project, "workflow": name, "states": states, "submitted_after": after}
        assert await paged(**filters) == expected, filters
