"""Group commit: the batches of several runners that are ready at the same time, in one
transaction (ARCHITECTURE.md §3 step 3).

Worker events arrive in bursts (a stream message carries the events of many instances), and each
instance's runner commits its batch on its own; a transaction's fixed cost (BEGIN, COMMIT, the
pages written to SQLite's WAL again, a PostgreSQL flush) was paid once per instance. A runner now
hands its batch to :meth:`GroupCommit.commit`; a drain task started by the first batch runs one
loop turn later, when the runners woken with it have handed in theirs, and applies them all in one
transaction, in instance id order (the order every other writer locks instances in).

Every caller is answered only after the transaction holding its batch committed: what a runner
does next (dispatch, acknowledge a worker's event, answer a client) follows a durable write, as
before. Batches are independent (one per instance, each starting with its own fence), so when one
of them is refused (OwnershipLost, IllegalTransition, Aborted) the group's transaction is rolled
back, the refused batch fails by itself and the others commit again without it; a commit that
fails as a whole (a conflict) is retried batch by batch. When the database is unreachable the
outcome of the commit is unknown, and every batch of the group gets
:class:`~dsched.errors.Unavailable` as its runner would have alone.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import datetime

from dsched.errors import Unavailable
from dsched_server.store import batch as batch_store
from dsched_server.store import events as event_log
from dsched_server.store.batch import BatchWrites
from dsched_server.store.database import Database
from dsched_server.store.events import NewEvent

log = logging.getLogger(__name__)

# A bound on one transaction: a burst larger than this commits in several.
MAX_GROUP = 64

_Waiting = list[tuple[BatchWrites, "asyncio.Future[list[int]]"]]


class GroupCommit:
    """See the module docstring. ``groups`` and ``grouped`` count the transactions of more than
    one batch and the batches they held (since this process started)."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._waiting: _Waiting = []
        self._drain: asyncio.Task[None] | None = None
        self.groups = 0
        self.grouped = 0

    async def commit(self, w: BatchWrites) -> list[int]:
        """:func:`dsched_server.store.batch.commit`, in a transaction it may share."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[list[int]] = loop.create_future()
        self._waiting.append((w, future))
        if self._drain is None:
            # A task, not the first caller: a runner cancelled while it waits must not strand
            # the batches of the others.
            self._drain = loop.create_task(self._drain_all(), name="group-commit")
        return await future

    async def _drain_all(self) -> None:
        group: _Waiting = []
        try:
            while self._waiting:
                group, self._waiting = self._waiting[:MAX_GROUP], self._waiting[MAX_GROUP:]
                group.sort(key=lambda item: item[0].instance_id)
                await self._commit(group)
        except BaseException as exc:  # cancelled (shutdown) or a bug: nobody may wait for ever
            error = Unavailable("the commit was interrupted; retry")
            for _, future in [*group, *self._waiting]:
                if not future.done():
                    future.set_exception(error)
            self._waiting = []
            if not isinstance(exc, Exception):
                raise
            log.exception("group commit failed")
        finally:
            self._drain = None

    async def _commit(self, group: _Waiting) -> None:
        live = [(w, f) for w, f in group if not f.cancelled()]
        if len(live) == 1:
            (w, future), *_ = live
            try:
                _settle(future, await batch_store.commit(self._db, w))
            except Exception as exc:  # the runner decides what it means
                _settle(future, exc)
            return
        if not live:
            return
        refused: tuple[int, Exception] | None = None
        try:
            async with self._db.transaction() as conn:
                results = []
                # One INSERT for the events of every batch, after them all (each batch's fence
                # and writes still come first, in instance order).
                events: list[tuple[Sequence[NewEvent], datetime]] = []
                for i, (w, _) in enumerate(live):
                    try:
                        results.append(await batch_store.apply(conn, w, events))
                    except Exception as exc:
                        refused = (i, exc)
                        raise
                await event_log.append_written(conn, events)
        except Unavailable as exc:  # the outcome is unknown: as each runner would have alone
            for _, future in live:
                _settle(future, exc)
            return
        except Exception:  # which one, below
            if refused is None:  # the commit itself failed (a conflict): each alone
                for item in live:
                    await self._commit([item])
                return
            # The batches are independent: the refused one fails as it would have alone (and is
            # not applied twice, which would log and count its refusal twice); the others commit.
            i, error = refused
            _settle(live[i][1], error)
            await self._commit([*live[:i], *live[i + 1 :]])
            return
        self.groups += 1
        self.grouped += len(live)
        for (_, future), ids in zip(live, results, strict=True):
            _settle(future, ids)


def _settle(future: asyncio.Future[list[int]], outcome: list[int] | BaseException) -> None:
    if future.done():  # its runner was cancelled meanwhile
        return
    if isinstance(outcome, BaseException):
        future.set_exception(outcome)
    else:
        future.set_result(outcome)
