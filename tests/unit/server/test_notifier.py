"""The notifier holds nothing for a key once no waiter holds its signal, and wakes every waiter
that took the signal before a notification."""

from __future__ import annotations

import asyncio

from dsched_server.engine.notifier import COMMANDS, Notifier


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
