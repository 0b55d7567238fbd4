"""The shutdown budget: what each step may take, and what a stop records as abandoned."""

from __future__ import annotations

import asyncio

import pytest

from dsched_server.shutdown import MIN_STEP_S, Shutdown


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_budget_is_what_is_left_less_the_reserve_never_negative() -> None:
    clock = FakeClock()
    shutdown = Shutdown(30.0, clock=clock)
    assert shutdown.budget() == 30.0
    assert shutdown.budget(5.0) == 5.0
    assert shutdown.budget(50.0, reserve=10.0) == 20.0
    clock.now += 25.0
    assert shutdown.remaining() == 5.0
    assert shutdown.budget(10.0, reserve=3.0) == 2.0
    assert shutdown.budget(reserve=8.0) == 0.0
    clock.now += 60.0
    assert (shutdown.remaining(), shutdown.budget(1.0)) == (0.0, 0.0)


def test_share_caps_a_step_to_a_fraction_of_the_whole_timeout() -> None:
    assert Shutdown(30.0).share(3.0, 0.1) == 3.0
    assert Shutdown(5.0).share(3.0, 0.1) == 0.5


async def test_a_step_that_finishes_abandons_nothing() -> None:
    shutdown = Shutdown(10.0)
    done: list[str] = []

    async def work() -> None:
        done.append("yes")

    assert await shutdown.step("do the work", work())
    assert done == ["yes"] and shutdown.abandoned == []


async def test_a_failing_step_is_abandoned_with_its_reason() -> None:
    shutdown = Shutdown(10.0)

    async def broken() -> None:
        raise ConnectionRefusedError("connection refused\nsecond line")

    assert not await shutdown.step("hand over", broken())
    assert shutdown.abandoned == ["hand over: connection refused"]


async def test_an_overrunning_step_is_cancelled_and_abandoned() -> None:
    shutdown = Shutdown(10.0)
    never = asyncio.Event()
    cancelled = asyncio.Event()

    async def waits_for_ever() -> None:
        try:
            await never.wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    assert not await shutdown.step("remove the node", waits_for_ever(), limit=MIN_STEP_S)
    assert cancelled.is_set()
    assert len(shutdown.abandoned) == 1
    assert shutdown.abandoned[0].startswith("remove the node: not done within ")


async def test_a_step_whose_budget_is_gone_still_gets_its_minimum() -> None:
    clock = FakeClock()
    shutdown = Shutdown(1.0, clock=clock)
    clock.now += 5.0  # past the deadline

    async def instant() -> int:
        return 1

    assert await shutdown.step("close the channels", instant())
    assert shutdown.abandoned == []


async def test_cancel_waits_for_the_task_to_end() -> None:
    shutdown = Shutdown(10.0)
    task = asyncio.create_task(asyncio.Event().wait())
    await asyncio.sleep(0)
    assert await shutdown.cancel("stop the heartbeat", task)
    assert task.cancelled() and shutdown.abandoned == []


async def test_cancelling_the_stop_cancels_the_step() -> None:
    shutdown = Shutdown(10.0)
    inner = asyncio.Event()
    started = asyncio.Event()

    async def slow() -> None:
        started.set()
        await inner.wait()

    outer = asyncio.create_task(shutdown.step("slow", slow()))
    await started.wait()
    outer.cancel()
    with pytest.raises(asyncio.CancelledError):
        await outer
    assert shutdown.abandoned == []
