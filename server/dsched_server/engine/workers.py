"""The master's view of live workers: registry membership, heartbeats and selection.

Membership comes from the registry's ephemeral worker nodes (``<group>@<host:port>``) and their
heartbeat data; the database is never asked who is alive. An address has one live incarnation, the
newest epoch registered for it: a worker restarted on the same address replaces the old one here
even when the registry never showed the old node go. Between two heartbeats of a worker the
directory counts the attempts this master sent it and adds them to the slots the heartbeat said were
in use, so a burst of dispatches spreads over the workers instead of piling onto whichever looked
idlest at the last heartbeat. Calls to workers go through the engine's
:class:`~dsched_server.engine.worker_client.WorkerClient`, which the directory tells when a worker
leaves (``on_left``) so that it can release what it holds for it (a channel).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta

from dsched.errors import DschedError
from dsched_server.constants import WORKERS_PATH
from dsched_server.coord.registry import Registry
from dsched_server.core.ports import Clock
from dsched_server.core.selection import Candidate, Selector, make_selector, weight
from dsched_server.heartbeat import HeartbeatInfo, ServerStatus, decode_heartbeat

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class WorkerRef:
    address: str
    group: str
    heartbeat: HeartbeatInfo

    @property
    def epoch(self) -> int:
        return self.heartbeat.epoch


def parse_member(name: str) -> tuple[str, str] | None:
    """``"<group>@<host:port>"`` -> (group, address)."""
    group, sep, address = name.partition("@")
    return (group, address) if sep and group and address else None


class WorkerDirectory:
    """Live workers by address. ``start`` subscribes to the registry, ``stop`` unsubscribes.
    ``on_left`` is called with the address of every worker that leaves."""

    def __init__(
        self,
        registry: Registry,
        clock: Clock,
        *,
        selector: str,
        warmup: timedelta,
        on_left: Callable[[str], None] = lambda _address: None,
    ) -> None:
        self._registry = registry
        self._clock = clock
        self._selectors: dict[str, Selector] = {}
        self._selector_name = selector
        self._warmup = warmup
        self._workers: dict[str, WorkerRef] = {}
        self._seen_groups: set[str] = set()  # groups with a worker since this master started
        self._sent: dict[str, int] = {}  # attempts sent since the worker's last heartbeat
        self._on_left = on_left
        self._changed = asyncio.Event()
        self._listeners: list[Callable[[], None]] = []
        self._cancel_watch: object = None

    async def start(self) -> None:
        self._cancel_watch = self._registry.watch_children(WORKERS_PATH, self._on_members)

    async def stop(self) -> None:
        if callable(self._cancel_watch):
            self._cancel_watch()

    def _on_members(self, children: Mapping[str, bytes]) -> None:
        workers: dict[str, WorkerRef] = {}
        for name, data in children.items():
            parsed = parse_member(name)
            if parsed is None:
                continue
            try:
                heartbeat = decode_heartbeat(data)
            except DschedError:
                log.warning("ignoring worker %s with an unreadable heartbeat", name)
                continue
            rival = workers.get(parsed[1])
            if rival is not None and rival.epoch > heartbeat.epoch:
                # Two nodes for one address (restarted in another group while the old node waits
                # for its session to expire): epochs only grow, the newer one is the live one.
                continue
            workers[parsed[1]] = WorkerRef(parsed[1], parsed[0], heartbeat)
        for address, worker in workers.items():
            known = self._workers.get(address)
            if known is None or known.heartbeat != worker.heartbeat:
                self._sent.pop(address, None)  # a fresh heartbeat counts them itself
        for gone in set(self._workers) - set(workers):
            self._sent.pop(gone, None)
            self._on_left(gone)
        self._workers = workers
        self._seen_groups.update(w.group for w in workers.values())
        # Wake everyone waiting for a change, then arm a fresh event for the next one.
        self._changed.set()
        self._changed = asyncio.Event()
        for listener in self._listeners:
            listener()

    def subscribe(self, listener: Callable[[], None]) -> None:
        """Calls ``listener`` after every membership or heartbeat change."""
        self._listeners.append(listener)

    def why_unavailable(self, group: str) -> str:
        """Why :meth:`pick` finds no worker for ``group``: every live one is BUSY, its workers
        left, or none ever registered (as far as this master has seen since it started; the
        groups that have live workers are named, so that a misspelt group is easy to spot)."""
        if self.has_group(group):
            return f"waiting for a worker: every live worker in group {group!r} is BUSY"
        if group in self._seen_groups:
            return f"waiting for a worker: no live worker in group {group!r} (its workers left)"
        live = sorted({w.group for w in self._workers.values()})
        return (
            f"waiting for a worker: no live worker in group {group!r}, and none has registered "
            "since this master started (groups with live workers: "
            f"{', '.join(repr(g) for g in live[:10]) or 'none'})"
        )

    def has_group(self, group: str) -> bool:
        """Whether any live worker serves ``group`` (busy or not)."""
        return any(w.group == group for w in self._workers.values())

    @property
    def live(self) -> set[tuple[str, int]]:
        """(address, epoch) of every live worker incarnation."""
        return {(w.address, w.epoch) for w in self._workers.values()}

    @property
    def members(self) -> list[WorkerRef]:
        return sorted(self._workers.values(), key=lambda w: (w.group, w.address))

    def get(self, address: str) -> WorkerRef | None:
        return self._workers.get(address)

    async def changed(self) -> None:
        """Returns at the next membership or heartbeat change."""
        await self._changed.wait()

    def pick(self, group: str) -> WorkerRef | None:
        """A NORMAL worker of ``group`` chosen by the configured selector, or None."""
        pool = [
            w
            for w in self._workers.values()
            if w.group == group and w.heartbeat.status is ServerStatus.NORMAL
        ]
        if not pool:
            return None
        selector = self._selectors.get(group)
        if selector is None:
            selector = self._selectors[group] = make_selector(self._selector_name, self._warmup)
        by_address = {w.address: w for w in pool}
        candidates = [_candidate(w, self._sent.get(w.address, 0)) for w in pool]
        chosen = selector.select(candidates, self._clock.now())
        if chosen is None:
            return None
        self._sent[chosen.address] = self._sent.get(chosen.address, 0) + 1
        return by_address[chosen.address]

    def weight_of(self, worker: WorkerRef) -> float:
        """``worker``'s effective selection weight now, as :meth:`pick` weighs it (1..100, lower
        during warm-up); 0 when it is not NORMAL, because then it receives nothing."""
        if worker.heartbeat.status is not ServerStatus.NORMAL:
            return 0.0
        return weight(_candidate(worker), self._clock.now(), self._warmup)


def _candidate(w: WorkerRef, sent: int = 0) -> Candidate:
    hb = w.heartbeat
    return Candidate(
        address=w.address,
        cpu=hb.cpu_usage,
        memory=hb.memory_usage,
        load=hb.load_average,
        slots_in_use=hb.slots_in_use,
        backlog=hb.queued + sent,
        slots_total=hb.slots_total,
        start_time=hb.start_time,
    )
