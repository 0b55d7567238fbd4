"""LogService on a real Worker: reads by offset, live follow, progress frames, end of log."""

from __future__ import annotations

import os

import grpc
import pytest
from grpc import aio

from dsched.v1 import log_service_pb2


async def test_read_task_log_by_offset(harness):
    worker = await harness.worker()
    execution = harness.execution("echo first line\necho second line")
    await harness.dispatch(worker, execution)
    await harness.master.wait_terminal(execution.task_instance_id)
    stub = harness.log_stub(worker)
    ti = execution.task_instance_id

    whole = await stub.ReadTaskLog(log_service_pb2.ReadTaskLogRequest(task_instance_id=ti))
    start = whole.data.index(b"second")
    part = await stub.ReadTaskLog(
        log_service_pb2.ReadTaskLogRequest(task_instance_id=ti, offset=start, length=6)
    )
    at_end = await stub.ReadTaskLog(
        log_service_pb2.ReadTaskLogRequest(task_instance_id=ti, offset=whole.size)
    )

    assert b"first line\nsecond line\n" in whole.data
    assert whole.end_of_log and whole.next_offset == whole.size == len(whole.data)
    assert (part.data, part.offset, part.next_offset) == (b"second", start, start + 6)
    assert not part.end_of_log
    assert at_end.data == b"" and at_end.end_of_log


async def test_tail_follow_streams_live_output_and_ends(harness, gate):
    worker = await harness.worker()
    g = gate("gate")
    execution = harness.execution(f'echo before\nread _ < "{g.path}"\necho after')
    await harness.dispatch(worker, execution)
    request = log_service_pb2.TailTaskLogRequest(
        task_instance_id=execution.task_instance_id, follow=True
    )

    frames = []
    cursor = 0
    opened = False
    async for frame in harness.log_stub(worker).TailTaskLog(request, timeout=20):
        assert frame.offset == cursor  # contiguous: every frame starts where the last ended
        cursor = frame.next_offset
        frames.append(frame)
        text = b"".join(f.data for f in frames)
        progress = [f for f in frames if not f.data and not f.end_of_log]
        if b"before\n" in text and progress and not opened:
            g.open()  # only once the stream has shown it is live and idle
            opened = True

    text = b"".join(f.data for f in frames)
    assert text.index(b"before\n") < text.index(b"after\n")
    assert frames[-1].end_of_log and not frames[-1].data
    assert sum(f.end_of_log for f in frames) == 1
    assert all(len(f.data) <= 64 * 1024 for f in frames)
    assert cursor == os.path.getsize(worker.logs.resolve(execution.task_instance_id))


async def test_tail_of_a_log_from_an_earlier_incarnation_is_complete(harness):
    first = await harness.worker()
    execution = harness.execution("printf '=%.0s' $(seq 1 100000)")  # 100 kB: several chunks
    await harness.dispatch(first, execution)
    await harness.master.wait_terminal(execution.task_instance_id)
    await first.stop(grace=1)

    second = await harness.worker()
    request = log_service_pb2.TailTaskLogRequest(
        task_instance_id=execution.task_instance_id, follow=True
    )
    frames = [f async for f in harness.log_stub(second).TailTaskLog(request, timeout=20)]

    text = b"".join(f.data for f in frames)
    assert text.count(b"=") == 100_000
    assert b"=\n[dsched] finished at " in text
    assert len(frames) >= 3
    assert frames[-1].end_of_log


async def test_unknown_log_is_not_found(harness):
    worker = await harness.worker()
    stub = harness.log_stub(worker)

    with pytest.raises(aio.AioRpcError) as read:
        await stub.ReadTaskLog(log_service_pb2.ReadTaskLogRequest(task_instance_id=123456))
    with pytest.raises(aio.AioRpcError) as tail:
        request = log_service_pb2.TailTaskLogRequest(task_instance_id=123456, follow=True)
        async for _ in stub.TailTaskLog(request):
            pass

    assert read.value.code() == grpc.StatusCode.NOT_FOUND
    assert tail.value.code() == grpc.StatusCode.NOT_FOUND


async def test_index_entries_pointing_outside_the_log_root_are_not_served(harness):
    worker = await harness.worker()
    index = harness.data_dir / "logs" / "index"
    index.mkdir(parents=True, exist_ok=True)
    secret = harness.tmp_path / "secret.txt"
    secret.write_text("top secret")
    (index / "31337.log").symlink_to(secret)
    (index / "31338.log").symlink_to("../../../secret.txt")

    for ti in (31337, 31338):
        with pytest.raises(aio.AioRpcError) as err:
            await harness.log_stub(worker).ReadTaskLog(
                log_service_pb2.ReadTaskLogRequest(task_instance_id=ti)
            )
        assert err.value.code() == grpc.StatusCode.NOT_FOUND
