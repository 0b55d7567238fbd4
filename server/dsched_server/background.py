"""Components whose work is one long-lived loop (a scan, a sweep): the loop's task is started with
the component and cancelled and awaited when it stops (ARCHITECTURE.md §8.6)."""

from __future__ import annotations

import asyncio


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
