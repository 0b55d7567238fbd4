"""The registry on ZooKeeper (kazoo), for clusters. Same contract as the embedded registry.

:class:`ZooKeeperRegistry` implements :class:`~dsched_server.coord.registry.Registry`:

- Every path is relative to the chroot, which ``start`` creates if it is missing. Without ``auth``
  nodes get the open ACL; with ``auth=(user, password)`` the session authenticates with digest and
  every node it creates (the chroot too) is readable and writable only by that identity.
- Members are ephemeral nodes. ``update`` and ``unregister`` touch a node only while this session
  owns it (``ephemeralOwner``), so a stale incarnation cannot overwrite or delete its successor.
- Watches: :mod:`~dsched_server.coord.zk_watch`. Locks and elections:
  :mod:`~dsched_server.coord.zk_queue` (kazoo's lock node layout under ``/locks`` and
  ``/elections``).
- ``next_epoch`` creates an ephemeral sequential node under ``/epochs``: ZooKeeper derives the
  sequence from the parent's child version, which only grows and is persisted, so epochs increase
  across clients, sessions and server restarts (with gaps). The node is left to vanish with the
  session; ``/epochs`` itself must never be deleted.

Connection states, sessions and the calls' fate across disconnects:
:mod:`~dsched_server.coord.zk_connection`. After an expiry kazoo opens a new session by itself; we
report LOST then CONNECTED and recreate nothing (the owner registers again, with a new epoch).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from kazoo.exceptions import (
    BadVersionError,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
)
from kazoo.security import make_digest_acl

from dsched.errors import FailedPrecondition, Internal, InvalidArgument, NotFound, Unavailable
from dsched_server.constants import (
    ELECTIONS_PATH,
    EPOCHS_PATH,
    LOCKS_PATH,
    REGISTRY_SESSION_TIMEOUT_S,
)
from dsched_server.coord import zk_queue
from dsched_server.coord.registry import (
    ChildrenListener,
    ConnectionState,
    StateListener,
    check_name,
    split_path,
)
from dsched_server.coord.zk_connection import (
    CLOSE_TIMEOUT_S,
    ZooKeeperConnection,
    ZooKeeperSession,
)
from dsched_server.coord.zk_watch import ChildrenWatch

__all__ = ["ZooKeeperRegistry"]

_log = logging.getLogger(__name__)

_EPOCH_NODE = "epoch-"
_RACES = 8  # attempts at a read-check-write before giving up on a node others keep changing


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
        session_timeout: float = REGISTRY_SESSION_TIMEOUT_S,
        auth: tuple[str, str] | None = None,
        connect_timeout: float = 15.0,
    ) -> None:
        if "/" in hosts:
            raise ValueError(f"ZooKeeper hosts {hosts!r} must not carry a chroot: pass chroot=")
        self._root = "" if chroot in ("", "/") else chroot
        if self._root:
            try:
                split_path(self._root)
            except InvalidArgument as exc:
                raise ValueError(str(exc)) from None
        acl = None if auth is None else [make_digest_acl(auth[0], auth[1], all=True)]
        self._acl = acl
        self._conn = ZooKeeperConnection(
            hosts,
            session_timeout=session_timeout,
            connect_timeout=connect_timeout,
            auth=auth,
            acl=acl,
            on_connected=self._rearm_watches,
        )
        self._watches: list[ChildrenWatch] = []

    @property
    def state(self) -> ConnectionState:
        return self._conn.state

    @property
    def client_id(self) -> tuple[int, bytes] | None:
        """``(session id, password)`` of the live session, for tests that expire it from a second
        client; None while disconnected."""
        return self._conn.client_id

    async def start(self) -> None:
        if self._conn.running:
            return
        await self._conn.start()
        if self._root:
            try:
                session = await self._conn.live_session()
                await self._conn.op(session, "ensure_path_async", self._root, self._acl)
            except BaseException:
                await self._conn.stop()
                raise

    async def stop(self) -> None:
        """Closes the session; Unavailable if kazoo did not close in time (the client is
        abandoned, and the session ends when it times out on the server)."""
        # Watches stay registered (a restarted client re-reads them); their refreshes stop.
        if self._conn.running and not await self._conn.stop():
            raise Unavailable(
                f"the ZooKeeper client did not close within {CLOSE_TIMEOUT_S:g} s: the session "
                "ends when it times out"
            )

    def add_state_listener(self, listener: StateListener) -> None:
        self._conn.add_state_listener(listener)

    async def register(self, path: str, data: bytes) -> None:
        if not split_path(path):
            raise InvalidArgument("cannot register the root node")
        zpath = self._z(path)
        session = await self._conn.live_session()
        for _ in range(_RACES):
            try:
                _, stat = await self._conn.op(
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
        session = await self._conn.live_session()
        if not await self._on_own_node(session, path, "set_async", data):
            raise NotFound(f"this registry session has no node {path}")

    async def unregister(self, path: str) -> None:
        split_path(path)
        session = await self._conn.live_session()
        # Not ours (gone already, or a newer registration of the name): nothing to do.
        await self._on_own_node(session, path, "delete_async")

    async def children(self, path: str) -> dict[str, bytes]:
        split_path(path)
        zpath = self._z(path)
        session = await self._conn.live_session()
        try:
            names = await self._conn.op(session, "get_children_async", zpath)
        except NoNodeError:
            return {}

        async def read(name: str) -> bytes | None:
            try:
                data, _ = await self._conn.op(session, "get_async", f"{zpath}/{name}")
            except NoNodeError:
                return None  # deleted since the listing
            return bytes(data)

        values = await asyncio.gather(*(read(name) for name in names))
        return {n: v for n, v in zip(names, values, strict=True) if v is not None}

    def watch_children(self, path: str, listener: ChildrenListener) -> Callable[[], None]:
        split_path(path)
        watch = ChildrenWatch(self._conn, self._z(path), listener)
        self._watches.append(watch)
        if self._conn.current_session() is not None:
            watch.kick(full=True)  # else the next CONNECTED does

        def cancel() -> None:
            watch.cancel()
            if watch in self._watches:
                self._watches.remove(watch)

        return cancel

    def lock(self, name: str) -> AbstractAsyncContextManager[None]:
        return zk_queue.hold(self._conn, self._z(f"{LOCKS_PATH}/{check_name(name, 'lock')}"), "")

    def leadership(self, name: str, identifier: str) -> AbstractAsyncContextManager[None]:
        path = self._z(f"{ELECTIONS_PATH}/{check_name(name, 'election')}")
        return zk_queue.hold(self._conn, path, identifier)

    async def leader(self, name: str) -> str | None:
        path = self._z(f"{ELECTIONS_PATH}/{check_name(name, 'election')}")
        return await zk_queue.leader(self._conn, await self._conn.live_session(), path)

    async def next_epoch(self) -> int:
        session = await self._conn.live_session()
        parent = self._z(EPOCHS_PATH)
        node = await zk_queue.create_sequential(self._conn, session, parent, _EPOCH_NODE, b"")
        sequence = zk_queue.sequence_of(node, _EPOCH_NODE)
        if sequence < 0:  # ZooKeeper's 32-bit counter wrapped: epochs would repeat
            raise Internal(f"the epoch counter under {self._z(EPOCHS_PATH)} overflowed")
        return sequence + 1  # the first epoch is 1, as with the embedded registry

    # -- internals --------------------------------------------------------------------------------

    async def _on_own_node(
        self, session: ZooKeeperSession, path: str, method: str, *args: Any
    ) -> bool:
        """Runs ``client.<method>(zpath, *args, version=...)`` on ``path`` if ``session`` owns the
        node, pinned to the version just checked so a replacement in between is never touched.
        False if the node is not this session's."""
        zpath = self._z(path)
        for _ in range(_RACES):
            stat = await self._conn.op(session, "exists_async", zpath)
            if stat is None or stat.ephemeralOwner != session.id:
                return False
            try:
                await self._conn.op(session, method, zpath, *args, version=stat.version)
                return True
            except (BadVersionError, NoNodeError):
                continue  # replaced or deleted meanwhile: look again
        raise Unavailable(f"{path} keeps changing under this call; try again")

    async def _replace(self, session: ZooKeeperSession, zpath: str, data: bytes) -> bool:
        """``register`` found ``zpath`` taken: its own node gets the new data; a stale node of
        another session is deleted (False: create again). A persistent node is refused."""
        stat = await self._conn.op(session, "exists_async", zpath)
        if stat is None:
            return False
        if stat.ephemeralOwner == 0:
            raise FailedPrecondition(f"{self._unz(zpath)} is a persistent node")
        try:
            if stat.ephemeralOwner == session.id:
                await self._conn.op(session, "set_async", zpath, data, stat.version)
                return True
            await self._conn.op(session, "delete_async", zpath, stat.version)
        except (BadVersionError, NoNodeError):
            pass
        return False

    async def _delete_stray(self, zpath: str) -> None:
        try:
            await self._conn.raw("delete_async", zpath)
        except Exception:  # it dies with that session, or the owner's next register replaces it
            _log.warning("cannot remove %s made in a newer session", zpath, exc_info=True)

    def _rearm_watches(self) -> None:
        for watch in list(self._watches):
            watch.kick(full=True)

    def _z(self, path: str) -> str:
        return self._root + path if path != "/" else (self._root or "/")

    def _unz(self, zpath: str) -> str:
        return zpath[len(self._root) :] or "/"
