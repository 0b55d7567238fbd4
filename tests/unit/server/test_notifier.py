"""The notifier holds nothing for a key once no waiter holds its signal, and wakes every waiter
that took the signal before a notification."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from dsched.options import CommandType, Priority, ReleaseState
from dsched.spec import ShellSpec, TaskSpec, WorkflowSpec
from dsched.states import WorkflowState
from dsched_server.core.records import (
    CommandRecord,
    InstanceRecord,
    RunOptions,
    RunScope,
    WorkflowRecord,
)
from dsched_server.engine.notifier import COMMANDS, HANDOVERS_MAX, Handover, Notifier


async def test_a_signal_nobody_holds_is_forgotten() -> None:
    notifier = Notifier()
    for key in range(1, 1001):
        signal = notifier.signal(key)
        assert len(notifier) == 1
        del signal  # the waiter left without any notification (a finished instance)
    assert len(notifier) == 0


async def test_waiters_of_one_key_share_its_signal_until_notified() -> None:
    notifier = Notifier()
    first, second = notifier.signal(7), notifier.signal(7)
    assert first is second
    waiters = [asyncio.create_task(notifier.wait(s, 5.0)) for s in (first, second)]
    await asyncio.sleep(0)
    notifier.notify(7)
    assert await asyncio.gather(*waiters) == [True, True]
    assert notifier.signal(7) is not first  # a fresh one for the next change


async def test_the_command_signal_is_not_counted_as_a_watch() -> None:
    notifier = Notifier()
    held = notifier.signal(COMMANDS)
    assert len(notifier) == 0
    notifier.notify_commands()
    assert held.is_set()


async def test_close_wakes_holders_and_keeps_nothing() -> None:
    notifier = Notifier()
    held = notifier.signal(3)
    notifier.close()
    assert held.is_set() and len(notifier) == 0
    assert notifier.signal(4).is_set() and len(notifier) == 0


def test_hints_of_commands_claimed_elsewhere_are_dropped() -> None:
    notifier = Notifier()
    for instance_id in (1, 2, 3):
        notifier.notify_commands(instance_id)
    hinted = list(notifier.local_commands)
    notifier.notify_commands(4)  # written after the read: the read could not have seen it
    notifier.forget_hints(hinted, pending=[2])
    assert notifier.local_commands == {2, 4}


def test_handovers_are_bounded_then_commands_are_hints_that_a_read_of_the_queue_finds() -> None:
    notifier = Notifier()
    for instance_id in range(1, HANDOVERS_MAX + 2):
        notifier.notify_commands(instance_id, _handover(instance_id))
    assert list(notifier.handovers) == list(range(1, HANDOVERS_MAX + 1))  # oldest first
    assert notifier.local_commands == {HANDOVERS_MAX + 1}
    assert notifier.take_scan_wanted()
    assert not notifier.take_scan_wanted()  # taken


def test_a_command_without_a_handover_asks_for_a_read_of_the_queue() -> None:
    notifier = Notifier()
    notifier.notify_commands(1, _handover(1))
    assert not notifier.take_scan_wanted()
    notifier.notify_commands()  # a failover, the slots moved: nothing to hand over
    assert notifier.take_scan_wanted()


def _handover(instance_id: int) -> Handover:
    when = datetime(2026, 11, 29, tzinfo=UTC)
    spec = WorkflowSpec(
        project="p", name="w", tasks=(TaskSpec(name="t", kind=ShellSpec(script="true")),)
    )
    return Handover(
        CommandRecord(
            id=instance_id,
            type=CommandType.START,
            workflow_instance_id=instance_id,
            priority=Priority.MEDIUM,
            scope=None,
            restore_state=None,
            create_time=when,
        ),
        InstanceRecord(
            id=instance_id,
            project="p",
            workflow="w",
            workflow_code=1,
            workflow_version=1,
            state=WorkflowState.SUBMITTED,
            command_type=CommandType.START,
            options=RunOptions(),
            run_scope=RunScope(),
            host="",
            epoch=0,
            run_times=1,
            submit_time=when,
            start_time=None,
            end_time=None,
            state_reason="",
            var_pool={},
        ),
        WorkflowRecord(
            id=1,
            project="p",
            project_id=1,
            spec=spec,
            version=1,
            release_state=ReleaseState.ONLINE,
            create_time=when,
            update_time=when,
        ),
    )
