"""The database handle: engine, transactions, migrations.

All store access goes through :class:`Database`. Writes happen in :meth:`Database.transaction`
blocks; the repositories are functions that take the block's connection, so one transaction can
span several of them (a state change and its event row commit together or not at all).

SQLite allows one writer at a time. Standalone dsched is one process, so write transactions are
serialised in-process by an asyncio lock instead of letting concurrent writers fail with "database
is locked"; WAL mode keeps readers off the writer's back.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import Connection, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

log = logging.getLogger(__name__)

MIGRATIONS = Path(__file__).parent / "migrations"
_MIGRATION_LOCK = 7_301_511  # arbitrary advisory-lock key shared by every dsched master


class Database:
    """Owns the async engine. ``start`` connects and migrates to the newest schema; ``stop``
    closes."""

    def __init__(self, url: str, *, echo: bool = False) -> None:
        self.url = make_url(url)
        self._echo = echo
        self._engine: AsyncEngine | None = None
        self._write_lock = asyncio.Lock()
        self.dialect = self.url.get_backend_name()

    @property
    def engine(self) -> AsyncEngine:
        if self._engine is None:
            raise RuntimeError("database not started")
        return self._engine

    @property
    def is_sqlite(self) -> bool:
        return self.dialect == "sqlite"

    async def start(self, *, migrate: bool = True) -> None:
        kwargs: dict[str, Any] = {"echo": self._echo, "pool_pre_ping": not self.is_sqlite}
        if self.is_sqlite:
            database = self.url.database
            if database and database != ":memory:":
                Path(database).parent.mkdir(parents=True, exist_ok=True)
            kwargs["connect_args"] = {"timeout": 30}
        else:
            kwargs.update(pool_size=10, max_overflow=10, pool_recycle=1800)
        engine = create_async_engine(self.url, **kwargs)
        if self.is_sqlite:
            event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
        self._engine = engine
        if migrate:
            await self.migrate()

    async def stop(self) -> None:
        if self._engine is not None:
            await self._engine.dispose()
            self._engine = None

    async def migrate(self) -> None:
        """Upgrades the schema to the newest revision, under a lock so masters don't race."""
        async with self.engine.begin() as conn:
            if self.dialect == "postgresql":
                await conn.execute(text(f"SELECT pg_advisory_xact_lock({_MIGRATION_LOCK})"))
            elif self.dialect in ("mysql", "mariadb"):
                await conn.execute(text("SELECT GET_LOCK('dsched_migrate', 120)"))
            await conn.run_sync(_upgrade)
            if self.dialect in ("mysql", "mariadb"):
                await conn.execute(text("SELECT RELEASE_LOCK('dsched_migrate')"))

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[AsyncConnection]:
        """A write transaction: commits when the block exits normally, rolls back on an
        exception."""
        if self.is_sqlite:
            async with self._write_lock, self.engine.begin() as conn:
                yield conn
        else:
            async with self.engine.begin() as conn:
                yield conn

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncConnection]:
        """A connection for reads (its implicit transaction is rolled back at the end)."""
        async with self.engine.connect() as conn:
            yield conn


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    # NORMAL in WAL mode loses at most the last transactions on power loss, never consistency.
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()


def _upgrade(conn: Connection) -> None:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.attributes["connection"] = conn
    command.upgrade(cfg, "head")
