"""Telling an unreachable database from other database errors, and the outage state machine.

The errors are the drivers' own classes, built as the drivers build them; the probe of
:class:`Availability` is a function the test controls (the real one is exercised against real
servers in tests/integration/engine/test_database_outage.py).
"""

from __future__ import annotations

import asyncio

import asyncpg  # type: ignore[import-untyped]  # ships no type information
import pymysql  # type: ignore[import-untyped]
import pytest
from sqlalchemy import exc as sa_exc

from dsched.errors import Unavailable
from dsched_server.store.availability import DATABASE_UNAVAILABLE, Availability, unreachable


def wrapped(orig: Exception, *, invalidated: bool = False) -> Exception:
    """What SQLAlchemy raises around a driver error."""
    err = sa_exc.DBAPIError.instance(
        "SELECT 1", None, orig, pymysql.err.Error, connection_invalidated=invalidated
    )
    err.__cause__ = orig
    return err


def with_cause(outer: Exception, cause: BaseException) -> Exception:
    outer.__cause__ = cause
    return outer


UNREACHABLE = {
    "refused": ConnectionRefusedError(111, "Connect call failed"),
    "reset": ConnectionResetError(104, "Connection reset by peer"),
    "unresolvable": OSError("Multiple exceptions: [Errno 111] ..., [Errno 99] ..."),
    "timeout": TimeoutError(),
    "pg admin shutdown": asyncpg.exceptions.AdminShutdownError("terminating connection"),
    "pg starting up": asyncpg.exceptions.CannotConnectNowError("the database system is starting"),
    "pg connection gone": asyncpg.exceptions.ConnectionDoesNotExistError("connection was closed"),
    "pg too many": asyncpg.exceptions.TooManyConnectionsError("too many clients"),
    "pg closed": asyncpg.exceptions.InterfaceError("connection is closed"),
    "mysql gone away": pymysql.err.OperationalError(2006, "MySQL server has gone away"),
    "mysql lost": wrapped(pymysql.err.OperationalError(2013, "Lost connection")),
    "mysql cannot connect": pymysql.err.OperationalError(2003, "Can't connect"),
    "invalidated": wrapped(pymysql.err.InterfaceError(0, ""), invalidated=True),
    "pool timeout": sa_exc.TimeoutError("QueuePool limit reached"),
    "cause of a wrapper": with_cause(RuntimeError("while reading"), ConnectionResetError()),
}
REACHABLE = {
    "deadlock": wrapped(pymysql.err.OperationalError(1213, "Deadlock found")),
    "duplicate key": wrapped(pymysql.err.IntegrityError(1062, "Duplicate entry")),
    "pg unique": asyncpg.exceptions.UniqueViolationError("duplicate key"),
    "pg syntax": asyncpg.exceptions.PostgresSyntaxError("syntax error"),
    "a missing file": FileNotFoundError("dsched.db"),
    "a bug": KeyError("x"),
}


@pytest.mark.parametrize("name", UNREACHABLE)
def test_errors_of_an_unreachable_database(name: str) -> None:
    assert unreachable(UNREACHABLE[name])


@pytest.mark.parametrize("name", REACHABLE)
def test_errors_of_a_database_that_answered(name: str) -> None:
    assert not unreachable(REACHABLE[name])


class ControlledProbe:
    """A probe that fails until the test lets it succeed; counts its calls."""

    def __init__(self) -> None:
        self.up = False
        self.calls = 0
        self.tried = asyncio.Event()

    async def __call__(self) -> None:
        self.calls += 1
        self.tried.set()
        if not self.up:
            raise ConnectionRefusedError(111, "refused")


async def test_an_outage_trips_once_fails_fast_and_ends_when_the_probe_answers() -> None:
    probe = ControlledProbe()
    availability = Availability(probe)
    changes: list[bool] = []
    availability.subscribe(changes.append)
    try:
        assert availability.translate(KeyError("x")).__class__ is KeyError  # not an outage
        assert availability.available and changes == []

        mapped = availability.translate(ConnectionRefusedError(111, "refused"))
        assert isinstance(mapped, Unavailable) and mapped.reason == DATABASE_UNAVAILABLE
        assert availability.translate(ConnectionResetError()).__class__ is Unavailable
        assert changes == [False]  # the second error of the same outage changes nothing
        with pytest.raises(Unavailable):
            availability.check()  # fail fast while it is away

        await probe.tried.wait()  # the probe tries at once...
        with pytest.raises(Unavailable):
            availability.check()
        probe.up = True  # ...and keeps trying (with back-off) until the database answers
        assert await availability.wait(30)
        assert changes == [False, True]
        availability.check()
    finally:
        await availability.close()


async def test_closing_stops_the_probe() -> None:
    probe = ControlledProbe()
    availability = Availability(probe)
    availability.trip("refused")
    await probe.tried.wait()
    await availability.close()
    calls = probe.calls
    availability.trip("again")  # closed: no new probe
    await asyncio.sleep(0)
    assert probe.calls == calls
    assert not availability.available
