"""The registry on ZooKeeper (kazoo), for clusters. Same contract as the embedded registry.

:class:`ZooKeeperRegistry` implements :class:`~dsched.server.coord.registry.Registry`:

- Every path is relative to the chroot, which ``start`` creates if it is missing. Without ``auth``
  nodes get the open ACL; with ``auth=(user, password)`` the session authenticates with digest and
  every node it creates (the chroot too) is readable and writable only by that identity.
- Members are ephemeral nodes. ``update`` and ``unregister`` touch a node only while this session
  owns it (``ephemeralOwner``), so a stale incarnation cannot overwrite or delete its successor.
- Watches: :mod:`~dsched.server.coord.zk_watch`. Locks and elections:
  :mod:`~dsched.server.coord.zk_queue` (kazoo's lock node layout under ``/locks`` and
  ``/elections``).
- ``next_epoch`` creates an ephemeral sequential node under ``/epochs``: ZooKeeper derives the
  sequence from the parent's child version, which only grows and is persisted, so epochs increase
  across clients, sessions and server restarts (with gaps). The node is left to vanish with the
  session; ``/epochs`` itself must never be deleted.

Connection states come from kazoo's listener (its connection thread) and are replayed on the loop
that called ``start`` (:mod:`~dsched.server.coord.kazoo_bridge`): CONNECTED, SUSPENDED, LOST. After
an expiry kazoo opens a new session by itself; we report LOST then CONNECTED and recreate nothing.
If kazoo ever showed a new session without a LOST first, LOST is reported anyway: the owner's
reaction to it is what keeps ownership safe.

A call waits while the connection is down and is retried in the same session when it comes back;
if the session ends meanwhile the call raises Unavailable rather than land in the next session.
(kazoo does not bind a request to a session, so a call issued in the instant between an expiry and
our LOST can still reach the new session; ``register`` checks the owner of the node it made.)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadVersionError,
    ConnectionClosedError,
    ConnectionLoss,
    NoAuthError,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    SessionExpiredError,
)
from kazoo.protocol.states import KazooState
from kazoo.security import make_digest_acl

from dsched.errors import (
    FailedPrecondition,
    Internal,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    Unavailable,
)
from dsched.server.constants import ELECTIONS_PATH, EPOCHS_PATH, LOCKS_PATH
from dsched.server.coord import zk_queue
from dsched.server.coord.kazoo_bridge import LoopBridge
from dsched.server.coord.registry import (
    ChildrenListener,
    ConnectionState,
    StateListener,
    check_name,
    split_path,
)
from dsched.server.coord.zk_watch import ChildrenWatch

__all__ = ["ZooKeeperRegistry"]

_log = logging.getLogger(__name__)

_KAZOO_STATES = {
    KazooState.CONNECTED: ConnectionState.CONNECTED,
    KazooState.SUSPENDED: ConnectionState.SUSPENDED,
    KazooState.LOST: ConnectionState.LOST,
}
# Between reconnection attempts kazoo backs off exponentially, by default up to an hour; a client
# must be back well within its session timeout after a ZooKeeper restart.
_CONNECTION_RETRY = {"max_tries": -1, "delay": 0.1, "backoff": 2, "max_delay": 1.0}
_EPOCH_NODE = "epoch-"
_RACES = 8  # attempts at a read-check-write before giving up on a node others keep changing


@dataclass(eq=False)
class ZooKeeperSession:
    """One ZooKeeper session as the loop knows it; ``ended`` is set at LOST or ``stop``."""

    id: int
    ended: asyncio.Event = field(default_factory=asyncio.Event)


class ZooKeeperRegistry:
    """A registry client on ZooKeeper: one kazoo client, one session at a time.

    ``hosts`` is ``host:port,...``; paths are under ``chroot`` ("" for the root). Before ``start``
    and after ``stop`` the state is LOST; calls on a stopped client raise FailedPrecondition;
    ``stop`` does not notify the state listeners. ``start`` raises Unavailable if no server answers
    within ``connect_timeout`` seconds. ``session_timeout`` is what the client asks for; ZooKeeper
    clamps it to 2-20 ticks.
    """

    def __init__(
        self,
        hosts: str,
        *,
        chroot: str = "",
        session_timeout: float = 10.0,
        auth: tuple[str, str] | None = None,
        connect_timeout: float = 15.0,
    ) -> None:
        if "/" in hosts:
            raise ValueError(f"ZooKeeper hosts {hosts!r} must not carry a chroot: pass chroot=")
        self._hosts = hosts
        self._root = "" if chroot in ("", "/") else chroot
        if self._root:
            try:
                split_path(self._root)
            except InvalidArgument as exc:
                raise ValueError(str(exc)) from None
        self._session_timeout = session_timeout
        self._auth = auth
        self._connect_timeout = connect_timeout
        self._acl = None if auth is None else [make_digest_acl(auth[0], auth[1], all=True)]
        self._client: Any = None
        self._bridge: LoopBridge | None = None
        self._running = False
        self._state = ConnectionState.LOST
        self._session: ZooKeeperSession | None = None
        self._connects = 0  # CONNECTED transitions seen; a call that lost its connection waits +1
        self._changed = asyncio.Event()  # set and replaced at every state change
        self._listeners: list[StateListener] = []
        self._watches: list[ChildrenWatch] = []
        self._tasks: set[asyncio.Task[Any]] = set()

    @property
    def state(self) -> ConnectionState:
        return self._state

    @property
    def client_id(self) -> tuple[int, bytes] | None:
        """``(session id, password)`` of the live session, for tests that expire it from a second
        client; None while disconnected."""
        return None if self._client is None else self._client.client_id

    async def start(self) -> None:
        if self._running:
            return
        loop = asyncio.get_running_loop()
        self._bridge = LoopBridge(loop)
        client = KazooClient(
            hosts=self._hosts,
            timeout=self._session_timeout,
            auth_data=None if self._auth is None else [("digest", ":".join(self._auth))],
            default_acl=self._acl,
            connection_retry=dict(_CONNECTION_RETRY),
        )
        client.add_listener(lambda state: self._on_kazoo_state(client, state))
        self._client = client
        self._running = True
        try:
            await LoopBridge.blocking(client.start_async)
            await asyncio.wait_for(self._wait_connected(), self._connect_timeout)
            if self._root:
                session = await self._live_session()
                await self._op(session, "ensure_path_async", self._root, self._acl)
        except BaseException as exc:
            await self._shut_down()
            if isinstance(exc, TimeoutError):
                raise Unavailable(
                    f"cannot reach ZooKeeper at {self._hosts} within {self._connect_timeout:g} s"
                ) from None
            raise

    async def stop(self) -> None:
        if self._running:
            await self._shut_down()

    def add_state_listener(self, listener: StateListener) -> None:
        self._listeners.append(listener)

    async def register(self, path: str, data: bytes) -> None:
        if not split_path(path):
            raise InvalidArgument("cannot register the root node")
        zpath = self._z(path)
        session = await self._live_session()
        for _ in range(_RACES):
            try:
                _, stat = await self._op(
                    session,
                    "create_async",
                    zpath,
                    data,
                    ephemeral=True,
                    makepath=True,
                    include_data=True,
                )
            except NodeExistsError:
                if await self._replace(session, zpath, data):
                    return
                continue
            except NoChildrenForEphemeralsError:
                raise FailedPrecondition(f"ephemeral nodes cannot have children: {path}") from None
            if stat.ephemeralOwner != session.id:
                # Made in a newer session than the call's (see the module docstring): undo it.
                await self._delete_stray(zpath)
                raise Unavailable("the registry session expired while the call waited")
            return
        raise Unavailable(f"{path} keeps changing under this registration; try again")

    async def update(self, path: str, data: bytes) -> None:
        split_path(path)
        session = await self._live_session()
        if not await self._on_own_node(session, path, "set_async", data):
            raise NotFound(f"this registry session has no node {path}")

    async def unregister(self, path: str) -> None:
        split_path(path)
        session = await self._live_session()
        # Not ours (gone already, or a newer registration of the name): nothing to do.
        await self._on_own_node(session, path, "delete_async")

    async def children(self, path: str) -> dict[str, bytes]:
        split_path(path)
        zpath = self._z(path)
        session = await self._live_session()
        try:
            names = await self._op(session, "get_children_async", zpath)
        except NoNodeError:
            return {}

        async def read(name: str) -> bytes | None:
            try:
                data, _ = await self._op(session, "get_async", f"{zpath}/{name}")
            except NoNodeError:
                return None  # deleted since the listing
            return bytes(data)

        values = await asyncio.gather(*(read(name) for name in names))
        return {n: v for n, v in zip(names, values, strict=True) if v is not None}

    def watch_children(self, path: str, listener: ChildrenListener) -> Callable[[], None]:
        split_path(path)
        watch = ChildrenWatch(self, self._z(path), listener)
        self._watches.append(watch)
        if self._current_session() is not None:
            watch.kick(full=True)  # else the next CONNECTED does

        def cancel() -> None:
            watch.cancel()
            if watch in self._watches:
                self._watches.remove(watch)

        return cancel

    def lock(self, name: str) -> AbstractAsyncContextManager[None]:
        return zk_queue.hold(self, self._z(f"{LOCKS_PATH}/{check_name(name, 'lock')}"), "")

    def leadership(self, name: str, identifier: str) -> AbstractAsyncContextManager[None]:
        path = self._z(f"{ELECTIONS_PATH}/{check_name(name, 'election')}")
        return zk_queue.hold(self, path, identifier)

    async def leader(self, name: str) -> str | None:
        path = self._z(f"{ELECTIONS_PATH}/{check_name(name, 'election')}")
        return await zk_queue.leader(self, await self._live_session(), path)

    async def next_epoch(self) -> int:
        session = await self._live_session()
        parent = self._z(EPOCHS_PATH)
        node = await zk_queue.create_sequential(self, session, parent, _EPOCH_NODE, b"")
        sequence = zk_queue.sequence_of(node, _EPOCH_NODE)
        if sequence < 0:  # ZooKeeper's 32-bit counter wrapped: epochs would repeat
            raise Internal(f"the epoch counter under {self._z(EPOCHS_PATH)} overflowed")
        return sequence + 1  # the first epoch is 1, as with the embedded registry

    # -- session and connection (on the loop) ----------------------------------------------------

    def _on_kazoo_state(self, client: Any, state: KazooState) -> None:
        # kazoo's connection thread: note the session the state belongs to, then hop.
        session_id = client._session_id if state == KazooState.CONNECTED else None
        assert self._bridge is not None
        self._bridge.call(self._apply_state, client, _KAZOO_STATES[state], session_id)

    def _apply_state(self, client: Any, state: ConnectionState, session_id: int | None) -> None:
        if client is not self._client or not self._running:
            return  # a stopped client's last words
        if state is ConnectionState.CONNECTED:
            assert session_id is not None
            if self._session is not None and self._session.id != session_id:
                self._end_session()  # a new session without LOST first: report it anyway
            if self._session is None:
                self._session = ZooKeeperSession(session_id)
            self._connects += 1
            self._set_state(ConnectionState.CONNECTED)
            for watch in list(self._watches):
                watch.kick(full=True)
        elif state is ConnectionState.SUSPENDED:
            if self._state is ConnectionState.CONNECTED:
                self._set_state(ConnectionState.SUSPENDED)
        else:
            self._end_session()

    def _end_session(self) -> None:
        if self._session is not None:
            self._session.ended.set()
            self._session = None
        if self._state is not ConnectionState.LOST:
            self._set_state(ConnectionState.LOST)

    def _set_state(self, state: ConnectionState) -> None:
        self._state = state
        self._changed.set()
        self._changed = asyncio.Event()
        assert self._bridge is not None
        for listener in self._listeners:
            # Scheduled, not called: a listener must not re-enter the registry mid-change.
            self._bridge.loop.call_soon(self._call_listener, listener, state)

    @staticmethod
    def _call_listener(listener: StateListener, state: ConnectionState) -> None:
        try:
            listener(state)
        except Exception:
            _log.exception("registry state listener failed")

    async def _wait_connected(self) -> None:
        while self._state is not ConnectionState.CONNECTED:
            await self._changed.wait()

    async def _shut_down(self) -> None:
        self._running = False
        if self._session is not None:
            self._session.ended.set()
            self._session = None
        self._state = ConnectionState.LOST
        self._changed.set()  # wakes waiting calls so that they see the client is stopped
        self._changed = asyncio.Event()
        # Watches stay registered (a restarted client re-reads them); their refreshes stop.
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        client, self._client = self._client, None
        if client is not None:
            # Closing the session releases its ephemeral nodes and locks at once.
            await LoopBridge.blocking(_close_client, client)

    def _current_session(self) -> ZooKeeperSession | None:
        return self._session if self._state is ConnectionState.CONNECTED else None

    async def _live_session(self, bound: ZooKeeperSession | None = None) -> ZooKeeperSession:
        """The session to act in, once connected. A call belongs to the session it started in
        (``bound``, by default the current one): if that one ends while the call waits, the call
        raises Unavailable instead of landing in the next session (where it could undo the owner's
        reaction to LOST). A call made between LOST and the new session waits for the new one."""
        bound = bound or self._session
        while True:
            if not self._running:
                raise FailedPrecondition("the registry client is not started")
            current = self._session
            if bound is not None and current is not bound:
                raise Unavailable("the registry session expired while the call waited")
            if self._state is ConnectionState.CONNECTED and current is not None:
                return current
            await self._changed.wait()

    async def _next_connect(self, connects: int) -> None:
        """Waits for a CONNECTED after the ``connects``-th (or for ``stop``)."""
        while self._running and self._connects <= connects:
            await self._changed.wait()

    async def _until(self, session: ZooKeeperSession, event: asyncio.Event) -> None:
        """Waits for ``event``; raises Unavailable if ``session`` ends first."""
        waits = [asyncio.ensure_future(event.wait()), asyncio.ensure_future(session.ended.wait())]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for wait in waits:
                wait.cancel()
        if not event.is_set():
            self._require_running()
            raise Unavailable("the registry session ended while waiting")

    # -- kazoo calls -------------------------------------------------------------------------------

    async def _op(
        self, session: ZooKeeperSession, method: str, *args: Any, retry: bool = True, **kw: Any
    ) -> Any:
        """Runs the kazoo call ``client.<method>(*args, **kw)`` (an ``*_async`` one) in
        ``session``. A dropped connection is waited out and the call retried once it is back in the
        same session (``retry=False``: ConnectionLoss is raised then, for calls that must not run
        twice); the end of the session raises Unavailable."""
        while True:
            connects = self._connects
            try:
                return await self._raw(method, *args, **kw)
            except ConnectionLoss:
                await self._next_connect(connects)
                await self._live_session(bound=session)
                if not retry:
                    raise
            except (SessionExpiredError, ConnectionClosedError):
                self._require_running()
                raise Unavailable("the registry session ended during the call") from None
            except NoAuthError as exc:
                raise PermissionDenied(
                    f"the registry's credentials do not grant this ({exc!r})"
                ) from exc

    async def _raw(self, method: str, *args: Any, **kw: Any) -> Any:
        """One kazoo call, no retry. Raises FailedPrecondition when the client is stopped."""
        self._require_running()
        assert self._bridge is not None
        return await self._bridge.result(getattr(self._client, method)(*args, **kw))

    async def _on_own_node(
        self, session: ZooKeeperSession, path: str, method: str, *args: Any
    ) -> bool:
        """Runs ``client.<method>(zpath, *args, version=...)`` on ``path`` if ``session`` owns the
        node, pinned to the version just checked so a replacement in between is never touched.
        False if the node is not this session's."""
        zpath = self._z(path)
        for _ in range(_RACES):
            stat = await self._op(session, "exists_async", zpath)
            if stat is None or stat.ephemeralOwner != session.id:
                return False
            try:
                await self._op(session, method, zpath, *args, version=stat.version)
                return True
            except (BadVersionError, NoNodeError):
                continue  # replaced or deleted meanwhile: look again
        raise Unavailable(f"{path} keeps changing under this call; try again")

    async def _replace(self, session: ZooKeeperSession, zpath: str, data: bytes) -> bool:
        """``register`` found ``zpath`` taken: its own node gets the new data; a stale node of
        another session is deleted (False: create again). A persistent node is refused."""
        stat = await self._op(session, "exists_async", zpath)
        if stat is None:
            return False
        if stat.ephemeralOwner == 0:
            raise FailedPrecondition(f"{self._unz(zpath)} is a persistent node")
        try:
            if stat.ephemeralOwner == session.id:
                await self._op(session, "set_async", zpath, data, stat.version)
                return True
            await self._op(session, "delete_async", zpath, stat.version)
        except (BadVersionError, NoNodeError):
            pass
        return False

    async def _delete_stray(self, zpath: str) -> None:
        try:
            await self._raw("delete_async", zpath)
        except Exception:  # it dies with that session, or the owner's next register replaces it
            _log.warning("cannot remove %s made in a newer session", zpath, exc_info=True)

    async def _discard(self, session: ZooKeeperSession, zpath: str) -> None:
        """Deletes this session's ``zpath`` (a lock or election node) on leaving. Awaited while
        connected, so the next contender is served at once; while disconnected the delete waits
        for the reconnect in the background, and the caller does not."""
        if session.ended.is_set():
            return  # the node died with its session

        async def delete() -> None:
            with contextlib.suppress(NoNodeError, Unavailable, FailedPrecondition):
                await self._op(session, "delete_async", zpath)

        task = self._spawn(delete(), f"release {zpath}")
        if self._current_session() is session:
            await asyncio.shield(task)

    # -- plumbing for zk_watch / zk_queue ----------------------------------------------------------

    def _hop(self, callback: Callable[..., None], *args: object) -> None:
        """From a kazoo thread: runs ``callback(*args)`` on the loop."""
        if self._bridge is not None:
            self._bridge.call(callback, *args)

    def _spawn(self, coro: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _require_running(self) -> None:
        if not self._running:
            raise FailedPrecondition("the registry client is not started")

    def _z(self, path: str) -> str:
        return self._root + path if path != "/" else (self._root or "/")

    def _unz(self, zpath: str) -> str:
        return zpath[len(self._root) :] or "/"


def _close_client(client: Any) -> None:
    # Blocking (joins kazoo's threads): runs in a worker thread.
    try:
        client.stop()
    finally:
        client.close()
