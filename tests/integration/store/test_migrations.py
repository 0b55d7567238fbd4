"""Migrations: an empty database is brought to the newest schema, once, even by racing masters."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from alembic import command
from alembic.config import Config
from sqlalchemy import Connection, inspect, text
from sqlalchemy.ext.asyncio import AsyncConnection

from dsched_server.store import definitions
from dsched_server.store.database import MIGRATIONS, Conn, Database
from dsched_server.store.models import Base
from tests.integration.store.conftest import NOW, make_project, read, write

HEAD = "0010"


async def _tables(conn: Conn) -> set[str]:
    return set(await conn.run_sync(lambda sync: inspect(sync).get_table_names()))


async def _versions(conn: Conn) -> list[str]:
    return [str(r[0]) for r in await conn.execute(text("SELECT version_num FROM alembic_version"))]


async def test_start_migrates_an_empty_database_to_the_newest_revision(db_url: str) -> None:
    db = Database(db_url)
    await db.start(migrate=False)
    try:
        assert await read(db, _tables) == set()
        await db.migrate()
        tables = await read(db, _tables)
        assert tables == {*Base.metadata.tables, "alembic_version"}
        assert await read(db, _versions) == [HEAD]
    finally:
        await db.stop()


async def test_migrated_schema_matches_the_models(db: Database) -> None:
    def columns(sync: object) -> dict[str, set[str]]:
        insp = inspect(sync)
        return {t: {c["name"] for c in insp.get_columns(t)} for t in Base.metadata.tables}

    async with db.read() as conn:
        found = await conn.run_sync(columns)
    expected = {name: {c.name for c in t.columns} for name, t in Base.metadata.tables.items()}
    assert found == expected


async def test_migrating_again_is_a_no_op_that_keeps_the_data(db: Database) -> None:
    await make_project(db, "kept")
    before = await read(db, _tables)

    await db.migrate()
    await db.migrate()

    assert await read(db, _tables) == before
    assert await read(db, _versions) == [HEAD]
    kept = await read(db, lambda c: definitions.get_project(c, "kept"))
    assert kept.create_time == NOW


async def test_a_second_database_object_on_a_migrated_database_starts_without_changes(
    db: Database, migrated_db_url: str
) -> None:
    await make_project(db, "first")
    again = Database(migrated_db_url)
    await again.start()
    try:
        assert await read(again, _versions) == [HEAD]
        names = await read(again, lambda c: definitions.list_projects(c, None, 10))
        assert [p.name for p in names] == ["first"]
    finally:
        await again.stop()


async def test_concurrent_migrations_of_a_fresh_database_both_succeed(db_url: str) -> None:
    first, second = Database(db_url), Database(db_url)
    try:
        results = await asyncio.gather(first.start(), second.start(), return_exceptions=True)
        assert list(results) == [None, None]
        assert await read(first, _versions) == [HEAD]
        assert await read(second, _tables) == {*Base.metadata.tables, "alembic_version"}
        # Both handles work on the one schema.
        await write(first, lambda c: definitions.create_project(c, "a", "", NOW))
        project = await read(second, lambda c: definitions.get_project(c, "a"))
        assert project.name == "a"
    finally:
        await first.stop()
        await second.stop()


async def test_a_migrator_that_takes_the_lock_as_soon_as_it_is_free_finds_the_schema_complete(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The lock must not be let go before the revision is committed. PostgreSQL's advisory lock
    # and SQLite's write lock end with the transaction; MariaDB's GET_LOCK belongs to the session
    # and is released by a statement, so the second migrator is started right after it.
    first, second = Database(db_url), Database(db_url)
    await first.start(migrate=False)
    await second.start(migrate=False)
    first_task: asyncio.Task[None] | None = None
    second_runs: list[asyncio.Task[None]] = []
    execute = AsyncConnection.execute

    async def spying_execute(self: AsyncConnection, statement: Any, *args: Any, **kw: Any) -> Any:
        result = await execute(self, statement, *args, **kw)
        if asyncio.current_task() is first_task and "RELEASE_LOCK" in str(statement):
            second_runs.append(asyncio.create_task(second.migrate()))
            await asyncio.wait(second_runs)
        return result

    monkeypatch.setattr(AsyncConnection, "execute", spying_execute)
    try:
        first_task = asyncio.create_task(first.migrate())
        await first_task
        if not second_runs:
            second_runs.append(asyncio.create_task(second.migrate()))
        await asyncio.gather(*second_runs)
        assert await read(second, _versions) == [HEAD]
        assert await read(second, _tables) == {*Base.metadata.tables, "alembic_version"}
    finally:
        await first.stop()
        await second.stop()


def _upgrade_to(revision: str) -> Callable[[Connection], None]:
    def run(sync: Connection) -> None:
        cfg = Config()
        cfg.set_main_option("script_location", str(MIGRATIONS))
        cfg.attributes["connection"] = sync
        command.upgrade(cfg, revision)

    return run


async def test_upgrading_from_the_first_revision_keeps_the_data_and_compares_names_exactly(
    db_url: str,
) -> None:
    db = Database(db_url)
    await db.start(migrate=False)
    try:
        async with db.transaction() as conn:
            await conn.run_sync(_upgrade_to("0001"))
        await write(db, lambda c: definitions.create_project(c, "etl", "old", NOW))
        assert await read(db, _versions) == ["0001"]

        await db.migrate()

        assert await read(db, _versions) == [HEAD]
        await write(db, lambda c: definitions.create_project(c, "ETL", "new", NOW))
        old = await read(db, lambda c: definitions.get_project(c, "etl"))
        new = await read(db, lambda c: definitions.get_project(c, "ETL"))
        assert (old.description, new.description) == ("old", "new")
    finally:
        await db.stop()
