"""Server incarnations: every start of a master gets a new epoch from this table's sequence."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import insert

from dsched_server.store.database import Conn
from dsched_server.store.models import Server, table

S = table(Server)


async def new_epoch(conn: Conn, role: str, address: str, now: datetime) -> int:
    """Allocates the next epoch (strictly greater than every earlier one, across restarts)."""
    result = await conn.execute(insert(S).values(role=role, address=address, start_time=now))
    return int(result.inserted_primary_key[0])  # type: ignore[index]
