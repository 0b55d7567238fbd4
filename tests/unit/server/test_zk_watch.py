"""The ZooKeeper children watch's refresh loop against a scripted connection: the order in which
kazoo's answers and watch events reach the loop, which a real server produces only by chance."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Mapping
from types import SimpleNamespace
from typing import Any

from kazoo.exceptions import NoNodeError
from kazoo.protocol.states import EventType

from dsched_server.coord.zk_watch import ChildrenWatch

PATH = "/c/nodes/workers"


class ScriptedConnection:
    """What ChildrenWatch uses of ZooKeeperConnection. ``hop`` runs the callback at once, as the
    loop does when kazoo's thread handled the event before the awaiting task resumed."""

    connects = 1

    def __init__(self) -> None:
        self.nodes: dict[str, bytes] | None = None  # the children of PATH; None: no PATH
        self.on_exists: Callable[[], None] = lambda: None

    def current_session(self) -> object:
        return self

    async def next_connect(self, connects: int) -> None:
        raise AssertionError("the connection never drops here")

    def hop(self, callback: Callable[..., None], *args: object) -> None:
        callback(*args)

    def spawn(self, coro: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        return asyncio.get_running_loop().create_task(coro, name=name)

    async def raw(self, method: str, path: str, watcher: Callable[[Any], None]) -> Any:
        if method == "get_children_async":
            if self.nodes is None:
                raise NoNodeError
            return list(self.nodes)
        if method == "exists_async":
            stat = None if self.nodes is None else SimpleNamespace()
            self.on_exists()  # between the server's answer and its arrival at the caller
            return stat
        assert method == "get_async" and self.nodes is not None
        return self.nodes[path.rsplit("/", 1)[1]], None


async def test_a_path_created_while_its_absence_is_being_confirmed_is_read() -> None:
    conn = ScriptedConnection()
    watch: ChildrenWatch
    seen: list[Mapping[str, bytes]] = []

    def created_meanwhile() -> None:
        # The exists call found no node and armed its watch; before its answer reaches the
        # refresh, the path and a member are created and the watch's CREATED event is handled.
        conn.on_exists = lambda: None
        conn.nodes = {"default@w1:1": b"beat"}
        watch._kazoo_children_event(SimpleNamespace(type=EventType.CREATED, path=PATH))

    conn.on_exists = created_meanwhile
    watch = ChildrenWatch(conn, PATH, seen.append)  # type: ignore[arg-type]
    watch.kick(full=True)
    assert watch._task is not None
    await watch._task  # the refresh ends once nothing is stale
    # The event was the only notice of the creation there will be: the refresh read it.
    assert seen[-1] == {"default@w1:1": b"beat"}
