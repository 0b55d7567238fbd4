"""Components whose work is one long-lived loop (a scan, a sweep): the loop's task is started with
the component and cancelled and awaited when it stops (ARCHITECTURE.md §8.6)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable


class Background:
    """Subclasses implement :meth:`_run`, the loop; it logs its own errors and never returns."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=self._name)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self) -> None:
        raise NotImplementedError


class Woken(Background):
    """A :class:`Background` whose loop makes a pass (:meth:`_pass`) each time :meth:`wake` is
    called, and ``every`` seconds without one (a fallback for a wake-up lost or never sent), when
    ``enabled()``. Wake-ups that come during a pass make one more pass, not one each."""

    def __init__(self, name: str, *, every: float, enabled: Callable[[], bool]) -> None:
        super().__init__(name)
        self._every = every
        self._enabled = enabled
        self._wake = asyncio.Event()

    def wake(self) -> None:
        self._wake.set()

    async def _run(self) -> None:
        while True:
            try:
                async with asyncio.timeout(self._every):
                    await self._wake.wait()
            except TimeoutError:
                pass
            self._wake.clear()
            if self._enabled():
                await self._pass()

    async def _pass(self) -> object:
        raise NotImplementedError
