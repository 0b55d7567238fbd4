"""KillTask and TakeOverTask against a real Worker: whole process groups die, owners move."""

from __future__ import annotations

from dsched.v1 import log_service_pb2, worker_service_pb2
from dsched_server.protocol.ack import Ack, AckDecision
from dsched_server.protocol.event import TaskEventType
from dsched_worker.outbox import stored_entries

KILLED, RUNNING, SUCCEEDED = TaskEventType.KILLED, TaskEventType.RUNNING, TaskEventType.SUCCEEDED

# Background children, a subshell with its own children, and a nested bash: all in the task's group.
SPAWNER = """
sleep 1000 &
( sleep 1000; echo never ) &
bash -c 'sleep 1000; echo never' &
echo ready
wait
"""


async def follow_until(harness, worker, task_instance_id: int, needle: bytes) -> None:
    stub = harness.log_stub(worker)
    seen = b""
    request = log_service_pb2.TailTaskLogRequest(task_instance_id=task_instance_id, follow=True)
    async for frame in stub.TailTaskLog(request, timeout=20):
        seen += frame.data
        if needle in seen:
            return
    raise AssertionError(f"log ended without {needle!r}: {seen!r}")


async def test_kill_kills_the_whole_process_group(harness, live_members, group_gone):
    worker = await harness.worker()
    execution = harness.execution(SPAWNER)
    await harness.dispatch(worker, execution)
    await follow_until(harness, worker, execution.task_instance_id, b"ready\n")
    await harness.master.wait_for(lambda m: len(m.received) >= 1)
    pgid = harness.master.received[0].event.pid
    assert len(live_members(pgid)) >= 4  # bash and the three children it forked before "ready"

    response = await harness.stub(worker).KillTask(
        worker_service_pb2.KillTaskRequest(
            task_instance_id=execution.task_instance_id, attempt=1, reason="stop requested"
        )
    )
    done = await harness.master.wait_terminal(execution.task_instance_id)

    assert response.found
    assert done.type is KILLED
    assert done.exit_code == 128 + 15
    assert done.message == "stop requested"
    await group_gone(pgid)


async def test_kill_escalates_to_sigkill_after_the_grace(harness, group_gone):
    worker = await harness.worker(kill_grace=0.3)
    execution = harness.execution("trap '' TERM\necho ready\nsleep 1000 & wait; wait")
    await harness.dispatch(worker, execution)
    await follow_until(harness, worker, execution.task_instance_id, b"ready\n")
    await harness.master.wait_for(lambda m: len(m.received) >= 1)
    pgid = harness.master.received[0].event.pid

    await harness.stub(worker).KillTask(
        worker_service_pb2.KillTaskRequest(task_instance_id=execution.task_instance_id, attempt=1)
    )
    done = await harness.master.wait_terminal(execution.task_instance_id)

    assert done.type is KILLED
    assert done.exit_code == 128 + 9
    await group_gone(pgid)


async def test_kill_of_a_queued_attempt_never_starts_it(harness, gate):
    worker = await harness.worker(slots=1)
    g = gate("gate")
    blocker = harness.execution(f'read _ < "{g.path}"')
    marker = harness.tmp_path / "started"
    queued = harness.execution(f'touch "{marker}"')
    await harness.dispatch(worker, blocker)
    await harness.dispatch(worker, queued)

    response = await harness.stub(worker).KillTask(
        worker_service_pb2.KillTaskRequest(task_instance_id=queued.task_instance_id, attempt=1)
    )
    done = await harness.master.wait_terminal(queued.task_instance_id)
    g.open()
    await harness.master.wait_terminal(blocker.task_instance_id)

    assert response.found
    assert done.type is KILLED
    assert harness.master.types_of(queued.task_instance_id) == [KILLED]
    assert not marker.exists()


async def test_kill_of_unknown_or_finished_attempts_is_not_found(harness):
    worker = await harness.worker()
    execution = harness.execution("true")
    await harness.dispatch(worker, execution)
    await harness.master.wait_terminal(execution.task_instance_id)
    stub = harness.stub(worker)

    finished = await stub.KillTask(
        worker_service_pb2.KillTaskRequest(task_instance_id=execution.task_instance_id, attempt=1)
    )
    unknown = await stub.KillTask(
        worker_service_pb2.KillTaskRequest(task_instance_id=999_999, attempt=1)
    )

    assert not finished.found
    assert not unknown.found


async def test_take_over_retargets_pending_and_future_events(harness, gate):
    worker = await harness.worker()
    old, new = harness.master, await harness.extra_master()
    old.decide = lambda event: None  # the old owner is stuck: it never acknowledges
    g = gate("gate")
    execution = harness.execution(f'read _ < "{g.path}"')
    await harness.dispatch(worker, execution)
    await old.wait_for(lambda m: len(m.received) == 1)

    response = await harness.stub(worker).TakeOverTask(
        worker_service_pb2.TakeOverTaskRequest(
            task_instance_id=execution.task_instance_id,
            attempt=1,
            owner_address=new.address,
            owner_epoch=10,
        )
    )
    await new.wait_for(lambda m: len(m.applied) == 1)
    g.open()
    await new.wait_terminal(execution.task_instance_id)
    unknown = await harness.stub(worker).TakeOverTask(
        worker_service_pb2.TakeOverTaskRequest(
            task_instance_id=424242, attempt=1, owner_address=new.address, owner_epoch=10
        )
    )

    assert response.found
    assert not unknown.found
    assert new.types_of(execution.task_instance_id) == [
        TaskEventType.RUNNING,
        TaskEventType.SUCCEEDED,
    ]
    assert [r.event.type for r in old.received] == [RUNNING]
    assert await worker.reporter.wait_drained(5)


async def test_not_owner_redirects_to_the_named_master(harness, gate):
    worker = await harness.worker()
    old, new = harness.master, await harness.extra_master()
    old.decide = lambda event: Ack(
        event_id=event.event_id, decision=AckDecision.NOT_OWNER, owner_address=new.address
    )
    g = gate("gate")
    execution = harness.execution(f'read _ < "{g.path}"')
    await harness.dispatch(worker, execution)

    await new.wait_for(lambda m: len(m.applied) == 1)
    g.open()
    await new.wait_terminal(execution.task_instance_id)

    assert new.types_of(execution.task_instance_id) == [
        TaskEventType.RUNNING,
        TaskEventType.SUCCEEDED,
    ]
    assert [r.event.type for r in old.received] == [RUNNING]  # later ones go direct
    assert await worker.reporter.wait_drained(5)
    assert stored_entries(harness.data_dir / "outbox") == []


async def test_take_over_of_a_queued_attempt_sends_all_its_events_to_the_new_owner(harness, gate):
    worker = await harness.worker(slots=1)
    new = await harness.extra_master()
    g = gate("gate")
    blocker = harness.execution(f'read _ < "{g.path}"')
    queued = harness.execution("echo queued")
    await harness.dispatch(worker, blocker)
    await harness.dispatch(worker, queued)

    response = await harness.stub(worker).TakeOverTask(
        worker_service_pb2.TakeOverTaskRequest(
            task_instance_id=queued.task_instance_id,
            attempt=1,
            owner_address=new.address,
            owner_epoch=11,
        )
    )
    g.open()
    await new.wait_terminal(queued.task_instance_id)

    assert response.found
    assert new.types_of(queued.task_instance_id) == [RUNNING, SUCCEEDED]
    assert harness.master.types_of(queued.task_instance_id) == []
    # Its log says it waited, right after the header (written with it: one write).
    lines = worker.logs.path_for(queued).read_text().splitlines()
    assert lines[1].startswith("[dsched] accepted by worker ")
    assert lines[2] == "[dsched] waiting for a free slot (1 in use)"
    assert lines[3].startswith("[dsched] started at ")
