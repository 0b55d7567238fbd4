"""LogService on a real Worker: reads by offset, live follow, progress frames, end of log."""

from __future__ import annotations

import os

import grpc
import pytest
from grpc import aio

from dsched.v1 import enums_pb2, log_service_pb2
from dsched_server.protocol.event import TaskEventType
from dsched_worker.topdir import is_top
from tests.bench.common import fs_type


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


async def test_a_log_that_cannot_be_made_fails_its_attempt_then_refuses_dispatches(harness):
    """The log file is made where the attempt starts; once that failed (a disk that refuses it),
    the worker makes each new attempt's file before accepting it and refuses the attempt if it
    cannot, so its master sends it elsewhere, until a log can be made again."""
    worker = await harness.worker()
    logs = harness.data_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    blocker = logs / "20240506"  # the day directory of the harness's submit time: a file
    blocker.write_text("not a directory")

    first = harness.execution("echo never")
    accepted = await harness.dispatch(worker, first)
    failed = await harness.master.wait_terminal(first.task_instance_id)
    refused = await harness.dispatch(worker, harness.execution("echo refused"))
    blocker.unlink()
    healed = harness.execution("echo healed")
    healed_reply = await harness.dispatch(worker, healed)
    healed_done = await harness.master.wait_terminal(healed.task_instance_id)
    after = harness.execution("echo after")
    after_reply = await harness.dispatch(worker, after)
    after_done = await harness.master.wait_terminal(after.task_instance_id)

    assert accepted.outcome == enums_pb2.DISPATCH_OUTCOME_ACCEPTED
    assert failed.type is TaskEventType.FAILED
    assert failed.message.startswith("could not start: cannot create the task log")
    assert refused.outcome == enums_pb2.DISPATCH_OUTCOME_REJECTED_UNAVAILABLE
    assert "cannot create log" in refused.reason
    assert healed_reply.outcome == after_reply.outcome == enums_pb2.DISPATCH_OUTCOME_ACCEPTED
    assert healed_done.type is after_done.type is TaskEventType.SUCCEEDED
    for done in (healed, after):
        stub = harness.log_stub(worker)
        request = log_service_pb2.ReadTaskLogRequest(task_instance_id=done.task_instance_id)
        assert (await stub.ReadTaskLog(request)).data.endswith(b"exit code 0\n")
    # nothing ran for the attempts that had no log
    assert harness.master.types_of(first.task_instance_id) == [TaskEventType.FAILED]


async def test_the_worker_marks_its_log_and_working_directory_roots_as_top_directories(harness):
    worker = await harness.worker()

    roots = (worker.logs.root, worker.workdirs.root)

    assert all(root.is_dir() for root in roots)
    if fs_type(str(harness.data_dir)) in ("ext2", "ext3", "ext4"):
        assert all(is_top(root) for root in roots)
