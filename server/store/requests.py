"""Idempotency of mutating RPCs: the first answer to a ``request_id`` is stored with the change."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import insert, select

from dsched.errors import FailedPrecondition
from dsched.server.store.database import Conn
from dsched.server.store.models import RequestLog, table

R = table(RequestLog)


async def recall(conn: Conn, request_id: str, method: str) -> bytes | None:
    """The stored answer for ``request_id``, or None. A reused id for another method is an error."""
    row = (
        await conn.execute(select(R.c.method, R.c.response).where(R.c.request_id == request_id))
    ).first()
    if row is None:
        return None
    if row.method != method:
        raise FailedPrecondition(
            f"request_id {request_id!r} was already used for {row.method}",
            reason="REQUEST_ID_REUSED",
            metadata={"request_id": request_id, "method": row.method},
        )
    return bytes(row.response)


async def remember(
    conn: Conn, request_id: str, method: str, response: bytes, now: datetime
) -> None:
    """Stores the answer in the caller's transaction; a concurrent duplicate fails its commit."""
    await conn.execute(
        insert(R).values(request_id=request_id, method=method, response=response, create_time=now)
    )
