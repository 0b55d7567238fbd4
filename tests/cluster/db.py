"""The test's view of the metadata database: synchronous queries over one asyncpg connection.

The tests are synchronous (they drive processes, sleep between faults and poll), but the database
driver the project ships is asyncpg. :class:`Database` runs a private event loop in a daemon thread
and hands each query to it, so a test never touches pytest-asyncio's loop and never blocks one of
its own. Every query has a deadline: a test that waits on the database cannot hang.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

import asyncpg  # type: ignore[import-untyped]  # ships no type information
from sqlalchemy.engine import make_url

QUERY_TIMEOUT_S = 15.0

_T = TypeVar("_T")

# The task-side effect sinks of the fenced ledger (see tests/cluster/ledger.py). No unique key on
# purpose: a duplicate effect must be countable, not refused.
EFFECT_TABLES = (
    "CREATE TABLE chaos_effects (ti BIGINT NOT NULL, attempt INT NOT NULL, epoch BIGINT NOT NULL,"
    " at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp())",
    "CREATE TABLE chaos_tries (ti BIGINT NOT NULL, attempt INT NOT NULL, epoch BIGINT NOT NULL,"
    " accepted BOOLEAN NOT NULL, at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp())",
)


def libpq_url(sqlalchemy_url: str) -> str:
    """``postgresql+asyncpg://u@h:p/db`` -> ``postgresql://u@h:p/db`` (for asyncpg and psql)."""
    url = make_url(sqlalchemy_url).set(drivername="postgresql")
    return url.render_as_string(hide_password=False)


class Database:
    """One connection to the test's PostgreSQL database. Thread-safe (calls are serialised on the
    private loop); :meth:`close` when done."""

    def __init__(self, sqlalchemy_url: str) -> None:
        self.url = libpq_url(sqlalchemy_url)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="cluster-db", daemon=True
        )
        self._thread.start()
        self._conn: Any = self._run(asyncpg.connect(self.url, timeout=10))

    def _run(self, coro: Coroutine[Any, Any, _T]) -> _T:
        future = asyncio.run_coroutine_threadsafe(
            asyncio.wait_for(coro, QUERY_TIMEOUT_S), self._loop
        )
        return future.result(QUERY_TIMEOUT_S + 5)

    def query(self, sql: str, *args: object) -> list[tuple[Any, ...]]:
        """Runs ``sql`` ($1, $2... placeholders) and returns its rows as tuples."""
        rows = self._run(self._conn.fetch(sql, *args))
        return [tuple(row) for row in rows]

    def scalar(self, sql: str, *args: object) -> Any:
        """The first column of the first row (None when there is no row)."""
        rows = self.query(sql, *args)
        return rows[0][0] if rows else None

    def execute(self, sql: str, *args: object) -> None:
        self._run(self._conn.execute(sql, *args))

    def reconnect(self) -> None:
        """A new connection (the server restarted: the old one is gone)."""
        self._conn.terminate()
        self._conn = self._run(asyncpg.connect(self.url, timeout=10))

    def create_effect_tables(self) -> None:
        for statement in EFFECT_TABLES:
            self.execute(statement)

    def close(self) -> None:
        """Closes the connection and stops the loop; idempotent."""
        if self._loop.is_closed():
            return
        try:
            self._run(self._conn.close(timeout=5))
        except Exception:  # teardown of a broken connection: nothing more to do
            self._conn.terminate()
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._loop.close()
