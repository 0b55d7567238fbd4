"""``watch_children`` on ZooKeeper: membership *and* data of every child, re-armed across sessions.

A ZooKeeper watch fires once, and a child watch does not fire when a child's data changes (kazoo's
``ChildrenWatch`` recipe has the same blind spot). :class:`ChildrenWatch` therefore keeps a cache of
``name -> data`` and arms a child watch on the path plus a data watch on each child; an event marks
what is stale and one refresh task per watch re-reads it, re-arming the watches it read through.
Events that arrive while a refresh runs are coalesced into the next round; each round ends with one
snapshot to the listener, skipped if it equals the last one delivered.

A name is not an incarnation: a member restarted on the same address deletes its predecessor's node
and creates its own under the same name, often before the watchers look. The new node carries no
data watch of ours, and a listing shows the same names as before. So a child event re-reads the
data of *every* child (not only of names not cached yet), and a data watch's DELETED marks its name
stale too: whatever order the deletion, the creation and the events arrive in, the cache ends on the
data of the node that exists now, and its data watch is armed on that node.

kazoo drops every watch when the connection drops (and ZooKeeper forgets them with the session), so
each CONNECTED (same session or a new one) triggers a full re-read, and its snapshot is always
delivered. A missing path is watched with ``exists`` so that its creation is noticed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from kazoo.exceptions import (
    ConnectionClosedError,
    ConnectionLoss,
    NoNodeError,
    SessionExpiredError,
)
from kazoo.protocol.states import EventType

from dsched.errors import DschedError
from dsched_server.coord.registry import ChildrenListener

if TYPE_CHECKING:
    from dsched_server.coord.zk_connection import ZooKeeperConnection

_log = logging.getLogger(__name__)

# The connection went away under a refresh: the next CONNECTED starts a full one.
_DISCONNECTED = (ConnectionLoss, SessionExpiredError, ConnectionClosedError)


class ChildrenWatch:
    """One ``watch_children`` registration on the absolute ZooKeeper path ``zpath``. Lives on the
    connection's event loop; kazoo's watch callbacks only hop onto it."""

    def __init__(self, conn: ZooKeeperConnection, zpath: str, listener: ChildrenListener) -> None:
        self._conn = conn
        self._zpath = zpath
        self._listener = listener
        self.active = True
        self._cache: dict[str, bytes] = {}
        self._last: Mapping[str, bytes] | None = None
        self._children_stale = True
        self._stale: set[str] = set()
        self._full = True  # deliver the next snapshot even if it equals the last one
        self._task: asyncio.Task[None] | None = None

    def kick(self, *, full: bool = False) -> None:
        """Marks everything stale (``full``, after a (re)connect) and makes sure a refresh runs."""
        if not self.active:
            return
        if full:
            self._full = True
            self._children_stale = True
            self._stale.update(self._cache)
        if self._task is None or self._task.done():
            self._task = self._conn.spawn(self._run(), f"watch {self._zpath}")

    def cancel(self) -> None:
        self.active = False
        if self._task is not None:
            self._task.cancel()

    # -- kazoo watch callbacks (kazoo's thread: hop onto the loop and nothing else) ---------------

    def _kazoo_children_event(self, event: Any) -> None:
        self._conn.hop(self._on_children_event, event)

    def _kazoo_data_event(self, event: Any) -> None:
        self._conn.hop(self._on_data_event, event)

    # -- on the loop ------------------------------------------------------------------------------

    def _on_children_event(self, event: Any) -> None:
        # NONE: kazoo dropping its watches on a disconnect; the reconnect re-reads everything.
        if event.type != EventType.NONE:
            self._children_stale = True
            self.kick()

    def _on_data_event(self, event: Any) -> None:
        # CHANGED, or DELETED (maybe re-created already under the same name: read it again).
        # NONE: kazoo dropping its watches, as above.
        if event.type in (EventType.CHANGED, EventType.DELETED):
            self._stale.add(event.path.rsplit("/", 1)[1])
            self.kick()

    async def _run(self) -> None:
        while self.active and (self._children_stale or self._stale):
            if self._conn.current_session() is None:
                return  # the next CONNECTED kicks a full refresh
            connects = self._conn.connects
            try:
                await self._refresh()
            except _DISCONNECTED:
                self.kick(full=True)
                await self._conn.next_connect(connects)
                continue
            except DschedError:
                return  # the client stopped
            except Exception:
                _log.exception("registry watch on %s failed; retried on reconnect", self._zpath)
                return
            self._deliver()

    async def _refresh(self) -> None:
        # An exists watch on a missing path reports its creation like a child change.
        w = self._kazoo_children_event
        if self._children_stale:
            self._children_stale = False
            try:
                names = set(await self._read("get_children_async", self._zpath, w))
            except NoNodeError:
                names = set()
                stat = await self._read("exists_async", self._zpath, w)
                # Created in between: read it again. Only ever set here, never cleared: the
                # creation's event may have been handled while the answer was on its way (kazoo
                # registers the watch and then reads the event, both before this task resumes),
                # and clearing the flag it set would lose the creation for good.
                if stat is not None:
                    self._children_stale = True
            for gone in set(self._cache) - names:
                del self._cache[gone]
            # Every name, not only new ones: a cached name may be a new node by now.
            self._stale.update(names)
        stale, self._stale = sorted(self._stale), set()
        try:
            results = await asyncio.gather(*(self._read_child(name) for name in stale))
        except BaseException:
            self._stale.update(stale)
            raise
        for name, data in zip(stale, results, strict=True):
            if data is None:
                self._cache.pop(name, None)
            else:
                self._cache[name] = data

    async def _read_child(self, name: str) -> bytes | None:
        path = f"{self._zpath.rstrip('/')}/{name}"
        try:
            data, _ = await self._read("get_async", path, self._kazoo_data_event)
        except NoNodeError:
            return None  # deleted meanwhile: the child watch fires for it
        return bytes(data)

    async def _read(self, method: str, *args: Any) -> Any:
        return await self._conn.raw(method, *args)

    def _deliver(self) -> None:
        snapshot = MappingProxyType(dict(self._cache))
        if not self._full and snapshot == self._last:
            return  # e.g. a child replaced by the same data
        self._full = False
        self._last = snapshot
        try:
            self._listener(snapshot)
        except Exception:
            _log.exception("registry watch listener failed")
