"""Masters and workers in the test's event loop, each with its own ZooKeeper session, over a real
PostgreSQL or MariaDB database (``cluster_db``: both, one fresh database each, migrated already:
a copy of the session's, see tests/conftest.py).

:class:`ZkCluster` starts members on demand and stops them in reverse. Sessions use a short timeout
(4 s) so that tests forcing an expiry (:meth:`ZkCluster.expire`, which closes the member's session
from a second client, as ZooKeeper does when a session times out) stay quick. The helpers of the
API tests (raw stubs, watch streams) are reused through :meth:`ZkCluster.api`.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from grpc import aio

from dsched.v1 import log_service_pb2_grpc, master_service_pb2_grpc
from dsched_server.coord.embedded import EmbeddedEnsemble
from dsched_server.coord.zookeeper import ZooKeeperRegistry
from dsched_server.master import Master, MasterOptions
from dsched_worker.app import Worker, WorkerOptions
from tests.conftest import _Server
from tests.integration.api.conftest import NEVER_BUSY, WAIT_S, Cluster
from tests.zk import ZooKeeperServer

SESSION_TIMEOUT_S = 4.0


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    with ZooKeeperServer(tmp_path_factory.mktemp("zookeeper")) as server:
        yield server


@pytest.fixture(params=["postgresql", "mariadb"])
def cluster_db(request: pytest.FixtureRequest, _servers: dict[str, _Server]) -> Iterator[str]:
    with _servers[str(request.param)].database(migrated=True) as url:
        yield url


@dataclass
class ZkCluster:
    zk: ZooKeeperServer
    db_url: str
    tmp: Path
    chroot: str = field(default_factory=lambda: f"/c-{secrets.token_hex(5)}")
    masters: list[Master] = field(default_factory=list)
    workers: list[Worker] = field(default_factory=list)
    _stack: contextlib.AsyncExitStack = field(default_factory=contextlib.AsyncExitStack)

    def registry(self) -> ZooKeeperRegistry:
        return ZooKeeperRegistry(
            self.zk.connect_string, chroot=self.chroot, session_timeout=SESSION_TIMEOUT_S
        )

    async def master(self, **options: Any) -> Master:
        registry = self.registry()
        await registry.start()
        self._stack.push_async_callback(registry.stop)
        options = {"thresholds": NEVER_BUSY, "heartbeat_interval": 0.5, **options}
        master = Master(
            MasterOptions(
                db_url=self.db_url,
                data_dir=self.tmp / f"master-{len(self.masters)}",
                port=0,
                cluster_port=0,
                **options,
            ),
            registry=registry,
        )
        await master.start()
        self._stack.push_async_callback(master.stop)
        self.masters.append(master)
        return master

    async def worker(self, **options: Any) -> Worker:
        registry = self.registry()
        await registry.start()
        self._stack.push_async_callback(registry.stop)
        worker = Worker(
            WorkerOptions(
                data_dir=self.tmp / f"worker-{len(self.workers)}",
                port=0,
                slots=4,
                thresholds=NEVER_BUSY,
                heartbeat_interval=0.5,
                stop_grace=2.0,
                **options,
            ),
            registry=registry,
        )
        await worker.start()
        self._stack.push_async_callback(worker.stop)
        self.workers.append(worker)
        for master in self.masters:
            await seen_by(master, worker)
        return worker

    async def api(self, master: Master) -> Cluster:
        """The API tests' view of ``master``: raw stubs on a channel to it."""
        channel = aio.insecure_channel(master.address)
        self._stack.push_async_callback(channel.close)
        await asyncio.wait_for(channel.channel_ready(), WAIT_S)
        return Cluster(
            master=master,
            worker=self.workers[0],
            channel=channel,
            stub=master_service_pb2_grpc.MasterServiceStub(channel),
            logs=log_service_pb2_grpc.LogServiceStub(channel),
            tmp=self.tmp,
            ensemble=EmbeddedEnsemble(self.tmp / "unused"),
        )

    def expire(self, member: Master | Worker) -> None:
        """Ends the member's ZooKeeper session as a timeout would."""
        registry = member.registry if isinstance(member, Master) else member._registry
        assert isinstance(registry, ZooKeeperRegistry)
        self.zk.expire_session(registry)


async def seen_by(master: Master, worker: Worker) -> None:
    """Waits (bounded) until ``master`` lists ``worker`` with its current epoch."""
    async with asyncio.timeout(WAIT_S):
        while True:
            ref = master.workers.get(worker.address)
            if ref is not None and ref.epoch == worker.epoch:
                return
            await master.workers.changed()


@pytest.fixture
async def zk_cluster(
    zookeeper: ZooKeeperServer, cluster_db: str, tmp_path: Path
) -> AsyncIterator[ZkCluster]:
    cluster = ZkCluster(zookeeper, cluster_db, tmp_path)
    async with cluster._stack:
        yield cluster
