"""Whether the metadata database can be reached, and what a master does while it cannot.

:func:`unreachable` is the one place that tells "the database is away" (refused, reset, shut down,
timed out, a connection invalidated) from every other database error, across the drivers dsched
ships (asyncpg, aiomysql, SQLite). :class:`Availability` is the outage state of one
:class:`~dsched_server.store.database.Database`, driven by failures, not by polling:

- the first unreachable error *trips* it: one warning line, listeners told (health goes
  NOT_SERVING), and a recovery probe starts;
- while it is tripped, store calls fail fast with :class:`~dsched.errors.Unavailable` (reason
  ``DATABASE_UNAVAILABLE``, retryable) instead of each waiting on a dead server;
- the probe (a ``SELECT 1`` on a fresh connection, with back-off) closes it again once the database
  answers: one info line with the outage's length, listeners told (SERVING), waiters woken.

Nothing polls while the database is healthy: a master notices an outage at its next store call
(at the latest its periodic command scan).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterator

from sqlalchemy import exc as sa_exc

from dsched.backoff import Backoff
from dsched.errors import Unavailable
from dsched.reasons import Reason

log = logging.getLogger(__name__)

DATABASE_UNAVAILABLE = Reason.DATABASE_UNAVAILABLE
# PostgreSQL SQLSTATEs of an unreachable server: class 08 (connection exception), 57P01-57P03
# (admin shutdown, crash shutdown, cannot connect now: starting up or shutting down), 53300 (too
# many connections).
_PG_STATES = ("08", "57P01", "57P02", "57P03", "53300")
# MySQL/MariaDB client and server error codes of an unreachable server: 1040 too many connections,
# 1053 server shutdown, 2002/2003 cannot connect, 2006 gone away, 2013 lost connection, 2055 lost
# connection at reading.
_MYSQL_CODES = frozenset({1040, 1053, 2002, 2003, 2006, 2013, 2055})
# OSErrors about files, not networks (a local SQLite file): never an outage of a server.
_LOCAL_OS_ERRORS = (FileNotFoundError, FileExistsError, IsADirectoryError, NotADirectoryError)
_PROBE = Backoff(initial=0.2, maximum=2.0)

Probe = Callable[[], Awaitable[None]]
Listener = Callable[[bool], None]


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc``, the driver error it wraps, and their causes, each once."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        orig = getattr(e, "orig", None)
        todo += [e.__context__, e.__cause__, orig if isinstance(orig, BaseException) else None]


def _unreachable_one(e: BaseException) -> bool:
    if isinstance(e, sa_exc.DBAPIError) and e.connection_invalidated:
        return True
    if isinstance(e, sa_exc.DisconnectionError | sa_exc.TimeoutError | TimeoutError):
        return True  # TimeoutError: a connect or statement timeout; sa's: the pool's checkout
    if isinstance(e, OSError) and not isinstance(e, _LOCAL_OS_ERRORS):
        return True  # refused, reset, unreachable host, a DNS failure
    sqlstate = getattr(e, "sqlstate", None) or getattr(e, "pgcode", None)
    if isinstance(sqlstate, str) and sqlstate.startswith(_PG_STATES):
        return True
    if type(e).__module__.startswith("pymysql") and e.args and isinstance(e.args[0], int):
        return e.args[0] in _MYSQL_CODES
    return type(e).__name__ == "InterfaceError" and "connection is closed" in str(e)


def unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` (anything a store call raised) means the database cannot be reached, as
    opposed to a bad statement, a constraint, a deadlock or a bug."""
    return any(_unreachable_one(e) for e in _chain(exc))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:300]


class Availability:
    """The outage state of one database (see the module docstring). ``probe`` runs one trivial
    statement on a fresh connection and raises if the database does not answer."""

    def __init__(self, probe: Probe) -> None:
        self._probe = probe
        self._up = asyncio.Event()
        self._up.set()
        self._since = 0.0
        self._listeners: list[Listener] = []
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    @property
    def available(self) -> bool:
        return self._up.is_set()

    def subscribe(self, listener: Listener) -> None:
        """``listener(available)`` is called on every change (on the event loop)."""
        self._listeners.append(listener)

    def error(self) -> Unavailable:
        """The error of a call made while the database is away: retryable, with the reason."""
        return Unavailable(
            "the metadata database is unreachable; retry later",
            reason=Reason.DATABASE_UNAVAILABLE,
        )

    def check(self) -> None:
        """Raises :meth:`error` while the database is known to be away (fail fast)."""
        if not self._up.is_set():
            raise self.error()

    def translate(self, exc: BaseException) -> BaseException:
        """``exc`` if it is not about reachability; else trips the outage and returns the
        :class:`Unavailable` to raise instead."""
        if isinstance(exc, Unavailable) or not unreachable(exc):
            return exc
        self.trip(_first_line(exc))
        return self.error()

    def trip(self, why: str) -> None:
        """Records that the database is away (idempotent while it is) and starts the probe."""
        if not self._up.is_set() or self._closed:
            return
        self._up.clear()
        self._since = time.monotonic()
        log.warning(
            "metadata database unreachable (%s): answering UNAVAILABLE until it is back", why
        )
        self._tell(False)
        self._task = asyncio.get_running_loop().create_task(
            self._recover(), name="database-recovery-probe"
        )

    async def wait(self, timeout: float) -> bool:
        """Waits up to ``timeout`` seconds for the database to be available; True if it is."""
        if self._up.is_set():
            return True
        try:
            async with asyncio.timeout(timeout):
                await self._up.wait()
        except TimeoutError:
            return False
        return True

    async def close(self) -> None:
        """Stops the probe (the database handle is closing)."""
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _recover(self) -> None:
        first = True
        for delay in _PROBE.delays():
            if not first:  # the first try at once: a single reset connection is no outage
                await asyncio.sleep(delay)
            first = False
            try:
                await self._probe()
            except Exception as exc:  # still away (or failing): keep probing
                log.debug("database probe failed: %s", _first_line(exc))
                continue
            log.warning(
                "metadata database reachable again after %.1fs", time.monotonic() - self._since
            )
            self._up.set()
            self._tell(True)
            return

    def _tell(self, available: bool) -> None:
        for listener in list(self._listeners):
            try:
                listener(available)
            except Exception:  # one listener's bug must not hide the change from the others
                log.exception("database availability listener failed")
