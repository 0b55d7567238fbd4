"""Watching an instance through the application layer: frames of events and state, resumable,
ended by the terminal state."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from dsched.errors import NotFound
from dsched.states import TaskState, WorkflowState
from dsched_server.app import controls, watches
from dsched_server.app.context import AppContext

from .conftest import make_workflow, ran, started

W = WorkflowState
WAIT_S = 10.0  # a bound on every wait, never a measurement


async def test_a_finished_instance_streams_its_events_then_ends(app: AppContext) -> None:
    await make_workflow(app)
    instance, _ = await ran(app, W.FAILED, {"extract": TaskState.FAILED})

    frames = [f async for f in watches.watch(app, instance.id)]

    (frame,) = frames
    assert [(e.workflow_state, e.message) for e in frame.events] == [
        (W.SUBMITTED, "submitted"),
        (W.FAILED, "end"),
    ]
    assert frame.cursor == frame.events[-1].sequence
    assert frame.state is W.FAILED

    # Resumed from there: nothing is left, but the final state arrives at once.
    (tail,) = [f async for f in watches.watch(app, instance.id, frame.cursor)]
    assert (tail.events, tail.cursor, tail.state) == ((), frame.cursor, W.FAILED)


async def test_a_live_instance_streams_what_commits_until_it_ends(app: AppContext) -> None:
    await make_workflow(app)
    instance = await started(app)
    stream = watches.watch(app, instance.id, idle=0.01)
    async with asyncio.timeout(WAIT_S):
        first = await anext(stream)
        assert [e.message for e in first.events] == ["submitted"]
        progress = await anext(stream)  # nothing happened: the watch says it is alive
        assert (progress.events, progress.cursor, progress.state) == ((), first.cursor, W.SUBMITTED)

        await controls.stop(app, instance.id, "stop-1")

        rest = [f async for f in stream]
    events = [e for f in rest for e in f.events]
    assert [e.workflow_state for e in events] == [W.STOPPED]
    assert rest[-1].state is W.STOPPED


async def test_an_unknown_instance_is_not_found(app: AppContext) -> None:
    with pytest.raises(NotFound):
        await anext(watches.watch(app, 404))


async def test_a_state_only_watch_sends_each_state_once_and_no_events(app: AppContext) -> None:
    await make_workflow(app)
    instance = await started(app)
    stream = watches.watch(app, instance.id, idle=0.01, state_only=True)
    async with asyncio.timeout(WAIT_S):
        first = await anext(stream)
        progress = await anext(stream)  # nothing happened: the watch says it is alive
        await controls.stop(app, instance.id, "stop-1")
        rest = [f async for f in stream]

    assert (first.events, first.cursor, first.state) == ((), 0, W.SUBMITTED)
    assert (progress.events, progress.cursor, progress.state) == ((), 0, W.SUBMITTED)
    assert all(not f.events and f.cursor == 0 for f in rest)
    states = [s for s, _ in itertools.groupby(f.state for f in [first, *rest])]
    assert states[0] is W.SUBMITTED and states[-1] is W.STOPPED
    assert len(states) == len(set(states))  # no state comes back

    # A finished instance: one frame with its final state, then the end.
    (done,) = [f async for f in watches.watch(app, instance.id, state_only=True)]
    assert (done.events, done.state) == ((), W.STOPPED)
    with pytest.raises(NotFound):
        await anext(watches.watch(app, 404, state_only=True))
