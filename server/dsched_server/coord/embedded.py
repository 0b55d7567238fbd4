"""The in-process registry client: ZooKeeper's semantics for standalone and for tests.

:class:`EmbeddedRegistry` implements :class:`~dsched_server.coord.registry.Registry` against an
:class:`~dsched_server.coord.ensemble.EmbeddedEnsemble` (re-exported here), one session at a time.
Nothing polls: waiting is done on asyncio futures and events. Deliberately like kazoo, so that code
tested here behaves the same against ZooKeeper:

- Every notification (state change, watch snapshot) is scheduled with ``loop.call_soon``, never made
  inline, so a listener cannot re-enter the registry in the middle of a change.
- A disconnected client (SUSPENDED, or LOST before its new session) gets no watch snapshots; on
  reconnect it gets the current children of every watched path that changed meanwhile.
- After its session expires the client reports LOST, opens a fresh session and reports CONNECTED.
  Its old ephemeral nodes are *not* recreated: the owner must register again (with a new epoch).
- An expiry while the client is suspended is learnt only when it is resumed (a partitioned ZooKeeper
  client cannot hear that its session died).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from types import MappingProxyType

from dsched.errors import FailedPrecondition, Unavailable
from dsched_server.constants import ELECTIONS_PATH, LOCKS_PATH
from dsched_server.coord.ensemble import EmbeddedEnsemble, Session, Watch
from dsched_server.coord.registry import (
    ChildrenListener,
    ConnectionState,
    StateListener,
    call_state_listener,
    check_name,
    split_path,
)

__all__ = ["EmbeddedEnsemble", "EmbeddedRegistry"]

_log = logging.getLogger(__name__)


class EmbeddedRegistry:
    """One registry client (one session at a time) of an :class:`EmbeddedEnsemble`.

    Before ``start`` and after ``stop`` the state is LOST (no session). Calls made while SUSPENDED
    or between LOST and the next CONNECTED wait for the connection; calls on a stopped client raise
    :class:`~dsched.errors.FailedPrecondition`. ``stop`` does not notify the state listeners: the
    owner asked for it. Locks are not re-entrant.
    """

    def __init__(self, ensemble: EmbeddedEnsemble) -> None:
        self._ensemble = ensemble
        self._loop: asyncio.AbstractEventLoop | None = None
        self._running = False
        self._session: Session | None = None
        self._state = ConnectionState.LOST
        self._suspended = False
        self._connected = asyncio.Event()
        self._listeners: list[StateListener] = []
        self._watches: dict[str, list[Watch]] = {}
        self._stale: set[str] = set()  # watched paths that changed while we were disconnected

    @property
    def state(self) -> ConnectionState:
        return self._state

    async def start(self) -> None:
        if self._running:
            return
        self._loop = asyncio.get_running_loop()
        self._running = True
        self._suspended = False
        self._ensemble._attach(self)
        self._stale.update(self._watches)
        self._connect(self._ensemble._open_session())

    async def stop(self) -> None:
        if not self._running:
            return
        self._running = False
        self._ensemble._detach(self)
        if self._session is not None and self._session.alive:
            self._ensemble._end_session(self._session)
        self._session = None
        self._state = ConnectionState.LOST
        self._connected.set()  # wakes waiting calls so that they see the client is stopped

    def add_state_listener(self, listener: StateListener) -> None:
        self._listeners.append(listener)

    async def register(self, path: str, data: bytes) -> None:
        self._ensemble._create(await self._live_session(), path, data)

    async def update(self, path: str, data: bytes) -> None:
        self._ensemble._set(await self._live_session(), path, data)

    async def unregister(self, path: str) -> None:
        split_path(path)
        self._ensemble._delete(await self._live_session(), path)

    async def children(self, path: str) -> dict[str, bytes]:
        split_path(path)
        await self._live_session()
        return self._ensemble._children(path)

    def watch_children(self, path: str, listener: ChildrenListener) -> Callable[[], None]:
        split_path(path)
        watch = Watch(listener)
        self._watches.setdefault(path, []).append(watch)
        if self._state is ConnectionState.CONNECTED:
            self._schedule(watch.fire, MappingProxyType(self._ensemble._children(path)))
        else:
            self._stale.add(path)

        def cancel() -> None:
            watch.active = False
            watches = self._watches.get(path, [])
            if watch in watches:
                watches.remove(watch)
            if not watches:
                self._watches.pop(path, None)

        return cancel

    def lock(self, name: str) -> AbstractAsyncContextManager[None]:
        return self._hold(f"{LOCKS_PATH}/{check_name(name, 'lock')}")

    def leadership(self, name: str, identifier: str) -> AbstractAsyncContextManager[None]:
        return self._hold(f"{ELECTIONS_PATH}/{check_name(name, 'election')}", identifier)

    async def leader(self, name: str) -> str | None:
        key = f"{ELECTIONS_PATH}/{check_name(name, 'election')}"
        await self._live_session()
        return self._ensemble._holder(key)

    async def next_epoch(self) -> int:
        await self._live_session()
        return await self._ensemble._next_epoch()

    # -- internals --------------------------------------------------------------------------------

    @asynccontextmanager
    async def _hold(self, key: str, identifier: str = "") -> AsyncIterator[None]:
        session = await self._live_session()
        ticket = await self._ensemble._acquire(session, key, identifier)
        try:
            # A grant can reach a suspended client: it may use the lock only once it is back, and
            # only if its session (hence the lock) survived.
            if await self._live_session() is not session:
                raise Unavailable(f"the registry session ended while acquiring {key}")
            yield
        finally:
            self._ensemble._release(ticket)

    async def _live_session(self) -> Session:
        """The session to act in, once connected. Like a request queued in kazoo, a call made in a
        session belongs to it: if that session expires while the call waits, the call raises
        Unavailable instead of landing in the next session (where it could undo the owner's
        reaction to LOST). A call made between LOST and the new session waits for the new one."""
        bound = self._session
        while True:
            if not self._running:
                raise FailedPrecondition("the registry client is not started")
            current = self._session
            if bound is not None and current is not bound:
                raise Unavailable("the registry session expired while the call waited")
            if self._state is ConnectionState.CONNECTED and current is not None:
                return current
            await self._connected.wait()

    def _schedule(self, callback: Callable[..., None], *args: object) -> None:
        assert self._loop is not None
        self._loop.call_soon(callback, *args)

    def _set_state(self, state: ConnectionState) -> None:
        self._state = state
        for listener in self._listeners:
            self._schedule(call_state_listener, listener, state)

    def _connect(self, session: Session) -> None:
        self._session = session
        self._set_state(ConnectionState.CONNECTED)
        self._connected.set()
        for path in sorted(self._stale):
            snapshot = MappingProxyType(self._ensemble._children(path))
            for watch in self._watches.get(path, []):
                self._schedule(watch.fire, snapshot)
        self._stale.clear()

    def _on_children_changed(self, path: str, snapshot: Mapping[str, bytes]) -> None:
        watches = self._watches.get(path)
        if not watches:
            return
        if self._state is ConnectionState.CONNECTED:
            for watch in watches:
                self._schedule(watch.fire, snapshot)
        else:
            self._stale.add(path)

    def _on_suspend(self) -> None:
        if not self._running or self._suspended:
            return
        self._suspended = True
        self._connected.clear()
        if self._state is ConnectionState.CONNECTED:
            self._set_state(ConnectionState.SUSPENDED)

    def _on_resume(self) -> None:
        if not self._running or not self._suspended:
            return
        self._suspended = False
        if self._session is not None and self._session.alive:
            self._connect(self._session)
        else:
            self._lose()

    def _on_expired(self) -> None:
        if not self._suspended:
            self._lose()

    def _lose(self) -> None:
        self._connected.clear()
        self._session = None
        self._stale.update(self._watches)
        self._set_state(ConnectionState.LOST)
        # Reconnect on a later turn of the loop, so LOST is observable (``state``) in between.
        self._schedule(self._reconnect)

    def _reconnect(self) -> None:
        if self._running and not self._suspended and self._session is None:
            self._connect(self._ensemble._open_session())
