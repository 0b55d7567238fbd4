"""What only the ZooKeeper registry shows, against real ZooKeeper servers.

Chroots and digest ACLs, interoperation with kazoo's own recipes, the client's threads, and the
failures a cluster meets: ZooKeeper killed and restarted within the session timeout (the session
survives), ZooKeeper paused past it (the session is lost), nobody listening at all. Tests that hurt
the server use a private one (``zookeeper_factory``); the rest share one and keep to a fresh
chroot. The shared contract is in ``test_registry_contract.py``.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import make_digest_acl

from dsched.errors import PermissionDenied, Unavailable
from dsched_server.constants import ELECTIONS_PATH, EPOCHS_PATH, LOCKS_PATH
from dsched_server.coord.registry import ConnectionState
from dsched_server.coord.zookeeper import ZooKeeperRegistry
from tests.conftest import free_port
from tests.integration.coord.conftest import ZooKeeperFactory
from tests.integration.coord.support import SESSION_TIMEOUT, WAIT, Recorder
from tests.tcp_proxy import TcpProxy
from tests.zk import ZooKeeperServer

WORKERS = "/nodes/workers"
A = f"{WORKERS}/default@127.0.0.1:1001"
NAME_A = A.rsplit("/", 1)[1]
CONNECTED, SUSPENDED, LOST = (
    ConnectionState.CONNECTED,
    ConnectionState.SUSPENDED,
    ConnectionState.LOST,
)
QUIET = 0.3
SECRET = ("dsched", "s3cret")


@asynccontextmanager
async def started(
    server: ZooKeeperServer | TcpProxy, chroot: str, **options: Any
) -> AsyncIterator[Any]:
    options.setdefault("session_timeout", SESSION_TIMEOUT)
    registry = ZooKeeperRegistry(server.connect_string, chroot=chroot, **options)
    await registry.start()
    try:
        yield registry
    finally:
        await registry.stop()


@contextmanager
def raw_client(server: ZooKeeperServer, **options: Any) -> Iterator[Any]:
    """A plain kazoo client, as another tool (or an intruder) would use."""
    client = KazooClient(hosts=server.connect_string, **options)
    client.start(timeout=WAIT)
    try:
        yield client
    finally:
        client.stop()
        client.close()


def in_thread(function: Callable[..., Any], *args: Any) -> Any:
    # Blocking kazoo and server calls stay off the loop the registries run on.
    return asyncio.to_thread(function, *args)


def test_hosts_must_not_carry_the_chroot() -> None:
    with pytest.raises(ValueError, match="chroot"):
        ZooKeeperRegistry("127.0.0.1:2181/dsched")
    with pytest.raises(ValueError, match="absolute"):
        ZooKeeperRegistry("127.0.0.1:2181", chroot="dsched")


async def test_start_gives_up_after_connect_timeout_without_leaking_threads() -> None:
    before = set(threading.enumerate())
    registry = ZooKeeperRegistry(f"127.0.0.1:{free_port()}", connect_timeout=1.0)
    began = time.monotonic()
    with pytest.raises(Unavailable, match="cannot reach ZooKeeper"):
        await registry.start()
    assert time.monotonic() - began < 5
    assert registry.state is LOST
    await assert_no_kazoo_threads_left(before)


async def test_stop_ends_the_session_at_once_and_joins_kazoo_threads(
    zookeeper: ZooKeeperServer, chroot: str
) -> None:
    before = set(threading.enumerate())
    async with started(zookeeper, chroot) as other:
        registry = ZooKeeperRegistry(zookeeper.connect_string, chroot=chroot)
        await registry.start()
        await registry.register(A, b"a")
        seen = Recorder(QUIET)
        other.watch_children(WORKERS, seen)
        assert await seen.next() == {NAME_A: b"a"}
        await registry.stop()
        assert await seen.next(timeout=2.0) == {}  # well before any session timeout
    await assert_no_kazoo_threads_left(before)


async def assert_no_kazoo_threads_left(before: set[threading.Thread]) -> None:
    # asyncio's executor threads live as long as the loop; anything else new must end.
    new = [t for t in set(threading.enumerate()) - before if not t.name.startswith("asyncio_")]
    for thread in new:
        await in_thread(thread.join, WAIT)
    assert not [t for t in new if t.is_alive()]


async def test_chroots_isolate_clusters_and_are_created(
    zookeeper: ZooKeeperServer, chroot: str
) -> None:
    async with (
        started(zookeeper, f"{chroot}/one") as one,
        started(zookeeper, f"{chroot}/two") as two,
    ):
        await one.register(A, b"one")
        await two.register(A, b"two")
        assert await one.children(WORKERS) == {NAME_A: b"one"}
        assert await two.children(WORKERS) == {NAME_A: b"two"}
        assert sorted(await one.children("/")) == ["nodes"]
        with raw_client(zookeeper) as raw:
            assert sorted(raw.get_children(chroot)) == ["one", "two"]
            data, stat = raw.get(f"{chroot}/one{A}")
            assert data == b"one"
            assert stat.ephemeralOwner == one.client_id[0]


async def test_digest_acl_keeps_other_clients_out(zookeeper: ZooKeeperServer, chroot: str) -> None:
    async with started(zookeeper, chroot, auth=SECRET) as registry:
        await registry.register(A, b"secret")
        async with registry.lock("failover"):
            pass
        node = f"{chroot}{A}"
        with raw_client(zookeeper, auth_data=[("digest", ":".join(SECRET))]) as friend:
            for path in (chroot, f"{chroot}{WORKERS}", node, f"{chroot}{LOCKS_PATH}/failover"):
                acls, _ = friend.get_acls(path)
                assert acls == [make_digest_acl(*SECRET, all=True)], path
        with raw_client(zookeeper) as raw:
            for call, args in (
                (raw.get_children, (chroot,)),
                (raw.get_children, (f"{chroot}{WORKERS}",)),
                (raw.get, (node,)),
                (raw.set, (node, b"forged")),
                (raw.delete, (node,)),
                (raw.create, (f"{chroot}{WORKERS}/intruder", b"")),
                (raw.create, (f"{chroot}{LOCKS_PATH}/failover/x", b"")),
            ):
                with pytest.raises(NoAuthError):
                    call(*args)
        with (
            raw_client(zookeeper, auth_data=[("digest", "dsched:wrong")]) as wrong,
            pytest.raises(NoAuthError),
        ):
            wrong.get(node)
        async with started(zookeeper, chroot, auth=("dsched", "wrong")) as intruder:
            with pytest.raises(PermissionDenied):
                await intruder.children(WORKERS)
        async with started(zookeeper, chroot, auth=SECRET) as peer:
            assert await peer.children(WORKERS) == {NAME_A: b"secret"}


async def test_kazoo_recipes_share_our_lock_and_election_queues(
    zookeeper: ZooKeeperServer, chroot: str
) -> None:
    async with started(zookeeper, chroot) as registry:
        with raw_client(zookeeper) as raw:
            theirs = raw.Lock(f"{chroot}{LOCKS_PATH}/shared", "kazoo")
            assert await in_thread(theirs.acquire, True, WAIT)
            inside = asyncio.Event()

            async def ours() -> None:
                async with registry.lock("shared"):
                    inside.set()

            task = asyncio.create_task(ours())
            await asyncio.sleep(
                QUIET
            )  # time to queue behind kazoo's holder, which it must not pass
            assert not inside.is_set()
            assert await in_thread(theirs.contenders) == ["kazoo", ""]  # ours has no identifier
            await in_thread(theirs.release)
            await asyncio.wait_for(task, WAIT)

            async with registry.leadership("masters", "master-1:5678"):
                election = raw.Election(f"{chroot}{ELECTIONS_PATH}/masters")
                assert await in_thread(election.contenders) == ["master-1:5678"]
            assert await in_thread(election.contenders) == []


async def test_restart_within_the_session_timeout_keeps_the_session(
    zookeeper_factory: ZooKeeperFactory, chroot: str
) -> None:
    server = zookeeper_factory()
    async with started(server, chroot, session_timeout=6.0) as registry:
        epoch = await registry.next_epoch()
        states, seen = Recorder(QUIET), Recorder(QUIET)
        registry.add_state_listener(states)
        await registry.register(A, b"before")
        registry.watch_children(WORKERS, seen)
        assert await seen.next() == {NAME_A: b"before"}

        server.kill()
        assert await states.next() is SUSPENDED
        pending = asyncio.create_task(registry.update(A, b"during"))  # waits for the connection
        await in_thread(server.restart)
        assert await states.next() is CONNECTED
        await asyncio.wait_for(pending, WAIT)  # same session: the call went through
        await seen.until({NAME_A: b"during"})  # watches were re-armed with the connection
        await registry.update(A, b"after")
        assert await seen.next() == {NAME_A: b"after"}
        assert await registry.children(WORKERS) == {NAME_A: b"after"}  # the node survived
        await states.assert_quiet()  # no LOST
        assert await registry.next_epoch() > epoch  # the counter survived the restart too


async def test_pause_past_the_session_timeout_loses_the_session(
    zookeeper_factory: ZooKeeperFactory, chroot: str
) -> None:
    server = zookeeper_factory()
    # The observer's session outlasts the pause; the registry reaches ZooKeeper through a proxy.
    with TcpProxy(server.port) as proxy, raw_client(server, timeout=20.0) as observer:
        async with started(proxy, chroot) as registry:
            states, seen = Recorder(QUIET), Recorder(QUIET)
            registry.add_state_listener(states)
            await registry.register(A, b"epoch-1")
            registry.watch_children(WORKERS, seen)
            assert await seen.next() == {NAME_A: b"epoch-1"}
            expired = threading.Event()
            assert await in_thread(observer.exists, f"{chroot}{A}", lambda _: expired.set())

            proxy.block()
            server.pause()
            try:
                paused = time.monotonic()
                # kazoo gives up on a silent server after 2/3 of the session timeout.
                assert await states.next(timeout=SESSION_TIMEOUT + WAIT) is SUSPENDED
                pending = asyncio.create_task(registry.update(A, b"while paused"))
                # Outlast the session timeout, as a long GC pause or a partition would.
                await asyncio.sleep(max(0.0, SESSION_TIMEOUT + 1.0 - (time.monotonic() - paused)))
            finally:
                server.resume()
            # The client stays cut off until the resumed server has expired its session: a
            # reconnect that reached the server before its expiry thread would revalidate the
            # session (the server's clock stood still too), and the test would prove nothing.
            assert await in_thread(expired.wait, WAIT)
            proxy.heal()
            assert await states.next(timeout=SESSION_TIMEOUT + WAIT) is LOST
            assert await states.next() is CONNECTED
            with pytest.raises(Unavailable):
                await asyncio.wait_for(pending, WAIT)  # it belonged to the dead session
            await seen.until({})  # a fresh snapshot in the new session: the old node is gone
            assert await registry.children(WORKERS) == {}
            await registry.register(A, b"epoch-2")
            assert await seen.next() == {NAME_A: b"epoch-2"}
            await states.assert_quiet()


async def test_epochs_keep_increasing_for_a_new_client(
    zookeeper: ZooKeeperServer, chroot: str
) -> None:
    async with started(zookeeper, chroot) as first:
        epochs = [await first.next_epoch() for _ in range(3)]
    assert epochs == sorted(epochs) and len(set(epochs)) == 3
    async with started(zookeeper, chroot) as second:
        assert await second.next_epoch() > epochs[-1]
        assert await second.children(EPOCHS_PATH) != {}  # this session's epoch node
    with raw_client(zookeeper) as raw:
        assert raw.get_children(f"{chroot}{EPOCHS_PATH}") == []  # gone with the sessions


async def test_a_watch_on_a_missing_path_sees_it_appear_and_bursts_coalesce(
    zookeeper: ZooKeeperServer, chroot: str
) -> None:
    names = [f"m{i:02d}" for i in range(20)]
    snapshots: list[dict[str, bytes]] = []
    complete = asyncio.Event()

    def seen(children: Mapping[str, bytes]) -> None:
        snapshots.append(dict(children))
        if len(children) == len(names):
            complete.set()

    async with started(zookeeper, chroot) as registry:
        registry.watch_children("/later/members", seen)
        await asyncio.gather(*(registry.register(f"/later/members/{n}", b"") for n in names))
        await asyncio.wait_for(complete.wait(), WAIT)
    assert snapshots[0] == {}  # the path did not exist yet
    assert snapshots[-1] == dict.fromkeys(names, b"")
    assert len(snapshots) < len(names)  # no snapshot per change once they pile up
