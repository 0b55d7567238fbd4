"""The dispatcher against fake workers: order, batches, groups, waiting, refusals, lost answers.

The dispatcher, the worker directory and the (in-process) registry are real; the workers are
:mod:`tests.fakes.worker`. Jobs are built by hand: no runner, no store, no network.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import pytest

from dsched_server.clock import SystemClock
from dsched_server.coord.embedded import EmbeddedEnsemble, EmbeddedRegistry
from dsched_server.engine.dispatcher import MAX_BATCH, MAX_BATCH_BYTES, Dispatcher, job_bytes
from dsched_server.engine.jobs import DispatchJob
from dsched_server.engine.messages import Dispatched, Waiting
from dsched_server.engine.workers import WorkerDirectory
from dsched_server.heartbeat import ServerStatus
from tests.fakes.worker import FakeWorker, FakeWorkers, Mode, dispatch_spec


@dataclass
class Outcomes:
    """What the dispatcher told the runners, by task instance id, in order."""

    fakes: FakeWorkers
    seen: dict[int, list[Dispatched | Waiting]] = field(default_factory=dict)

    def record(self, ti_id: int, outcome: Dispatched | Waiting) -> None:
        self.seen.setdefault(ti_id, []).append(outcome)
        self.fakes.changed()

    def dispatched(self, ti_id: int) -> list[Dispatched]:
        return [o for o in self.seen.get(ti_id, []) if isinstance(o, Dispatched)]

    def waiting(self, ti_id: int) -> list[str]:
        return [o.reason for o in self.seen.get(ti_id, []) if isinstance(o, Waiting)]


@dataclass
class Rig:
    fakes: FakeWorkers
    directory: WorkerDirectory
    dispatcher: Dispatcher
    outcomes: Outcomes

    def job(
        self, ti_id: int, *, group: str = "default", priority: int = 2, script: str = "true"
    ) -> DispatchJob:
        spec = dispatch_spec(ti_id, script=script)
        return DispatchJob(
            spec,
            group,
            (priority, 2, ti_id),
            lambda outcome: self.outcomes.record(ti_id, outcome),
        )

    def submit(self, *jobs: DispatchJob) -> None:
        for job in jobs:
            self.dispatcher.submit(job)

    async def until_dispatched(self, *ti_ids: int) -> None:
        await self.fakes.wait_for(lambda: all(self.outcomes.dispatched(t) for t in ti_ids))

    async def seen_by_directory(self, worker: FakeWorker, present: bool = True) -> None:
        async with asyncio.timeout(10):
            while (self.directory.get(worker.address) is not None) is not present:
                await self.directory.changed()

    def calls_to(self, worker: FakeWorker) -> list[tuple[int, ...]]:
        return [
            c.task_instance_ids
            for c in self.fakes.calls
            if c.method == "dispatch" and c.address == worker.address
        ]


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    ensemble = EmbeddedEnsemble(tmp_path / "registry")
    registry = EmbeddedRegistry(ensemble)
    await registry.start()
    fakes = FakeWorkers(ensemble)
    directory = WorkerDirectory(
        registry, SystemClock(), selector="round_robin", warmup=timedelta(0), on_left=fakes.forget
    )
    dispatcher = Dispatcher(directory, fakes)
    await directory.start()
    await dispatcher.start()
    try:
        yield Rig(fakes, directory, dispatcher, Outcomes(fakes))
    finally:
        await dispatcher.stop()
        await directory.stop()
        await fakes.close()
        await registry.stop()


async def add(rig: Rig, group: str = "default", *, mode: Mode = Mode.ACCEPT) -> FakeWorker:
    worker = await rig.fakes.add(group, mode=mode)
    await rig.seen_by_directory(worker)
    return worker


async def test_jobs_go_out_highest_priority_first(rig: Rig) -> None:
    worker = await add(rig)
    rig.dispatcher.pause()
    jobs = [rig.job(ti, priority=p) for ti, p in [(1, 4), (2, 0), (3, 2), (4, 0), (5, 1)]]
    rig.submit(*jobs)
    rig.dispatcher.resume()
    await rig.until_dispatched(1, 2, 3, 4, 5)
    # Priority rank first, then the task instance id: one batch, in that order.
    assert rig.calls_to(worker) == [(2, 4, 5, 3, 1)]


async def test_a_wide_fan_out_goes_in_batches_of_at_most_max_batch(rig: Rig) -> None:
    worker = await add(rig)
    rig.dispatcher.pause()
    count = 2 * MAX_BATCH + 22
    rig.submit(*[rig.job(ti) for ti in range(1, count + 1)])
    rig.dispatcher.resume()
    await rig.until_dispatched(*range(1, count + 1))
    sizes = [len(c) for c in rig.calls_to(worker)]
    assert sizes == [MAX_BATCH, MAX_BATCH, 22]
    assert [ti for c in rig.calls_to(worker) for ti in c] == list(range(1, count + 1))


async def test_a_batch_stays_under_max_batch_bytes(rig: Rig) -> None:
    worker = await add(rig)
    rig.dispatcher.pause()
    big = "x" * (1024 * 1024)
    jobs = [rig.job(ti, script=big) for ti in range(1, 11)]
    rig.submit(*jobs)
    rig.dispatcher.resume()
    await rig.until_dispatched(*range(1, 11))
    calls = rig.calls_to(worker)
    by_id = {j.spec.task_instance_id: j for j in jobs}
    assert all(sum(job_bytes(by_id[ti]) for ti in call) <= MAX_BATCH_BYTES for call in calls)
    assert len(calls) == 4  # 3 + 3 + 3 + 1 attempts of just over 1 MiB
    assert sorted(ti for c in calls for ti in c) == list(range(1, 11))


async def test_each_job_goes_to_a_worker_of_its_own_group(rig: Rig) -> None:
    a1, a2 = await add(rig, "a"), await add(rig, "a")
    b1 = await add(rig, "b")
    rig.submit(*[rig.job(ti, group="a") for ti in range(1, 9)])
    rig.submit(*[rig.job(ti, group="b") for ti in range(11, 15)])
    await rig.until_dispatched(*range(1, 9), *range(11, 15))
    hosts = {ti: rig.outcomes.dispatched(ti)[0].host for ti in [*range(1, 9), *range(11, 15)]}
    assert {hosts[ti] for ti in range(1, 9)} == {a1.address, a2.address}  # spread over both
    assert {hosts[ti] for ti in range(11, 15)} == {b1.address}
    epochs = {rig.outcomes.dispatched(ti)[0].worker_epoch for ti in range(11, 15)}
    assert epochs == {b1.epoch}


async def test_a_group_without_workers_says_why_and_is_served_once_one_registers(
    rig: Rig,
) -> None:
    await add(rig, "default")
    rig.submit(rig.job(1, group="gpu"))
    await rig.fakes.wait_for(lambda: bool(rig.outcomes.waiting(1)))
    [reason] = rig.outcomes.waiting(1)
    assert "no live worker in group 'gpu'" in reason
    assert "none has registered since this master started" in reason
    assert "'default'" in reason  # the groups that do have workers
    assert not rig.fakes.dispatched()

    gpu = await add(rig, "gpu")
    await rig.until_dispatched(1)
    assert rig.calls_to(gpu) == [(1,)]


async def test_a_group_whose_workers_left_says_so(rig: Rig) -> None:
    gpu = await add(rig, "gpu")
    await gpu.leave()
    await rig.seen_by_directory(gpu, present=False)
    rig.submit(rig.job(1, group="gpu"))
    await rig.fakes.wait_for(lambda: bool(rig.outcomes.waiting(1)))
    assert rig.outcomes.waiting(1) == [
        "waiting for a worker: no live worker in group 'gpu' (its workers left)"
    ]
    assert rig.fakes.forgotten == [gpu.address]  # its channel was released


async def test_busy_workers_from_the_start_are_ordinary_queueing_not_reported(rig: Rig) -> None:
    busy = await rig.fakes.add("default")
    await busy.register(ServerStatus.BUSY)
    await rig.seen_by_directory(busy)
    rig.submit(rig.job(1))
    other = await add(rig)  # a change of membership un-parks the job
    await rig.until_dispatched(1)
    assert rig.outcomes.waiting(1) == []
    assert rig.calls_to(other) == [(1,)]
    assert rig.calls_to(busy) == []


async def test_a_rejected_dispatch_is_retried_until_a_worker_accepts(rig: Rig) -> None:
    worker = await add(rig, mode=Mode.FULL)
    rig.submit(rig.job(1))
    await rig.fakes.wait_for(lambda: len(rig.calls_to(worker)) >= 2)
    assert not rig.outcomes.dispatched(1)
    worker.mode = Mode.ACCEPT
    await rig.until_dispatched(1)
    assert len(rig.outcomes.dispatched(1)) == 1


async def test_a_rejected_dispatch_may_go_to_another_worker(rig: Rig) -> None:
    full = await add(rig, mode=Mode.FULL)
    rig.submit(rig.job(1))
    await rig.fakes.wait_for(lambda: len(rig.calls_to(full)) >= 1)
    other = await add(rig)
    await rig.until_dispatched(1)
    assert rig.outcomes.dispatched(1)[0].host == other.address


async def test_a_malformed_request_is_dropped_not_resent(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    refusing = await add(rig, mode=Mode.REFUSE)
    rig.submit(rig.job(1))
    await rig.fakes.wait_for(lambda: len(rig.calls_to(refusing)) == 1)
    refusing.mode = Mode.ACCEPT
    rig.submit(rig.job(2))
    await rig.until_dispatched(2)
    assert rig.calls_to(refusing) == [(1,), (2,)]
    assert not rig.outcomes.dispatched(1)
    assert any(
        r.levelno == logging.ERROR and "refused a dispatch batch" in r.getMessage()
        for r in caplog.records
    )


async def test_an_unknown_outcome_is_retried_on_the_same_worker_only(rig: Rig) -> None:
    silent = await add(rig, mode=Mode.UNREACHABLE)
    rig.submit(rig.job(1))
    await rig.fakes.wait_for(lambda: len(rig.calls_to(silent)) >= 1)
    other = await add(rig)
    await rig.fakes.wait_for(lambda: len(rig.calls_to(silent)) >= 3)
    # It may have accepted the attempt: sending it elsewhere could run it twice.
    assert rig.calls_to(other) == []
    silent.mode = Mode.ACCEPT
    await rig.until_dispatched(1)
    assert [d.host for d in rig.outcomes.dispatched(1)] == [silent.address]


async def test_an_unknown_outcome_goes_elsewhere_once_the_worker_is_gone(rig: Rig) -> None:
    silent = await add(rig, mode=Mode.UNREACHABLE)
    rig.submit(rig.job(1))
    await rig.fakes.wait_for(lambda: len(rig.calls_to(silent)) >= 1)
    other = await add(rig)
    await silent.leave()
    await rig.until_dispatched(1)
    assert [d.host for d in rig.outcomes.dispatched(1)] == [other.address]


async def test_a_late_answer_is_awaited_not_resent(rig: Rig) -> None:
    slow = await add(rig, mode=Mode.HOLD)
    job = rig.job(1)
    rig.submit(job)
    await rig.fakes.wait_for(lambda: len(rig.calls_to(slow)) == 1)
    assert job.sent and job.target == slow.address
    await add(rig)  # a membership change: nothing is parked, nothing moves
    slow.release()
    await rig.until_dispatched(1)
    assert rig.fakes.dispatched() == [1]
    assert rig.outcomes.dispatched(1)[0].host == slow.address


async def test_a_pinned_job_waits_for_its_worker_even_when_it_is_busy(rig: Rig) -> None:
    pinned = await add(rig)
    await pinned.register(ServerStatus.BUSY)
    other = await add(rig)
    job = rig.job(1)
    job.pinned = pinned.address
    rig.submit(job)
    await rig.until_dispatched(1)
    assert rig.calls_to(pinned) == [(1,)]
    assert rig.calls_to(other) == []


async def test_a_pin_lapses_when_its_worker_leaves(rig: Rig) -> None:
    pinned = await add(rig)
    await pinned.leave()
    await rig.seen_by_directory(pinned, present=False)
    other = await add(rig)
    job = rig.job(1)
    job.pinned = pinned.address
    rig.submit(job)
    await rig.until_dispatched(1)
    assert rig.outcomes.dispatched(1)[0].host == other.address


async def test_nothing_is_sent_while_paused_nor_after_a_job_is_cancelled(rig: Rig) -> None:
    worker = await add(rig)
    rig.dispatcher.pause()
    cancelled, kept = rig.job(1), rig.job(2)
    rig.submit(cancelled, kept)
    assert rig.dispatcher.waiting == 2
    cancelled.cancelled = True
    rig.dispatcher.resume()
    await rig.until_dispatched(2)
    assert rig.calls_to(worker) == [(2,)]
    assert rig.outcomes.seen.get(1) is None
