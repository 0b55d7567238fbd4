"""Control requests on SQLite, PostgreSQL and MariaDB: recording, settling, refusing what is left
when an instance ends, the owner's sweep query, and the instance-row lock that orders a recording
master against the owner's fenced transactions."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy.exc import IntegrityError

from dsched.errors import NotFound
from dsched.options import ReleaseState
from dsched.states import WorkflowState
from dsched_server.core.controls import ControlKind, ControlOutcome, ControlRecord
from dsched_server.store import controls, definitions, instances
from dsched_server.store.database import Conn, Database
from tests.integration.store.conftest import (
    NOW,
    at,
    claim_instance,
    make_instance,
    make_workflow,
    overlap,
    read,
    until_a_transaction_waits_for_a_lock,
    write,
)

W = WorkflowState
PAUSE, STOP = ControlKind.PAUSE, ControlKind.STOP


async def _owned(db: Database, *, epoch: int = 7) -> int:
    """A RUNNING instance owned by ``epoch`` (of workflow proj/wf, created on first use)."""
    try:
        workflow = await read(db, lambda c: definitions.get_workflow(c, "proj", "wf"))
    except NotFound:
        workflow = await make_workflow(db)
    instance_id = await make_instance(db, workflow)
    await claim_instance(db, instance_id, epoch=epoch)
    return instance_id


async def _add(
    db: Database, instance_id: int, rid: str, kind: ControlKind = PAUSE, **kw: object
) -> int:
    return await write(
        db,
        lambda c: controls.add(
            c,
            request_id=rid,
            instance_id=instance_id,
            kind=kind,
            requested_by="master-2:5678",
            now=NOW,
            **kw,  # type: ignore[arg-type]
        ),
    )


async def test_a_pending_control_reads_back_as_recorded(db: Database) -> None:
    instance_id = await _owned(db)
    control_id = await _add(db, instance_id, "r-1", STOP)
    got = await read(db, lambda c: controls.get(c, control_id))
    assert got == ControlRecord(
        id=control_id,
        request_id="r-1",
        instance_id=instance_id,
        kind=STOP,
        requested_by="master-2:5678",
        create_time=NOW,
    )
    assert got.pending
    assert await read(db, lambda c: controls.find(c, "r-1")) == got
    assert await read(db, lambda c: controls.find(c, "r-2")) is None


async def test_a_control_recorded_as_applied_carries_its_state_and_epoch(db: Database) -> None:
    instance_id = await _owned(db)
    control_id = await _add(db, instance_id, "r-1", STOP, applied=(W.STOPPED, 0))
    got = await read(db, lambda c: controls.get(c, control_id))
    assert (got.outcome, got.outcome_state, got.applied_by, got.apply_time) == (
        ControlOutcome.APPLIED,
        W.STOPPED,
        0,
        NOW,
    )
    assert await read(db, lambda c: controls.pending(c, instance_id)) == []


async def test_a_request_id_records_one_control_and_compares_exactly(db: Database) -> None:
    instance_id = await _owned(db)
    await _add(db, instance_id, "Stop-1", STOP)
    with pytest.raises(IntegrityError):
        await _add(db, instance_id, "Stop-1", PAUSE)
    await _add(db, instance_id, "stop-1", STOP)  # another id (MariaDB compares binary, too)
    found = await read(db, lambda c: controls.find(c, "stop-1"))
    assert found is not None and found.request_id == "stop-1"


async def test_pending_lists_the_instances_pending_controls_in_order_plus_the_asked_request(
    db: Database,
) -> None:
    first, other = await _owned(db), await _owned(db)
    a = await _add(db, first, "a", PAUSE)
    b = await _add(db, first, "b", STOP)
    done = await _add(db, first, "done", STOP, applied=(W.READY_STOP, 7))
    elsewhere = await _add(db, other, "elsewhere", STOP)

    assert [c.id for c in await read(db, lambda c: controls.pending(c, first))] == [a, b]
    with_done = await read(db, lambda c: controls.pending(c, first, or_request="done"))
    assert [c.id for c in with_done] == [a, b, done]
    with_other = await read(db, lambda c: controls.pending(c, first, or_request="elsewhere"))
    assert [c.id for c in with_other] == [a, b, elsewhere]


async def test_settle_records_the_outcome_once(db: Database) -> None:
    instance_id = await _owned(db)
    control_id = await _add(db, instance_id, "r-1", PAUSE)

    async def settle(conn: Conn, outcome: ControlOutcome) -> bool:
        return await controls.settle(
            conn,
            control_id,
            outcome=outcome,
            state=W.READY_PAUSE,
            reason="",
            epoch=7,
            now=at(5),
        )

    assert await write(db, lambda c: settle(c, ControlOutcome.APPLIED)) is True
    assert await write(db, lambda c: settle(c, ControlOutcome.REJECTED)) is False
    got = await read(db, lambda c: controls.get(c, control_id))
    assert (got.outcome, got.outcome_state, got.applied_by, got.apply_time) == (
        ControlOutcome.APPLIED,
        W.READY_PAUSE,
        7,
        at(5),
    )


async def test_reject_pending_refuses_only_what_is_still_pending(db: Database) -> None:
    instance_id = await _owned(db)
    applied = await _add(db, instance_id, "applied", PAUSE, applied=(W.READY_PAUSE, 7))
    left = await _add(db, instance_id, "left", STOP)
    count = await write(
        db,
        lambda c: controls.reject_pending(
            c, instance_id, state=W.SUCCEEDED, reason="ended", epoch=7, now=at(9)
        ),
    )
    assert count == 1
    kept = await read(db, lambda c: controls.get(c, applied))
    refused = await read(db, lambda c: controls.get(c, left))
    assert kept.outcome is ControlOutcome.APPLIED
    assert (refused.outcome, refused.outcome_state, refused.outcome_reason) == (
        ControlOutcome.REJECTED,
        W.SUCCEEDED,
        "ended",
    )


async def test_owned_with_pending_finds_the_instances_of_one_epoch(db: Database) -> None:
    mine, theirs, settled = await _owned(db, epoch=7), await _owned(db, epoch=8), await _owned(db)
    await _add(db, mine, "m1", PAUSE)
    await _add(db, mine, "m2", STOP)
    await _add(db, theirs, "t1", STOP)
    await _add(db, settled, "s1", STOP, applied=(W.READY_STOP, 7))
    assert await read(db, lambda c: controls.owned_with_pending(c, 7)) == [mine]
    assert await read(db, lambda c: controls.owned_with_pending(c, 8)) == [theirs]
    assert await read(db, lambda c: controls.owned_with_pending(c, 9)) == []


async def test_controls_go_with_their_instance(db: Database) -> None:
    instance_id = await _owned(db)
    await _add(db, instance_id, "r-1", STOP)
    await write(
        db,
        lambda c: instances.set_state(
            c, instance_id, epoch=7, expected=[W.RUNNING], state=W.STOPPED, via=[W.READY_STOP]
        ),
    )
    await write(
        db, lambda c: definitions.set_release_state(c, "proj", "wf", ReleaseState.OFFLINE, NOW)
    )
    await write(db, lambda c: definitions.delete_workflow(c, "proj", "wf"))
    assert await read(db, lambda c: controls.find(c, "r-1")) is None


async def test_lock_of_an_unknown_instance_is_not_found(db: Database) -> None:
    with pytest.raises(NotFound):
        await write(db, lambda c: instances.lock(c, 424242))


async def test_restore_state_is_the_state_a_failover_command_brings_back(db: Database) -> None:
    instance_id = await _owned(db, epoch=7)
    assert await read(db, lambda c: instances.restore_state(c, instance_id)) is None
    await write(
        db,
        lambda c: instances.set_state(
            c, instance_id, epoch=7, expected=[W.RUNNING], state=W.READY_PAUSE
        ),
    )
    await write(db, lambda c: instances.fail_over_epoch(c, 7, [W.READY_PAUSE], at(1)))
    assert await read(db, lambda c: instances.restore_state(c, instance_id)) is W.READY_PAUSE


# ------------------------------------------------------------------ a recorder racing the owner


async def _owner_finishes(db: Database, instance_id: int, fenced: asyncio.Barrier | None) -> None:
    """The owner's last batch: fence, end the instance, refuse what is pending. With ``fenced``,
    it holds the fence until a racing transaction waits for it."""
    async with db.transaction() as conn:
        await instances.fence(conn, instance_id, 7)
        await overlap(db, fenced)
        if fenced is not None and not db.is_sqlite:  # (SQLite runs them one after the other)
            await until_a_transaction_waits_for_a_lock(db)
        await instances.set_state(
            conn, instance_id, epoch=7, expected=[W.RUNNING], state=W.SUCCEEDED
        )
        await controls.reject_pending(
            conn, instance_id, state=W.SUCCEEDED, reason="ended", epoch=7, now=at(2)
        )


async def _recorder(db: Database, instance_id: int, fenced: asyncio.Barrier | None) -> bool:
    """Another master recording a stop as the API does: lock, read the state, record if legal."""
    await overlap(db, fenced)
    async with db.transaction() as conn:
        await instances.lock(conn, instance_id)
        state = (await instances.get_instance(conn, instance_id)).state
        if state is not W.RUNNING:
            return False
        await controls.add(
            conn,
            request_id="late-stop",
            instance_id=instance_id,
            kind=STOP,
            requested_by="master-2:5678",
            now=at(1),
        )
        return True


async def test_a_control_recorded_while_the_owner_finishes_waits_and_is_then_refused(
    db: Database,
) -> None:
    # The recorder's lock waits for the owner's fenced transaction, then reads the state it left:
    # no control is ever left pending on an instance that ended.
    instance_id = await _owned(db, epoch=7)
    fenced = asyncio.Barrier(2)
    _, recorded = await asyncio.wait_for(
        asyncio.gather(
            _owner_finishes(db, instance_id, fenced), _recorder(db, instance_id, fenced)
        ),
        timeout=30,
    )
    assert recorded is False
    assert (await read(db, lambda c: instances.get_instance(c, instance_id))).state is W.SUCCEEDED
    assert await read(db, lambda c: controls.find(c, "late-stop")) is None


async def test_a_control_recorded_before_the_owner_finishes_is_refused_by_its_finish(
    db: Database,
) -> None:
    instance_id = await _owned(db, epoch=7)
    assert await _recorder(db, instance_id, None) is True
    await _owner_finishes(db, instance_id, None)
    late = await read(db, lambda c: controls.find(c, "late-stop"))
    assert late is not None
    assert (late.outcome, late.outcome_state) == (ControlOutcome.REJECTED, W.SUCCEEDED)
