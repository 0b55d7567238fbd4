"""What only the embedded registry shows: its synchronous timing, suspension, the epoch file.

The behaviour both registries share is tested in ``test_registry_contract.py``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from dsched.errors import Unavailable
from dsched_server.coord.embedded import EmbeddedEnsemble, EmbeddedRegistry
from dsched_server.coord.registry import ConnectionState
from tests.integration.coord.support import WAIT, Recorder, settle

WORKERS = "/nodes/workers"
A = f"{WORKERS}/default@127.0.0.1:1001"
B = f"{WORKERS}/default@127.0.0.1:1002"
CONNECTED, SUSPENDED, LOST = (
    ConnectionState.CONNECTED,
    ConnectionState.SUSPENDED,
    ConnectionState.LOST,
)


@pytest.fixture
def ensemble(tmp_path: Path) -> EmbeddedEnsemble:
    return EmbeddedEnsemble(tmp_path / "registry")


@pytest.fixture
async def clients(ensemble: EmbeddedEnsemble) -> AsyncIterator[list[EmbeddedRegistry]]:
    started = [EmbeddedRegistry(ensemble) for _ in range(3)]
    for client in started:
        await client.start()
    yield started
    for client in started:
        await client.stop()


async def test_expiry_is_reported_in_order_one_turn_apart(
    ensemble: EmbeddedEnsemble, clients: list[EmbeddedRegistry]
) -> None:
    a, b, _ = clients
    states, theirs = Recorder(), Recorder()
    a.add_state_listener(states)
    await a.register(A, b"epoch-1")
    b.watch_children(WORKERS, theirs)
    assert await theirs.next() == {A.rsplit("/", 1)[1]: b"epoch-1"}

    ensemble.expire_session(a)
    assert a.state is LOST  # until the reconnect, one turn of the loop later
    assert await theirs.next() == {}  # other sessions see the member go at once
    assert await states.next() == LOST
    assert await states.next() == CONNECTED
    assert a.state is CONNECTED
    await states.assert_quiet()


async def test_suspend_and_resume_keep_the_session(
    ensemble: EmbeddedEnsemble, clients: list[EmbeddedRegistry]
) -> None:
    a, b, _ = clients
    states, mine = Recorder(), Recorder()
    a.add_state_listener(states)
    await a.register(A, b"a")
    a.watch_children(WORKERS, mine)
    assert await mine.next() == {A.rsplit("/", 1)[1]: b"a"}

    ensemble.suspend(a)
    assert await states.next() == SUSPENDED
    assert list(await b.children(WORKERS)) == [A.rsplit("/", 1)[1]]  # still alive for others
    pending = asyncio.ensure_future(a.update(A, b"while away"))
    await b.register(B, b"b")
    await b.unregister(B)
    await settle()
    assert not pending.done()  # calls wait for the connection
    await mine.assert_quiet()  # a disconnected client hears nothing

    ensemble.resume(a)
    assert await states.next() == CONNECTED
    assert await mine.next() == {A.rsplit("/", 1)[1]: b"a"}  # one catch-up snapshot: b came, went
    await asyncio.wait_for(pending, WAIT)
    assert await mine.next() == {A.rsplit("/", 1)[1]: b"while away"}
    await mine.assert_quiet()
    await states.assert_quiet()


async def test_expiry_during_suspension_is_learnt_on_resume(
    ensemble: EmbeddedEnsemble, clients: list[EmbeddedRegistry]
) -> None:
    a, b, _ = clients
    states, theirs = Recorder(), Recorder()
    a.add_state_listener(states)
    await a.register(A, b"a")
    b.watch_children(WORKERS, theirs)
    assert await theirs.next() == {A.rsplit("/", 1)[1]: b"a"}

    ensemble.suspend(a)
    assert await states.next() == SUSPENDED
    pending = asyncio.ensure_future(a.update(A, b"late"))
    ensemble.expire_session(a)
    assert await theirs.next() == {}
    await states.assert_quiet()  # a partitioned client cannot hear of its expiry
    assert a.state is SUSPENDED

    ensemble.resume(a)
    assert await states.next() == LOST
    assert await states.next() == CONNECTED
    with pytest.raises(Unavailable):
        await pending  # the call belonged to the dead session: it must not land in the new one
    assert await b.children(WORKERS) == {}


async def test_epochs_increase_across_clients_and_ensemble_restarts(tmp_path: Path) -> None:
    state = tmp_path / "registry"
    first = EmbeddedEnsemble(state)
    a, b = EmbeddedRegistry(first), EmbeddedRegistry(first)
    await a.start()
    await b.start()
    together = await asyncio.gather(*(c.next_epoch() for c in (a, b, a, b)))
    assert sorted(together) == [1, 2, 3, 4]
    await a.stop()
    await b.stop()

    again = EmbeddedRegistry(EmbeddedEnsemble(state))  # a new process on the same data dir
    await again.start()
    assert await again.next_epoch() == 5
    await again.stop()
    assert (state / "registry-epoch").read_text().strip() == "5"


def test_a_corrupt_epoch_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "registry-epoch").write_text("garbage")
    with pytest.raises(ValueError, match="registry epoch"):
        EmbeddedEnsemble(tmp_path)


async def test_a_waiter_cancelled_in_the_same_turn_as_the_release_is_skipped(
    ensemble: EmbeddedEnsemble, clients: list[EmbeddedRegistry]
) -> None:
    a, b, c = clients
    inside: list[str] = []

    async def hold(client: EmbeddedRegistry, who: str) -> None:
        async with client.lock("x"):
            inside.append(who)
            await asyncio.Event().wait()

    holder = asyncio.create_task(hold(a, "a"))
    await settle()
    skipped = asyncio.create_task(hold(b, "b"))
    await settle()
    nxt = asyncio.create_task(hold(c, "c"))
    await settle()
    skipped.cancel()  # its task has not run yet when the lock is freed below
    ensemble.expire_session(a)
    await settle()
    assert inside == ["a", "c"]
    ensemble.expire_session(b)  # b's session holds nothing any more
    for task in (holder, skipped, nxt):
        task.cancel()
    results = await asyncio.gather(holder, skipped, nxt, return_exceptions=True)
    assert all(isinstance(r, asyncio.CancelledError) for r in results)
