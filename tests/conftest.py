"""Shared fixtures: real databases and free ports.

The database servers are the ones ``scripts/test`` makes sure are up (``make test``), found through
``DSCHED_TEST_PG_URL`` and ``DSCHED_TEST_MYSQL_URL`` (defaults: the local servers of the dev and CI
machines). A fixture creates its own uniquely named database (``dsched_t_<pid>_<random>``) and drops
it afterwards. An unreachable server fails the test: a silently skipped database is an untested one.

- ``pg_url`` / ``mysql_url``: one fresh database per test session, shared by the tests that ask.
- ``db_url``: every test that takes it runs three times (ids ``sqlite``, ``postgresql``,
  ``mariadb``), each time on a fresh, empty database. Creating one costs milliseconds.
- ``migrated_db_url``: the same, but at the newest schema revision already: a copy of a database
  this session migrated once per kind (PostgreSQL: ``CREATE DATABASE ... TEMPLATE``; MariaDB: each
  table's ``SHOW CREATE TABLE`` and rows; SQLite: the file). For the many tests that start from
  the schema rather than test the migrations: migrating costs seconds a database (MariaDB's DDL
  above all), a copy a fraction of that. What migrates takes ``db_url``.

Processes a test starts die with pytest, even a SIGKILLed one: :mod:`tests.lifeline`.

``scripts/test`` runs the tests in parallel processes; :mod:`tests.parallel` says which must share
one.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import re
import secrets
import shutil
import socket
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, TypeVar

import pytest
from sqlalchemy import text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from tests import lifeline
from tests.parallel import GroupScheduling

if TYPE_CHECKING:
    from xdist.remote import Producer
    from xdist.scheduler.protocol import Scheduling

PG_URL = os.environ.get(
    "DSCHED_TEST_PG_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/postgres"
)
MYSQL_URL = os.environ.get("DSCHED_TEST_MYSQL_URL", "mysql+aiomysql://root@127.0.0.1:3306/test")
_NAME_RE = re.compile(r"dsched_t_(\d+)_[0-9a-f]+\Z")
_T = TypeVar("_T")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nobody listens on right now (prefer binding port 0 directly
    where the code under test allows it: the port can be taken between this call and its use)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _run(make: Callable[[], Awaitable[_T]]) -> _T:
    # Admin statements run on a private loop in a private thread, so that they never touch the
    # event loop pytest-asyncio set up for the test itself.
    async def main() -> _T:
        return await asyncio.wait_for(make(), timeout=30)

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, main()).result()


class _Server:
    """A database server on which tests create and drop throw-away databases."""

    def __init__(self, url: str, kind: str) -> None:
        self.url: URL = make_url(url)
        self.kind = kind
        self._swept = False
        self._template: str | None = None  # a migrated database, copied by database(migrated)

    def _fail(self, exc: BaseException) -> NoReturn:
        pytest.fail(
            f"{self.kind} at {self.url.host}:{self.url.port} is unreachable ({exc!r}); "
            "run the tests with `make test` (scripts/test starts the servers)",
            pytrace=False,
        )

    async def _execute(self, *statements: str) -> list[str]:
        """Runs ``statements`` in the server's admin database; returns all database names."""
        # AUTOCOMMIT: PostgreSQL refuses CREATE/DROP DATABASE inside a transaction.
        engine = create_async_engine(self.url, poolclass=NullPool, isolation_level="AUTOCOMMIT")
        try:
            async with engine.connect() as conn:
                for statement in statements:
                    await conn.execute(text(statement))
                pg = self.kind == "postgresql"
                query = "SELECT datname FROM pg_database" if pg else "SHOW DATABASES"
                return [str(row[0]) for row in await conn.execute(text(query))]
        finally:
            await engine.dispose()

    def _drop(self, name: str) -> str:
        force = " WITH (FORCE)" if self.kind == "postgresql" else ""
        return f"DROP DATABASE IF EXISTS {name}{force}"

    def _sweep(self) -> None:
        """Drops databases left behind by test processes that died before their teardown."""
        self._swept = True
        names = _run(lambda: self._execute())
        stale = [n for n in names if (m := _NAME_RE.match(n)) and not _alive(int(m.group(1)))]
        if stale:
            _run(lambda: self._execute(*(self._drop(n) for n in stale)))

    def _url_of(self, name: str) -> str:
        return self.url.set(database=name).render_as_string(hide_password=False)

    @contextmanager
    def database(self, *, migrated: bool = False) -> Iterator[str]:
        """Creates a fresh database, yields its URL (with the password), then drops it. With
        ``migrated`` it is at the newest schema revision: a copy of this session's template."""
        name = _new_name()
        try:
            if not self._swept:
                self._sweep()
            if migrated:
                template = self._migrated_template()
                _run(lambda: self._copy(template, name))
            else:
                _run(lambda: self._execute(f"CREATE DATABASE {name}"))
        except (OSError, TimeoutError, SQLAlchemyError) as exc:
            self._fail(exc)
        try:
            yield self._url_of(name)
        finally:
            _run(lambda: self._execute(self._drop(name)))

    def _migrated_template(self) -> str:
        """The session's migrated database (made at the first call; never connected to after)."""
        if self._template is None:
            name = _new_name()
            _run(lambda: self._execute(f"CREATE DATABASE {name}"))
            self._template = name  # dropped by close()
            _run(lambda: _migrate(self._url_of(name)))
        return self._template

    async def _copy(self, template: str, name: str) -> None:
        if self.kind == "postgresql":
            await self._execute(f"CREATE DATABASE {name} TEMPLATE {template}")
            return
        # MariaDB has no template databases: the same tables (foreign keys checked only once
        # all exist), then their rows (the schema's revision).
        engine = create_async_engine(self.url, poolclass=NullPool, isolation_level="AUTOCOMMIT")
        try:
            async with engine.connect() as conn:
                await conn.execute(text(f"CREATE DATABASE {name}"))
                await conn.execute(text(f"USE {name}"))
                await conn.execute(text("SET SESSION foreign_key_checks = 0"))
                tables = await conn.execute(
                    text(
                        "SELECT table_name FROM information_schema.tables"
                        " WHERE table_schema = :db AND table_type = 'BASE TABLE'"
                    ),
                    {"db": template},
                )
                for (table,) in tables.all():
                    show = await conn.exec_driver_sql(f"SHOW CREATE TABLE {template}.`{table}`")
                    _, ddl = tuple(show.one())  # (table, its CREATE TABLE statement)
                    await conn.exec_driver_sql(str(ddl))
                    await conn.exec_driver_sql(
                        f"INSERT INTO `{table}` SELECT * FROM {template}.`{table}`"
                    )
        finally:
            await engine.dispose()

    def close(self) -> None:
        """Drops the session's template, if one was made."""
        if self._template is not None:
            template, self._template = self._template, None
            _run(lambda: self._execute(self._drop(template)))


def _new_name() -> str:
    # The pid lets _sweep tell the databases of dead test processes.
    return f"dsched_t_{os.getpid()}_{secrets.token_hex(4)}"


async def _migrate(url: str) -> None:
    from dsched_server.store.database import Database  # only for the tests that need it

    database = Database(url)
    await database.start()  # migrates
    await database.stop()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@pytest.hookimpl(tryfirst=True, optionalhook=True)  # (xdist may be left out: -p no:xdist)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Producer) -> Scheduling | None:
    """``--dist loadgroup`` distributes by :mod:`tests.parallel`'s groups; other modes as xdist
    does."""
    if config.getvalue("dist") == "loadgroup":
        return GroupScheduling(config, log)
    return None


@pytest.fixture(scope="session", autouse=True)
def _lifeline(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Task process groups recorded by workers under this session's temporary directory (workers
    inside pytest, and those a test killed) die with pytest, however it ends: tests.lifeline."""
    lifeline.watch_tree(tmp_path_factory.getbasetemp())


@pytest.fixture(scope="session")
def _servers() -> Iterator[dict[str, _Server]]:
    servers = {
        "postgresql": _Server(PG_URL, "postgresql"),
        "mariadb": _Server(MYSQL_URL, "mariadb"),
    }
    try:
        yield servers
    finally:
        for server in servers.values():
            server.close()


@pytest.fixture(scope="session")
def pg_url(_servers: dict[str, _Server]) -> Iterator[str]:
    """URL (``postgresql+asyncpg``) of a PostgreSQL database of this test session."""
    with _servers["postgresql"].database() as url:
        yield url


@pytest.fixture(scope="session")
def mysql_url(_servers: dict[str, _Server]) -> Iterator[str]:
    """URL (``mysql+aiomysql``) of a MariaDB database of this test session."""
    with _servers["mariadb"].database() as url:
        yield url


@pytest.fixture(params=["sqlite", "postgresql", "mariadb"])
def db_url(
    request: pytest.FixtureRequest, tmp_path: Path, _servers: dict[str, _Server]
) -> Iterator[str]:
    """An async SQLAlchemy URL of a fresh, empty database of each supported kind."""
    kind = str(request.param)
    if kind == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'dsched.db'}"
        return
    with _servers[kind].database() as url:
        yield url


@pytest.fixture(scope="session")
def _sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sqlite-template") / "dsched.db"
    _run(lambda: _migrate(f"sqlite+aiosqlite:///{path}"))
    return path


@pytest.fixture(params=["sqlite", "postgresql", "mariadb"])
def migrated_db_url(
    request: pytest.FixtureRequest, tmp_path: Path, _servers: dict[str, _Server]
) -> Iterator[str]:
    """Like ``db_url``, but the database is at the newest schema revision already."""
    kind = str(request.param)
    if kind == "sqlite":
        template: Path = request.getfixturevalue("_sqlite_template")
        shutil.copyfile(template, tmp_path / "dsched.db")  # closed: no WAL left beside it
        yield f"sqlite+aiosqlite:///{tmp_path / 'dsched.db'}"
        return
    with _servers[kind].database(migrated=True) as url:
        yield url
