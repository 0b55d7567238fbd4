"""The embedded registry's "server": what a ZooKeeper ensemble keeps, inside one process.

It holds the tree of nodes (ephemeral ones owned by sessions, persistent parents made on the way),
the sessions, a FIFO queue per lock, and the epoch counter. Only the epoch counter outlives the
process (``<state_dir>/registry-epoch``, replaced atomically), because fencing tokens must never
repeat; the tree is rebuilt by servers registering again after a restart.

Clients are :class:`~dsched_server.coord.embedded.EmbeddedRegistry` objects (seen through the
:class:`Client` protocol); the methods with a
leading underscore are the wire between them and this module. The test hooks
(:meth:`~EmbeddedEnsemble.expire_session`, :meth:`~EmbeddedEnsemble.suspend`,
:meth:`~EmbeddedEnsemble.resume`) play the failures ZooKeeper clients meet. Not thread-safe: the
ensemble and all its clients live on one event loop.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Protocol

from dsched.errors import FailedPrecondition, InvalidArgument, NotFound, Unavailable
from dsched_server.coord.registry import ChildrenListener, parent_path, split_path

_log = logging.getLogger(__name__)

EPOCH_FILE = "registry-epoch"


@dataclass(eq=False)
class Session:
    """A client's session: what dies with it."""

    id: int
    nodes: set[str] = field(default_factory=set)
    locks: set[LockTicket] = field(default_factory=set)
    alive: bool = True


class Client(Protocol):
    """What the ensemble calls on its clients (:class:`~dsched_server.coord.embedded.
    EmbeddedRegistry`, which imports this module: a protocol, not that class, keeps the two
    modules out of an import cycle)."""

    @property
    def _session(self) -> Session | None: ...

    def _on_children_changed(self, path: str, snapshot: Mapping[str, bytes]) -> None: ...

    def _on_suspend(self) -> None: ...

    def _on_resume(self) -> None: ...

    def _on_expired(self) -> None: ...


@dataclass(eq=False)
class _Node:
    data: bytes
    owner: Session | None  # None: a persistent parent made on the way to an ephemeral node
    children: dict[str, _Node] = field(default_factory=dict)


@dataclass(eq=False)
class LockTicket:
    """One session's place in one lock's or election's queue (ZooKeeper's sequential node);
    ``identifier`` is what an election reports for its leader."""

    name: str
    session: Session
    granted: asyncio.Future[None]
    identifier: str = ""


@dataclass(eq=False)
class _LockQueue:
    holder: LockTicket | None = None
    waiting: deque[LockTicket] = field(default_factory=deque)


@dataclass(eq=False)
class Watch:
    """One ``watch_children`` registration; cancelling it makes pending deliveries no-ops."""

    listener: ChildrenListener
    active: bool = True

    def fire(self, children: Mapping[str, bytes]) -> None:
        if not self.active:
            return
        try:
            self.listener(children)
        except Exception:
            _log.exception("registry watch listener failed")


def _read_epoch(path: Path) -> int:
    try:
        text = path.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        return 0
    if not text.isdigit():
        # Guessing would risk handing out an epoch twice; a human must look at it.
        raise ValueError(f"{path} does not hold a registry epoch: {text[:40]!r}")
    return int(text)


def _write_epoch(path: Path, value: int) -> None:
    """Writes ``value`` durably: temp file, fsync, rename, fsync of the directory."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="ascii") as f:
        f.write(f"{value}\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


class EmbeddedEnsemble:
    """The shared registry "server" of one process. ``state_dir`` keeps the epoch counter."""

    def __init__(self, state_dir: Path) -> None:
        state_dir.mkdir(parents=True, exist_ok=True)
        self._epoch_file = state_dir / EPOCH_FILE
        self._epoch = _read_epoch(self._epoch_file)
        self._epoch_lock = asyncio.Lock()
        self._root = _Node(b"", None)
        self._locks: dict[str, _LockQueue] = {}
        self._clients: set[Client] = set()
        self._session_ids = itertools.count(1)

    # -- test hooks -------------------------------------------------------------------------------

    def expire_session(self, client: Client) -> None:
        """Expires ``client``'s session as ZooKeeper would after its timeout: its ephemeral nodes
        and locks vanish at once (other clients' watches fire). A connected client then reports LOST
        and CONNECTED with a fresh session; a suspended one finds out when it is resumed."""
        session = client._session
        if session is None or not session.alive:
            raise FailedPrecondition("the client has no live session to expire")
        self._end_session(session)
        client._on_expired()

    def suspend(self, client: Client) -> None:
        """Cuts ``client`` off (SUSPENDED); its session, nodes and locks stay alive."""
        client._on_suspend()

    def resume(self, client: Client) -> None:
        """Reconnects ``client``: CONNECTED if its session survived, else LOST then CONNECTED."""
        client._on_resume()

    def contenders(self, key: str) -> int:
        """How many sessions hold or wait for the lock or election ``key`` (its registry path,
        e.g. ``/locks/failover``): lets a test know that a remote waiter has queued."""
        queue = self._locks.get(key)
        return 0 if queue is None else len(queue.waiting) + (queue.holder is not None)

    # -- the server side of the client calls ------------------------------------------------------

    def _attach(self, client: Client) -> None:
        self._clients.add(client)

    def _detach(self, client: Client) -> None:
        self._clients.discard(client)

    def _open_session(self) -> Session:
        return Session(next(self._session_ids))

    def _end_session(self, session: Session) -> None:
        session.alive = False
        parents: set[str] = set()
        for path in sorted(session.nodes, reverse=True):
            self._remove(path)
            parents.add(parent_path(path))
        session.nodes.clear()
        for ticket in list(session.locks):
            queue = self._locks.get(ticket.name)
            if queue is not None and queue.holder is ticket:
                self._release(ticket)
                continue
            if queue is not None and ticket in queue.waiting:
                queue.waiting.remove(ticket)
            session.locks.discard(ticket)
            if not ticket.granted.done():
                ticket.granted.set_exception(Unavailable("registry session ended"))
        # One session ending is one change per parent, as one ZooKeeper transaction would be.
        for parent in sorted(parents):
            self._notify(parent)

    def _find(self, path: str) -> _Node | None:
        node: _Node | None = self._root
        for name in split_path(path):
            node = node.children.get(name) if node is not None else None
        return node

    def _create(self, session: Session, path: str, data: bytes) -> None:
        parts = split_path(path)
        if not parts:
            raise InvalidArgument("cannot register the root node")
        node = self._root
        for name in parts[:-1]:
            if node.owner is not None:
                raise FailedPrecondition(f"ephemeral nodes cannot have children: {path}")
            node = node.children.setdefault(name, _Node(b"", None))
        if node.owner is not None:
            raise FailedPrecondition(f"ephemeral nodes cannot have children: {path}")
        old = node.children.get(parts[-1])
        if old is not None and old.owner is None:
            raise FailedPrecondition(f"{path} is a persistent node")
        if old is not None and old.owner is not None:
            old.owner.nodes.discard(path)  # a stale registration of this name is replaced
        node.children[parts[-1]] = _Node(data, session)
        session.nodes.add(path)
        self._notify(parent_path(path))

    def _set(self, session: Session, path: str, data: bytes) -> None:
        node = self._find(path)
        if node is None or node.owner is not session:
            raise NotFound(f"this registry session has no node {path}")
        node.data = data
        self._notify(parent_path(path))

    def _delete(self, session: Session, path: str) -> None:
        node = self._find(path)
        if node is None or node.owner is not session:
            return  # gone already, or replaced by a newer registration that is not ours to delete
        self._remove(path)
        session.nodes.discard(path)
        self._notify(parent_path(path))

    def _remove(self, path: str) -> None:
        parent = self._find(parent_path(path))
        if parent is not None:
            parent.children.pop(path.rsplit("/", 1)[1], None)

    def _children(self, path: str) -> dict[str, bytes]:
        node = self._find(path)
        return {} if node is None else {name: c.data for name, c in node.children.items()}

    def _notify(self, path: str) -> None:
        snapshot = MappingProxyType(self._children(path))
        for client in list(self._clients):
            client._on_children_changed(path, snapshot)

    async def _acquire(self, session: Session, name: str, identifier: str = "") -> LockTicket:
        queue = self._locks.setdefault(name, _LockQueue())
        ticket = LockTicket(name, session, asyncio.get_running_loop().create_future(), identifier)
        session.locks.add(ticket)
        if queue.holder is None and not queue.waiting:
            queue.holder = ticket
            return ticket
        queue.waiting.append(ticket)
        try:
            await ticket.granted
        except BaseException:
            # Cancelled (or the session ended): give up the place, or the lock if it just arrived.
            if queue.holder is ticket:
                self._release(ticket)
            else:
                if ticket in queue.waiting:
                    queue.waiting.remove(ticket)
                session.locks.discard(ticket)
            raise
        return ticket

    def _release(self, ticket: LockTicket) -> None:
        queue = self._locks.get(ticket.name)
        if queue is None or queue.holder is not ticket:
            return  # released already, e.g. when its session ended under the holder
        ticket.session.locks.discard(ticket)
        queue.holder = None
        while queue.waiting:
            nxt = queue.waiting.popleft()
            if not nxt.granted.done():
                queue.holder = nxt
                nxt.granted.set_result(None)
                return
            nxt.session.locks.discard(nxt)  # cancelled, its task not yet run: skip it
        del self._locks[ticket.name]

    def _holder(self, name: str) -> str | None:
        queue = self._locks.get(name)
        return None if queue is None or queue.holder is None else queue.holder.identifier

    async def _next_epoch(self) -> int:
        # Serialised so that the file never goes backwards; the value is handed out only once it
        # is on disk, so a crash cannot make a restarted ensemble repeat it.
        async with self._epoch_lock:
            value = self._epoch + 1
            await asyncio.to_thread(_write_epoch, self._epoch_file, value)
            self._epoch = value
            return value
