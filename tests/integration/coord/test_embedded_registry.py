"""The embedded registry against the Registry contract: nodes, watches, sessions, locks, epochs."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from pathlib import Path

import pytest

from dsched.errors import FailedPrecondition, InvalidArgument, NotFound, Unavailable
from dsched.server.coord.embedded import EmbeddedEnsemble, EmbeddedRegistry
from dsched.server.coord.registry import ConnectionState, Registry

WORKERS = "/nodes/workers"
A = f"{WORKERS}/default@127.0.0.1:1001"
B = f"{WORKERS}/default@127.0.0.1:1002"
CONNECTED, SUSPENDED, LOST = (
    ConnectionState.CONNECTED,
    ConnectionState.SUSPENDED,
    ConnectionState.LOST,
)
WAIT = 5.0


class Recorder:
    """Collects what a listener is called with, for awaiting one call at a time."""

    def __init__(self) -> None:
        self.calls: asyncio.Queue[object] = asyncio.Queue()

    def __call__(self, value: object) -> None:
        self.calls.put_nowait(dict(value) if isinstance(value, Mapping) else value)

    async def next(self) -> object:
        return await asyncio.wait_for(self.calls.get(), WAIT)

    async def assert_quiet(self) -> None:
        await settle()
        assert self.calls.empty(), f"unexpected call {self.calls.get_nowait()!r}"


async def settle() -> None:
    """Lets every callback already scheduled on the loop (and the ones they schedule) run."""
    for _ in range(10):
        await asyncio.sleep(0)


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


def test_satisfies_the_registry_protocol(ensemble: EmbeddedEnsemble) -> None:
    registry: Registry = EmbeddedRegistry(ensemble)
    assert registry.state is LOST  # no session before start


async def test_register_update_children_unregister(clients: list[EmbeddedRegistry]) -> None:
    a, b, _ = clients
    assert await a.children(WORKERS) == {}
    await a.register(A, b"one")
    await b.register(B, b"two")
    assert await a.children(WORKERS) == {A.rsplit("/", 1)[1]: b"one", B.rsplit("/", 1)[1]: b"two"}
    assert await a.children("/nodes") == {"workers": b""}  # parents are made on the way
    await a.update(A, b"uno")
    assert (await b.children(WORKERS))[A.rsplit("/", 1)[1]] == b"uno"
    await a.unregister(A)
    await a.unregister(A)  # already gone: no error
    assert list(await b.children(WORKERS)) == [B.rsplit("/", 1)[1]]
    with pytest.raises(NotFound):
        await a.update(A, b"gone")
    with pytest.raises(NotFound):
        await a.update(B, b"not mine")


async def test_bad_paths_are_rejected(clients: list[EmbeddedRegistry]) -> None:
    a = clients[0]
    for bad in ("relative", "/trailing/", "/double//slash", ""):
        with pytest.raises(InvalidArgument):
            await a.register(bad, b"")
    with pytest.raises(InvalidArgument):
        a.watch_children("nodes", Recorder())
    await a.register(A, b"")
    with pytest.raises(FailedPrecondition):
        await a.register(f"{A}/child", b"")  # ephemeral nodes have no children
    with pytest.raises(FailedPrecondition):
        await a.register(WORKERS, b"")  # a parent with children is persistent


async def test_watch_reports_every_change_including_data(clients: list[EmbeddedRegistry]) -> None:
    a, b, _ = clients
    seen = Recorder()
    cancel = b.watch_children(WORKERS, seen)
    assert await seen.next() == {}  # the current children, at once
    name_a, name_b = A.rsplit("/", 1)[1], B.rsplit("/", 1)[1]
    await a.register(A, b"1")
    assert await seen.next() == {name_a: b"1"}
    await a.update(A, b"2")
    assert await seen.next() == {name_a: b"2"}
    await b.register(B, b"x")
    assert await seen.next() == {name_a: b"2", name_b: b"x"}
    await a.unregister(A)
    assert await seen.next() == {name_b: b"x"}
    await seen.assert_quiet()
    cancel()
    await b.unregister(B)
    await seen.assert_quiet()


async def test_stop_removes_ephemerals_and_notifies_others(clients: list[EmbeddedRegistry]) -> None:
    a, b, _ = clients
    await a.register(A, b"a")
    seen = Recorder()
    b.watch_children(WORKERS, seen)
    assert await seen.next() == {A.rsplit("/", 1)[1]: b"a"}
    await a.stop()
    assert await seen.next() == {}
    assert await b.children(WORKERS) == {}
    with pytest.raises(FailedPrecondition):
        await a.register(A, b"again")  # stopped clients refuse calls


async def test_expiry_drops_nodes_and_reconnects_with_a_fresh_session(
    ensemble: EmbeddedEnsemble, clients: list[EmbeddedRegistry]
) -> None:
    a, b, _ = clients
    states = Recorder()
    a.add_state_listener(states)
    mine, theirs = Recorder(), Recorder()
    await a.register(A, b"epoch-1")
    a.watch_children(WORKERS, mine)
    b.watch_children(WORKERS, theirs)
    assert await mine.next() == await theirs.next() == {A.rsplit("/", 1)[1]: b"epoch-1"}

    ensemble.expire_session(a)
    assert a.state is LOST  # until the reconnect, one turn of the loop later
    assert await theirs.next() == {}  # other sessions see the member go at once
    assert await states.next() == LOST
    assert await states.next() == CONNECTED
    assert a.state is CONNECTED
    assert await mine.next() == {}  # the reconnected client is told what it missed
    assert await b.children(WORKERS) == {}  # nothing resurrected, as with kazoo
    with pytest.raises(NotFound):
        await a.update(A, b"stale")  # the old node belonged to the old session

    await a.register(A, b"epoch-2")  # the owner re-registers in its new session
    assert await theirs.next() == {A.rsplit("/", 1)[1]: b"epoch-2"}
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


async def test_lock_is_exclusive_and_fifo(clients: list[EmbeddedRegistry]) -> None:
    order: list[str] = []
    inside = 0
    release = asyncio.Event()

    async def hold(client: EmbeddedRegistry, who: str) -> None:
        nonlocal inside
        async with client.lock("failover"):
            inside += 1
            assert inside == 1
            order.append(who)
            if who == "a":
                await release.wait()
            await asyncio.sleep(0)
            inside -= 1

    a, b, c = clients
    first = asyncio.create_task(hold(a, "a"))
    await settle()
    assert order == ["a"]
    waiters = []
    for client, who in ((c, "c"), (b, "b"), (a, "a2")):  # queue order: c, b, a2
        waiters.append(asyncio.create_task(hold(client, who)))
        await settle()
    assert order == ["a"]
    release.set()
    await asyncio.wait_for(asyncio.gather(first, *waiters), WAIT)
    assert order == ["a", "c", "b", "a2"]


async def test_lock_is_released_when_the_holder_session_expires(
    ensemble: EmbeddedEnsemble, clients: list[EmbeddedRegistry]
) -> None:
    a, b, c = clients
    a_inside, a_leave, b_inside = asyncio.Event(), asyncio.Event(), asyncio.Event()
    b_leave = asyncio.Event()

    async def hold(client: EmbeddedRegistry, inside: asyncio.Event, leave: asyncio.Event) -> None:
        async with client.lock("alerts"):
            inside.set()
            await leave.wait()

    holder = asyncio.create_task(hold(a, a_inside, a_leave))
    await asyncio.wait_for(a_inside.wait(), WAIT)
    waiter = asyncio.create_task(hold(b, b_inside, b_leave))
    await settle()
    assert not b_inside.is_set()

    ensemble.expire_session(a)
    await asyncio.wait_for(b_inside.wait(), WAIT)  # the lock died with a's session
    a_leave.set()
    await asyncio.wait_for(holder, WAIT)  # a's late release must not free b's lock
    c_inside = asyncio.Event()
    third = asyncio.create_task(hold(c, c_inside, asyncio.Event()))
    await settle()
    assert not c_inside.is_set()
    b_leave.set()
    await asyncio.wait_for(waiter, WAIT)
    await asyncio.wait_for(c_inside.wait(), WAIT)
    third.cancel()
    with pytest.raises(asyncio.CancelledError):
        await third


async def test_lock_waiters_leave_the_queue_on_cancel_and_on_expiry(
    ensemble: EmbeddedEnsemble, clients: list[EmbeddedRegistry]
) -> None:
    a, b, c = clients
    leave = asyncio.Event()
    got: list[str] = []

    async def hold(client: EmbeddedRegistry, who: str) -> None:
        async with client.lock("x"):
            got.append(who)
            if who == "a":
                await leave.wait()

    first = asyncio.create_task(hold(a, "a"))
    await settle()
    cancelled = asyncio.create_task(hold(b, "b"))
    await settle()
    expired = asyncio.create_task(hold(c, "c"))
    await settle()
    cancelled.cancel()
    ensemble.expire_session(c)
    with pytest.raises(Unavailable):
        await asyncio.wait_for(expired, WAIT)
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    leave.set()
    await asyncio.wait_for(first, WAIT)
    await asyncio.wait_for(hold(b, "b-again"), WAIT)  # the queue is empty again
    assert got == ["a", "b-again"]


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


async def test_register_replaces_a_stale_node_of_another_session(
    clients: list[EmbeddedRegistry],
) -> None:
    old, new, _ = clients
    await old.register(A, b"old incarnation")
    await new.register(A, b"new incarnation")
    await old.unregister(A)  # not the old session's node any more: left alone
    await old.stop()  # nor does the old session's end remove it
    assert await new.children(WORKERS) == {A.rsplit("/", 1)[1]: b"new incarnation"}


async def test_watch_before_start_and_listener_errors(
    ensemble: EmbeddedEnsemble, caplog: pytest.LogCaptureFixture
) -> None:
    client = EmbeddedRegistry(ensemble)
    seen = Recorder()

    def broken(_: object) -> None:
        raise RuntimeError("listener bug")

    client.watch_children(WORKERS, seen)
    client.watch_children(WORKERS, broken)
    client.add_state_listener(broken)
    await client.start()
    assert await seen.next() == {}  # delivered once connected
    await client.register(A, b"")
    assert await seen.next() == {A.rsplit("/", 1)[1]: b""}  # a failing listener harms no other
    assert "registry watch listener failed" in caplog.text
    assert "registry state listener failed" in caplog.text
    await client.stop()


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
