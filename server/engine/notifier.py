"""In-process wake-ups: watchers of an instance, and the command consumer.

A waiter takes the current :class:`asyncio.Event` of a key, re-checks the store, then waits on it;
``notify`` sets that event and installs a fresh one, so no notification between the check and the
wait is lost.
"""

from __future__ import annotations

import asyncio

COMMANDS = 0  # key of the command-queue signal (instance ids start at 1)


class Notifier:
    def __init__(self) -> None:
        self._events: dict[int, asyncio.Event] = {}
        self.closed = False

    def close(self) -> None:
        """Shutdown: wakes every waiter for good, so streams can end before the server stops
        (a stream the server has to cancel is logged by grpcio as an error)."""
        self.closed = True
        for event in self._events.values():
            event.set()
        self._events.clear()

    def signal(self, key: int) -> asyncio.Event:
        """The event the next ``notify(key)`` sets (already set once closed)."""
        event = self._events.get(key)
        if event is None:
            event = asyncio.Event()
            if self.closed:
                event.set()
            else:
                self._events[key] = event
        return event

    def notify(self, key: int) -> None:
        event = self._events.pop(key, None)
        if event is not None:
            event.set()

    def notify_commands(self) -> None:
        self.notify(COMMANDS)

    async def wait(self, event: asyncio.Event, timeout: float) -> bool:
        """Waits for ``event`` up to ``timeout`` seconds; True if it fired."""
        try:
            async with asyncio.timeout(timeout):
                await event.wait()
            return True
        except TimeoutError:
            return False
