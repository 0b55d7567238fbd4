"""Repository of the append-only instance event log (the source of watch streams)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Select, bindparam, func, insert, select

from dsched.states import InstanceEventKind, TaskState, WorkflowState
from dsched_server.core.records import EventRecord
from dsched_server.store.database import Conn
from dsched_server.store.models import InstanceEvent, table

EV = table(InstanceEvent)
# Built once (see instances._GET): every batch appends, every watch reads.
_APPEND = insert(EV)


@dataclass(frozen=True, slots=True, kw_only=True)
class NewEvent:
    workflow_instance_id: int
    kind: InstanceEventKind = InstanceEventKind.STATE
    task_instance_id: int = 0
    task_name: str = ""
    workflow_state: WorkflowState | None = None
    task_state: TaskState | None = None
    message: str = ""


async def append(conn: Conn, events: Sequence[NewEvent], now: datetime) -> None:
    """Appends events in the caller's transaction (so they commit with the change they describe)."""
    await append_written(conn, [(events, now)])


async def append_written(conn: Conn, groups: Sequence[tuple[Sequence[NewEvent], datetime]]) -> None:
    """:func:`append` for several writes of one transaction (each its events and its time), in
    one statement: the sequence numbers follow the order of ``groups``."""
    rows = [_row(e, now) for events, now in groups for e in events]
    if rows:
        await conn.execute(_APPEND, rows)


def _row(e: NewEvent, now: datetime) -> dict[str, Any]:
    return {
        "workflow_instance_id": e.workflow_instance_id,
        "task_instance_id": e.task_instance_id,
        "task_name": e.task_name,
        "workflow_state": e.workflow_state.value if e.workflow_state else None,
        "task_state": e.task_state.value if e.task_state else None,
        "kind": e.kind.value,
        "message": e.message[:1024],
        "create_time": now,
    }


async def after(conn: Conn, instance_id: int, sequence: int, limit: int = 500) -> list[EventRecord]:
    rows = await conn.execute(_after(limit), {"_instance": instance_id, "_sequence": sequence})
    return [
        EventRecord(
            sequence=r.sequence,
            workflow_instance_id=r.workflow_instance_id,
            task_instance_id=r.task_instance_id,
            task_name=r.task_name,
            workflow_state=WorkflowState(r.workflow_state) if r.workflow_state else None,
            task_state=TaskState(r.task_state) if r.task_state else None,
            kind=InstanceEventKind(r.kind),
            message=r.message,
            create_time=r.create_time,
        )
        for r in rows
    ]


@functools.lru_cache(maxsize=8)
def _after(limit: int) -> Select[Any]:
    return (
        select(EV)
        .where(
            EV.c.workflow_instance_id == bindparam("_instance"),
            EV.c.sequence > bindparam("_sequence"),
        )
        .order_by(EV.c.sequence)
        .limit(limit)
    )


async def last_sequence(conn: Conn, instance_id: int) -> int:
    value = await conn.scalar(
        select(func.max(EV.c.sequence)).where(EV.c.workflow_instance_id == instance_id)
    )
    return int(value or 0)
