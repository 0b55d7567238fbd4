"""Real ZooKeeper servers for the registry tests (see :mod:`tests.zk`).

- ``zookeeper``: one server shared by the whole test session. Tests must not disturb it (no kill,
  pause or restart) and keep to a unique chroot (``chroot`` gives one, ``/t-<random>``), so they
  never see each other's nodes.
- ``zookeeper_factory``: ``zookeeper_factory()`` starts a private server that the test may kill,
  restart or pause; every server it started is closed (its JVM killed) after the test.
- ``backend`` / ``clients``: the contract tests run three times, on the embedded registry, on
  ZooKeeper (the shared server, a fresh chroot) and on the embedded registry over gRPC (a
  ``RegistryService`` on 127.0.0.1:0); ``clients`` are three started clients of it.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from dsched_server.coord.embedded import EmbeddedEnsemble
from dsched_server.coord.registry import Registry
from dsched_server.coord.registry_servicer import RegistryServer
from tests.integration.coord.support import (
    Backend,
    EmbeddedBackend,
    GrpcBackend,
    ZooKeeperBackend,
)
from tests.zk import ZooKeeperServer

ZooKeeperFactory = Callable[..., ZooKeeperServer]


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    with ZooKeeperServer(tmp_path_factory.mktemp("zookeeper")) as server:
        yield server


@pytest.fixture
def zookeeper_factory(tmp_path: Path) -> Iterator[ZooKeeperFactory]:
    servers: list[ZooKeeperServer] = []

    def make(port: int | None = None, tick_ms: int = 1000) -> ZooKeeperServer:
        server = ZooKeeperServer(tmp_path / f"zookeeper-{len(servers)}", port, tick_ms)
        servers.append(server)
        server.start()
        return server

    yield make
    for server in servers:
        server.close()


@pytest.fixture
def chroot() -> str:
    """A chroot no other test uses."""
    return f"/t-{secrets.token_hex(6)}"


@pytest.fixture(params=["embedded", "zookeeper", "grpc"])
async def backend(
    request: pytest.FixtureRequest, tmp_path: Path, chroot: str
) -> AsyncIterator[Backend]:
    if request.param == "embedded":
        yield EmbeddedBackend(EmbeddedEnsemble(tmp_path / "registry"))
    elif request.param == "grpc":
        async with registry_service(EmbeddedEnsemble(tmp_path / "registry")) as served:
            yield served
    else:
        # Asked for here, not in the signature, so that embedded-only runs start no JVM.
        yield ZooKeeperBackend(request.getfixturevalue("zookeeper"), chroot)


@contextlib.asynccontextmanager
async def registry_service(ensemble: EmbeddedEnsemble) -> AsyncIterator[GrpcBackend]:
    """``RegistryService`` on ``ensemble``, served on 127.0.0.1:0 while the block runs."""
    server = RegistryServer(ensemble)
    await server.start()
    try:
        yield GrpcBackend(ensemble, server.servicer, server.address)
    finally:
        await server.stop()


@pytest.fixture
async def clients(backend: Backend) -> AsyncIterator[list[Registry]]:
    started = [backend.client() for _ in range(3)]
    for client in started:
        await client.start()
    yield started
    for client in started:
        await client.stop()
