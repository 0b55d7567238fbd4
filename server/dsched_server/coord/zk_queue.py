"""Locks and leader elections on ZooKeeper: a queue of ephemeral sequential nodes.

The node layout is kazoo's ``Lock`` recipe (which its ``Election`` recipe also uses):
``<path>/<uuid hex>__lock__<10-digit sequence>`` holding the contender's identifier, the lowest
sequence being the holder. kazoo's ``Lock(...).contenders()`` and ``Election(...).contenders()``
read our queues, and a kazoo ``Lock`` on the same path excludes us and is excluded by us.

The recipe is run natively on the event loop rather than through kazoo's blocking ``Lock``: that
would park one thread per waiter (the default executor has a handful), and a thread blocked in
``acquire`` cannot be cancelled cleanly. Here a waiter awaits a watch on its predecessor; cancelling
it removes its node.

A sequential create that loses its connection is ambiguous (was the node made?); the uuid prefix
finds it again after the reconnect, exactly as kazoo's recipe does.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import uuid
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from kazoo.exceptions import ConnectionLoss, NoNodeError

from dsched.errors import FailedPrecondition, Unavailable

if TYPE_CHECKING:
    from dsched_server.coord.zk_connection import ZooKeeperConnection, ZooKeeperSession

CONTENDER = "__lock__"
_CONTENDER = re.compile(re.escape(CONTENDER) + r"(-?\d{10})$")


def sequence_of(name: str, suffix: str) -> int:
    """The sequence number ZooKeeper appended to ``name``, a node made by
    :func:`create_sequential` with ``suffix``."""
    return int(name.rsplit(suffix, 1)[1])


def contenders(children: Iterable[str]) -> list[str]:
    """The contender nodes among ``children``, in queue order (lowest sequence first)."""
    found = [(int(m.group(1)), name) for name in children if (m := _CONTENDER.search(name))]
    return [name for _, name in sorted(found)]


async def create_sequential(
    conn: ZooKeeperConnection, session: ZooKeeperSession, parent: str, suffix: str, data: bytes
) -> str:
    """Creates an ephemeral sequential node ``<parent>/<uuid><suffix><seq>`` in ``session`` and
    returns its name, once, even if the connection drops while the create is in flight."""
    prefix = f"{uuid.uuid4().hex}{suffix}"
    while True:
        try:
            created: str = await conn.op(
                session,
                "create_async",
                f"{parent}/{prefix}",
                data,
                ephemeral=True,
                sequence=True,
                makepath=True,
                retry=False,
            )
            return created.rsplit("/", 1)[1]
        except ConnectionLoss:  # the session survived (else Unavailable): was the node made?
            try:
                children = await conn.op(session, "get_children_async", parent)
            except NoNodeError:
                children = []
            for name in children:
                if name.startswith(prefix):
                    return str(name)


@asynccontextmanager
async def hold(conn: ZooKeeperConnection, path: str, identifier: str) -> AsyncIterator[None]:
    """Queues in ``path``, waits to be first and holds that place while the block runs."""
    session = await conn.live_session()
    node = await create_sequential(conn, session, path, CONTENDER, identifier.encode())
    mine = f"{path}/{node}"
    try:
        await _wait_turn(conn, session, path, node)
        # Granted while disconnected? Usable only once back, and only if the session survived.
        await conn.live_session(bound=session)
        yield
    finally:
        await _leave(conn, session, mine)


async def _wait_turn(
    conn: ZooKeeperConnection, session: ZooKeeperSession, path: str, node: str
) -> None:
    while True:
        queue = contenders(await conn.op(session, "get_children_async", path))
        if node not in queue:
            raise Unavailable(f"the registry session ended while waiting for {path}")
        place = queue.index(node)
        if place == 0:
            return
        moved = asyncio.Event()
        # Watch only the predecessor, not the whole queue: one waiter wakes per release. The watch
        # also fires (type NONE) when kazoo drops watches on a disconnect: then we look again.
        predecessor = f"{path}/{queue[place - 1]}"
        stat = await conn.op(session, "exists_async", predecessor, _waker(conn, moved))
        if stat is not None:
            await conn.until(session, moved)


async def _leave(conn: ZooKeeperConnection, session: ZooKeeperSession, node: str) -> None:
    """Deletes this session's queue ``node``. Awaited while connected, so that the next contender
    is served at once; while disconnected the delete waits for the reconnect in the background
    (a surviving session would otherwise hold the place forever) and the caller goes on."""
    if session.ended.is_set():
        return  # the node died with its session

    async def delete() -> None:
        with contextlib.suppress(NoNodeError, Unavailable, FailedPrecondition):
            await conn.op(session, "delete_async", node)

    task = conn.spawn(delete(), f"leave {node}")
    if conn.current_session() is session:
        await asyncio.shield(task)


def _waker(conn: ZooKeeperConnection, event: asyncio.Event) -> Callable[[Any], None]:
    """A kazoo watch callback (kazoo's thread) that sets ``event`` on the loop."""
    return lambda _: conn.hop(event.set)


async def leader(conn: ZooKeeperConnection, session: ZooKeeperSession, path: str) -> str | None:
    """The identifier held by the first contender of ``path``; None if nobody queues."""
    try:
        children = await conn.op(session, "get_children_async", path)
    except NoNodeError:
        return None
    for node in contenders(children):
        with contextlib.suppress(NoNodeError):  # it left meanwhile: the next one leads
            data, _ = await conn.op(session, "get_async", f"{path}/{node}")
            return bytes(data).decode("utf-8", "replace")
    return None
