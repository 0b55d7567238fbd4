"""The registry interface: ZooKeeper's semantics, independent of ZooKeeper.

A registry client holds one *session*. Members registered through it are *ephemeral*: they vanish
when the session ends (``stop``, or expiry after the session timeout without contact). Watches
report the current children of a path after every change. Locks and leadership of an election are
held by a session and released when it ends.

Paths are absolute with no empty segments (``/nodes/workers``); lock and election names are single
segments (no ``/``). Both are relative to the registry's namespace (the ZooKeeper chroot).

Connection states follow kazoo's: CONNECTED; SUSPENDED (contact lost, the session may still be
alive: stop claiming and dispatching new work); LOST (the session expired: every ephemeral member
and lock of this client is gone and other servers may already have taken over; the owner must fence
itself and re-register with a new epoch). A client keeps reconnecting after LOST with a fresh
session.

Two implementations satisfy it: :mod:`dsched_server.coord.embedded` (in-process, for standalone and
tests) and the ZooKeeper one (kazoo) used by clusters. Listeners and watch callbacks are always
invoked on the event loop that called ``start``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from enum import StrEnum
from typing import Protocol

from dsched.errors import InvalidArgument


class ConnectionState(StrEnum):
    CONNECTED = "CONNECTED"
    SUSPENDED = "SUSPENDED"
    LOST = "LOST"


StateListener = Callable[[ConnectionState], None]
ChildrenListener = Callable[[Mapping[str, bytes]], None]

_log = logging.getLogger(__name__)


def call_state_listener(listener: StateListener, state: ConnectionState) -> None:
    """Calls ``listener``; an error in it is logged, and harms neither the client nor the other
    listeners."""
    try:
        listener(state)
    except Exception:
        _log.exception("registry state listener failed")


def split_path(path: str) -> list[str]:
    """The segments of an absolute path; "/" has none. Rejects relative and malformed paths."""
    if path == "/":
        return []
    parts = path.split("/")
    if parts[0] != "" or any(p == "" for p in parts[1:]):
        raise InvalidArgument(f"registry path {path!r} must be absolute with no empty segments")
    return parts[1:]


def parent_path(path: str) -> str:
    return path.rsplit("/", 1)[0] or "/"


def check_name(name: str, what: str) -> str:
    """Returns ``name`` if it can name a lock or an election (one path segment), else raises
    InvalidArgument."""
    if not name or "/" in name or name in (".", ".."):
        raise InvalidArgument(f"{what} name {name!r} must be one non-empty path segment")
    return name


class Registry(Protocol):
    """A session with the cluster registry. See the module docstring for the semantics."""

    @property
    def state(self) -> ConnectionState:
        """The current connection state."""
        ...

    async def start(self) -> None:
        """Connects and opens a session; returns once CONNECTED."""
        ...

    async def stop(self) -> None:
        """Closes the session: this client's ephemeral nodes and locks are released at once.
        Bounded: if the registry does not answer, the client is abandoned and Unavailable raised
        (the session then ends when it times out)."""
        ...

    def add_state_listener(self, listener: StateListener) -> None:
        """Calls ``listener`` on every connection state change."""
        ...

    async def register(self, path: str, data: bytes) -> None:
        """Creates the ephemeral node ``path`` with ``data`` (replacing a stale node of this
        name)."""
        ...

    async def update(self, path: str, data: bytes) -> None:
        """Replaces the data of a node this session registered."""
        ...

    async def unregister(self, path: str) -> None:
        """Deletes a node this session registered; no error if it is already gone."""
        ...

    async def children(self, path: str) -> dict[str, bytes]:
        """Returns the children of ``path`` (name -> data); empty if ``path`` does not exist."""
        ...

    def watch_children(self, path: str, listener: ChildrenListener) -> Callable[[], None]:
        """Calls ``listener`` with the current children now and after every change (membership or
        data). Returns a function that cancels the watch."""
        ...

    def lock(self, name: str) -> AbstractAsyncContextManager[None]:
        """A mutual-exclusion lock across the cluster, held by this session while the block runs.
        Waiters are served in arrival order. Not re-entrant. If the session ends while waiting the
        wait raises Unavailable; if it ends while held, the lock is gone at once (the holder learns
        it through LOST, not from the block)."""
        ...

    def leadership(self, name: str, identifier: str) -> AbstractAsyncContextManager[None]:
        """Waits until this session leads the election ``name`` (contenders are served in arrival
        order), holds leadership while the block runs and gives it up at exit. ``identifier``
        (e.g. the server's address) is what :meth:`leader` reports while this session leads.
        Leadership ends with the session: the next contender takes over at once, and the holder
        learns it through LOST, not from the block. Waiting raises Unavailable if the session
        ends first."""
        ...

    async def leader(self, name: str) -> str | None:
        """The identifier of the current leader of election ``name``; None if nobody leads."""
        ...

    async def next_epoch(self) -> int:
        """Returns a number greater than every number this registry handed out before (also across
        restarts of the registry), for fencing tokens of servers that do not use the database."""
        ...
