"""A bounded stop: one deadline for the whole shutdown of a server process, shared by its parts.

A stop must end in bounded time even when ZooKeeper or the database no longer answers
(ARCHITECTURE.md §8.6): every await of a stop path runs as a :meth:`Shutdown.step` that gets at
most what is left of the budget (less what the caller keeps for the steps after it), and what a step
could not finish is recorded as *abandoned*: logged at once, reported at the end, and turned into a
non-zero exit status by :mod:`dsched_server.lifecycle`. ::

    shutdown = Shutdown(30.0)
    await shutdown.step("remove the registry node", registry.unregister(node), limit=3.0)
    grace = shutdown.budget(30.0, reserve=10.0)  # what running tasks may still have

A step that overruns is cancelled and given :data:`UNWIND_S` to unwind; one that ignores the
cancellation is left behind (the process exits anyway: see ``processes``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

log = logging.getLogger(__name__)

DEFAULT_SHUTDOWN_TIMEOUT_S = 30.0
UNWIND_S = 0.5  # how long a step that overran may take to unwind after its cancellation
# Every step may run this long even past the deadline, so that something that takes no time (a
# server with no calls to end) is never abandoned for want of budget; the process keeps a margin
# beyond the parts' deadline for it.
MIN_STEP_S = 0.05


class Shutdown:
    """The deadline of one stop and the list of what it abandoned. ``timeout`` counts from now."""

    def __init__(
        self,
        timeout: float = DEFAULT_SHUTDOWN_TIMEOUT_S,
        *,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self._clock = clock or time.monotonic
        self.timeout = timeout
        self.deadline = self._clock() + timeout
        self.abandoned: list[str] = []

    def remaining(self) -> float:
        """Seconds left before the deadline (0 once it passed)."""
        return max(0.0, self.deadline - self._clock())

    def budget(self, wanted: float | None = None, *, reserve: float = 0.0) -> float:
        """What a step may take: ``wanted`` (None: no limit of its own), but no more than what is
        left once ``reserve`` seconds are kept for the steps after it; never negative."""
        left = max(0.0, self.remaining() - reserve)
        return left if wanted is None else max(0.0, min(wanted, left))

    def share(self, seconds: float, fraction: float) -> float:
        """``seconds``, but at most ``fraction`` of the whole timeout: a step that waits for an
        answer that may never come (a registry node's removal) gets its due share of a short
        timeout instead of all of it."""
        return min(seconds, self.timeout * fraction)

    def abandon(self, what: str) -> None:
        """Records (and logs) something this stop could not do."""
        self.abandoned.append(what)
        log.warning("shutdown abandoned: %s", what)

    async def step(
        self,
        what: str,
        awaitable: Awaitable[Any],
        *,
        limit: float | None = None,
        reserve: float = 0.0,
    ) -> bool:
        """Awaits ``awaitable`` for at most :meth:`budget` (``limit``, ``reserve``) seconds. True
        if it finished; False if it overran (it is cancelled) or raised, and then ``what`` is
        abandoned with the reason. ``what`` says what the step does ("remove the registry
        node")."""
        task = asyncio.ensure_future(awaitable)
        seconds = max(MIN_STEP_S, self.budget(limit, reserve=reserve))
        try:
            done, _ = await asyncio.wait({task}, timeout=seconds)
        except asyncio.CancelledError:
            task.cancel()
            raise
        if not done:
            task.cancel()
            await asyncio.wait({task}, timeout=UNWIND_S)
            self.abandon(f"{what}: not done within {seconds:.1f} s")
            return False
        exc = asyncio.CancelledError() if task.cancelled() else task.exception()
        if exc is not None:
            log.debug("shutdown step failed: %s", what, exc_info=exc)
            self.abandon(f"{what}: {_reason(exc)}")
            return False
        return True

    async def cancel(self, what: str, task: asyncio.Future[Any], *, reserve: float = 0.0) -> bool:
        """Cancels ``task`` and waits, as a :meth:`step`, for it to end (however it ends)."""
        task.cancel()
        return await self.step(what, asyncio.gather(task, return_exceptions=True), reserve=reserve)


def _reason(exc: BaseException) -> str:
    # A driver's own words for database errors (SQLAlchemy keeps them in ``orig``).
    source = getattr(exc, "orig", None) or exc
    text = str(source).strip() or type(source).__name__
    return text.splitlines()[0]
