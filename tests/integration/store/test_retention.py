"""History retention on real SQLite, PostgreSQL and MariaDB: exactly the old history of finished
instances goes, nothing of unfinished ones; a dry run deletes nothing and counts the same; two
clean-ups at once delete each row once; small batches reach the end."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import func, insert, select, update

from dsched.states import WorkflowState
from dsched_server.clock import SystemClock
from dsched_server.core.records import WorkflowRecord
from dsched_server.core.retention import HistoryKind, Tally
from dsched_server.engine.history import History
from dsched_server.store import events, requests, retention
from dsched_server.store.database import Conn, Database
from dsched_server.store.events import NewEvent
from dsched_server.store.models import (
    ControlRequest,
    InstanceEvent,
    RequestLog,
    TaskInstance,
    WorkflowInstance,
    table,
)
from tests.integration.store.conftest import NOW, make_instance, make_workflow, write

W = WorkflowState
WI, TI, EV, CR, R = (
    table(m) for m in (WorkflowInstance, TaskInstance, InstanceEvent, ControlRequest, RequestLog)
)
DAY = timedelta(days=1)
CUTOFF = {
    HistoryKind.REQUEST_IDS: NOW - 7 * DAY,
    HistoryKind.EVENTS: NOW - 30 * DAY,
    HistoryKind.INSTANCES: NOW - 30 * DAY,
}


async def instance(
    db: Database, workflow: WorkflowRecord, state: W, end: datetime | None, events_at: datetime
) -> int:
    """An instance in ``state`` that ended at ``end``, with two task instances, three events (the
    last at ``events_at``) and a control."""
    instance_id = await make_instance(db, workflow, now=events_at - DAY)

    async def shape(conn: Conn) -> None:
        await conn.execute(
            update(WI).where(WI.c.id == instance_id).values(state=state.value, end_time=end)
        )
        for name in ("a", "b"):
            await conn.execute(
                insert(TI).values(
                    workflow_instance_id=instance_id,
                    task_name=name,
                    attempt=1,
                    state="SUCCEEDED",
                    submit_time=events_at - DAY,
                    out_params={},
                    priority="MEDIUM",
                    worker_group="default",
                )
            )
        for offset in (2, 1, 0):
            await events.append(
                conn,
                [NewEvent(workflow_instance_id=instance_id, message=f"e{offset}")],
                events_at - offset * timedelta(minutes=1),
            )
        await conn.execute(
            insert(CR).values(
                request_id=f"control-{instance_id}",
                workflow_instance_id=instance_id,
                kind="STOP",
                requested_by="m:1",
                create_time=events_at,
                outcome="APPLIED",
            )
        )

    await write(db, shape)
    return instance_id


async def world(db: Database) -> dict[str, int]:
    """Old and recent finished instances, unfinished ones (one resting since long ago), and old
    and recent request ids."""
    wf = await make_workflow(db)
    old = NOW - 40 * DAY
    ids = {
        "succeeded_old": await instance(db, wf, W.SUCCEEDED, old, old),
        "failed_old": await instance(db, wf, W.FAILED, old + DAY, old + DAY),
        "stopped_recent": await instance(db, wf, W.STOPPED, NOW - 5 * DAY, NOW - 5 * DAY),
        "running_old": await instance(db, wf, W.RUNNING, None, old),
        "paused_old": await instance(db, wf, W.PAUSED, old, old),
        "rerun_old": await instance(db, wf, W.SUBMITTED, None, old),  # rerun: unfinished again
    }
    async with db.transaction() as conn:
        for request_id, age in (("old-1", 10), ("old-2", 8), ("new", 1)):
            await requests.remember(conn, request_id, "M", b"x", NOW - age * DAY)
    return ids


async def rows(db: Database) -> dict[str, dict[int, int] | set[str]]:
    """Per instance: its task instances, events and controls; and the request ids."""
    async with db.read() as conn:
        counts: dict[str, dict[int, int] | set[str]] = {}
        counts["instances"] = {i: 1 for i in (await conn.execute(select(WI.c.id))).scalars()}
        for name, t in (("tasks", TI), ("events", EV), ("controls", CR)):
            q: Any = select(t.c.workflow_instance_id, func.count()).group_by(
                t.c.workflow_instance_id
            )
            pairs: list[Any] = [list(r) for r in (await conn.execute(q)).all()]
            counts[name] = {int(wi): int(n) for wi, n in pairs}
        counts["request_ids"] = set((await conn.execute(select(R.c.request_id))).scalars())
    return counts


def history(db: Database) -> History:
    return History(db, SystemClock(), ages={})


def expect_kept(before: dict[str, dict[int, int] | set[str]], gone: set[int]) -> dict[str, object]:
    return {
        k: ({i: n for i, n in v.items() if i not in gone} if isinstance(v, dict) else v)
        for k, v in before.items()
    }


async def test_dry_run_counts_what_the_real_run_deletes(db: Database) -> None:
    ids = await world(db)
    before = await rows(db)
    old_finished = {ids["succeeded_old"], ids["failed_old"]}

    dry = await history(db).clean(CUTOFF, dry_run=True)
    assert await rows(db) == before  # nothing deleted
    assert {k: t.count for k, t in dry.items()} == {
        HistoryKind.REQUEST_IDS: 2,
        HistoryKind.EVENTS: 6,
        HistoryKind.INSTANCES: 2,
    }
    assert dry[HistoryKind.REQUEST_IDS].oldest == NOW - 10 * DAY
    assert dry[HistoryKind.REQUEST_IDS].newest == NOW - 8 * DAY
    assert dry[HistoryKind.INSTANCES].oldest == NOW - 40 * DAY
    assert dry[HistoryKind.INSTANCES].newest == NOW - 39 * DAY

    done = await history(db).clean(CUTOFF, dry_run=False)
    assert done == dry
    after = await rows(db)
    expected = expect_kept(before, old_finished)
    expected["request_ids"] = {"new"}
    assert after == expected
    # Again: nothing is left to delete.
    again = await history(db).clean(CUTOFF, dry_run=False)
    assert {t.count for t in again.values()} == {0}


async def test_events_alone_keep_their_instances(db: Database) -> None:
    ids = await world(db)
    before = await rows(db)
    cutoff = {HistoryKind.EVENTS: CUTOFF[HistoryKind.EVENTS]}
    done = await history(db).clean(cutoff, dry_run=False)
    assert done == {
        HistoryKind.EVENTS: Tally(
            HistoryKind.EVENTS, 6, NOW - 40 * DAY - 2 * timedelta(minutes=1), NOW - 39 * DAY
        )
    }
    after = await rows(db)
    assert after["instances"] == before["instances"] and after["tasks"] == before["tasks"]
    events_left = dict(before["events"])  # type: ignore[arg-type]
    for gone in (ids["succeeded_old"], ids["failed_old"]):
        del events_left[gone]
    assert after["events"] == events_left


async def test_small_batches_reach_the_end(db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(retention, "BATCH", 2)
    monkeypatch.setattr(retention, "INSTANCE_BATCH", 1)
    ids = await world(db)
    before = await rows(db)
    dry = await history(db).clean(CUTOFF, dry_run=True)
    done = await history(db).clean(CUTOFF, dry_run=False)
    assert done == dry and done[HistoryKind.EVENTS].count == 6
    expected = expect_kept(before, {ids["succeeded_old"], ids["failed_old"]})
    expected["request_ids"] = {"new"}
    assert await rows(db) == expected


async def test_two_clean_ups_at_once_are_harmless(
    db: Database, migrated_db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(retention, "BATCH", 2)
    monkeypatch.setattr(retention, "INSTANCE_BATCH", 1)
    ids = await world(db)
    before = await rows(db)
    other = Database(migrated_db_url)  # another master's connection pool
    await other.start(migrate=False)
    try:
        first, second = await asyncio.gather(
            history(db).clean(CUTOFF, dry_run=False), history(other).clean(CUTOFF, dry_run=False)
        )
    finally:
        await other.stop()
    # Each row was deleted by one of them.
    for kind, total in ((HistoryKind.REQUEST_IDS, 2), (HistoryKind.INSTANCES, 2)):
        assert first[kind].count + second[kind].count == total
    assert first[HistoryKind.EVENTS].count + second[HistoryKind.EVENTS].count == 6
    expected = expect_kept(before, {ids["succeeded_old"], ids["failed_old"]})
    expected["request_ids"] = {"new"}
    assert await rows(db) == expected


class FixedClock:
    def now(self) -> datetime:
        return NOW

    def monotonic(self) -> float:
        return 0.0


async def done(db: Database, old: set[int]) -> bool:
    """The old request ids and the old finished instances' events are gone."""
    now = await rows(db)
    return now["request_ids"] == {"new"} and not old & set(now["events"])


async def test_the_periodic_clean_up_applies_the_configured_ages(db: Database) -> None:
    ids = await world(db)
    before = await rows(db)
    job = History(
        db,
        FixedClock(),
        ages={
            HistoryKind.REQUEST_IDS: 7 * DAY,
            HistoryKind.EVENTS: 30 * DAY,
            HistoryKind.INSTANCES: timedelta(0),  # kept for ever
        },
        interval=0.05,
        jitter=lambda interval: 0.0,
    )
    await job.start()
    try:
        async with asyncio.timeout(30):
            while not await done(db, {ids["succeeded_old"], ids["failed_old"]}):
                await asyncio.sleep(0.05)
    finally:
        await job.stop()
    after = await rows(db)
    assert after["instances"] == before["instances"] and after["tasks"] == before["tasks"]
    assert after["request_ids"] == {"new"}
