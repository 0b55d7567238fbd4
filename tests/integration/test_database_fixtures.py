"""The shared database fixtures give each test a real database of each kind: empty (``db_url``),
or migrated (``migrated_db_url``: a copy that must not differ from a database migrated there and
then)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, inspect, text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from dsched_server.store.database import Database
from tests.conftest import _Server, free_port


async def _tables_and_name(url: str) -> tuple[list[str], str]:
    engine = create_async_engine(url, poolclass=NullPool)
    try:
        async with engine.begin() as conn:
            await conn.execute(text("CREATE TABLE probe (id INTEGER PRIMARY KEY)"))
            tables = await conn.run_sync(lambda sync: inspect(sync).get_table_names())
        return tables, engine.url.database or ""
    finally:
        await engine.dispose()


async def test_db_url_is_a_fresh_database(db_url: str) -> None:
    # Each parametrised run creates the same table: it would fail if databases were shared.
    tables, name = await _tables_and_name(db_url)
    assert tables == ["probe"]
    assert db_url.split("+", 1)[1].split(":", 1)[0] in ("aiosqlite", "asyncpg", "aiomysql")
    if not db_url.startswith("sqlite"):
        assert name.startswith("dsched_t_")


def _described(sync: Connection) -> dict[str, Any]:
    """Every table's columns (with types, collations and defaults), keys, indexes and rows."""
    found = inspect(sync)
    out: dict[str, Any] = {}
    for table in sorted(found.get_table_names()):
        out[table] = {
            "columns": [
                (c["name"], str(c["type"]), c["nullable"], str(c.get("default")))
                for c in found.get_columns(table)
            ],
            "primary key": found.get_pk_constraint(table)["constrained_columns"],
            "foreign keys": sorted(
                (fk["constrained_columns"], fk["referred_table"], fk["referred_columns"])
                for fk in found.get_foreign_keys(table)
            ),
            "indexes": sorted(
                (i["name"], [str(c) for c in i["column_names"]], bool(i["unique"]))
                for i in found.get_indexes(table)
            ),
            "unique": sorted(
                (u["name"] or "", u["column_names"]) for u in found.get_unique_constraints(table)
            ),
            "rows": sorted(map(tuple, sync.execute(text(f"SELECT * FROM {table}")).all())),
        }
    return out


async def _description(url: str) -> dict[str, Any]:
    engine = create_async_engine(url, poolclass=NullPool)
    try:
        async with engine.connect() as conn:
            return await conn.run_sync(_described)
    finally:
        await engine.dispose()


@contextmanager
def _fresh(kind: str, servers: dict[str, _Server], tmp_path: Path) -> Iterator[str]:
    if kind == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'fresh.db'}"
        return
    with servers[kind].database() as url:
        yield url


async def test_migrated_db_url_is_a_fresh_copy_of_a_freshly_migrated_database(
    migrated_db_url: str, _servers: dict[str, _Server], tmp_path: Path
) -> None:
    kind = make_url(migrated_db_url).get_backend_name()
    kind = {"mysql": "mariadb"}.get(kind, kind)
    with _fresh(kind, _servers, tmp_path) as url:
        migrated = Database(url)
        await migrated.start()  # what a master does on an empty database
        await migrated.stop()
        expected = await _description(url)
    copy = await _description(migrated_db_url)
    assert copy == expected
    assert any(rows["rows"] for rows in copy.values())  # the revision, at least
    # A database of the test's own: the probe table is not in the template, nor in the next copy.
    tables, name = await _tables_and_name(migrated_db_url)
    assert "probe" in tables and len(tables) == len(expected) + 1
    if kind != "sqlite":
        assert name.startswith("dsched_t_")


async def test_session_databases(pg_url: str, mysql_url: str) -> None:
    for url in (pg_url, mysql_url):
        engine = create_async_engine(url, poolclass=NullPool)
        try:
            async with engine.connect() as conn:
                assert (await conn.execute(text("SELECT 1"))).scalar() == 1
        finally:
            await engine.dispose()


def test_free_port_can_be_bound() -> None:
    port = free_port()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))
