"""Watching an instance: its events in order from a cursor, and its state, as they commit
(ARCHITECTURE.md §3, step 7).

The stream is resumable: a frame carries the cursor it reached (the last event's sequence), and a
caller that lost the stream asks again from there. It ends after the frame that carries the
terminal state (unless kept open); while nothing happens, a progress frame every
``idle`` seconds says the watch is alive. A sub-workflow waiting on a child instance reads the
same frames as a client's ``run --wait``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

from dsched.errors import NotFound, Unavailable
from dsched.states import WorkflowState
from dsched_server.app.context import AppContext
from dsched_server.constants import PROGRESS_FRAME_INTERVAL_S
from dsched_server.core.records import EventRecord
from dsched_server.store import events as event_log
from dsched_server.store import instances as instance_repo
from dsched_server.store.database import Conn

BATCH = 500  # events per frame at most
DEBOUNCE_S = 0.02


@dataclass(frozen=True, slots=True)
class Frame:
    """Events after the previous frame's cursor (none in a progress frame), the cursor reached,
    and the instance's state, never older than the events."""

    events: tuple[EventRecord, ...]
    cursor: int
    state: WorkflowState


async def watch(
    ctx: AppContext,
    instance_id: int,
    after: int = 0,
    *,
    keep_open: bool = False,
    idle: float = PROGRESS_FRAME_INTERVAL_S,
    state_only: bool = False,
) -> AsyncIterator[Frame]:
    """The frames of the instance's events after the sequence ``after``; NOT_FOUND for an unknown
    instance. Ends when the server stops (the caller resumes from its cursor elsewhere).
    ``state_only``: no events are read; a frame (cursor ``after``) comes whenever the state
    changes."""
    cursor = after
    sent = False
    state: WorkflowState | None = None
    shown: WorkflowState | None = None  # the state of the last frame that was not a progress one
    while True:
        # Take the wake-up signal before reading, so a change committed after the read still
        # wakes us (see Notifier).
        signal = ctx.notifier.signal(instance_id)
        try:
            batch, state = await _read(ctx, instance_id, cursor, events=not state_only)
        except Unavailable:
            # The metadata database is away: the stream stays open (progress frames with the
            # last state) and reads again when the instance's next commit wakes it, or after
            # an interval. A commit needs the database, so that is when it is back.
            fired = await ctx.notifier.wait(signal, idle)
            if ctx.notifier.closed:
                return
            if not fired and state is not None:
                yield Frame((), cursor, state)
            continue
        if batch:
            cursor = batch[-1].sequence
            sent, shown = True, state
            yield Frame(tuple(batch), cursor, state)
            if len(batch) == BATCH:
                continue
        elif state_only and state is not shown:
            sent, shown = True, state
            yield Frame((), cursor, state)
        if state.terminal and not sent:
            # Resumed at (or past) the end of a finished instance: no events are left, but
            # the caller still learns the final state at once instead of an empty stream.
            sent = True
            yield Frame((), cursor, state)
        if state.terminal and not keep_open:
            # The terminal state and its events commit together, so nothing more is coming.
            return
        fired = await ctx.notifier.wait(signal, idle)
        if ctx.notifier.closed:
            return
        if fired:
            # Debounce: a busy instance commits hundreds of times a second; reading once per
            # window sends the same events in fewer, larger frames and keeps watchers cheap.
            await asyncio.sleep(DEBOUNCE_S)
        else:
            yield Frame((), cursor, state)


async def _read(
    ctx: AppContext, instance_id: int, cursor: int, *, events: bool = True
) -> tuple[list[EventRecord], WorkflowState]:
    """The events after ``cursor`` (up to a batch; none without ``events``) and the instance's
    state."""
    if not events:
        async with ctx.db.read() as conn:
            return [], await _state(conn, instance_id)
    async with ctx.db.read() as conn:
        # Events first, then the state: a frame's state is never older than its events
        # (another master may commit between the two reads; on PostgreSQL and MariaDB each
        # statement sees what is committed when it starts).
        batch = await event_log.after(conn, instance_id, cursor, BATCH)
        state = await _state(conn, instance_id)
        if state.terminal and len(batch) < BATCH and not ctx.db.is_sqlite:
            # The terminal state commits with its events: fetch any that landed between
            # the two reads, so the stream does not end without them. (A read on SQLite is one
            # snapshot, store/database.py: none can have landed.)
            start = batch[-1].sequence if batch else cursor
            batch += await event_log.after(conn, instance_id, start, BATCH - len(batch))
    return batch, state


async def _state(conn: Conn, instance_id: int) -> WorkflowState:
    state = await instance_repo.current_state(conn, instance_id)
    if state is None:
        raise NotFound(
            f"workflow instance {instance_id} not found",
            metadata={"instance": str(instance_id)},
        )
    return state
