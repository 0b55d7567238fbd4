"""A runner's batch through the real engine: its effects happen after its commit, never before.

The decision of a batch can be complete (a success decided, its successor created and queued for a
worker) and still not commit; then nothing of it may reach a worker or the store.
"""

from __future__ import annotations

import pytest
from sqlalchemy import update

from dsched.errors import IllegalTransition
from dsched.states import TaskState
from dsched_server.protocol.ack import AckDecision
from dsched_server.store import batch as batch_store
from dsched_server.store.batch import BatchWrites
from dsched_server.store.database import Database
from dsched_server.store.models import TaskInstance, table
from tests.unit.core.specs import task, workflow
from tests.unit.engine.conftest import Engine


async def test_a_batch_whose_commit_fails_sends_and_stores_nothing(engine: Engine) -> None:
    worker = await engine.workers.add()
    instance_id = await engine.start_run(workflow(task("a"), task("b", "a")))
    await worker.holding(1)
    await worker.running("a")
    a = worker.attempt("a").spec.task_instance_id
    runner = engine.runners.get(instance_id)
    assert runner is not None
    reloads: list[tuple[int, dict[int, str]]] = []
    engine.services.reload = lambda i, pins: reloads.append((i, dict(pins)))
    # Behind the runner's back the attempt is no longer RUNNING: the batch that records its
    # success (and creates and dispatches b) matches no row and rolls back.
    TI = table(TaskInstance)
    async with engine.db.transaction() as conn:
        await conn.execute(update(TI).where(TI.c.id == a).values(state=TaskState.KILLED.value))

    ack = await worker.succeed("a")

    assert ack.decision is AckDecision.RETRY_LATER  # not ACCEPTED: the worker keeps the event
    assert runner.done  # stopped, and reloaded from the store, where a went to handed over
    assert reloads == [(instance_id, {a: worker.address})]
    assert len(worker.attempts) == 1  # b was decided, but never dispatched
    stored = await engine.attempts(instance_id)
    assert [(t.task_name, t.state) for t in stored] == [("a", TaskState.KILLED)]


async def test_a_batch_the_store_refuses_as_illegal_is_counted_and_not_acknowledged(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    worker = await engine.workers.add()
    instance_id = await engine.start_run(workflow(task("a")))
    await worker.holding(1)
    reloads: list[int] = []
    engine.services.reload = lambda i, _pins: reloads.append(i)

    async def refused(_db: Database, w: BatchWrites) -> list[int]:
        # What the store's guard raises for a write the transition tables forbid.
        raise IllegalTransition("task instance 1 cannot go from SUCCEEDED to RUNNING")

    monkeypatch.setattr(batch_store, "commit", refused)
    ack = await worker.running("a")

    assert ack.decision is AckDecision.RETRY_LATER
    assert engine.services.metrics.illegal_transitions == 1
    assert reloads == [instance_id]
    stored = await engine.attempts(instance_id)
    assert [(t.task_name, t.state) for t in stored] == [("a", TaskState.SUBMITTED)]
