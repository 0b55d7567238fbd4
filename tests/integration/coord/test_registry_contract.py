"""The Registry contract, run against both implementations (``backend``: embedded, zookeeper).

Everything here is awaited through events (listener calls, queue watches), never timed: the same
test passes whether a change lands in the same turn of the loop (embedded) or a few milliseconds
later over a socket (ZooKeeper). What only one implementation can show lives in its own module.
"""

from __future__ import annotations

import asyncio
import threading

import pytest

from dsched.errors import FailedPrecondition, InvalidArgument, NotFound, Unavailable
from dsched_server.constants import ELECTIONS_PATH, LOCKS_PATH
from dsched_server.coord.registry import ConnectionState, Registry
from tests.integration.coord.support import WAIT, Backend

WORKERS = "/nodes/workers"
A = f"{WORKERS}/default@127.0.0.1:1001"
B = f"{WORKERS}/default@127.0.0.1:1002"
NAME_A, NAME_B = A.rsplit("/", 1)[1], B.rsplit("/", 1)[1]
CONNECTED, SUSPENDED, LOST = (
    ConnectionState.CONNECTED,
    ConnectionState.SUSPENDED,
    ConnectionState.LOST,
)


def test_both_satisfy_the_registry_protocol(backend: Backend) -> None:
    registry: Registry = backend.client()
    assert registry.state is LOST  # no session before start


async def test_register_update_children_unregister(clients: list[Registry]) -> None:
    a, b, _ = clients
    assert await a.children(WORKERS) == {}
    await a.register(A, b"one")
    await b.register(B, b"two")
    assert await a.children(WORKERS) == {NAME_A: b"one", NAME_B: b"two"}
    assert await a.children("/nodes") == {"workers": b""}  # parents are made on the way
    await a.update(A, b"uno")
    assert (await b.children(WORKERS))[NAME_A] == b"uno"
    await a.register(A, b"again")  # registering one's own node again replaces its data
    assert (await b.children(WORKERS))[NAME_A] == b"again"
    await a.unregister(A)
    await a.unregister(A)  # already gone: no error
    assert list(await b.children(WORKERS)) == [NAME_B]
    with pytest.raises(NotFound):
        await a.update(A, b"gone")
    with pytest.raises(NotFound):
        await a.update(B, b"not mine")
    await a.unregister(B)  # not mine either: left alone
    assert list(await b.children(WORKERS)) == [NAME_B]


async def test_bad_paths_and_names_are_rejected(clients: list[Registry]) -> None:
    a = clients[0]
    for bad in ("relative", "/trailing/", "/double//slash", ""):
        with pytest.raises(InvalidArgument):
            await a.register(bad, b"")
    with pytest.raises(InvalidArgument):
        await a.register("/", b"")
    with pytest.raises(InvalidArgument):
        a.watch_children("nodes", lambda _: None)
    for name in ("", "a/b", ".."):
        with pytest.raises(InvalidArgument):
            a.lock(name)
        with pytest.raises(InvalidArgument):
            a.leadership(name, "me")
        with pytest.raises(InvalidArgument):
            await a.leader(name)
    await a.register(A, b"")
    with pytest.raises(FailedPrecondition):
        await a.register(f"{A}/child", b"")  # ephemeral nodes have no children
    with pytest.raises(FailedPrecondition):
        await a.register(WORKERS, b"")  # a parent with children is persistent


async def test_watch_reports_every_change_including_data(
    backend: Backend, clients: list[Registry]
) -> None:
    a, b, _ = clients
    seen = backend.recorder()
    cancel = b.watch_children(WORKERS, seen)
    assert await seen.next() == {}  # the current children, at once
    await a.register(A, b"1")
    assert await seen.next() == {NAME_A: b"1"}
    await a.update(A, b"2")  # a heartbeat: data only
    assert await seen.next() == {NAME_A: b"2"}
    await a.update(A, b"3")
    assert await seen.next() == {NAME_A: b"3"}
    await b.register(B, b"x")
    assert await seen.next() == {NAME_A: b"3", NAME_B: b"x"}
    await a.unregister(A)
    assert await seen.next() == {NAME_B: b"x"}
    await seen.assert_quiet()
    cancel()
    await b.unregister(B)
    await seen.assert_quiet()


async def test_listeners_run_on_the_loop_thread(backend: Backend, clients: list[Registry]) -> None:
    a, b, _ = clients
    threads: set[int] = set()
    seen = backend.recorder()
    a.add_state_listener(lambda _: threads.add(threading.get_ident()))
    a.watch_children(WORKERS, lambda _: threads.add(threading.get_ident()))
    a.watch_children(WORKERS, seen)
    assert await seen.next() == {}
    await b.register(B, b"")
    assert await seen.next() == {NAME_B: b""}
    states = backend.recorder()
    a.add_state_listener(states)
    await backend.expire(a)
    assert await states.next() in (SUSPENDED, LOST)
    await states.until(CONNECTED)
    assert threads == {threading.get_ident()}


async def test_stop_removes_ephemerals_and_notifies_others(
    backend: Backend, clients: list[Registry]
) -> None:
    a, b, _ = clients
    await a.register(A, b"a")
    seen = backend.recorder()
    b.watch_children(WORKERS, seen)
    assert await seen.next() == {NAME_A: b"a"}
    await a.stop()
    assert a.state is LOST
    assert await seen.next() == {}
    assert await b.children(WORKERS) == {}
    with pytest.raises(FailedPrecondition):
        await a.register(A, b"again")  # stopped clients refuse calls


async def test_expiry_drops_nodes_and_reconnects_with_a_fresh_session(
    backend: Backend, clients: list[Registry]
) -> None:
    a, b, _ = clients
    states = backend.recorder()
    a.add_state_listener(states)
    mine, theirs = backend.recorder(), backend.recorder()
    await a.register(A, b"epoch-1")
    a.watch_children(WORKERS, mine)
    b.watch_children(WORKERS, theirs)
    assert await mine.next() == await theirs.next() == {NAME_A: b"epoch-1"}

    await backend.expire(a)
    assert await theirs.next() == {}  # other sessions see the member go
    first = await states.next()
    if first is SUSPENDED:  # ZooKeeper: the server dropped the connection before the expiry
        first = await states.next()
    assert first is LOST
    assert await states.next() is CONNECTED  # LOST always comes before the new session
    assert a.state is CONNECTED
    await mine.until({})  # the reconnected client is told what it missed
    assert await b.children(WORKERS) == {}  # nothing resurrected, as with kazoo
    with pytest.raises(NotFound):
        await a.update(A, b"stale")  # the old node belonged to the old session

    await a.register(A, b"epoch-2")  # the owner re-registers in its new session
    assert await theirs.next() == {NAME_A: b"epoch-2"}
    # Watches survive the session (the embedded one may repeat the {} it saw at the expiry).
    await mine.until({NAME_A: b"epoch-2"})
    await states.assert_quiet()


async def test_register_replaces_a_stale_node_of_another_session(clients: list[Registry]) -> None:
    old, new, _ = clients
    await old.register(A, b"old incarnation")
    await new.register(A, b"new incarnation")
    await old.unregister(A)  # not the old session's node any more: left alone
    with pytest.raises(NotFound):
        await old.update(A, b"stale heartbeat")
    await old.stop()  # nor does the old session's end remove it
    assert await new.children(WORKERS) == {NAME_A: b"new incarnation"}


async def test_watch_before_start_and_listener_errors(
    backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    client = backend.client()
    seen = backend.recorder()

    def broken(_: object) -> None:
        raise RuntimeError("listener bug")

    client.watch_children(WORKERS, seen)
    client.watch_children(WORKERS, broken)
    client.add_state_listener(broken)
    await client.start()
    try:
        assert await seen.next() == {}  # delivered once connected
        await client.register(A, b"")
        assert await seen.next() == {NAME_A: b""}  # a failing listener harms no other
    finally:
        await client.stop()
    assert "registry watch listener failed" in caplog.text
    assert "registry state listener failed" in caplog.text


async def test_lock_is_exclusive_and_fifo(backend: Backend, clients: list[Registry]) -> None:
    order: list[str] = []
    inside = 0
    release = asyncio.Event()

    async def hold(client: Registry, who: str) -> None:
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
    await backend.queued(c, f"{LOCKS_PATH}/failover", 1)
    waiters = []
    for count, (client, who) in enumerate(((c, "c"), (b, "b"), (a, "a2")), start=2):
        waiters.append(asyncio.create_task(hold(client, who)))
        await backend.queued(c, f"{LOCKS_PATH}/failover", count)  # queue order: c, b, a2
    assert order == ["a"]
    release.set()
    await asyncio.wait_for(asyncio.gather(first, *waiters), WAIT)
    assert order == ["a", "c", "b", "a2"]


async def test_lock_is_released_when_the_holder_session_expires(
    backend: Backend, clients: list[Registry]
) -> None:
    a, b, c = clients
    a_inside, a_leave, b_inside = asyncio.Event(), asyncio.Event(), asyncio.Event()
    b_leave = asyncio.Event()

    async def hold(client: Registry, inside: asyncio.Event, leave: asyncio.Event) -> None:
        async with client.lock("alerts"):
            inside.set()
            await leave.wait()

    holder = asyncio.create_task(hold(a, a_inside, a_leave))
    await asyncio.wait_for(a_inside.wait(), WAIT)
    waiter = asyncio.create_task(hold(b, b_inside, b_leave))
    await backend.queued(c, f"{LOCKS_PATH}/alerts", 2)
    assert not b_inside.is_set()

    await backend.expire(a)
    await asyncio.wait_for(b_inside.wait(), WAIT)  # the lock died with a's session
    a_leave.set()
    await asyncio.wait_for(holder, WAIT)  # a's late release must not free b's lock
    c_inside = asyncio.Event()
    third = asyncio.create_task(hold(c, c_inside, asyncio.Event()))
    await backend.queued(c, f"{LOCKS_PATH}/alerts", 2)
    assert not c_inside.is_set()
    b_leave.set()
    await asyncio.wait_for(waiter, WAIT)
    await asyncio.wait_for(c_inside.wait(), WAIT)
    third.cancel()
    with pytest.raises(asyncio.CancelledError):
        await third


async def test_lock_waiters_leave_the_queue_on_cancel_and_on_expiry(
    backend: Backend, clients: list[Registry]
) -> None:
    a, b, c = clients
    leave = asyncio.Event()
    got: list[str] = []

    async def hold(client: Registry, who: str) -> None:
        async with client.lock("x"):
            got.append(who)
            if who == "a":
                await leave.wait()

    first = asyncio.create_task(hold(a, "a"))
    await backend.queued(a, f"{LOCKS_PATH}/x", 1)
    cancelled = asyncio.create_task(hold(b, "b"))
    await backend.queued(a, f"{LOCKS_PATH}/x", 2)
    expired = asyncio.create_task(hold(c, "c"))
    await backend.queued(a, f"{LOCKS_PATH}/x", 3)
    cancelled.cancel()
    await backend.expire(c)
    with pytest.raises(Unavailable):
        await asyncio.wait_for(expired, WAIT)
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    leave.set()
    await asyncio.wait_for(first, WAIT)
    await asyncio.wait_for(hold(b, "b-again"), WAIT)  # the queue is empty again
    assert got == ["a", "b-again"]


async def test_election_queues_contenders_and_hands_over_on_expiry(
    backend: Backend, clients: list[Registry]
) -> None:
    a, b, c = clients
    assert await c.leader("masters") is None
    inside = {who: asyncio.Event() for who in "abc"}
    leave = {who: asyncio.Event() for who in "abc"}

    async def run(client: Registry, who: str) -> None:
        async with client.leadership("masters", f"{who}:5678"):
            inside[who].set()
            await leave[who].wait()

    tasks = {"a": asyncio.create_task(run(a, "a"))}
    await asyncio.wait_for(inside["a"].wait(), WAIT)
    assert await c.leader("masters") == "a:5678"
    for count, (client, who) in enumerate(((b, "b"), (c, "c")), start=2):
        tasks[who] = asyncio.create_task(run(client, who))
        await backend.queued(a, f"{ELECTIONS_PATH}/masters", count)
    assert not inside["b"].is_set() and not inside["c"].is_set()
    assert await c.leader("masters") == "a:5678"
    async with a.lock("masters"):  # a lock of the same name is another queue
        pass

    states = backend.recorder()
    a.add_state_listener(states)
    await backend.expire(a)  # leadership ends with the session; the holder learns it via LOST
    await asyncio.wait_for(inside["b"].wait(), WAIT)
    await states.until(LOST)
    assert await c.leader("masters") == "b:5678"
    assert not inside["c"].is_set()
    leave["a"].set()  # a's late exit must not unseat b
    await asyncio.wait_for(tasks["a"], WAIT)
    assert await c.leader("masters") == "b:5678"

    leave["b"].set()  # stepping down hands over too
    await asyncio.wait_for(inside["c"].wait(), WAIT)
    assert await a.leader("masters") == "c:5678"
    leave["c"].set()
    await asyncio.wait_for(asyncio.gather(tasks["b"], tasks["c"]), WAIT)
    assert await a.leader("masters") is None


async def test_epochs_increase_across_clients(clients: list[Registry]) -> None:
    a, b, c = clients
    together = await asyncio.gather(*(r.next_epoch() for r in (a, b, c, a, b, c)))
    assert len(set(together)) == 6
    assert all(e > 0 for e in together)
    later = await c.next_epoch()
    assert later > max(together)


def _generation(snapshot: object) -> int:
    """The generation ``gen-<n>`` of A in a watch snapshot; -1 while A is absent."""
    assert isinstance(snapshot, dict)
    data = snapshot.get(NAME_A)
    return -1 if data is None else int(data.decode().removeprefix("gen-"))


async def test_watchers_converge_on_a_name_deleted_and_recreated_at_once(
    backend: Backend, clients: list[Registry]
) -> None:
    """A member restarted on the same address: its node is deleted and created again under the
    same name (by the new incarnation's ``register``, or by an ``unregister`` followed at once by
    another session's ``register``) faster than the watchers re-read it. Every watcher ends on the
    latest incarnation's data, and none ever goes back to an older one, whatever the order in
    which the deletions, creations and data changes reach it."""
    a, b, c = clients
    recorders = [backend.recorder() for _ in range(4)]
    for client, seen in zip((a, b, c, c), recorders, strict=True):
        client.watch_children(WORKERS, seen)
        assert await seen.next() == {}
    owners = (a, b)
    generation = 0
    for round_ in range(24):
        old, new = owners[round_ % 2], owners[(round_ + 1) % 2]
        await old.register(A, f"gen-{generation}".encode())
        generation += 1
        if round_ % 3 == 0:  # the old incarnation leaves cleanly, the new one comes at once
            await old.unregister(A)
            await new.register(A, f"gen-{generation}".encode())
        elif round_ % 3 == 1:  # the new incarnation replaces the stale node, then beats
            await new.register(A, f"gen-{generation}".encode())
            generation += 1
            await new.update(A, f"gen-{generation}".encode())
        else:  # replaced, and nothing else happens to the new node
            await new.register(A, f"gen-{generation}".encode())
        generation += 1
    latest = generation - 1
    assert await c.children(WORKERS) == {NAME_A: f"gen-{latest}".encode()}
    for seen in recorders:  # each snapshot: A absent (-1) or no older than any seen before
        newest = -1
        while newest != latest:
            current = _generation(await seen.next())
            assert current == -1 or current >= newest, f"back from gen-{newest} to gen-{current}"
            newest = max(newest, current)
