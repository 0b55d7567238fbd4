"""LogService on the master: reads and follows task logs held by the worker that ran the task."""

from __future__ import annotations

import asyncio

import grpc

from dsched.v1 import log_service_pb2 as logs_pb
from tests.integration.api.conftest import (
    SUCCEEDED,
    WAIT_S,
    Cluster,
    Gate,
    assert_status,
    enums,
    failure,
    online_workflow,
    run_to_end,
    seconds,
    shell,
    start,
    stream_failure,
    task_instances,
    task_is,
    watch_until,
)

PRINTED = b"first line\nsecond line with \xc3\xa9\n"


async def finished_task(cluster: Cluster) -> int:
    """Runs a task that prints PRINTED (and a line on stderr); returns its task instance id."""
    script = "printf 'first line\\nsecond line with \\303\\251\\n'; echo 'to stderr' >&2"
    await online_workflow(cluster, "p", "printer", [shell("print", script)])
    inst = await start(cluster, "p", "printer")
    seen = await run_to_end(cluster, inst.id)
    assert seen.events[-1].workflow_state == SUCCEEDED
    return seen.task_instance_id("print")


async def test_read_returns_what_the_task_printed(cluster: Cluster) -> None:
    ti = await finished_task(cluster)
    reply = await cluster.logs.ReadTaskLog(logs_pb.ReadTaskLogRequest(task_instance_id=ti))
    assert PRINTED in reply.data
    assert b"to stderr" in reply.data
    assert reply.offset == 0
    assert reply.next_offset == reply.size == len(reply.data)
    assert reply.end_of_log

    # Paging by offset and length reassembles the same bytes.
    pieces: list[bytes] = []
    offset = 0
    while True:
        part = await cluster.logs.ReadTaskLog(
            logs_pb.ReadTaskLogRequest(task_instance_id=ti, offset=offset, length=7)
        )
        assert part.offset == offset and len(part.data) <= 7
        pieces.append(part.data)
        offset = part.next_offset
        if part.end_of_log:
            break
    assert b"".join(pieces) == reply.data


async def test_tail_without_follow_sends_the_log_and_ends(cluster: Cluster) -> None:
    ti = await finished_task(cluster)
    whole = (await cluster.logs.ReadTaskLog(logs_pb.ReadTaskLogRequest(task_instance_id=ti))).data
    frames = [
        f async for f in cluster.logs.TailTaskLog(logs_pb.TailTaskLogRequest(task_instance_id=ti))
    ]
    assert b"".join(f.data for f in frames) == whole
    assert frames[-1].end_of_log and frames[-1].next_offset == len(whole)
    # Resuming from a cursor sends only the rest.
    middle = len(whole) // 2
    rest = [
        f
        async for f in cluster.logs.TailTaskLog(
            logs_pb.TailTaskLogRequest(task_instance_id=ti, offset=middle)
        )
    ]
    assert rest[0].offset == middle
    assert b"".join(f.data for f in rest) == whole[middle:]


async def test_follow_streams_a_running_task_live(cluster: Cluster, gate: Gate) -> None:
    script = f"echo 'before the gate'; {gate.wait}; echo 'after the gate'"
    await online_workflow(cluster, "p", "live", [shell("talk", script)])
    inst = await start(cluster, "p", "live")
    running = await watch_until(
        cluster, inst.id, task_is("talk", enums.TASK_INSTANCE_STATE_RUNNING)
    )
    ti = running.task_instance_id("talk")

    received = b""
    frames: list[logs_pb.TailTaskLogResponse] = []
    call = cluster.logs.TailTaskLog(logs_pb.TailTaskLogRequest(task_instance_id=ti, follow=True))
    async with asyncio.timeout(WAIT_S):
        async for frame in call:
            assert frame.offset == len(received)  # contiguous: no gap, no repeat
            frames.append(frame)
            received += frame.data
            assert frame.next_offset == len(received)
            if b"before the gate" in received and not gate.path.exists():
                # The first line arrived while the task still runs; only now can it finish.
                assert b"after the gate" not in received
                gate.open()
    assert b"after the gate" in received
    assert frames[-1].end_of_log
    assert not any(f.end_of_log for f in frames[:-1])
    whole = (await cluster.logs.ReadTaskLog(logs_pb.ReadTaskLogRequest(task_instance_id=ti))).data
    assert received == whole


async def test_log_of_a_task_that_never_started(cluster: Cluster) -> None:
    # A long start delay keeps the attempt off every worker, so it has no log yet.
    await online_workflow(cluster, "p", "later", [shell("sleepy", "echo hi", delay=seconds(3600))])
    inst = await start(cluster, "p", "later")
    await watch_until(
        cluster, inst.id, task_is("sleepy", enums.TASK_INSTANCE_STATE_DELAY_EXECUTION)
    )
    [ti] = await task_instances(cluster, inst.id)
    assert ti.host == ""
    got = await failure(
        cluster.logs.ReadTaskLog(logs_pb.ReadTaskLogRequest(task_instance_id=ti.id))
    )
    assert_status(got, grpc.StatusCode.NOT_FOUND, "LOG_NOT_STARTED")
    frames = [
        f
        async for f in cluster.logs.TailTaskLog(logs_pb.TailTaskLogRequest(task_instance_id=ti.id))
    ]
    assert [(f.data, f.end_of_log) for f in frames] == [(b"", False)]
    # Following it waits for the attempt to reach a worker: the master sends progress frames.
    call = cluster.logs.TailTaskLog(logs_pb.TailTaskLogRequest(task_instance_id=ti.id, follow=True))
    try:
        frame = await asyncio.wait_for(call.read(), WAIT_S)
    finally:
        call.cancel()
    assert isinstance(frame, logs_pb.TailTaskLogResponse)
    assert (frame.data, frame.next_offset, frame.end_of_log) == (b"", 0, False)


async def test_unknown_task_instance_is_not_found(cluster: Cluster) -> None:
    got = await failure(
        cluster.logs.ReadTaskLog(logs_pb.ReadTaskLogRequest(task_instance_id=31337))
    )
    assert_status(got, grpc.StatusCode.NOT_FOUND, "NOT_FOUND")
    got = await stream_failure(
        cluster.logs.TailTaskLog(logs_pb.TailTaskLogRequest(task_instance_id=31337, follow=True))
    )
    assert_status(got, grpc.StatusCode.NOT_FOUND, "NOT_FOUND")


async def test_offset_beyond_the_end_is_out_of_range(cluster: Cluster) -> None:
    ti = await finished_task(cluster)
    got = await failure(
        cluster.logs.ReadTaskLog(logs_pb.ReadTaskLogRequest(task_instance_id=ti, offset=1 << 40))
    )
    assert_status(got, grpc.StatusCode.OUT_OF_RANGE, "OUT_OF_RANGE")
    assert got.metadata["task_instance"] == str(ti)
