"""The one seam between kazoo's threads and asyncio.

kazoo runs threads of its own: a connection thread (which calls state listeners) and callback
threads (which complete async results and call watchers). None of our code runs on them. A kazoo
callback only hops onto the event loop (``loop.call_soon_threadsafe``); a kazoo ``*_async`` result
becomes an awaitable; the few blocking kazoo calls with no async variant run in another thread:
starting the client in ``asyncio.to_thread``, stopping it in a daemon thread of its own that is
abandoned if it does not return in time (kazoo's stop waits for its connection thread, which may be
stuck in a connection attempt to a server that does not answer, and the interpreter's exit must not
wait for it).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
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

    @staticmethod
    async def abandonable(function: Callable[[], object], *, timeout: float, name: str) -> bool:
        """Runs a blocking ``function`` in a daemon thread of its own; True once it returned (its
        exception is raised), False if it had not returned within ``timeout`` seconds. The
        thread is then abandoned: being a daemon, it never holds up the process's exit."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()

        def settle(exc: BaseException | None) -> None:  # on the loop
            if not done.done():
                if exc is None:
                    done.set_result(None)
                else:
                    done.set_exception(exc)

        def target() -> None:
            error: BaseException | None = None
            try:
                function()
            except BaseException as exc:  # handed to the loop, which raises it in the caller
                error = exc
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
                loop.call_soon_threadsafe(settle, error)

        threading.Thread(target=target, name=name, daemon=True).start()
        try:
            await asyncio.wait_for(asyncio.shield(done), timeout)
        except TimeoutError:
            return False
        return True
