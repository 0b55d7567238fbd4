"""In-process wake-ups: watchers of an instance, and the command consumer.

A waiter takes the current :class:`asyncio.Event` of a key, re-checks the store, then waits on it;
``notify`` sets that event and installs a fresh one, so no notification between the check and the
wait is lost.

Nothing here outlives its waiters: the notifier holds each key's event weakly, so a key's entry
goes away with the last waiter holding its event (a watch of a finished instance is never
notified again; holding its event strongly kept about 1 KB per instance ever watched).
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Collection
from dataclasses import dataclass

from dsched_server.core.records import CommandRecord, InstanceRecord, WorkflowRecord

COMMANDS = 0  # key of the command-queue signal (instance ids start at 1)


LOCAL_HINTS_MAX = 10_000
# A handover holds a few KB (the instance's options, the workflow record); past this many waiting
# to be claimed (a storm of fire times), a command is a hint again and the consumer reads it.
HANDOVERS_MAX = 1_000


@dataclass(frozen=True, slots=True)
class Handover:
    """A START command this master committed, with the rows its transaction wrote and the
    workflow version it read: the consumer claims it without reading them again. Until the
    command is deleted nothing else writes its instance (a stop deletes the command with it,
    and the workflow version is immutable), so they are still the stored ones when the claim's
    conditional DELETE finds the command; when it does not, the claim backs off as from a scan."""

    command: CommandRecord
    instance: InstanceRecord
    workflow: WorkflowRecord


class Notifier:
    def __init__(self) -> None:
        # Weak values: an entry lives exactly as long as some waiter holds its event, which is
        # also the only time a notification has anyone to wake.
        self._events: weakref.WeakValueDictionary[int, asyncio.Event] = (
            weakref.WeakValueDictionary()
        )
        self.closed = False
        # Instances whose command this master wrote itself (a client asked *this* master): the
        # consumer claims them whatever their slot, because this master is awake and the client
        # already chose it. Bounded: a lost hint only means the slot owner claims the command.
        self.local_commands: set[int] = set()
        # Such commands with what their transaction wrote, by instance id, oldest first; the
        # consumer claims them without reading the queue. Bounded like the hints.
        self.handovers: dict[int, Handover] = {}
        # A command was written without a handover (or one could not be claimed): the consumer's
        # next round reads the queue, not only the handovers.
        self.scan_wanted = False
        # Whether the consumer claims handovers now. While it does not (paused, busy), a command
        # is a hint: a handover would only hold its rows in memory until another master claimed
        # it, and then cost a claim that fails.
        self.handovers_open = True

    def __len__(self) -> int:
        """Instances some waiter holds a signal of (the command consumer's is not one)."""
        return len(self._events) - (COMMANDS in self._events)

    def close(self) -> None:
        """Shutdown: wakes every waiter for good, so streams can end before the server stops
        (a stream the server has to cancel is logged by grpcio as an error)."""
        self.closed = True
        for event in list(self._events.values()):
            event.set()
        self._events.clear()

    def signal(self, key: int) -> asyncio.Event:
        """The event the next ``notify(key)`` sets (already set once closed). The caller keeps
        it (a local variable) for as long as it may wait on it."""
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

    def notify_commands(
        self, instance_id: int | None = None, handover: Handover | None = None
    ) -> None:
        """Wakes the command consumer; ``instance_id`` names a command written by this master,
        ``handover`` (of that instance) what it needs to claim it without reading the queue."""
        if handover is not None and self.handovers_open and len(self.handovers) < HANDOVERS_MAX:
            self.handovers[handover.instance.id] = handover
        else:
            self.hint(instance_id)
        self.notify(COMMANDS)

    def hint(self, *instance_ids: int | None) -> None:
        """The next round of the consumer reads the queue, and claims these instances' commands
        (this master's) whatever their slot; a hint past the bound is dropped (see
        ``local_commands``). Wakes nobody."""
        self.scan_wanted = True
        for instance_id in instance_ids:
            if instance_id is not None and len(self.local_commands) < LOCAL_HINTS_MAX:
                self.local_commands.add(instance_id)

    def take_scan_wanted(self) -> bool:
        """Whether a command was written that only a read of the queue finds; resets it."""
        wanted, self.scan_wanted = self.scan_wanted, False
        return wanted

    def close_handovers(self) -> None:
        """The consumer stops claiming (paused, busy): the commands handed over become hints, and
        new ones are hints until it claims again (``handovers_open``)."""
        self.handovers_open = False
        if not self.handovers:
            return
        self.hint(*self.handovers)
        self.handovers.clear()

    def forget_hints(
        self, hinted: Collection[int], pending: Collection[int], handed: Collection[int] = ()
    ) -> None:
        """Drops the hints in ``hinted`` and the handovers in ``handed`` (both taken before a
        read of the whole command queue) whose command that read did not find: another master
        claimed it (or a stop deleted it). Both are added after their command commits, so one
        taken before the read names a command the read would have seen; kept, such hints would
        fill the set up to its bound and then stop every new one, and such handovers would each
        cost a claim bound to fail."""
        found = set(pending)
        self.local_commands.difference_update(set(hinted) - found)
        for instance_id in set(handed) - found:
            self.handovers.pop(instance_id, None)

    async def wait(self, event: asyncio.Event, timeout: float) -> bool:
        """Waits for ``event`` up to ``timeout`` seconds; True if it fired."""
        try:
            async with asyncio.timeout(timeout):
                await event.wait()
            return True
        except TimeoutError:
            return False
