"""Repository of datasources (``core/datasource.py`` says what is valid; this stores). Names are
unique (a key, so two concurrent creates cannot both succeed); the password column holds only
what :mod:`dsched_server.datasource_key` encrypted."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Row, delete, insert, select, update
from sqlalchemy.exc import IntegrityError

from dsched.errors import AlreadyExists, NotFound
from dsched_server.core.datasource import DatasourceRecord, DatasourceSpec, DatasourceType
from dsched_server.store.database import Conn
from dsched_server.store.models import DatasourceRow, table

D = table(DatasourceRow)


def _values(spec: DatasourceSpec) -> dict[str, Any]:
    return {
        "type": spec.type.value,
        "description": spec.description,
        "host": spec.host,
        "port": spec.port,
        "database": spec.database,
        "user": spec.user,
        "options": dict(spec.options),
        "url": spec.url,
    }


async def create(
    conn: Conn, spec: DatasourceSpec, token: str | None, now: datetime
) -> DatasourceRecord:
    if await conn.scalar(select(D.c.id).where(D.c.name == spec.name)) is not None:
        raise _exists(spec.name)
    try:
        await conn.execute(
            insert(D).values(
                name=spec.name, password=token, create_time=now, update_time=now, **_values(spec)
            )
        )
    except IntegrityError as exc:  # lost a race with a concurrent create
        raise _exists(spec.name) from exc
    return await get(conn, spec.name)


async def update_spec(
    conn: Conn, spec: DatasourceSpec, token: str | None, replace_token: bool, now: datetime
) -> DatasourceRecord:
    """Replaces the fields of the datasource ``spec.name`` (and its password if
    ``replace_token``)."""
    values = {**_values(spec), "update_time": now}
    if replace_token:
        values["password"] = token
    result = await conn.execute(update(D).where(D.c.name == spec.name).values(**values))
    if result.rowcount != 1:
        raise _not_found(spec.name)
    return await get(conn, spec.name)


async def get(conn: Conn, name: str) -> DatasourceRecord:
    row = (await conn.execute(select(D).where(D.c.name == name))).first()
    if row is None:
        raise _not_found(name)
    return _record(row)


async def list_datasources(conn: Conn, after: str | None, limit: int) -> list[DatasourceRecord]:
    """Up to ``limit`` datasources by name, after the name ``after`` (the unique index)."""
    query = select(D).order_by(D.c.name).limit(limit)
    if after is not None:
        query = query.where(D.c.name > after)
    return [_record(r) for r in await conn.execute(query)]


async def delete_datasource(conn: Conn, name: str) -> None:
    result = await conn.execute(delete(D).where(D.c.name == name))
    if result.rowcount != 1:
        raise _not_found(name)


def _record(row: Row[Any]) -> DatasourceRecord:
    m = row._mapping
    return DatasourceRecord(
        spec=DatasourceSpec(
            name=m["name"],
            type=DatasourceType(m["type"]),
            description=m["description"],
            host=m["host"],
            port=m["port"],
            database=m["database"],
            user=m["user"],
            options=dict(m["options"]),
            url=m["url"],
        ),
        token=m["password"],
        create_time=m["create_time"],
        update_time=m["update_time"],
    )


def _exists(name: str) -> AlreadyExists:
    return AlreadyExists(f"datasource {name!r} already exists", metadata={"datasource": name})


def _not_found(name: str) -> NotFound:
    return NotFound(f"datasource {name!r} not found", metadata={"datasource": name})
