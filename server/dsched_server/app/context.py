"""What the application layer needs from the master that hosts it: the store, the clock, the
wake-ups, and ports onto the instance runners and the other masters.

Runners and peers are ports (protocols), not the engine's classes: those reach gRPC (the worker
and peer stubs), and the application layer stays free of it (an import-linter contract).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol

from dsched_server.core.ports import Clock
from dsched_server.engine.messages import Message
from dsched_server.engine.notifier import Notifier
from dsched_server.store.database import Database


class Runner(Protocol):
    """An instance runner: it takes messages in order until it is done."""

    @property
    def done(self) -> bool: ...

    def post(self, message: Message) -> None: ...


class Runners(Protocol):
    """The runners of the instances this master drives."""

    def get(self, instance_id: int) -> Runner | None: ...


class Peers(Protocol):
    """The other masters, as far as the application layer calls them."""

    async def apply_controls(self, address: str, instance_id: int, timeout: float) -> bool: ...


@dataclass(slots=True, kw_only=True)
class AppContext:
    """One per master, built by its composition root; the servicers' context extends it."""

    db: Database
    clock: Clock
    notifier: Notifier
    runners: Runners
    peers: Peers
    # This master's client address ("" until it listens): who recorded a control.
    address: str
    # The cluster listener of a live master given its address ("" when it is not live): where a
    # worker is told to send events of instances that master owns, where a nudge goes.
    owner_cluster_address: Callable[[str], str]
    epoch: Callable[[], int]
    # A schedule was created, changed or deleted here: this master's scheduler looks at once.
    schedule_changed: Callable[[int], None] = lambda _schedule_id: None
    # Schedules may not fire more often than this (a master setting).
    min_schedule_interval: timedelta = timedelta(seconds=1)
