"""Reports task events to the masters that own their attempts, until each event is settled.

Every event gets an id ``"<worker epoch>-<sequence>"`` and is written to the :class:`Outbox`
*before* it is queued for sending; it leaves the outbox when its master answers ACCEPTED, DUPLICATE
or REJECTED_STALE (stale rejections are counted in :attr:`Reporter.stale_rejections` and logged).
Events of an earlier incarnation found in the outbox at start are resent with their original ids and
epoch.

Ownership: each attempt's events go to the master the dispatch named until told otherwise. NOT_OWNER
with an address, or a TakeOverTask, re-targets the attempt's unsettled *and future* events to the
new owner (the outbox files are rewritten, so a restart keeps the new target). NOT_OWNER without an
address is treated like RETRY_LATER. Sending, ordering and reconnecting per master are in
:mod:`dsched_worker.stream`.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from dataclasses import fields, replace
from datetime import timedelta
from typing import Any

from dsched.backoff import Backoff
from dsched_server.protocol.ack import Ack, AckDecision
from dsched_server.protocol.attempt import AttemptKey
from dsched_server.protocol.event import AttemptReport, TaskEvent
from dsched_server.protocol.execution import TaskExecution
from dsched_server.protocol.wire.event import event_to_bytes
from dsched_worker.clock import Clock
from dsched_worker.outbox import Outbox, OutboxEntry
from dsched_worker.stream import MasterStream, Pending

log = logging.getLogger(__name__)


class Reporter:
    """Owns the outbox and one :class:`MasterStream` per master. ``start`` loads the outbox and
    begins sending; ``report`` adds events; ``stop`` waits (bounded) for the rest to settle, then
    stops."""

    def __init__(self, outbox: Outbox, *, clock: Clock, backoff: Backoff) -> None:
        self._outbox = outbox
        self._clock = clock
        self._backoff = backoff
        self.address = ""
        self.epoch = 0  # the current incarnation's epoch, for new events (set again after fencing)
        self.stale_rejections = 0
        self._seq = itertools.count(1)
        self._order = itertools.count()
        self._pending: dict[str, Pending] = {}
        self._by_key: dict[AttemptKey, list[Pending]] = {}
        self._owners: dict[AttemptKey, str] = {}  # current target of attempts with events
        self._closed: set[AttemptKey] = set()  # attempts that will emit nothing more
        self._streams: dict[str, MasterStream] = {}
        self._drained = asyncio.Event()
        self._drained.set()
        self._running = False

    @property
    def pending_count(self) -> int:
        return len(self._pending)

    def stream(self, address: str) -> MasterStream | None:
        return self._streams.get(address)

    async def start(self, *, address: str, epoch: int) -> None:
        """Loads events left by earlier incarnations and starts sending them. ``address`` is this
        worker's address, sent with every batch."""
        self.address = address
        self.epoch = epoch
        self._running = True
        loaded = self._outbox.load()
        for entry in loaded:
            self._closed.add(entry.event.key)  # no attempt of an earlier incarnation runs here
            self._owners[entry.event.key] = entry.owner_address
            self._add(Pending(entry=entry, order=next(self._order)))
        if loaded:
            log.info("resending %d events from the outbox", len(loaded))

    async def stop(self, flush_timeout: float) -> int:
        """Waits up to ``flush_timeout`` seconds for unsettled events, then closes every stream.
        Events still unsettled stay in the outbox for the next incarnation; returns how many."""
        if self._pending and flush_timeout > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._drained.wait(), flush_timeout)
        left = len(self._pending)
        self._running = False
        streams, self._streams = list(self._streams.values()), {}
        for stream in streams:
            await stream.stop()
        return left

    async def wait_drained(self, timeout: float) -> bool:
        """Waits until no event is unsettled; False if ``timeout`` passed first."""
        try:
            await asyncio.wait_for(self._drained.wait(), timeout)
        except TimeoutError:
            return False
        return True

    async def report(
        self, execution: TaskExecution, outcome: AttemptReport, *, happened: float | None = None
    ) -> TaskEvent:
        """Records an event of ``execution``'s attempt and queues it for its owner. Events of one
        attempt must be reported one after the other (await each); they are sent in that order.
        ``happened``: :func:`time.monotonic` when what it reports happened (the process started
        or exited), so that its time is that of the fact, not of this call (default: now)."""
        seq = next(self._seq)
        now = self._clock()
        if happened is not None:
            now -= timedelta(seconds=max(0.0, time.monotonic() - happened))
        event = TaskEvent(
            event_id=f"{self.epoch}-{seq}",
            task_instance_id=execution.task_instance_id,
            attempt=execution.attempt,
            workflow_instance_id=execution.workflow_instance_id,
            event_time=now,
            **_report_fields(outcome),
        )
        key = execution.key
        owner = self._owners.setdefault(key, execution.owner_address)
        entry = OutboxEntry(
            event=event,
            worker_epoch=self.epoch,
            seq=seq,
            owner_address=owner,
            event_bytes=event_to_bytes(event),
        )
        try:
            await self._outbox.put(entry)
        except OSError as exc:
            # Still send it: losing durability for one event is better than losing the event.
            log.error("cannot write event %s to the outbox: %s", event.event_id, exc)
        current = self._owners.get(key, owner)
        if current != owner:  # re-targeted while the file was being written
            entry = self._rewrite(replace(entry, owner_address=current))
        if outcome.type.terminal:
            self._closed.add(key)
        self._add(Pending(entry=entry, order=next(self._order)))
        return event

    def retarget(self, key: AttemptKey, owner_address: str) -> bool:
        """Sends the attempt's unsettled and future events to ``owner_address``; returns whether it
        had unsettled events."""
        if key in self._owners:
            self._owners[key] = owner_address
        mine = self._by_key.get(key, [])
        for p in mine:
            if p.entry.owner_address == owner_address:
                continue
            old = self._streams.get(p.entry.owner_address)
            if old is not None:
                old.discard(p)
            p.entry = self._rewrite(replace(p.entry, owner_address=owner_address))
            self._stream_for(owner_address).add(p)
        return bool(mine)

    def has_pending(self, key: AttemptKey) -> bool:
        return key in self._by_key

    def release(self, key: AttemptKey) -> None:
        """The attempt will report nothing more (finished or fenced): forget its owner once its
        events are settled."""
        self._closed.add(key)
        if key not in self._by_key:
            self._forget(key)

    def _add(self, p: Pending) -> None:
        self._pending[p.event_id] = p
        self._by_key.setdefault(p.key, []).append(p)
        self._drained.clear()
        self._stream_for(p.entry.owner_address).add(p)

    def _stream_for(self, address: str) -> MasterStream:
        stream = self._streams.get(address)
        if stream is None:
            stream = MasterStream(
                address,
                worker_address=lambda: self.address,
                on_ack=self._on_ack,
                backoff=self._backoff,
            )
            self._streams[address] = stream
            if self._running:
                stream.start()
        return stream

    def _on_ack(self, stream: MasterStream, ack: Ack) -> None:
        p = self._pending.get(ack.event_id)
        if p is None:
            return  # settled already (an answer to a resend)
        if ack.decision.final:
            if ack.decision is AckDecision.REJECTED_STALE:
                self.stale_rejections += 1
                log.warning(
                    "master %s rejected event %s (%s %s) as stale: %s",
                    stream.address,
                    ack.event_id,
                    p.key,
                    p.entry.event.type,
                    ack.reason,
                )
            self._settle(p, stream)
            return
        if p.entry.owner_address != stream.address:
            return  # a redirect from a master this event has already left
        owner = ack.owner_address
        if (
            ack.decision is AckDecision.NOT_OWNER
            and owner  # "" also stands for an address the decoder found undiallable
            and owner != stream.address
        ):
            log.info("events of %s go to %s now (redirected by %s)", p.key, owner, stream.address)
            self.retarget(p.key, owner)
            return
        log.info(
            "master %s answered %s for %s; resending later", stream.address, ack.decision, p.key
        )
        stream.hold(p.key)

    def _settle(self, p: Pending, stream: MasterStream) -> None:
        del self._pending[p.event_id]
        target = self._streams.get(p.entry.owner_address)
        for s in {stream, target}:
            if s is not None:
                s.discard(p)
                s.settled(p.key)
        self._outbox.remove(p.entry)
        mine = self._by_key[p.key]
        mine.remove(p)
        if not mine:
            del self._by_key[p.key]
            if p.key in self._closed:
                self._forget(p.key)
        if not self._pending:
            self._drained.set()

    def _forget(self, key: AttemptKey) -> None:
        self._closed.discard(key)
        self._owners.pop(key, None)

    def _rewrite(self, entry: OutboxEntry) -> OutboxEntry:
        try:
            self._outbox.rewrite(entry)
        except OSError as exc:
            log.error("cannot rewrite outbox event %s: %s", entry.event.event_id, exc)
        return entry


_REPORT_FIELDS = tuple(f.name for f in fields(AttemptReport))


def _report_fields(outcome: AttemptReport) -> dict[str, Any]:
    """The fields of ``outcome``, with a copy of its OUT parameters (the event owns its own).
    Not :func:`dataclasses.asdict`: its deep copy took 8 us an event, this 0.6."""
    found = {name: getattr(outcome, name) for name in _REPORT_FIELDS}
    found["out_params"] = dict(outcome.out_params)
    return found
