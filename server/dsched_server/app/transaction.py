"""One unit of work of the application layer: a metadata transaction, and whom to wake once it
has committed.

Operations that change state take a :class:`Transaction` instead of opening their own, so that a
caller can add its own writes to the same commit: the gRPC handlers store the request's answer with
the change (idempotency, :mod:`dsched_server.api.idempotency`), a backfill can start many runs at
once. Wake-ups wait for the commit: a woken command consumer or watcher must find the change.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TypeVar

from dsched_server.app.context import AppContext
from dsched_server.engine.notifier import Handover
from dsched_server.store.database import Conn

T = TypeVar("T")


@dataclass(slots=True)
class Transaction:
    conn: Conn
    now: datetime
    _commands: list[tuple[int, Handover | None]] = field(default_factory=list)
    _changed: list[int] = field(default_factory=list)

    def command_added(self, instance_id: int, handover: Handover | None = None) -> None:
        """Wakes the command consumer after the commit (this master wrote the command), handing
        it ``handover`` if given (a START command with the rows written with it)."""
        self._commands.append((instance_id, handover))

    def instance_changed(self, instance_id: int) -> None:
        """Wakes the instance's watchers (and a control waiting on it) after the commit."""
        self._changed.append(instance_id)

    def wake(self, ctx: AppContext) -> None:
        for instance_id, handover in self._commands:
            ctx.notifier.notify_commands(instance_id, handover)
        for instance_id in self._changed:
            ctx.notifier.notify(instance_id)


async def transact(
    ctx: AppContext,
    work: Callable[[Transaction], Awaitable[T]],
    *,
    defer: list[Transaction] | None = None,
) -> T:
    """Runs ``work`` in one transaction; wakes what it changed once that has committed, or, given
    ``defer``, appends the committed transaction to it for the caller to wake later (a scheduler
    firing a storm of batches wakes the command consumer once, after the last)."""
    async with ctx.db.transaction() as conn:
        tx = Transaction(conn, ctx.clock.now())
        result = await work(tx)
    if defer is None:
        tx.wake(ctx)
    else:
        defer.append(tx)
    return result
