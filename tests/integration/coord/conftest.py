"""Real ZooKeeper servers for the registry tests (see :mod:`tests.zk`).

- ``zookeeper``: one server shared by the whole test session. Tests must not disturb it (no kill,
  pause or restart) and keep to a unique chroot (``chroot`` gives one, ``/t-<random>``), so they
  never see each other's nodes.
- ``zookeeper_factory``: ``zookeeper_factory()`` starts a private server that the test may kill,
  restart or pause; every server it started is closed (its JVM killed) after the test.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

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
