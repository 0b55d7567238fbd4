"""The worker's agent against the real embedded registry (ZooKeeper semantics, in process)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from dsched.v1 import enums_pb2
from dsched_server.constants import WORKERS_PATH
from dsched_server.coord.embedded import EmbeddedEnsemble, EmbeddedRegistry
from dsched_server.heartbeat import decode_heartbeat


@pytest.fixture
async def registries(tmp_path) -> AsyncIterator[tuple[EmbeddedEnsemble, list[EmbeddedRegistry]]]:
    ensemble = EmbeddedEnsemble(tmp_path / "registry")
    clients = [EmbeddedRegistry(ensemble) for _ in range(2)]
    for client in clients:
        await client.start()
    yield ensemble, clients
    for client in clients:
        await client.stop()


async def watch_workers(observer: EmbeddedRegistry) -> asyncio.Queue[dict[str, bytes]]:
    snapshots: asyncio.Queue[dict[str, bytes]] = asyncio.Queue()
    observer.watch_children(WORKERS_PATH, lambda children: snapshots.put_nowait(dict(children)))
    return snapshots


async def until(snapshots: asyncio.Queue[dict[str, bytes]], check) -> dict[str, bytes]:
    while True:
        children = await asyncio.wait_for(snapshots.get(), 20)
        if check(children):
            return children


async def test_session_expiry_fences_and_reregisters_with_a_new_epoch(harness, registries):
    ensemble, (mine, observer) = registries
    snapshots = await watch_workers(observer)
    worker = await harness.worker(registry=mine, group="g1")
    name = f"g1@{worker.address}"
    first = await until(snapshots, lambda c: name in c)
    first_epoch = decode_heartbeat(first[name]).epoch
    assert first_epoch == worker.epoch

    ensemble.expire_session(mine)
    await until(snapshots, lambda c: name not in c)  # the ephemeral node died with the session
    again = await until(snapshots, lambda c: name in c)

    assert decode_heartbeat(again[name]).epoch == worker.epoch > first_epoch
    execution = harness.execution("true")
    response = await harness.dispatch(worker, execution)
    assert response.outcome == enums_pb2.DISPATCH_OUTCOME_ACCEPTED
    assert response.worker_epoch == worker.epoch
    assert (await harness.master.wait_terminal(execution.task_instance_id)).event_id.startswith(
        f"{worker.epoch}-"
    )


async def test_suspension_refuses_dispatches_until_resumed(harness, registries):
    ensemble, (mine, _) = registries
    worker = await harness.worker(registry=mine)
    states: asyncio.Queue[object] = asyncio.Queue()
    mine.add_state_listener(states.put_nowait)

    ensemble.suspend(mine)
    await asyncio.wait_for(states.get(), 20)
    refused = await harness.dispatch(worker, harness.execution("true"))
    ensemble.resume(mine)
    await asyncio.wait_for(states.get(), 20)
    accepted = await harness.dispatch(worker, harness.execution("true"))

    assert refused.outcome == enums_pb2.DISPATCH_OUTCOME_REJECTED_UNAVAILABLE
    assert accepted.outcome == enums_pb2.DISPATCH_OUTCOME_ACCEPTED
