"""Connections to datasources with the synchronous DB-API drivers: psycopg 3 (PostgreSQL), PyMySQL
(MySQL, MariaDB) and the standard library's sqlite3 (README "Datasources").

Shared by the master (TestDatasource, in a thread) and the worker's SQL program (a process of its
own, where blocking is what it is for). Options reach the driver only after the allow-list of
:mod:`dsched_server.core.datasource` passed them, and the call here checks them again, so a value
from anywhere else cannot add one. The password goes to the driver as an argument in memory:
never through the environment or a command line, which other users of the host can read.
"""

from __future__ import annotations

import os
import sqlite3
from typing import Any, Literal
from urllib.parse import quote

from dsched_server.core.datasource import Connection, DatasourceType, Secret, option_violations

Style = Literal["format", "qmark"]
DEFAULT_CONNECT_TIMEOUT_S = 10
# libpq reads these from the environment (PGOPTIONS sets server settings, PGSERVICEFILE and
# PGSYSCONFDIR point at files of connection options): none may come from a task's parameters.
_LIBPQ_ENV_PREFIX = "PG"


class ConnectError(Exception):
    """The database could not be reached or refused the connection (the message names neither
    the password nor anything the driver echoes of it)."""


def paramstyle(kind: DatasourceType) -> Style:
    return "qmark" if kind is DatasourceType.SQLITE else "format"


def connect(conn: Connection, *, timeout: int | None = None) -> Any:
    """An open DB-API connection (autocommit off) to ``conn``; ``timeout`` (seconds) overrides
    the connect timeout. Raises ConnectError."""
    problems = option_violations("options", conn.type, conn.options)
    if problems:
        raise ConnectError(f"datasource {conn.name!r}: {problems[0].description}")
    try:
        if conn.type is DatasourceType.POSTGRESQL:
            return _postgresql(conn, timeout)
        if conn.type is DatasourceType.MYSQL:
            return _mysql(conn, timeout)
        if conn.type is DatasourceType.SQLITE:
            return _sqlite(conn, timeout)
    except Exception as exc:
        raise ConnectError(describe(exc, conn)) from None
    raise ConnectError(f"datasource {conn.name!r}: type {conn.type.value} cannot be connected to")


def describe(exc: BaseException, conn: Connection) -> str:
    """A driver error as text for a log or an answer, with the password cut out should a driver
    ever echo it."""
    text = f"{type(exc).__name__}: {exc}".strip()
    secret = conn.password.reveal()
    if secret:
        text = text.replace(secret, "***")
    return text[:1000]


def _postgresql(conn: Connection, timeout: int | None) -> Any:
    import psycopg  # the driver is loaded only where a PostgreSQL datasource is used

    options: dict[str, Any] = dict(conn.options)
    if timeout is not None:
        options["connect_timeout"] = str(timeout)
    options.setdefault("connect_timeout", str(DEFAULT_CONNECT_TIMEOUT_S))
    return psycopg.connect(
        host=conn.host,
        port=conn.port or 5432,
        dbname=conn.database,
        user=conn.user,
        password=conn.password.reveal(),
        autocommit=False,
        **options,
    )


_MYSQL_INTS = {"connect_timeout", "read_timeout", "write_timeout"}
_MYSQL_BOOLS = {"ssl_verify_cert", "ssl_verify_identity", "ssl_disabled"}


def scrub_libpq_environment() -> None:
    """Drops the ``PG*`` variables libpq would read from this process's environment. The worker's
    SQL program calls it first: its environment is a task's, and a task's parameters are its
    variables, so a parameter named PGOPTIONS would otherwise set server settings."""
    for name in [n for n in os.environ if n.upper().startswith(_LIBPQ_ENV_PREFIX)]:
        del os.environ[name]


def _mysql(conn: Connection, timeout: int | None) -> Any:
    import pymysql  # type: ignore[import-untyped]  # ships no type information

    options: dict[str, Any] = {}
    for key, value in conn.options.items():
        if key in _MYSQL_INTS:
            options[key] = int(value)
        elif key in _MYSQL_BOOLS:
            options[key] = value == "true"
        else:
            options[key] = value
    if timeout is not None:
        options["connect_timeout"] = timeout
    options.setdefault("connect_timeout", DEFAULT_CONNECT_TIMEOUT_S)
    options.setdefault("charset", "utf8mb4")
    return pymysql.connect(
        host=conn.host,
        port=conn.port or 3306,
        user=conn.user,
        password=conn.password.reveal(),
        database=conn.database or None,
        autocommit=False,
        local_infile=False,  # the server must not read the worker's files
        client_flag=0,  # no MULTI_STATEMENTS: one statement per call, as the task said
        **options,
    )


def _sqlite(conn: Connection, timeout: int | None) -> Any:
    mode = conn.options.get("mode", "rwc")
    wait = float(conn.options.get("timeout", "5"))
    if timeout is not None:
        wait = min(wait, float(timeout))
    # A URI with the path quoted: nothing in the path can add URI parameters (vfs=, ...).
    uri = f"file:{quote(conn.database)}?mode={mode}"
    return sqlite3.connect(uri, uri=True, timeout=wait, isolation_level="DEFERRED")


def server_version(db: Any, kind: DatasourceType) -> str:
    """The server's version, by a trivial query (what TestDatasource answers)."""
    query = {
        DatasourceType.POSTGRESQL: "SELECT version()",
        DatasourceType.MYSQL: "SELECT VERSION()",
        DatasourceType.SQLITE: "SELECT 'SQLite ' || sqlite_version()",
    }[kind]
    cursor = db.cursor()
    try:
        cursor.execute(query)
        row = cursor.fetchone()
    finally:
        cursor.close()
    return str(row[0]) if row else ""


def probe(conn: Connection, timeout: int) -> tuple[bool, str]:
    """Connects, asks the server's version and disconnects: ``(ok, version or error)``."""
    try:
        db = connect(conn, timeout=timeout)
    except ConnectError as exc:
        return False, str(exc)
    try:
        return True, server_version(db, conn.type)
    except Exception as exc:
        return False, describe(exc, conn)
    finally:
        db.close()


def connection_to_json(conn: Connection) -> dict[str, Any]:
    """``conn`` for a child program's stdin (password included: stdin is a pipe, never a file)."""
    return {
        "name": conn.name,
        "type": conn.type.value,
        "host": conn.host,
        "port": conn.port,
        "database": conn.database,
        "user": conn.user,
        "password": conn.password.reveal(),
        "options": dict(conn.options),
    }


def connection_from_json(doc: Any) -> Connection:
    """The inverse of :func:`connection_to_json`; ValueError if ``doc`` is not one."""
    if not isinstance(doc, dict):
        raise ValueError("the datasource is not an object")
    options = doc.get("options", {})
    if not isinstance(options, dict) or not all(isinstance(v, str) for v in options.values()):
        raise ValueError("the datasource's options are not text")
    try:
        return Connection(
            name=str(doc["name"]),
            type=DatasourceType(doc["type"]),
            host=str(doc["host"]),
            port=int(doc["port"]),
            database=str(doc["database"]),
            user=str(doc["user"]),
            password=Secret(str(doc["password"])),
            options=options,
        )
    except (KeyError, TypeError) as exc:
        raise ValueError(f"the datasource lacks {exc}") from None


def canceller(db: Any, conn: Connection) -> Any:
    """A function that cancels the statement ``db`` is running (from a signal handler): libpq's
    cancel request, MySQL's ``KILL QUERY`` on a second connection, SQLite's interrupt. Killing
    only the client would leave the statement running on the server."""
    if conn.type is DatasourceType.POSTGRESQL:
        return db.cancel
    if conn.type is DatasourceType.SQLITE:
        return db.interrupt
    thread_id = db.thread_id()

    def kill_query() -> None:
        other = connect(conn, timeout=5)
        try:
            with other.cursor() as cursor:
                cursor.execute("KILL QUERY %s", (thread_id,))
        finally:
            other.close()

    return kill_query
