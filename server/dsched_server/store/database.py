"""The database handle: engine, transactions, migrations.

All store access goes through :class:`Database`. Writes happen in :meth:`Database.transaction`
blocks; the repositories are functions that take the block's :class:`Conn`, so one transaction can
span several of them (a state change and its event row commit together or not at all).

PostgreSQL and MariaDB are reached through SQLAlchemy's asyncio drivers (asyncpg, aiomysql).
SQLite is different on purpose: it is a library in this process, its statements take microseconds,
and running each one through aiosqlite's thread costs a thread hop per call (about 50 hops per task
attempt, which dominated the latency between dependent tasks). So for SQLite the store uses the
synchronous driver and runs statements inline on the event loop; a statement never waits for
another process, and WAL mode with ``synchronous=NORMAL`` means a commit does not wait for the disk.
Standalone dsched is one process, so write transactions are serialised by an asyncio lock.

A database that cannot be reached (refused, reset, shut down, timed out) surfaces from
:meth:`Database.read` and :meth:`Database.transaction` as :class:`~dsched.errors.Unavailable`
(reason ``DATABASE_UNAVAILABLE``), never as a driver error; :attr:`Database.availability` tracks the
outage (see :mod:`dsched_server.store.availability`). Pooled connections are pinged before use, so
the ones a restarted server dropped are replaced instead of failing a request.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Protocol, TypeVar

from alembic import command
from alembic.config import Config
from sqlalchemy import Connection, Engine, create_engine, event, text
from sqlalchemy.dialects import registry
from sqlalchemy.dialects.sqlite.pysqlite import SQLiteDialect_pysqlite
from sqlalchemy.engine import CursorResult, make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.pool import NullPool

from dsched.errors import DschedError
from dsched_server.store.availability import Availability
from dsched_server.store.memo import Memo, Staged, Versions

log = logging.getLogger(__name__)

MIGRATIONS = Path(__file__).parent / "migrations"
_MIGRATION_LOCK = 7_301_511  # arbitrary advisory-lock key shared by every dsched master
# Seconds to wait for a new connection: a server that does not answer (a partition, not a refusal)
# must become UNAVAILABLE, not hold a request for the driver's default minute.
CONNECT_TIMEOUT_S = 10
_CONNECT_ARGS: dict[str, dict[str, Any]] = {
    "postgresql": {"timeout": CONNECT_TIMEOUT_S},
    "mysql": {"connect_timeout": CONNECT_TIMEOUT_S},
    "mariadb": {"connect_timeout": CONNECT_TIMEOUT_S},
}
T = TypeVar("T")


class Conn(Protocol):
    """The connection repositories use: SQLAlchemy's execute/scalar, awaitable on every backend.

    ``multi_rowcount`` tells whether an executemany reports the total number of matched rows;
    ``versions`` remembers the workflow versions read (:mod:`dsched_server.store.memo`).
    """

    multi_rowcount: bool
    versions: Versions

    async def execute(self, statement: Any, parameters: Any = None) -> CursorResult[Any]: ...

    async def scalar(self, statement: Any, parameters: Any = None) -> Any: ...

    async def run_sync(self, fn: Callable[[Connection], T]) -> T: ...


class _AsyncConn:
    """A :class:`Conn` over an asyncio driver connection (PostgreSQL, MariaDB)."""

    def __init__(self, conn: AsyncConnection, versions: Versions) -> None:
        self._conn = conn
        self.multi_rowcount = conn.dialect.supports_sane_multi_rowcount
        self.versions = versions

    async def execute(self, statement: Any, parameters: Any = None) -> CursorResult[Any]:
        result: CursorResult[Any] = await self._conn.execute(statement, parameters)
        return result

    async def scalar(self, statement: Any, parameters: Any = None) -> Any:
        return await self._conn.scalar(statement, parameters)

    async def run_sync(self, fn: Callable[[Connection], T]) -> T:
        return await self._conn.run_sync(fn)


class _InlineConn:
    """A :class:`Conn` over a synchronous SQLite connection: statements run inline (see module)."""

    def __init__(self, conn: Connection, versions: Versions) -> None:
        self._conn = conn
        self.multi_rowcount = conn.dialect.supports_sane_multi_rowcount
        self.versions = versions

    async def execute(self, statement: Any, parameters: Any = None) -> CursorResult[Any]:
        return self._conn.execute(statement, parameters)

    async def scalar(self, statement: Any, parameters: Any = None) -> Any:
        return self._conn.scalar(statement, parameters)

    async def run_sync(self, fn: Callable[[Connection], T]) -> T:
        return fn(self._conn)


class Database:
    """Owns the engine. ``start`` connects and migrates to the newest schema; ``stop`` closes."""

    def __init__(self, url: str, *, echo: bool = False) -> None:
        self.url = make_url(url)
        self.dialect = self.url.get_backend_name()
        self._echo = echo
        self._async: AsyncEngine | None = None
        self._sync: Engine | None = None
        self._write_lock = asyncio.Lock()
        self._probe_engine: AsyncEngine | None = None
        self.availability = Availability(self._probe)
        self.memo = Memo()

    @property
    def is_sqlite(self) -> bool:
        return self.dialect == "sqlite"

    async def start(self, *, migrate: bool = True) -> None:
        if self.is_sqlite:
            database = self.url.database
            if database and database != ":memory:":
                Path(database).parent.mkdir(parents=True, exist_ok=True)
            # The loop thread is the only user; check_same_thread would trip on pool hand-offs.
            url = self.url.set(drivername=f"sqlite+{_SQLITE_DRIVER}")
            engine = create_engine(
                url, echo=self._echo, connect_args={"timeout": 30, "check_same_thread": False}
            )
            event.listen(engine, "connect", _sqlite_pragmas)
            self._sync = engine
        else:
            connect_args = _CONNECT_ARGS.get(self.dialect, {})
            self._async = create_async_engine(
                self.url,
                echo=self._echo,
                pool_pre_ping=True,
                pool_size=10,
                max_overflow=10,
                pool_recycle=1800,
                connect_args=connect_args,
            )
            # The recovery probe dials a fresh connection each time: the pool may be full of
            # requests waiting on the dead server, and a pooled connection proves nothing.
            self._probe_engine = create_async_engine(
                self.url, poolclass=NullPool, connect_args=connect_args
            )
        if migrate:
            await self.migrate()

    async def _probe(self) -> None:
        if self._probe_engine is not None:
            async with self._probe_engine.connect() as conn:
                await conn.execute(text("SELECT 1"))

    async def stop(self, *, close: bool = True) -> None:
        """Disposes of the engine. ``close=False`` drops the pooled connections without a word to
        the server (a server that does not answer would keep a close waiting): they end with the
        process."""
        await self.availability.close()
        if self._probe_engine is not None:
            await self._probe_engine.dispose(close=close)
            self._probe_engine = None
        if self._async is not None:
            await self._async.dispose(close=close)
            self._async = None
        if self._sync is not None:
            self._sync.dispose()
            self._sync = None

    async def migrate(self) -> None:
        """Upgrades the schema to the newest revision, under a lock so masters don't race."""
        if self.dialect in ("mysql", "mariadb"):
            await self._migrate_under_session_lock()
            return
        async with self.transaction() as conn:
            if self.dialect == "postgresql":
                await conn.execute(text(f"SELECT pg_advisory_xact_lock({_MIGRATION_LOCK})"))
            await conn.run_sync(_upgrade)

    async def _migrate_under_session_lock(self) -> None:
        # GET_LOCK belongs to the session, not to the transaction: it is released only after the
        # commit, or a waiting master would read alembic_version before the new revision row is
        # committed and run the same migration again ("table already exists").
        if self._async is None:
            raise RuntimeError("database not started")
        async with self._async.connect() as aconn:
            await aconn.execute(text("SELECT GET_LOCK('dsched_migrate', 120)"))
            try:
                await aconn.run_sync(_upgrade)
                await aconn.commit()
            finally:
                await aconn.execute(text("SELECT RELEASE_LOCK('dsched_migrate')"))

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Conn]:
        """A write transaction: commits when the block exits normally, rolls back on an
        exception. Raises Unavailable if the database cannot be reached (then the outcome of a
        commit that was under way is unknown: the writes are idempotent or fenced)."""
        staged = Staged(self.memo)
        async with self._reachable():
            if self._sync is not None:
                async with self._write_lock:
                    with self._sync.begin() as conn:
                        yield _InlineConn(conn, staged)
            else:
                if self._async is None:
                    raise RuntimeError("database not started")
                async with self._async.begin() as aconn:
                    yield _AsyncConn(aconn, staged)
        staged.publish()  # committed

    @asynccontextmanager
    async def read(self) -> AsyncIterator[Conn]:
        """A connection for reads (its implicit transaction is rolled back at the end). Raises
        Unavailable if the database cannot be reached."""
        async with self._reachable():
            if self._sync is not None:
                with self._sync.connect() as conn:
                    yield _InlineConn(conn, self.memo)
                return
            if self._async is None:
                raise RuntimeError("database not started")
            async with self._async.connect() as aconn:
                yield _AsyncConn(aconn, self.memo)

    @asynccontextmanager
    async def _reachable(self) -> AsyncIterator[None]:
        """Fails fast during a known outage; turns a driver's "cannot reach" into Unavailable.
        dsched's own errors raised inside the block pass through unchanged."""
        self.availability.check()
        try:
            yield
        except DschedError:
            raise
        except Exception as exc:
            mapped = self.availability.translate(exc)
            if mapped is exc:
                raise
            raise mapped from exc


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    # The dialect issues BEGIN itself (see _PysqliteDialect); pysqlite's implicit BEGIN is
    # unreliable.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    # NORMAL in WAL mode loses at most the last transactions on power loss, never consistency.
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()


class _PysqliteDialect(SQLiteDialect_pysqlite):
    """pysqlite with an explicit BEGIN for every transaction, reads included (a read's statements
    then see one snapshot). In the dialect's ``do_begin`` rather than a ``begin`` event listener,
    as SQLAlchemy's documentation suggests: any connection event listener on the engine sends every
    statement through the event dispatch, which cost about a third of SQLAlchemy's time per
    statement and half of it per transaction on SQLite (a transaction with two UPDATEs and a
    SELECT: 104 us with the listener, 67 us without)."""

    supports_statement_cache = True  # nothing here changes how statements compile

    def do_begin(self, dbapi_connection: Any) -> None:
        dbapi_connection.execute("BEGIN")


_SQLITE_DRIVER = "dsched_pysqlite"
registry.register(f"sqlite.{_SQLITE_DRIVER}", __name__, "_PysqliteDialect")


def _upgrade(conn: Connection) -> None:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.attributes["connection"] = conn
    command.upgrade(cfg, "head")
