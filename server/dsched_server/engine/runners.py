"""The instances this master drives: one runner each, by instance id."""

from __future__ import annotations

import asyncio
import logging

from dsched_server.engine.messages import Message
from dsched_server.engine.runner import InstanceRunner

log = logging.getLogger(__name__)


class Runners:
    """Owns the live runners. A runner removes itself when its instance finishes or is dropped."""

    def __init__(self) -> None:
        self._by_id: dict[int, InstanceRunner] = {}
        self._idle = asyncio.Event()
        self._idle.set()

    def __len__(self) -> int:
        return len(self._by_id)

    def get(self, instance_id: int) -> InstanceRunner | None:
        return self._by_id.get(instance_id)

    def ids(self) -> list[int]:
        return list(self._by_id)

    def broadcast(self, message: Message) -> None:
        """Posts ``message`` to every live runner."""
        for runner in list(self._by_id.values()):
            runner.post(message)

    def add(self, runner: InstanceRunner) -> None:
        if runner.id in self._by_id:
            raise RuntimeError(f"instance {runner.id} already has a runner")
        self._by_id[runner.id] = runner
        self._idle.clear()
        runner.start()

    def on_exit(self, runner: InstanceRunner) -> None:
        if self._by_id.get(runner.id) is runner:
            del self._by_id[runner.id]
        if not self._by_id:
            self._idle.set()

    async def wait_idle(self) -> None:
        await self._idle.wait()

    async def stop_all(self) -> None:
        await asyncio.gather(*(r.stop() for r in list(self._by_id.values())))
        self._by_id.clear()
        self._idle.set()
