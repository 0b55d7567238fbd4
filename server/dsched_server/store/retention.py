"""Deleting old history (:mod:`dsched_server.core.retention`) a bounded batch at a time.

Each :func:`step` reads one batch of candidates after a keyset cursor through an index (request
ids by creation time, events by sequence, instances by end time) and, unless dry, deletes them in
the caller's transaction under a condition that re-checks, in the statement itself, that they
still qualify: an instance rerun meanwhile is unfinished again and keeps everything. So a dry run
counts exactly what a real run would delete, two clean-ups at once delete each row once (the
second finds nothing, or skips the instances the first has locked), and no transaction holds more
than a batch of rows.

Events are walked from the oldest: the first event created after the cutoff ends the walk (an
instance that ended before the cutoff made no event after it), so a pass reads what it deletes
plus the few old events of instances that are still unfinished.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, and_, delete, or_, select

from dsched_server.core.retention import FINISHED, HistoryKind
from dsched_server.store.database import Conn
from dsched_server.store.models import (
    Command,
    ControlRequest,
    InstanceEvent,
    RequestLog,
    TaskInstance,
    WorkflowInstance,
    table,
)

R = table(RequestLog)
EV = table(InstanceEvent)
WI = table(WorkflowInstance)
TI = table(TaskInstance)
CR = table(ControlRequest)
CMD = table(Command)

BATCH = 500  # rows a statement reads or deletes: milliseconds, even for SQLite on the event loop
INSTANCE_BATCH = 20  # instances per transaction, each with its tasks (up to 2,000) and controls

Cursor = tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class Batch:
    """One step: ``count`` rows deleted (dry: found), the times of those found, and where the next
    step starts (None: nothing is left)."""

    count: int
    times: list[datetime] = field(default_factory=list)
    after: Cursor | None = None


async def step(
    conn: Conn,
    kind: HistoryKind,
    cutoff: datetime,
    after: Cursor | None,
    *,
    dry_run: bool,
    skip_locked: bool = False,
) -> Batch:
    """One batch of ``kind`` older than ``cutoff`` after ``after`` (None: from the start).
    ``skip_locked`` (PostgreSQL, MariaDB): instances another clean-up is deleting are left to it."""
    if kind is HistoryKind.REQUEST_IDS:
        return await _request_ids(conn, cutoff, after, dry_run)
    if kind is HistoryKind.EVENTS:
        return await _events(conn, cutoff, after, dry_run)
    return await _instances(conn, cutoff, after, dry_run, skip_locked)


def _finished_before(cutoff: datetime) -> ColumnElement[bool]:
    return and_(WI.c.state.in_([s.value for s in FINISHED]), WI.c.end_time < cutoff)


def _after(columns: Sequence[Any], cursor: Cursor | None) -> ColumnElement[bool]:
    """Keyset condition ``columns > cursor`` (portable: no row-value comparison)."""
    if cursor is None:
        return and_(True)
    first, *rest = columns
    if not rest:
        return first > cursor[0]  # type: ignore[no-any-return]
    return or_(first > cursor[0], and_(first == cursor[0], _after(rest, cursor[1:])))


async def _request_ids(conn: Conn, cutoff: datetime, after: Cursor | None, dry: bool) -> Batch:
    rows = (
        await conn.execute(
            select(R.c.request_id, R.c.create_time)
            .where(R.c.create_time < cutoff, _after([R.c.create_time, R.c.request_id], after))
            .order_by(R.c.create_time, R.c.request_id)
            .limit(BATCH)
        )
    ).all()
    count = len(rows)
    if rows and not dry:
        ids = [r.request_id for r in rows]
        result = await conn.execute(
            delete(R).where(R.c.request_id.in_(ids), R.c.create_time < cutoff)
        )
        count = result.rowcount
    last = (rows[-1].create_time, rows[-1].request_id) if len(rows) == BATCH else None
    return Batch(count, [r.create_time for r in rows], last)


async def _events(conn: Conn, cutoff: datetime, after: Cursor | None, dry: bool) -> Batch:
    rows = (
        await conn.execute(
            select(EV.c.sequence, EV.c.workflow_instance_id, EV.c.create_time)
            .where(_after([EV.c.sequence], after))
            .order_by(EV.c.sequence)
            .limit(BATCH)
        )
    ).all()
    old = [r for r in rows if r.create_time < cutoff]
    more = len(rows) == BATCH and len(old) == len(rows)
    last = (rows[-1].sequence,) if more else None
    instances = {r.workflow_instance_id for r in old}
    if not instances:
        return Batch(0, [], last)
    qualifying = select(WI.c.id).where(WI.c.id.in_(instances), _finished_before(cutoff))
    done = set((await conn.execute(qualifying)).scalars())
    chosen = [r for r in old if r.workflow_instance_id in done]
    count = len(chosen)
    if chosen and not dry:
        result = await conn.execute(
            delete(EV).where(
                EV.c.sequence.in_([r.sequence for r in chosen]),
                EV.c.workflow_instance_id.in_(qualifying),
            )
        )
        count = result.rowcount
    return Batch(count, [r.create_time for r in chosen], last)


async def _instances(
    conn: Conn, cutoff: datetime, after: Cursor | None, dry: bool, skip_locked: bool
) -> Batch:
    rows = (
        await conn.execute(
            select(WI.c.id, WI.c.end_time)
            .where(_finished_before(cutoff), _after([WI.c.end_time, WI.c.id], after))
            .order_by(WI.c.end_time, WI.c.id)
            .limit(INSTANCE_BATCH)
        )
    ).all()
    last = (rows[-1].end_time, rows[-1].id) if len(rows) == INSTANCE_BATCH else None
    if dry or not rows:
        return Batch(len(rows), [r.end_time for r in rows], last)
    # Lock the rows that still qualify (in id order, as every clean-up does): a rerun that comes
    # first makes its instance unfinished and it is left alone; one that comes after finds the
    # instance gone.
    locking = (
        select(WI.c.id)
        .where(WI.c.id.in_([r.id for r in rows]), _finished_before(cutoff))
        .order_by(WI.c.id)
        .with_for_update(skip_locked=skip_locked)
    )
    ids = list((await conn.execute(locking)).scalars())
    if not ids:
        return Batch(0, [], last)
    for child in (EV.c.workflow_instance_id, TI.c.workflow_instance_id, CR.c.workflow_instance_id):
        await conn.execute(delete(child.table).where(child.in_(ids)))
    await conn.execute(delete(CMD).where(CMD.c.workflow_instance_id.in_(ids)))
    result = await conn.execute(delete(WI).where(WI.c.id.in_(ids)))
    kept = set(ids)
    return Batch(result.rowcount, [r.end_time for r in rows if r.id in kept], last)
