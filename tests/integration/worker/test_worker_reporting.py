"""Event delivery: the outbox, resends after stream failures and restarts, and master decisions."""

from __future__ import annotations

from collections import Counter

from dsched_server.protocol.ack import Ack, AckDecision
from dsched_server.protocol.event import TaskEventType
from dsched_worker import stream
from dsched_worker.outbox import stored_entries

RUNNING, SUCCEEDED = TaskEventType.RUNNING, TaskEventType.SUCCEEDED


def outbox_files(harness) -> list[str]:
    """The ids of the events the outbox stores (read from its log, as a restart would)."""
    return [e.event.event_id for e in stored_entries(harness.data_dir / "outbox")]


async def test_broken_stream_resends_everything_unacknowledged(harness):
    worker = await harness.worker()
    master = harness.master
    master.break_after = 3  # abort the stream as the third event arrives (it is never acked)
    executions = [harness.execution(f"echo {i}") for i in range(4)]

    for execution in executions:
        await harness.dispatch(worker, execution)
    await master.wait_for(lambda m: len(m.applied) == 8)

    assert master.streams >= 2
    sent = Counter(r.event.event_id for r in master.received)
    assert len(sent) == 8 and max(sent.values()) >= 2  # every id arrived, some of them twice
    for execution in executions:
        assert master.types_of(execution.task_instance_id) == [RUNNING, SUCCEEDED]
    assert await worker.reporter.wait_drained(5)
    assert outbox_files(harness) == []


async def test_outbox_survives_a_restart(harness):
    master = harness.master
    master.decide = lambda event: None  # receive, never acknowledge
    first = await harness.worker()
    execution = harness.execution("echo hi")
    await harness.dispatch(first, execution)
    await master.wait_terminal(execution.task_instance_id)
    old_epoch = first.epoch
    sent_ids = [r.event.event_id for r in master.received]

    await first.stop(grace=1)
    assert len(outbox_files(harness)) == 2
    master.decide = None
    second = await harness.worker()
    await master.wait_for(lambda m: len(m.applied) == 2)

    assert second.epoch > old_epoch
    assert sorted(master.applied) == sorted(sent_ids)
    assert master.types_of(execution.task_instance_id) == [RUNNING, SUCCEEDED]
    resent = [r for r in master.received if r.event.event_id in master.applied]
    assert {r.worker_epoch for r in resent} == {old_epoch}  # sent under the epoch that ran it
    assert {r.worker_address for r in resent} == {first.address, second.address}
    assert await second.reporter.wait_drained(5)
    assert outbox_files(harness) == []


async def test_stale_rejections_are_dropped_and_counted(harness):
    worker = await harness.worker()
    harness.master.decide = lambda event: Ack(
        event_id=event.event_id, decision=AckDecision.REJECTED_STALE, reason="epoch moved on"
    )
    execution = harness.execution("true")
    await harness.dispatch(worker, execution)
    await harness.master.wait_terminal(execution.task_instance_id)

    assert await worker.reporter.wait_drained(5)
    assert worker.reporter.stale_rejections == 2
    assert outbox_files(harness) == []


async def test_retry_later_resends_in_order_until_accepted(harness):
    worker = await harness.worker()
    answers = {"retries": 0}

    def decide(event):
        # Like a real master: an attempt's events apply in order, so nothing after a RETRY_LATER
        # event of that attempt is accepted before it.
        running_applied = any(e.type is RUNNING for e in harness.master.applied.values())
        if event.type is RUNNING and answers["retries"] < 3:
            answers["retries"] += 1
            return Ack(event_id=event.event_id, decision=AckDecision.RETRY_LATER)
        if event.type is SUCCEEDED and not running_applied:
            return Ack(event_id=event.event_id, decision=AckDecision.RETRY_LATER)
        return Ack(event_id=event.event_id, decision=AckDecision.ACCEPTED)

    harness.master.decide = decide
    execution = harness.execution("true")
    await harness.dispatch(worker, execution)
    await harness.master.wait_for(lambda m: len(m.applied) == 2)

    assert harness.master.types_of(execution.task_instance_id) == [RUNNING, SUCCEEDED]
    assert answers["retries"] == 3
    assert await worker.reporter.wait_drained(5)


async def test_duplicates_settle_events(harness):
    worker = await harness.worker()
    harness.master.decide = lambda event: Ack(
        event_id=event.event_id, decision=AckDecision.DUPLICATE
    )
    execution = harness.execution("true")
    await harness.dispatch(worker, execution)
    await harness.master.wait_terminal(execution.task_instance_id)

    assert await worker.reporter.wait_drained(5)
    assert worker.reporter.stale_rejections == 0
    assert outbox_files(harness) == []


async def test_a_short_attempts_running_travels_with_its_end(harness, monkeypatch):
    # A linger far longer than the task makes the pairing certain however slow the machine.
    monkeypatch.setattr(stream, "LINGER_S", 30.0)
    worker = await harness.worker()
    master = harness.master
    execution = harness.execution("true")
    await harness.dispatch(worker, execution)
    await master.wait_terminal(execution.task_instance_id)

    mine = [r for r in master.received if r.event.task_instance_id == execution.task_instance_id]
    assert [r.event.type for r in mine] == [RUNNING, SUCCEEDED]  # in order, each once
    assert mine[0].request == mine[1].request  # one request: not held past the end
    assert mine[0].event.event_time <= mine[1].event.event_time  # RUNNING keeps its start time
    assert await worker.reporter.wait_drained(5)


async def test_a_running_attempts_running_is_not_held_until_its_end(harness, gate):
    worker = await harness.worker()
    master = harness.master
    held = gate("hold")
    execution = harness.execution(f'read _ < "{held.path}"')
    await harness.dispatch(worker, execution)

    # The linger is bounded: RUNNING arrives while the task still runs.
    await master.wait_for(lambda m: m.types_of(execution.task_instance_id) == [RUNNING])
    assert master.terminal(execution.task_instance_id) is None
    held.open()
    assert (await master.wait_terminal(execution.task_instance_id)).type is SUCCEEDED
