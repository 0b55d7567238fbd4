"""Watch, wait and log tails: complete, in order, resumed from their cursor after UNAVAILABLE."""

from __future__ import annotations

import itertools
import threading

import grpc
import pytest

import dsched
from dsched import Client, InstanceEvent, Shell, Workflow
from dsched.v1 import enums_pb2
from tests.integration.sdk.conftest import Fake
from tests.integration.sdk.fake_state import rich_status

TS = enums_pb2.TaskInstanceState


def _started(client: Client, *scripts: str) -> int:
    with Workflow("wf", project="demo") as wf:
        tasks = [Shell(f"t{i}", script) for i, script in enumerate(scripts)]
        for up, down in itertools.pairwise(tasks):
            up >> down
    wf.submit(client)
    return client.start_workflow("demo", "wf").id


def _states(events: list[InstanceEvent]) -> list[str]:
    return [
        f"{e.task_name}:{e.task_state}" if e.is_task_event else f"wf:{e.workflow_state}"
        for e in events
    ]


def test_watch_replays_history_and_ends_at_terminal(fake: Fake, client: Client) -> None:
    instance_id = _started(client, "echo a", "echo b")
    events = list(client.watch_instance(instance_id))
    assert _states(events) == [
        "wf:SUBMITTED",
        "wf:RUNNING",
        "t0:RUNNING",
        "t0:SUCCEEDED",
        "t1:RUNNING",
        "t1:SUCCEEDED",
        "wf:SUCCEEDED",
    ]
    sequences = [e.sequence for e in events]
    assert sequences == sorted(set(sequences))
    later = list(client.watch_instance(instance_id, after_sequence=sequences[3]))
    assert [e.sequence for e in later] == sequences[4:]


def test_watch_resumes_from_the_cursor_after_unavailable(fake: Fake, client: Client) -> None:
    instance_id = _started(client, "echo a", "echo b")
    client.wait(instance_id, timeout=10)
    fake.master.watch_batch = 2
    fake.master.watch_breaks = 2  # two streams break, each after its first frame
    events = list(client.watch_instance(instance_id))
    assert len(events) == 7
    assert len({e.sequence for e in events}) == 7  # nothing repeated, nothing lost
    cursors = [r.after_sequence for r in fake.master.seen("WatchWorkflowInstance")[1:]]
    assert cursors == [0, events[1].sequence, events[3].sequence]


def test_wait_survives_a_broken_stream_and_reports_every_event(fake: Fake, client: Client) -> None:
    fake.master.watch_batch = 1
    fake.master.watch_breaks = 3
    seen: list[InstanceEvent] = []
    instance_id = _started(client, "echo a", "echo b", "echo c")
    final = client.wait(instance_id, timeout=10, on_event=seen.append)
    assert final.state is dsched.WorkflowState.SUCCEEDED
    assert len(seen) == 9
    assert [e.sequence for e in seen] == sorted({e.sequence for e in seen})


def test_persistent_unavailable_gives_up(fake: Fake, client: Client) -> None:
    instance_id = _started(client, "echo a")
    fake.master.fail(
        "WatchWorkflowInstance", rich_status(grpc.StatusCode.UNAVAILABLE, "down", reason="DRAINING")
    )
    with pytest.raises(dsched.Unavailable) as caught:
        client.wait(instance_id, timeout=10)
    assert caught.value.reason == "DRAINING"
    assert len(fake.master.seen("WatchWorkflowInstance")) == 1 + client.reconnect.attempts


def test_other_stream_errors_are_raised_at_once(fake: Fake, client: Client) -> None:
    with pytest.raises(dsched.NotFound):
        client.wait(999, timeout=10)
    assert len(fake.master.seen("WatchWorkflowInstance")) == 1


def test_wait_asks_for_states_only_unless_it_reports_events(fake: Fake, client: Client) -> None:
    instance_id = _started(client, "echo a")
    client.wait(instance_id, timeout=10)
    client.wait(instance_id, timeout=10, on_event=lambda _: None)

    asked = [r.state_only for r in fake.master.seen("WatchWorkflowInstance")]
    assert asked == [True, False]


def test_wait_timeout(fake: Fake, client: Client) -> None:
    instance_id = _started(client, "sleep 100")
    with pytest.raises(TimeoutError):
        client.wait(instance_id, timeout=0.3)


def test_wait_confirms_a_replayed_terminal_state(fake: Fake, client: Client) -> None:
    instance_id = _started(client, "echo a")
    client.wait(instance_id, timeout=10)
    # A rerun: the history now holds an old SUCCEEDED; the instance runs again.
    rerun = client.rerun_instance(instance_id)
    assert rerun.state is dsched.WorkflowState.SUBMITTED
    result: list[dsched.WorkflowInstance] = []
    waiter = threading.Thread(target=lambda: result.append(client.wait(instance_id, timeout=10)))
    waiter.start()
    fake.world.set_state(instance_id, enums_pb2.WORKFLOW_INSTANCE_STATE_RUNNING)
    fake.world.set_state(instance_id, enums_pb2.WORKFLOW_INSTANCE_STATE_FAILED, "boom")
    waiter.join(10)
    (final,) = result
    assert final.state is dsched.WorkflowState.FAILED and final.state_reason == "boom"


def _task(fake: Fake, client: Client) -> int:
    fake.world.auto_run = False
    instance_id = _started(client, "echo a")
    return fake.world.add_task(instance_id, "t0").id


def test_tail_log_follow_streams_until_end_of_log(fake: Fake, client: Client) -> None:
    task_id = _task(fake, client)
    fake.world.append_log(task_id, b"first\n")
    chunks = client.tail_log(task_id, follow=True)
    first = next(chunks)
    assert (first.data, first.offset, first.next_offset, first.end_of_log) == (
        b"first\n",
        0,
        6,
        False,
    )
    fake.world.append_log(task_id, b"second\n")
    fake.world.set_task_state(task_id, TS.TASK_INSTANCE_STATE_SUCCEEDED, exit_code=0)
    rest = list(chunks)
    assert b"".join(c.data for c in rest) == b"second\n"
    assert rest[-1].end_of_log and rest[-1].next_offset == 13


def test_tail_log_resumes_from_the_offset(fake: Fake, client: Client) -> None:
    task_id = _task(fake, client)
    fake.world.append_log(task_id, b"0123456789abcdef")
    fake.world.finish_log(task_id)
    fake.logs.chunk = 4
    fake.logs.tail_breaks = 2
    chunks = list(client.tail_log(task_id, offset=2, follow=True))
    assert b"".join(c.data for c in chunks) == b"23456789abcdef"
    assert [c.offset for c in chunks if c.data] == [2, 6, 10, 14]
    assert fake.logs.offsets == [2, 6, 10]
    assert chunks[-1].end_of_log


def test_tail_log_without_follow_returns_what_exists(fake: Fake, client: Client) -> None:
    task_id = _task(fake, client)
    fake.world.append_log(task_id, b"partial")
    chunks = list(client.tail_log(task_id))
    assert [c.data for c in chunks] == [b"partial"]
    assert not chunks[-1].end_of_log


def test_read_log(fake: Fake, client: Client) -> None:
    task_id = _task(fake, client)
    fake.world.append_log(task_id, b"hello world")
    chunk = client.read_log(task_id, offset=6, length=3)
    assert (chunk.data, chunk.offset, chunk.next_offset, chunk.size) == (b"wor", 6, 9, 11)
    assert not chunk.end_of_log
    with pytest.raises(dsched.NotFound) as caught:
        client.read_log(12345)
    assert caught.value.reason == "LOG_NOT_FOUND"
