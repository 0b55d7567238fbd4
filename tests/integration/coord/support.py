"""Helpers for the registry tests: a listener recorder and the three registries behind one face.

:class:`Backend` hides what differs between the embedded registry, ZooKeeper and the embedded
registry reached over gRPC (``RegistryService``, a standalone's worker process) in the contract
tests: how clients are made, how a session is expired (the embedded ensemble's hook, a second
ZooKeeper client closing the session, the service ending the stream's session), and how a test
knows that a lock or election waiter has queued (the embedded queue is filled in the same turn of
the loop; on ZooKeeper, a watch on the queue's node shows it; over gRPC, the ensemble's queue is
read until the waiter's request has arrived).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import cast

from dsched_server.coord.embedded import EmbeddedEnsemble, EmbeddedRegistry
from dsched_server.coord.grpc_registry import GrpcRegistry
from dsched_server.coord.registry import Registry
from dsched_server.coord.registry_servicer import RegistryServicer
from dsched_server.coord.zk_queue import contenders
from dsched_server.coord.zookeeper import ZooKeeperRegistry
from tests.zk import ZooKeeperServer

WAIT = 10.0  # the longest any single expected event may take
SESSION_TIMEOUT = 4.0  # seconds; the test servers tick every second, so 2-20 s are allowed


async def settle() -> None:
    """Lets every callback already scheduled on the loop (and the ones they schedule) run."""
    for _ in range(10):
        await asyncio.sleep(0)


class Recorder:
    """Collects what a listener is called with, for awaiting one call at a time. ``quiet`` is how
    long :meth:`assert_quiet` watches for an unexpected call (0: only what is already scheduled)."""

    def __init__(self, quiet: float = 0.0) -> None:
        self.calls: asyncio.Queue[object] = asyncio.Queue()
        self.quiet = quiet

    def __call__(self, value: object) -> None:
        self.calls.put_nowait(dict(value) if isinstance(value, Mapping) else value)

    async def next(self, timeout: float = WAIT) -> object:
        return await asyncio.wait_for(self.calls.get(), timeout)

    async def until(self, expected: object, timeout: float = WAIT) -> None:
        """Skips calls until one equals ``expected``."""

        async def scan() -> None:
            while await self.calls.get() != expected:
                pass

        await asyncio.wait_for(scan(), timeout)

    async def assert_quiet(self) -> None:
        await settle()
        if self.quiet:
            await asyncio.sleep(self.quiet)
        assert self.calls.empty(), f"unexpected call {self.calls.get_nowait()!r}"


class Backend:
    """One registry implementation as the contract tests see it."""

    name: str
    quiet: float

    def client(self) -> Registry:
        raise NotImplementedError

    async def expire(self, client: Registry) -> None:
        """Ends ``client``'s session as a timeout would (its nodes and locks go)."""
        raise NotImplementedError

    async def queued(self, observer: Registry, path: str, count: int) -> None:
        """Returns once ``count`` contenders wait in the lock or election queue at ``path``."""
        raise NotImplementedError

    def recorder(self) -> Recorder:
        return Recorder(self.quiet)


class EmbeddedBackend(Backend):
    name = "embedded"
    quiet = 0.0

    def __init__(self, ensemble: EmbeddedEnsemble) -> None:
        self.ensemble = ensemble

    def client(self) -> Registry:
        return EmbeddedRegistry(self.ensemble)

    async def expire(self, client: Registry) -> None:
        self.ensemble.expire_session(cast(EmbeddedRegistry, client))

    async def queued(self, observer: Registry, path: str, count: int) -> None:
        await settle()  # a waiter joins the queue on its first turn of the loop


class ZooKeeperBackend(Backend):
    name = "zookeeper"
    quiet = 0.3  # ZooKeeper answers within milliseconds on loopback

    def __init__(self, server: ZooKeeperServer, chroot: str) -> None:
        self.server = server
        self.chroot = chroot

    def client(self) -> Registry:
        return ZooKeeperRegistry(
            self.server.connect_string, chroot=self.chroot, session_timeout=SESSION_TIMEOUT
        )

    async def expire(self, client: Registry) -> None:
        await asyncio.to_thread(self.server.expire_session, cast(ZooKeeperRegistry, client))

    async def queued(self, observer: Registry, path: str, count: int) -> None:
        arrived = asyncio.Event()

        def seen(children: Mapping[str, bytes]) -> None:
            if len(contenders(children)) >= count:
                arrived.set()

        cancel = observer.watch_children(path, seen)
        try:
            await asyncio.wait_for(arrived.wait(), WAIT)
        finally:
            cancel()


class GrpcBackend(Backend):
    """Clients in this process, sessions on an ensemble behind a real ``RegistryService`` on
    127.0.0.1 (the server side is in this process too; the stream between them is real gRPC)."""

    name = "grpc"
    quiet = 0.3  # answers cross a loopback socket

    def __init__(self, ensemble: EmbeddedEnsemble, servicer: RegistryServicer, address: str):
        self.ensemble = ensemble
        self.servicer = servicer
        self.address = address

    def client(self) -> Registry:
        return GrpcRegistry(self.address, session_timeout=SESSION_TIMEOUT)

    async def expire(self, client: Registry) -> None:
        await self.servicer.expire(cast(GrpcRegistry, client).session_id)

    async def queued(self, observer: Registry, path: str, count: int) -> None:
        # The waiter's request crosses the socket: read the ensemble's queue until it is there.
        async def arrived() -> None:
            while self.ensemble.contenders(path) < count:
                await asyncio.sleep(0.005)

        await asyncio.wait_for(arrived(), WAIT)
