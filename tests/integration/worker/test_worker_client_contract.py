"""The master's ``WorkerClient`` contract, checked twice: over gRPC against a real worker, and on
the engine tests' fake (:mod:`tests.fakes.worker`). The fake is only worth its tests if it answers
as a real worker does; every check here runs on both sides.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from dsched_server.coord.embedded import EmbeddedEnsemble
from dsched_server.engine.grpc_worker_client import GrpcWorkerClient
from dsched_server.engine.worker_client import RequestRefused, WorkerCallError, WorkerClient
from dsched_server.protocol.attempt import AttemptKey
from dsched_server.protocol.execution import TaskExecution
from dsched_server.protocol.orders import Kill, TakeOver
from tests.conftest import free_port
from tests.fakes.worker import FakeWorker, FakeWorkers, Mode, dispatch_spec
from tests.integration.worker.conftest import Harness

TIMEOUT_S = 10.0
HOLD = "sleep 30"  # runs until killed


@dataclass
class Side:
    """One implementation of the contract and the worker it talks to."""

    client: WorkerClient
    address: str
    epoch: int
    owner: str  # the cluster address the attempts report to
    fill: Callable[[], Awaitable[None]]  # makes the worker full
    leave: Callable[[], Awaitable[None]]  # the worker goes away, its port closed
    ids: itertools.count[int] = field(default_factory=lambda: itertools.count(5000))

    def spec(self, script: str = "true") -> TaskExecution:
        return dispatch_spec(next(self.ids), script=script, owner=self.owner, instance=77)

    async def dispatch(self, *specs: TaskExecution) -> list[bool]:
        reply = await self.client.dispatch(self.address, specs, timeout=TIMEOUT_S)
        assert reply.worker_epoch == self.epoch
        assert len(reply.results) == len(specs)
        return [r.accepted for r in reply.results]

    async def kill(self, spec: TaskExecution) -> bool:
        return await self.client.kill(self.address, Kill(spec.key, "test"), timeout=TIMEOUT_S)

    async def take_over(self, spec: TaskExecution) -> bool:
        order = TakeOver(spec.key, self.owner, 10)
        return await self.client.take_over(self.address, order, timeout=TIMEOUT_S)


async def _grpc(harness: Harness) -> AsyncIterator[Side]:
    worker = await harness.worker(slots=1, max_queued=0)
    client = GrpcWorkerClient()
    side: Side

    async def fill() -> None:
        assert await side.dispatch(side.spec(HOLD)) == [True]

    async def leave() -> None:
        await worker.stop(grace=0.5)

    side = Side(client, worker.address, worker.epoch, harness.master.address, fill, leave)
    try:
        yield side
    finally:
        await client.close()


async def _fake(tmp_path: Path) -> AsyncIterator[Side]:
    fakes = FakeWorkers(EmbeddedEnsemble(tmp_path / "registry"))
    worker: FakeWorker = await fakes.add()

    async def fill() -> None:
        worker.mode = Mode.FULL

    async def leave() -> None:
        await worker.leave(listening=False)

    try:
        yield Side(fakes, worker.address, worker.epoch, "127.0.0.1:7002", fill, leave)
    finally:
        await fakes.close()


@pytest.fixture(params=["grpc", "fake"])
async def side(
    request: pytest.FixtureRequest, harness: Harness, tmp_path: Path
) -> AsyncIterator[Side]:
    sides = _grpc(harness) if request.param == "grpc" else _fake(tmp_path)
    async for made in sides:
        yield made


async def test_a_dispatch_is_accepted_and_accepted_again_when_repeated(side: Side) -> None:
    spec = side.spec(HOLD)
    assert await side.dispatch(spec) == [True]
    # Idempotent per attempt: the repeat is accepted (ALREADY_ACCEPTED), not run a second time.
    assert await side.dispatch(spec) == [True]
    assert await side.kill(spec)


async def test_a_malformed_request_is_refused_and_nothing_happens(side: Side) -> None:
    bad = replace(side.spec(), task_instance_id=0)
    with pytest.raises(RequestRefused):
        await side.dispatch(bad)
    good = side.spec()
    assert await side.dispatch(good) == [True]


async def test_kill_and_take_over_say_whether_the_worker_has_the_attempt(side: Side) -> None:
    held, unknown = side.spec(HOLD), side.spec()
    assert await side.dispatch(held) == [True]
    assert await side.take_over(held)
    assert not await side.take_over(unknown)
    assert not await side.kill(unknown)
    assert await side.kill(held)


async def test_an_attempt_killed_before_it_arrived_is_not_accepted(side: Side) -> None:
    overtaken = side.spec()
    assert not await side.kill(overtaken)
    assert await side.dispatch(overtaken) == [False]


async def test_a_full_worker_accepts_nothing(side: Side) -> None:
    await side.fill()
    assert await side.dispatch(side.spec(), side.spec()) == [False, False]


async def test_a_worker_that_left_cannot_be_reached_and_its_port_is_refused(side: Side) -> None:
    assert not await side.client.refused(side.address, timeout=TIMEOUT_S)
    await side.leave()
    with pytest.raises(WorkerCallError) as raised:
        await side.dispatch(side.spec())
    assert not isinstance(raised.value, RequestRefused)  # not known: it may have been accepted
    assert await side.client.refused(side.address, timeout=TIMEOUT_S)


async def test_nothing_listening_is_a_call_error_not_a_refusal() -> None:
    client = GrpcWorkerClient()
    address = f"127.0.0.1:{free_port()}"
    try:
        with pytest.raises(WorkerCallError) as raised:
            await client.kill(address, Kill(AttemptKey(1, 1), "test"), timeout=TIMEOUT_S)
        assert raised.value.code == "UNAVAILABLE"
        assert not isinstance(raised.value, RequestRefused)
        assert await client.refused(address, timeout=TIMEOUT_S)
        client.forget(address)  # its channel goes; the next call opens a new one
        with pytest.raises(WorkerCallError):
            order = TakeOver(AttemptKey(1, 1), "127.0.0.1:1", 1)
            await client.take_over(address, order, timeout=TIMEOUT_S)
    finally:
        await client.close()
