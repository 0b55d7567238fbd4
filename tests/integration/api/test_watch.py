"""WatchWorkflowInstance: ordered events, the end after the terminal event, resumable cursors."""

from __future__ import annotations

import asyncio

import grpc

from tests.integration.api.conftest import (
    FAILED,
    SUCCEEDED,
    TERMINAL,
    WAIT_S,
    Cluster,
    Gate,
    Watched,
    assert_status,
    chain,
    enums,
    online_workflow,
    pb,
    run_to_end,
    shell,
    start,
    stream_failure,
    task_is,
    watch_to_end,
    watch_until,
)


def check_frames(seen: Watched) -> None:
    """Sequences strictly increase across frames; every frame's cursor is its last sequence."""
    sequences = [e.sequence for e in seen.events]
    assert sequences == sorted(set(sequences)), sequences
    assert seen.cursors == sorted(seen.cursors)
    assert seen.cursor == sequences[-1]


async def test_history_is_ordered_and_ends_after_the_terminal_event(cluster: Cluster) -> None:
    await online_workflow(cluster, "p", "w", chain("a", "b", "c"))
    started = await start(cluster, "p", "w")
    seen = await run_to_end(cluster, started.id)
    check_frames(seen)
    assert all(e.workflow_instance_id == started.id for e in seen.events)
    # Exactly one terminal event, and it is the last one.
    terminal = [e for e in seen.events if not e.task_instance_id and e.workflow_state in TERMINAL]
    assert terminal == [seen.events[-1]]
    assert seen.state == SUCCEEDED
    assert seen.workflow_states()[0] == enums.WORKFLOW_INSTANCE_STATE_SUBMITTED
    for name in ("a", "b", "c"):
        states = seen.task_states(name)
        assert states[0] == enums.TASK_INSTANCE_STATE_SUBMITTED
        assert states[-1] == enums.TASK_INSTANCE_STATE_SUCCEEDED
        assert enums.TASK_INSTANCE_STATE_RUNNING in states
    order = [
        e.task_name for e in seen.events if e.task_state == enums.TASK_INSTANCE_STATE_SUCCEEDED
    ]
    assert order == ["a", "b", "c"]
    for event in seen.events:
        assert event.HasField("create_time") and event.kind
        assert (event.task_instance_id == 0) == (event.task_name == "")


async def test_resume_from_every_cursor_has_no_repeats_or_gaps(cluster: Cluster) -> None:
    await online_workflow(cluster, "p", "w", chain("a", "b"))
    started = await start(cluster, "p", "w")
    full = await run_to_end(cluster, started.id)
    sequences = [e.sequence for e in full.events]
    for i, cursor in enumerate(sequences[:-1]):
        rest = await watch_to_end(cluster, started.id, after=cursor)
        assert [e.sequence for e in rest.events] == sequences[i + 1 :]
        assert [e.SerializeToString() for e in rest.events] == [
            e.SerializeToString() for e in full.events[i + 1 :]
        ]
    # From the end of a finished instance (or past it): no events, but one frame with the final
    # state at the cursor asked for, then the end.
    for cursor in (sequences[-1], sequences[-1] + 1000):
        last = await watch_to_end(cluster, started.id, after=cursor)
        assert (last.events, last.cursors, last.states) == ([], [cursor], [SUCCEEDED])


async def test_resume_at_the_end_of_a_failed_instance_reports_failed(cluster: Cluster) -> None:
    await online_workflow(cluster, "p", "w", [shell("a", "exit 3")])
    started = await start(cluster, "p", "w")
    full = await run_to_end(cluster, started.id)
    assert full.state == FAILED
    last = await watch_to_end(cluster, started.id, after=full.cursor)
    assert (last.events, last.cursors, last.states) == ([], [full.cursor], [FAILED])


async def test_resume_a_live_stream_after_hanging_up(cluster: Cluster, gate: Gate) -> None:
    await online_workflow(cluster, "p", "w", [shell("a", gate.wait), shell("b", "true", ["a"])])
    started = await start(cluster, "p", "w")
    head = await watch_until(
        cluster, started.id, task_is("a", enums.TASK_INSTANCE_STATE_RUNNING)
    )  # hangs up here, while the instance runs
    check_frames(head)
    gate.open()
    tail = await run_to_end(cluster, started.id, after=head.cursor)
    assert tail.events[0].sequence > head.cursor
    full = await run_to_end(cluster, started.id)
    joined = [e.sequence for e in [*head.events, *tail.events]]
    assert joined == [e.sequence for e in full.events]


async def test_concurrent_instances_stream_only_their_own_events(cluster: Cluster) -> None:
    await online_workflow(cluster, "p", "w", chain("a", "b", "c"))
    first, second = await start(cluster, "p", "w"), await start(cluster, "p", "w")
    seen_first, seen_second = await asyncio.gather(
        run_to_end(cluster, first.id), run_to_end(cluster, second.id)
    )
    for inst, seen in ((first, seen_first), (second, seen_second)):
        check_frames(seen)
        assert {e.workflow_instance_id for e in seen.events} == {inst.id}
        assert seen.events[-1].workflow_state == SUCCEEDED
    assert not {e.sequence for e in seen_first.events} & {e.sequence for e in seen_second.events}


async def test_keep_open_stays_open_with_progress_frames(cluster: Cluster) -> None:
    await online_workflow(cluster, "p", "w", chain("a"))
    started = await start(cluster, "p", "w")
    done = await run_to_end(cluster, started.id)
    request = pb.WatchWorkflowInstanceRequest(
        id=started.id, after_sequence=done.cursor, keep_open=True
    )
    call = cluster.stub.WatchWorkflowInstance(request)
    try:
        # The first frame states the final state at once; then, as nothing new happens, progress
        # frames follow (every few seconds) and the stream stays open.
        frames = [await asyncio.wait_for(call.read(), WAIT_S) for _ in range(2)]
    finally:
        call.cancel()
    for frame in frames:
        assert isinstance(frame, pb.WatchWorkflowInstanceResponse)
        assert list(frame.events) == []
        assert (frame.cursor, frame.state) == (done.cursor, SUCCEEDED)


async def test_watch_of_an_unknown_instance_is_not_found(cluster: Cluster) -> None:
    got = await stream_failure(
        cluster.stub.WatchWorkflowInstance(pb.WatchWorkflowInstanceRequest(id=424242))
    )
    assert_status(got, grpc.StatusCode.NOT_FOUND, "NOT_FOUND")
    assert got.metadata == {"instance": "424242"}


async def test_a_state_only_watch_carries_states_and_no_events(cluster: Cluster) -> None:
    await online_workflow(cluster, "p", "w", chain("a", "b"))
    started = await start(cluster, "p", "w")
    request = pb.WatchWorkflowInstanceRequest(id=started.id, state_only=True)

    frames = []
    async with asyncio.timeout(WAIT_S):
        async for frame in cluster.stub.WatchWorkflowInstance(request):
            frames.append(frame)

    assert frames and all(not f.events and f.cursor == 0 for f in frames)
    assert frames[-1].state == SUCCEEDED
    assert not any(f.state in TERMINAL for f in frames[:-1])  # it ends with the terminal state
