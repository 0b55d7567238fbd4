"""The worker directory on the in-process registry: incarnations, departures, picks in a burst."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import pytest

from dsched_server.clock import SystemClock
from dsched_server.constants import WORKERS_PATH
from dsched_server.coord.embedded import EmbeddedEnsemble, EmbeddedRegistry
from dsched_server.engine.workers import WorkerDirectory, parse_member
from dsched_server.heartbeat import ServerStatus
from tests.fakes.worker import WAIT_S, FakeWorker, FakeWorkers


@dataclass
class View:
    fakes: FakeWorkers
    directory: WorkerDirectory
    registry: EmbeddedRegistry
    left: list[str] = field(default_factory=list)

    async def until(self, check: Callable[[], bool]) -> None:
        """Waits (bounded) until ``check()`` holds, checked after each registry change."""
        async with asyncio.timeout(WAIT_S):
            while not check():
                await self.directory.changed()

    def weight(self, worker: FakeWorker) -> float:
        ref = self.directory.get(worker.address)
        assert ref is not None
        return self.directory.weight_of(ref)

    def pick(self, group: str = "default") -> str:
        ref = self.directory.pick(group)
        assert ref is not None
        return ref.address


async def _view(tmp_path: Path, selector: str) -> AsyncIterator[View]:
    ensemble = EmbeddedEnsemble(tmp_path / "registry")
    registry = EmbeddedRegistry(ensemble)
    await registry.start()
    left: list[str] = []
    directory = WorkerDirectory(
        registry, SystemClock(), selector=selector, warmup=timedelta(0), on_left=left.append
    )
    await directory.start()
    fakes = FakeWorkers(ensemble)
    try:
        yield View(fakes, directory, registry, left)
    finally:
        await directory.stop()
        await fakes.close()
        await registry.stop()


@pytest.fixture
async def view(tmp_path: Path) -> AsyncIterator[View]:
    async for made in _view(tmp_path, "lower_weight"):
        yield made


async def listed(view: View, worker: FakeWorker) -> None:
    await view.until(
        lambda: (
            (ref := view.directory.get(worker.address)) is not None and ref.epoch == worker.epoch
        )
    )


def test_member_names_are_group_at_address() -> None:
    assert parse_member("etl@10.0.0.5:5679") == ("etl", "10.0.0.5:5679")
    assert parse_member("[::1]:5679") is None
    assert parse_member("@10.0.0.5:5679") is None
    assert parse_member("etl@") is None


async def test_a_worker_that_leaves_is_dropped_and_its_address_released(view: View) -> None:
    a, b = await view.fakes.add(), await view.fakes.add()
    await listed(view, a)
    await listed(view, b)
    await a.register(ServerStatus.BUSY)  # a heartbeat change is not a departure
    await view.until(lambda: view.weight(a) == 0.0)
    await a.leave()
    await view.until(lambda: view.directory.get(a.address) is None)
    assert view.left == [a.address]
    assert view.directory.live == {(b.address, b.epoch)}


async def test_of_two_nodes_for_one_address_the_newer_epoch_is_the_live_one(view: View) -> None:
    old = await view.fakes.add("etl")
    await listed(view, old)
    # Restarted in another group while the old node waits for its session to expire.
    new = await view.fakes.add("reports", address=old.address)
    await listed(view, new)
    ref = view.directory.get(old.address)
    assert ref is not None and (ref.group, ref.epoch) == ("reports", new.epoch)
    assert not view.directory.has_group("etl")
    assert view.left == []  # the address never left


async def test_an_unreadable_node_is_ignored(view: View) -> None:
    good = await view.fakes.add()
    await view.registry.register(f"{WORKERS_PATH}/default@127.0.0.1:1", b"\xff not a heartbeat")
    await listed(view, good)
    assert [w.address for w in view.directory.members] == [good.address]


async def test_a_burst_of_picks_spreads_over_idle_workers(view: View) -> None:
    workers = [await view.fakes.add() for _ in range(4)]
    for worker in workers:
        await listed(view, worker)
    # Between heartbeats the directory counts what it sent each worker: 40 picks in a burst
    # do not all go to whichever looked idlest at the last heartbeat.
    picks = Counter(view.pick() for _ in range(40))
    assert set(picks) == {w.address for w in workers}
    assert max(picks.values()) - min(picks.values()) <= 1


async def test_a_busy_worker_is_never_picked_and_a_group_without_workers_none(
    view: View,
) -> None:
    busy, idle = await view.fakes.add(), await view.fakes.add()
    await busy.register(ServerStatus.BUSY)
    await listed(view, idle)
    await view.until(lambda: view.weight(busy) == 0.0)
    assert {view.pick() for _ in range(10)} == {idle.address}
    assert view.directory.pick("gpu") is None
    await idle.register(ServerStatus.BUSY)
    await view.until(lambda: view.directory.pick("default") is None)
    assert "every live worker in group 'default' is BUSY" in view.directory.why_unavailable(
        "default"
    )
