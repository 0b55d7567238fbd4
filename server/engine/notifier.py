"""In-process wake-ups: watchers of an instance, and the command consumer.

A waiter takes the current :class:`asyncio.Event` of a key, re-checks the store, then waits on it;
``notify`` sets that event and installs a fresh one, so no notification between the check and the
wait is lost.
"""

from __future__ import annotations

import asyncio

COMMANDS = 0  # key of the command-queue signal (instance ids start at 1)


LOCAL_HINTS_MAX = 10_000


class Notifier:
    def __init__(self) -> None:
        self._events: dict[int, asyncio.Event] = {}
        self.closed = False
        # Instances whose command this master wrote itself (a client asked *this* master): the
        # consumer claims them whatever their slot, because this master is awake and the client
        # already chose it. Bounded: a lost hint only means the slot owner claims the command.
        self.local_commands: set[int] = set()

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

    def notify_commands(self, instance_id: int | None = None) -> None:
        """Wakes the command consumer; ``instance_id`` names a command written by this master."""
        if instance_id is not None and len(self.local_commands) < LOCAL_HINTS_MAX:
            self.local_commands.add(instance_id)
        self.notify(COMMANDS)

    async def wait(self, event: asyncio.Event, timeout: float) -> bool:
        """Waits for ``event`` up to ``timeout`` seconds; True if it fired."""
        try:
            async with asyncio.timeout(timeout):
                await event.wait()
            return True
        except TimeoutError:
            return False
