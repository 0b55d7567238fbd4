"""The command consumer's claim of a START this master wrote: handed over with the rows its
transaction wrote, it is claimed without reading the queue, the instance or the workflow, in
queue order, and exactly as race-safe as a claim from a read of the queue."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine as SyncEngine

from dsched.options import Priority
from dsched.states import InstanceEventKind, WorkflowState
from dsched_server.store import events
from dsched_server.store import instances as instance_repo
from tests.unit.core.specs import task, workflow
from tests.unit.engine.conftest import Engine


@contextmanager
def tables_read() -> Iterator[list[str]]:
    """The table after the first FROM of every SELECT run meanwhile (on any engine)."""
    read: list[str] = []

    def record(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        found = re.match(r"\s*SELECT\b.*?\bFROM\s+(\w+)", statement, re.S | re.I)
        if found:
            read.append(found.group(1))

    event.listen(SyncEngine, "before_cursor_execute", record)
    try:
        yield read
    finally:
        event.remove(SyncEngine, "before_cursor_execute", record)


async def test_a_start_handed_over_is_claimed_without_reading_it_back(engine: Engine) -> None:
    worker = await engine.workers.add()
    await engine.consumer.stop()  # the test runs its rounds
    instance_id = await engine.start_run(workflow(task("a")))
    assert instance_id in engine.services.notifier.handovers

    with tables_read() as read:
        assert await engine.consumer.consume_once(scan=False) == 1

    # Only the instance's pending controls, which another master may have recorded meanwhile.
    assert read == ["control_requests"]
    assert engine.services.metrics.commands_claimed == 1
    assert not engine.services.notifier.handovers
    runner = engine.runners.get(instance_id)
    assert runner is not None
    stored = await engine.instance(instance_id)
    assert stored.state is WorkflowState.RUNNING and stored.epoch == engine.epoch
    held = runner.state.instance
    assert held == replace(stored, state=held.state)  # the runner's own later moves aside
    await worker.holding(1)


async def test_a_handed_over_command_another_master_claimed_is_left_to_it(
    engine: Engine,
) -> None:
    worker = await engine.workers.add()
    await engine.consumer.stop()
    instance_id = await engine.start_run(workflow(task("a")))
    handover = engine.services.notifier.handovers[instance_id]
    other_epoch = engine.epoch + 100
    async with engine.db.transaction() as conn:  # another master's claim, committed first
        assert await instance_repo.claim(
            conn,
            handover.command,
            host="127.0.0.1:9999",
            epoch=other_epoch,
            state=WorkflowState.RUNNING,
            values={},
        )

    assert await engine.consumer.consume_once(scan=False) == 1

    metrics = engine.services.metrics
    assert (metrics.commands_claimed, metrics.commands_lost_race) == (0, 1)
    assert engine.runners.get(instance_id) is None
    assert not engine.services.notifier.handovers
    stored = await engine.instance(instance_id)
    assert (stored.host, stored.epoch) == ("127.0.0.1:9999", other_epoch)
    assert worker.attempts == {}  # nothing dispatched by the loser


async def test_handed_over_commands_are_claimed_in_queue_order(engine: Engine) -> None:
    await engine.workers.add()
    await engine.consumer.stop()
    low = await engine.start_run(workflow(task("a")), priority=Priority.LOW)
    high = await engine.start_run(workflow(task("a")), priority=Priority.HIGHEST)

    assert await engine.consumer.consume_once(scan=False) == 2

    async def claimed_at(instance_id: int) -> int:
        async with engine.db.read() as conn:
            log = await events.after(conn, instance_id, 0)
        (claim,) = [e.sequence for e in log if e.kind is InstanceEventKind.CLAIMED]
        return claim

    assert await claimed_at(high) < await claimed_at(low)


async def test_a_scan_claims_a_handed_over_command_with_its_handover(engine: Engine) -> None:
    """A read of the queue claims the commands of its page in the queue's order, a handed-over
    one with the rows handed over, and once."""
    await engine.workers.add()
    await engine.consumer.stop()
    instance_id = await engine.start_run(workflow(task("a")))

    with tables_read() as read:
        assert await engine.consumer.consume_once(scan=True) == 1

    assert read == ["commands", "control_requests"]  # the page, then the claim's controls
    assert engine.services.metrics.commands_claimed == 1
    assert engine.runners.get(instance_id) is not None
    assert not engine.services.notifier.handovers


async def test_a_whole_queue_read_drops_handovers_of_commands_claimed_elsewhere(
    engine: Engine,
) -> None:
    """A handover whose command a read of the whole queue no longer finds costs no claim."""
    await engine.workers.add()
    await engine.consumer.stop()
    instance_id = await engine.start_run(workflow(task("a")))
    handover = engine.services.notifier.handovers[instance_id]
    async with engine.db.transaction() as conn:  # another master's claim, committed first
        assert await instance_repo.claim(
            conn,
            handover.command,
            host="127.0.0.1:9999",
            epoch=engine.epoch + 100,
            state=WorkflowState.RUNNING,
            values={},
        )

    assert await engine.consumer.consume_once(scan=True) == 0

    assert not engine.services.notifier.handovers
    metrics = engine.services.metrics
    assert (metrics.commands_claimed, metrics.commands_lost_race) == (0, 0)
    assert engine.runners.get(instance_id) is None


async def test_a_consumer_that_stops_claiming_holds_hints_not_handovers(engine: Engine) -> None:
    """Paused or busy, the consumer turns what was handed over into hints, and new commands come
    as hints until it claims again: nothing holds their rows meanwhile."""
    await engine.workers.add()
    await engine.consumer.stop()
    notifier = engine.services.notifier
    first = await engine.start_run(workflow(task("a")))
    assert first in notifier.handovers

    notifier.close_handovers()
    second = await engine.start_run(workflow(task("a")))

    assert not notifier.handovers
    assert {first, second} <= notifier.local_commands
    assert notifier.take_scan_wanted()
    notifier.handovers_open = True  # claiming again: the queue's read finds both
    assert await engine.consumer.consume_once(scan=True) == 2
    assert engine.runners.get(first) is not None and engine.runners.get(second) is not None
    assert not notifier.local_commands
