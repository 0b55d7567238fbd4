"""Repository of control requests: pauses and stops recorded for an instance's owner to apply.

Writers serialise on the instance row (ARCHITECTURE.md §4): a master recording a control first
locks it with :func:`~dsched_server.store.instances.lock`, the owner applying controls holds it
through its fence. So a control is either committed before the owner's transaction reads the pending
ones, or recorded after that transaction, against the state it left.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Row, bindparam, insert, or_, select, update

from dsched.states import WorkflowState
from dsched_server.core.controls import ControlKind, ControlOutcome, ControlRecord
from dsched_server.store.database import Conn
from dsched_server.store.models import ControlRequest, WorkflowInstance, table

CR = table(ControlRequest)
WI = table(WorkflowInstance)
PENDING = ControlOutcome.PENDING.value
# Built once (see instances._GET): every claim reads the pending controls, every end refuses them.
_OF_INSTANCE = (CR.c.workflow_instance_id == bindparam("_instance")) & (CR.c.outcome == PENDING)
_PENDING = select(CR).where(_OF_INSTANCE).order_by(CR.c.id)
_PENDING_OR_REQUEST = (
    select(CR).where(or_(_OF_INSTANCE, CR.c.request_id == bindparam("_request"))).order_by(CR.c.id)
)
_REJECT = (
    update(CR)
    .where(_OF_INSTANCE)
    .values(
        outcome=ControlOutcome.REJECTED.value,
        outcome_state=bindparam("_state"),
        outcome_reason=bindparam("_reason"),
        applied_by=bindparam("_epoch"),
        apply_time=bindparam("_now"),
    )
)


def _record(row: Row[Any]) -> ControlRecord:
    m = row._mapping
    return ControlRecord(
        id=m["id"],
        request_id=m["request_id"],
        instance_id=m["workflow_instance_id"],
        kind=ControlKind(m["kind"]),
        requested_by=m["requested_by"],
        create_time=m["create_time"],
        outcome=ControlOutcome(m["outcome"]),
        outcome_state=WorkflowState(m["outcome_state"]) if m["outcome_state"] else None,
        outcome_reason=m["outcome_reason"],
        applied_by=m["applied_by"],
        apply_time=m["apply_time"],
    )


async def add(
    conn: Conn,
    *,
    request_id: str,
    instance_id: int,
    kind: ControlKind,
    requested_by: str,
    now: datetime,
    applied: tuple[WorkflowState, int] | None = None,
) -> int:
    """Records a control, PENDING, or with ``applied=(state, epoch)`` already APPLIED (by the
    owner, or in the store for an instance nobody drives). Raises IntegrityError if
    ``request_id`` is taken."""
    values: dict[str, Any] = {
        "request_id": request_id,
        "workflow_instance_id": instance_id,
        "kind": kind.value,
        "requested_by": requested_by,
        "create_time": now,
        "outcome": PENDING,
        "outcome_state": None,
        "outcome_reason": "",
        "applied_by": 0,
        "apply_time": None,
    }
    if applied is not None:
        values.update(
            outcome=ControlOutcome.APPLIED.value,
            outcome_state=applied[0].value,
            applied_by=applied[1],
            apply_time=now,
        )
    result = await conn.execute(insert(CR).values(**values))
    return int(result.inserted_primary_key[0])  # type: ignore[index]


async def get(conn: Conn, control_id: int) -> ControlRecord:
    row = (await conn.execute(select(CR).where(CR.c.id == control_id))).one()
    return _record(row)


async def find(conn: Conn, request_id: str) -> ControlRecord | None:
    """The control recorded under ``request_id``, if any."""
    row = (await conn.execute(select(CR).where(CR.c.request_id == request_id))).first()
    return _record(row) if row is not None else None


async def pending(conn: Conn, instance_id: int, *, or_request: str = "") -> list[ControlRecord]:
    """The pending controls of an instance in recording order, plus (with ``or_request``) the
    control recorded under that request id whatever its instance or outcome: one query for the
    owner, which must apply the first and must not record the second twice."""
    if or_request:
        rows = await conn.execute(
            _PENDING_OR_REQUEST, {"_instance": instance_id, "_request": or_request}
        )
    else:
        rows = await conn.execute(_PENDING, {"_instance": instance_id})
    return [_record(r) for r in rows]


async def settle(
    conn: Conn,
    control_id: int,
    *,
    outcome: ControlOutcome,
    state: WorkflowState,
    reason: str,
    epoch: int,
    now: datetime,
) -> bool:
    """Records what became of a pending control; False if it was settled already."""
    result = await conn.execute(
        update(CR)
        .where(CR.c.id == control_id, CR.c.outcome == PENDING)
        .values(
            outcome=outcome.value,
            outcome_state=state.value,
            outcome_reason=reason[:1024],
            applied_by=epoch,
            apply_time=now,
        )
    )
    return result.rowcount == 1


async def reject_pending(
    conn: Conn, instance_id: int, *, state: WorkflowState, reason: str, epoch: int, now: datetime
) -> int:
    """Refuses every control still pending for an instance that ended in ``state`` (in the owner's
    finishing transaction); returns how many there were."""
    result = await conn.execute(
        _REJECT,
        {
            "_instance": instance_id,
            "_state": state.value,
            "_reason": reason[:1024],
            "_epoch": epoch,
            "_now": now,
        },
    )
    return int(result.rowcount)


async def owned_with_pending(conn: Conn, epoch: int) -> list[int]:
    """Instances owned by master ``epoch`` that have pending controls (the owner's fallback
    sweep, for controls whose nudge never arrived)."""
    rows = await conn.execute(
        select(CR.c.workflow_instance_id)
        .join(WI, WI.c.id == CR.c.workflow_instance_id)
        .where(CR.c.outcome == PENDING, WI.c.epoch == epoch)
        .distinct()
    )
    return sorted(int(r[0]) for r in rows)
