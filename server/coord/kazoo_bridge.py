"""The one seam between kazoo's threads and asyncio.

kazoo runs threads of its own: a connection thread (which calls state listeners) and callback
threads (which complete async results and call watchers). None of our code runs on them. A kazoo
callback only hops onto the event loop (``loop.call_soon_threadsafe``); a kazoo ``*_async`` result
becomes an awaitable; the few blocking kazoo calls with no async variant (starting and stopping
the client) run in ``asyncio.to_thread``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any, TypeVar

_T = TypeVar("_T")


class LoopBridge:
    """Carries kazoo's callbacks and results onto ``loop``. Thread-safe."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop

    def call(self, callback: Callable[..., None], *args: object) -> None:
        """Schedules ``callback(*args)`` on the loop, from any thread. Dropped once the loop is
        closed: kazoo may still fire a watch or a state change while its client shuts down."""
        with contextlib.suppress(RuntimeError):
            self.loop.call_soon_threadsafe(callback, *args)

    async def result(self, async_result: Any) -> Any:
        """The value of a kazoo ``IAsyncResult`` (or its exception), awaited on the loop.

        Cancelling the await does not cancel the ZooKeeper request: it may still take effect."""
        future: asyncio.Future[Any] = self.loop.create_future()

        def settle(done: Any) -> None:  # on the loop
            if future.done():
                return  # the awaiting task was cancelled
            if done.exception is None:
                future.set_result(done.value)
            else:
                future.set_exception(done.exception)

        async_result.rawlink(lambda done: self.call(settle, done))
        return await future

    @staticmethod
    async def blocking(function: Callable[..., _T], *args: object) -> _T:
        """Runs a blocking kazoo call that has no async variant in a worker thread."""
        return await asyncio.to_thread(function, *args)
