"""What the SQL and PROCEDURE programs share: the datasource from the request, one connection,
one transaction around the work, and the cancel of a running statement when the attempt is
killed or times out (SIGTERM to its process group): killing only the client would leave the
statement running on the server."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from typing import Any, TypeVar

from dsched_server import dbapi
from dsched_server.core.datasource import Connection
from dsched_worker.programs.runtime import ProgramError, Spec, log

T = TypeVar("T")
EXIT_KILLED = 128 + signal.SIGTERM


def datasource(spec: Spec) -> Connection:
    """The request's datasource, after the libpq variables of the environment are dropped."""
    dbapi.scrub_libpq_environment()
    try:
        return dbapi.connection_from_json(spec.get("datasource"))
    except ValueError as exc:
        raise ProgramError(str(exc)) from None


def in_transaction(conn: Connection, work: Callable[[Any], T]) -> T:
    """Connects, runs ``work(cursor)`` and commits; rolls back and raises ProgramError (the
    driver's message, the password cut out) on any error."""
    try:
        db = dbapi.connect(conn)
    except dbapi.ConnectError as exc:
        raise ProgramError(str(exc)) from None
    _cancel_on_sigterm(db, conn)
    try:
        found = work(db.cursor())
        db.commit()
        return found
    except ProgramError:
        _rollback(db)
        raise
    except Exception as exc:
        _rollback(db)
        raise ProgramError(dbapi.describe(exc, conn)) from None
    finally:
        db.close()


def _rollback(db: Any) -> None:
    try:
        db.rollback()
    except Exception as exc:  # the connection is gone: the server rolled back
        log(f"rollback: {type(exc).__name__}")


def _cancel_on_sigterm(db: Any, conn: Connection) -> None:
    cancel = dbapi.canceller(db, conn)

    def on_term(signum: int, frame: Any) -> None:
        log("cancelling the statement (the attempt was killed or timed out)")
        try:
            cancel()
        except Exception as exc:
            log(f"cancel: {dbapi.describe(exc, conn)}")
        os._exit(EXIT_KILLED)

    signal.signal(signal.SIGTERM, on_term)
