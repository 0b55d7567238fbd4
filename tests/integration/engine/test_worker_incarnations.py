"""A master's view of worker incarnations (its worker directory and failover) on a real registry,
embedded and ZooKeeper: an incarnation is (address, epoch), and an epoch that changes under an
address is the old incarnation's death, whatever order the registry shows it in.

The workers here are registry nodes with heartbeat data, registered by other sessions as workers
do; their addresses either refuse connections (nothing listens: a dead process) or accept them (a
live listener: a process that may be frozen or cut off). What failover decides reaches the
instance runners as :class:`WorkerGone` messages, recorded at that seam.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from dsched_server.clock import SystemClock
from dsched_server.coord.embedded import EmbeddedEnsemble, EmbeddedRegistry
from dsched_server.coord.registry import Registry
from dsched_server.coord.zookeeper import ZooKeeperRegistry
from dsched_server.datasource_key import DatasourceKey
from dsched_server.engine.dispatcher import Dispatcher
from dsched_server.engine.failover import Failover
from dsched_server.engine.grpc_worker_client import GrpcWorkerClient
from dsched_server.engine.messages import Message, WorkerGone
from dsched_server.engine.notifier import Notifier
from dsched_server.engine.runners import Runners
from dsched_server.engine.services import EngineServices
from dsched_server.engine.workers import WorkerDirectory
from dsched_server.heartbeat import HeartbeatInfo, ServerStatus, encode_heartbeat
from dsched_server.store.database import Database
from dsched_worker.agent import worker_node
from tests.conftest import free_port

WAIT_S = 15.0
# No test here waits for a session to end (each ends its sessions by stopping the client, which
# removes their nodes at once), so the sessions are the longest the test server grants (20 ticks of
# 1 s). With the 4 s of the other engine tests, kazoo drops a connection that is silent for 2/3 of
# the session (2.7 s) and the session ends 4 s after the last ping: a stall that long on a loaded
# machine (the JVM's or the client thread's) ends it, and its nodes vanish mid-test.
SESSION_TIMEOUT_S = 20.0
NEVER = 600.0  # a failover delay no test waits out: a failover seen is a confirmed death
NOW = datetime(2024, 1, 1, tzinfo=UTC)

NewRegistry = Callable[[], Awaitable[Registry]]


def beat(epoch: int) -> bytes:
    return encode_heartbeat(
        HeartbeatInfo(
            cpu_usage=0.0,
            memory_usage=0.0,
            load_average=0.0,
            disk_usage=0.0,
            slots_total=4,
            slots_in_use=0,
            start_time=NOW,
            report_time=NOW,
            status=ServerStatus.NORMAL,
            epoch=epoch,
            pid=1,
        )
    )


class RecordingRunners(Runners):
    """The runners seam: keeps what failover tells the instance runners."""

    def __init__(self) -> None:
        super().__init__()
        self.gone: asyncio.Queue[WorkerGone] = asyncio.Queue()

    def broadcast(self, message: Message) -> None:
        if isinstance(message, WorkerGone):
            self.gone.put_nowait(message)

    async def next_gone(self) -> WorkerGone:
        return await asyncio.wait_for(self.gone.get(), WAIT_S)


@pytest.fixture(params=["embedded", "zookeeper"])
async def registries(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[NewRegistry]:
    """Starts registry clients (sessions) of one registry on demand; stops them afterwards."""
    started: list[Registry] = []
    if request.param == "embedded":
        ensemble = EmbeddedEnsemble(tmp_path / "registry")

        def make() -> Registry:
            return EmbeddedRegistry(ensemble)
    else:
        zk = request.getfixturevalue("zookeeper")
        chroot = f"/i-{secrets.token_hex(5)}"

        def make() -> Registry:
            return ZooKeeperRegistry(
                zk.connect_string, chroot=chroot, session_timeout=SESSION_TIMEOUT_S
            )

    async def new() -> Registry:
        registry = make()
        await registry.start()
        started.append(registry)
        return registry

    yield new
    for registry in reversed(started):
        await registry.stop()


@asynccontextmanager
async def master_view(
    registry: Registry, tmp_path: Path, delay: float
) -> AsyncIterator[tuple[WorkerDirectory, RecordingRunners]]:
    """A master's worker directory and failover (failover delay ``delay``) on ``registry``."""
    client = GrpcWorkerClient()
    directory = WorkerDirectory(
        registry, SystemClock(), selector="lower_weight", warmup=timedelta(0)
    )
    services = EngineServices(
        db=Database(f"sqlite+aiosqlite:///{tmp_path / 'unused.db'}"),  # never started
        clock=SystemClock(),
        dispatcher=Dispatcher(directory, client),
        workers=directory,
        worker_client=client,
        notifier=Notifier(),
        address="127.0.0.1:1",
        cluster_address="127.0.0.1:2",
        epoch=1,
        default_group="default",
        reload=lambda _id, _pins: None,
        datasource_key=DatasourceKey(tmp_path / "datasource.key", create=True),
        failover_delay=delay,
    )
    runners = RecordingRunners()
    failover = Failover(services, registry, runners, delay=delay, enabled=lambda: False)
    await directory.start()
    await failover.start()
    try:
        yield directory, runners
    finally:
        await failover.stop()
        await directory.stop()
        await client.close()


async def shows(directory: WorkerDirectory, address: str, epoch: int, group: str = "") -> None:
    """Waits (bounded) until ``directory`` lists ``address`` with ``epoch`` (and ``group``)."""
    async with asyncio.timeout(WAIT_S):
        while True:
            ref = directory.get(address)
            if ref is not None and ref.epoch == epoch and (not group or ref.group == group):
                return
            await directory.changed()


@asynccontextmanager
async def listening_address() -> AsyncIterator[str]:
    """An address that accepts connections (and closes them)."""

    def close(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()

    server = await asyncio.start_server(close, "127.0.0.1", 0)
    try:
        yield f"127.0.0.1:{server.sockets[0].getsockname()[1]}"
    finally:
        server.close()
        await server.wait_closed()


@pytest.fixture
async def listening() -> AsyncIterator[str]:
    async with listening_address() as address:
        yield address


async def wait_gone(directory: WorkerDirectory, address: str) -> None:
    async with asyncio.timeout(WAIT_S):
        while directory.get(address) is not None:
            await directory.changed()


async def test_a_worker_back_on_its_address_is_failed_over_at_once_however_the_events_come(
    registries: NewRegistry, tmp_path: Path, listening: str
) -> None:
    """A worker restarted on its address again and again, each incarnation replacing the node of
    the one before (delete and create under one name, faster than the master looks): the master
    ends on the newest incarnation and fails over every older one without waiting for the
    failover delay, including incarnations it never saw."""
    observer, first, second = await registries(), await registries(), await registries()
    node = worker_node("default", listening)
    async with master_view(observer, tmp_path, NEVER) as (directory, runners):
        await first.register(node, beat(1))
        await shows(directory, listening, 1)
        for epoch in range(2, 14):
            await (first, second)[epoch % 2].register(node, beat(epoch))
        await shows(directory, listening, 13)
        newest = 0
        while newest != 12:
            gone = await runners.next_gone()
            assert gone.address == listening and gone.why.startswith("is back as epoch"), gone
            assert newest < gone.epoch < 13, (newest, gone)
            newest = gone.epoch


async def test_a_worker_whose_address_refuses_connections_is_failed_over_at_once(
    registries: NewRegistry, tmp_path: Path
) -> None:
    observer, worker = await registries(), await registries()
    address = f"127.0.0.1:{free_port()}"  # nothing listens: its process is gone
    async with master_view(observer, tmp_path, NEVER) as (directory, runners):
        await worker.register(worker_node("default", address), beat(7))
        await shows(directory, address, 7)
        await worker.stop()  # its node goes, as at the end of a session
        assert await runners.next_gone() == WorkerGone(
            address, 7, "nothing listens at its address any more"
        )


async def test_a_worker_that_may_be_alive_waits_for_the_delay_unless_it_comes_back(
    registries: NewRegistry, tmp_path: Path, listening: str
) -> None:
    """Two workers whose addresses still accept connections (frozen or cut off, not known dead)
    leave the registry one after the other. The first comes back with its epoch (its session
    survived), so only the second is failed over, at the end of the failover delay; had the first
    one's timer not been cancelled it would have fired first."""
    observer, back, lost = await registries(), await registries(), await registries()
    async with (
        master_view(observer, tmp_path, 1.0) as (directory, runners),
        listening_address() as other,
    ):
        await back.register(worker_node("default", listening), beat(3))
        await lost.register(worker_node("default", other), beat(4))
        await shows(directory, listening, 3)
        await shows(directory, other, 4)
        await back.unregister(worker_node("default", listening))
        await wait_gone(directory, listening)
        await back.register(worker_node("default", listening), beat(3))
        await shows(directory, listening, 3)
        await lost.unregister(worker_node("default", other))
        assert await runners.next_gone() == WorkerGone(other, 4, "did not come back within 1s")
        assert runners.gone.empty()


async def test_two_nodes_for_one_address_the_newer_epoch_is_the_live_one(
    registries: NewRegistry, tmp_path: Path, listening: str
) -> None:
    """A worker restarted in another group while its old node waits for the old session to end:
    the directory keeps the newer incarnation, whichever node it reads first, and the older one is
    failed over at once."""
    observer, old, new = await registries(), await registries(), await registries()
    async with master_view(observer, tmp_path, NEVER) as (directory, runners):
        await old.register(worker_node("blue", listening), beat(5))
        await shows(directory, listening, 5, "blue")
        await new.register(worker_node("green", listening), beat(6))
        await shows(directory, listening, 6, "green")
        assert await runners.next_gone() == WorkerGone(listening, 5, "is back as epoch 6")
        await old.register(worker_node("blue", listening), beat(5))  # a late beat of the old one
        await old.stop()
        await shows(directory, listening, 6, "green")
        assert directory.live == {(listening, 6)}
