"""The shared database fixtures give each test a real, empty database of each kind."""

from __future__ import annotations

import socket

from sqlalchemy import inspect, text
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from tests.conftest import free_port


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
