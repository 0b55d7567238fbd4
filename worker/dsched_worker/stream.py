"""One master's event stream: the queue of events for it, what is in flight, and the reconnecting
``TaskEventService.ReportTaskEvents`` call that carries them.

The stream is opened lazily (when the first event for that master is queued) and kept open. A sender
task wakes on an :class:`asyncio.Event` whenever events are queued and writes everything queued as
one request per worker epoch (events of earlier incarnations keep the epoch they were produced
under). A reader task hands every acknowledgement to the reporter. If either side fails or the
master ends the stream, everything still in flight goes back to the queue in its original order and
the stream is reopened after a back-off delay; the master answers DUPLICATE for events it already
applied.

A request that would carry only non-terminal events (RUNNING) waits up to :data:`LINGER_S` for a
terminal one to join it (see there); a terminal event is written at once, with whatever is queued.

RETRY_LATER holds back the whole attempt (so its events stay in order) until a per-attempt back-off
timer releases it. Nothing here polls: the only waits are the wake event, the stream itself, and
back-off delays.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import itertools
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import grpc
from grpc import aio

from dsched.backoff import Backoff
from dsched.rpc import CHANNEL_OPTIONS
from dsched.v1 import task_event_service_pb2_grpc
from dsched_server.protocol.ack import Ack
from dsched_server.protocol.attempt import AttemptKey
from dsched_server.protocol.wire.ack import acks_from_proto
from dsched_server.protocol.wire.event import report_request_of_bytes

if TYPE_CHECKING:
    from dsched.v1 import task_event_service_pb2
    from dsched_worker.outbox import OutboxEntry

    Call = aio.StreamStreamCall[
        task_event_service_pb2.ReportTaskEventsRequest,
        task_event_service_pb2.ReportTaskEventsResponse,
    ]

log = logging.getLogger(__name__)

# How long queued RUNNING events wait for an attempt's end before they are written alone. A short
# task (a check, a `true`, a small SQL statement) ends within a few milliseconds of its start: its
# RUNNING and its end then travel in one request, which the master applies in one transaction and
# acknowledges in one response, instead of two of each (per one-task run: about 1 ms of the
# master's CPU and 0.3 ms of the worker's). Nothing waits on a RUNNING but the users who read it,
# and the event keeps the time it was taken (the attempt's start), so 10 ms late costs nothing.
# A terminal event is never held: the next task of a chain waits for it.
LINGER_S = 0.01


@dataclass(slots=True)
class Pending:
    """An unsettled event. ``order`` is its place in emission order (resends keep it)."""

    entry: OutboxEntry
    order: int

    @property
    def event_id(self) -> str:
        return self.entry.event.event_id

    @property
    def key(self) -> AttemptKey:
        return self.entry.event.key


def _order(p: Pending) -> int:
    return p.order


class MasterStream:
    """Events for the master at ``address``. ``on_ack`` receives each acknowledgement (with this
    stream, so stale redirects can be told apart); ``worker_address`` names the sender."""

    def __init__(
        self,
        address: str,
        *,
        worker_address: Callable[[], str],
        on_ack: Callable[[MasterStream, Ack], None],
        backoff: Backoff,
    ) -> None:
        self.address = address
        self._worker_address = worker_address
        self._on_ack = on_ack
        self._backoff = backoff
        self._queue: list[Pending] = []
        self._inflight: dict[str, Pending] = {}
        self._held: dict[AttemptKey, list[Pending]] = {}
        self._retry_delays: dict[AttemptKey, Iterator[float]] = {}
        self._timers: dict[AttemptKey, asyncio.TimerHandle] = {}
        self._wake = asyncio.Event()
        self._channel: aio.Channel | None = None
        self._task: asyncio.Task[None] | None = None
        self.sessions = 0  # streams opened so far (observability and tests)

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"dsched-events-to-{self.address}")

    async def stop(self) -> None:
        """Stops sending; events not yet settled stay with the reporter (and in the outbox)."""
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._channel is not None:
            await self._channel.close()
            self._channel = None

    def add(self, p: Pending) -> None:
        """Queues an event (behind a held attempt's earlier events, if that attempt is held)."""
        held = self._held.get(p.key)
        if held is not None:
            bisect.insort(held, p, key=_order)
            return
        bisect.insort(self._queue, p, key=_order)
        self._wake.set()

    def discard(self, p: Pending) -> None:
        """Forgets an event (settled, or moved to another master)."""
        self._inflight.pop(p.event_id, None)
        with contextlib.suppress(ValueError):
            self._queue.remove(p)
        held = self._held.get(p.key)
        if held is not None:
            with contextlib.suppress(ValueError):
                held.remove(p)

    def settled(self, key: AttemptKey) -> None:
        """An event of ``key`` was settled: its resend back-off starts over."""
        self._retry_delays.pop(key, None)

    def hold(self, key: AttemptKey) -> None:
        """Holds back every event of ``key`` here until a back-off delay has passed
        (RETRY_LATER)."""
        mine = [p for p in self._queue if p.key == key]
        mine += [p for p in self._inflight.values() if p.key == key]
        for p in mine:
            self.discard(p)
        held = self._held.setdefault(key, [])
        for p in mine:
            bisect.insort(held, p, key=_order)
        if key not in self._timers:
            delays = self._retry_delays.setdefault(key, self._backoff.delays())
            delay = next(delays, self._backoff.maximum)
            loop = asyncio.get_running_loop()
            self._timers[key] = loop.call_later(delay, self._release, key)

    def _release(self, key: AttemptKey) -> None:
        self._timers.pop(key, None)
        for p in self._held.pop(key, []):
            bisect.insort(self._queue, p, key=_order)
        self._wake.set()

    async def _run(self) -> None:
        delays = self._backoff.delays()
        while True:
            while not self._queue:  # lazily: no stream until there is something to send
                self._wake.clear()
                await self._wake.wait()
            if self._channel is None:
                self._channel = aio.insecure_channel(self.address, options=CHANNEL_OPTIONS)
            if await self._session():
                delays = self._backoff.delays()
            for p in self._inflight.values():  # unacknowledged: resend in order on the next stream
                bisect.insort(self._queue, p, key=_order)
            self._inflight.clear()
            if self._queue:
                await asyncio.sleep(next(delays, self._backoff.maximum))

    async def _session(self) -> bool:
        """Runs one stream until it fails or ends; returns whether any acknowledgement arrived."""
        assert self._channel is not None
        stub = task_event_service_pb2_grpc.TaskEventServiceStub(self._channel)
        call: Call = stub.ReportTaskEvents()
        self.sessions += 1
        acked = asyncio.Event()
        reader = asyncio.create_task(self._read(call, acked))
        writer = asyncio.create_task(self._write(call))
        try:
            await asyncio.wait({reader, writer}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            reader.cancel()
            writer.cancel()
            call.cancel()
            results = await asyncio.gather(reader, writer, return_exceptions=True)
        for result in results:
            if isinstance(result, grpc.RpcError):
                log.info("event stream to %s failed: %s", self.address, result)
            elif isinstance(result, Exception):
                log.error("event stream to %s broke", self.address, exc_info=result)
        return acked.is_set()

    async def _read(self, call: Call, acked: asyncio.Event) -> None:
        async for response in call:
            acked.set()
            for ack in acks_from_proto(response):
                self._on_ack(self, ack)
        log.info("master %s ended the event stream", self.address)

    async def _write(self, call: Call) -> None:
        while True:
            while not self._queue:
                self._wake.clear()
                await self._wake.wait()
            await self._linger()
            if not self._queue:  # discarded meanwhile (settled elsewhere, moved to another master)
                continue
            batch, self._queue = self._queue, []
            for p in batch:
                self._inflight[p.event_id] = p
            for epoch, group in itertools.groupby(batch, key=lambda p: p.entry.worker_epoch):
                events = [p.entry.wire_event() for p in group]
                await call.write(report_request_of_bytes(self._worker_address(), epoch, events))

    async def _linger(self) -> None:
        """Waits up to :data:`LINGER_S` while every queued event is non-terminal (see there)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + LINGER_S
        while self._queue and not any(p.entry.event.type.terminal for p in self._queue):
            self._wake.clear()
            left = deadline - loop.time()
            if left <= 0:
                return
            try:
                async with asyncio.timeout(left):
                    await self._wake.wait()
            except TimeoutError:
                return
