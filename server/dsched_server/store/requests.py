"""Idempotency of mutating RPCs: the first answer to a ``request_id`` is stored with the change."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import bindparam, insert, select

from dsched.errors import FailedPrecondition
from dsched_server.store.database import Conn
from dsched_server.store.models import RequestLog, table

R = table(RequestLog)
# Built once (see instances._GET): every mutating request reads and writes one.
_RECALL = select(R.c.method, R.c.response, R.c.fingerprint).where(
    R.c.request_id == bindparam("_id")
)
_REMEMBER = insert(R)


async def recall(conn: Conn, request_id: str, method: str, fingerprint: str = "") -> bytes | None:
    """The stored answer for ``request_id``, or None. The id reused for another method, or for a
    request with another ``fingerprint`` (when both are known), is REQUEST_ID_REUSED."""
    row = (await conn.execute(_RECALL, {"_id": request_id})).first()
    if row is None:
        return None
    if row.method != method:
        raise FailedPrecondition(
            f"request_id {request_id!r} was already used for {row.method}",
            reason="REQUEST_ID_REUSED",
            metadata={"request_id": request_id, "method": row.method},
        )
    if fingerprint and row.fingerprint and row.fingerprint != fingerprint:
        raise FailedPrecondition(
            f"request_id {request_id!r} was already used for a different {method} request; "
            "use a new request_id for a new request",
            reason="REQUEST_ID_REUSED",
            metadata={"request_id": request_id, "method": method},
        )
    return bytes(row.response)


async def remember(
    conn: Conn,
    request_id: str,
    method: str,
    response: bytes,
    now: datetime,
    fingerprint: str = "",
) -> None:
    """Stores the answer in the caller's transaction; a concurrent duplicate fails its commit."""
    await conn.execute(
        _REMEMBER,
        {
            "request_id": request_id,
            "method": method,
            "response": response,
            "create_time": now,
            "fingerprint": fingerprint or None,
        },
    )
