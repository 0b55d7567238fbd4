"""The runner's one-call commit (store/batch.py) on SQLite, PostgreSQL and MariaDB: all of
a batch or nothing, behind the ownership fence; attempts it creates named by provisional ids."""

from __future__ import annotations

import pytest

from dsched.errors import Aborted, OwnershipLost
from dsched.states import TaskState, WorkflowState
from dsched_server.core.controls import ControlKind
from dsched_server.store import batch, controls, events, instances, task_instances
from dsched_server.store.batch import BatchWrites, ControlAdd
from dsched_server.store.database import Database
from dsched_server.store.events import NewEvent
from dsched_server.store.task_instances import TaskWrite
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

T = TaskState
W = WorkflowState
EPOCH = 7


async def _instance(db: Database) -> int:
    workflow = await make_workflow(db, workflow_spec(tasks=(shell("a"), shell("b", "a"))))
    instance_id = await make_instance(db, workflow)
    await claim_instance(db, instance_id, epoch=EPOCH)
    return instance_id


def _writes(instance_id: int, epoch: int = EPOCH) -> BatchWrites:
    return BatchWrites(instance_id=instance_id, epoch=epoch, now=at(1), state_before=W.RUNNING)


async def _recorded_elsewhere(
    db: Database, instance_id: int, request_id: str, kind: ControlKind
) -> None:
    """A control another master recorded, pending for the owner."""
    async with db.transaction() as conn:
        await controls.add(
            conn,
            request_id=request_id,
            instance_id=instance_id,
            kind=kind,
            requested_by="m2:1",
            now=at(0),
        )


async def test_an_attempt_created_and_cancelled_in_one_batch_is_stored_cancelled(
    db: Database,
) -> None:
    instance_id = await _instance(db)
    w = _writes(instance_id)
    a = w.provisional_id(first_attempt("a"))
    b = w.provisional_id(first_attempt("b"))
    assert (a, b) == (-1, -2)
    w.task_writes[b] = TaskWrite(
        task_instance_id=b,
        expected=frozenset({T.SUBMITTED}),
        state=T.KILLED,
        worker_epoch=None,
        values={"end_time": at(1)},
    )
    w.events.append(NewEvent(workflow_instance_id=instance_id, task_instance_id=b, task_name="b"))
    w.path = [W.READY_STOP]
    ids = await batch.commit(db, w)
    rows = await read(db, lambda c: task_instances.valid_attempts(c, instance_id))
    assert [(r.id, r.task_name, r.state) for r in rows] == [
        (ids[0], "a", T.SUBMITTED),
        (ids[1], "b", T.KILLED),
    ]
    logged = await read(db, lambda c: events.after(c, instance_id, 0))
    assert logged[-1].task_instance_id == ids[1]
    assert (await read(db, lambda c: instances.get_instance(c, instance_id))).state is W.READY_STOP


async def test_a_stale_epoch_commits_nothing(db: Database) -> None:
    instance_id = await _instance(db)
    w = _writes(instance_id, epoch=EPOCH - 1)
    w.provisional_id(first_attempt("a"))
    w.path = [W.READY_PAUSE]
    with pytest.raises(OwnershipLost):
        await batch.commit(db, w)
    assert await read(db, lambda c: task_instances.valid_attempts(c, instance_id)) == []
    assert (await read(db, lambda c: instances.get_instance(c, instance_id))).state is W.RUNNING


async def test_the_end_refuses_pending_controls_before_the_end_event(db: Database) -> None:
    instance_id = await _instance(db)
    await _recorded_elsewhere(db, instance_id, "r-1", ControlKind.PAUSE)
    w = _writes(instance_id)
    w.path = [W.SUCCEEDED]
    w.end_event = NewEvent(workflow_instance_id=instance_id, workflow_state=W.SUCCEEDED)
    await batch.commit(db, w)
    logged = await read(db, lambda c: events.after(c, instance_id, 0))
    assert [e.workflow_state for e in logged[-2:]] == [None, W.SUCCEEDED]
    assert "1 requested control(s) not applied" in logged[-2].message
    assert await read(db, lambda c: controls.pending(c, instance_id)) == []


async def test_controls_recorded_after_the_decision_read_them_fail_the_batch(
    db: Database,
) -> None:
    instance_id = await _instance(db)
    seen = await read(db, lambda c: controls.pending(c, instance_id, or_request="mine"))
    await _recorded_elsewhere(db, instance_id, "theirs", ControlKind.STOP)  # meanwhile
    w = _writes(instance_id)
    w.controls_seen, w.control_request = tuple(r.id for r in seen), "mine"
    w.adds.append(
        ControlAdd(
            request_id="mine", kind=ControlKind.PAUSE, requested_by="m1:1", state=W.READY_PAUSE
        )
    )
    w.path = [W.READY_PAUSE]
    with pytest.raises(Aborted):
        await batch.commit(db, w)
    assert await read(db, lambda c: controls.find(c, "mine")) is None
    assert (await read(db, lambda c: instances.get_instance(c, instance_id))).state is W.RUNNING
