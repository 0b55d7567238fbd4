"""What only the registry over gRPC (``RegistryService``) can show; the rest is the contract.

A session is its stream: it ends when the client process dies (its connection breaks), when the
client goes silent for its session timeout, and the client reports SUSPENDED when the server goes
silent. Real processes and real gRPC on 127.0.0.1; the ensemble's own (embedded) client watches.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import grpc
import pytest

from dsched.errors import Unavailable
from dsched.v1 import registry_service_pb2 as pb
from dsched.v1 import registry_service_pb2_grpc as pb_grpc
from dsched_server.coord.embedded import EmbeddedEnsemble, EmbeddedRegistry
from dsched_server.coord.grpc_registry import GrpcRegistry
from dsched_server.coord.registry import ConnectionState
from dsched_server.coord.registry_servicer import RegistryServer
from dsched_server.rpc.serving import Service, Serving
from tests.integration.coord.support import WAIT, Recorder

WORKERS = "/nodes/workers"
NODE = f"{WORKERS}/default@127.0.0.1:1001"
NAME = NODE.rsplit("/", 1)[1]

# A client in a process of its own: registers, says so, then beats until it is killed.
_CLIENT = """
import asyncio, sys
from dsched_server.coord.grpc_registry import GrpcRegistry

async def main():
    registry = GrpcRegistry(sys.argv[1], session_timeout=60.0)
    await registry.start()
    await registry.register(sys.argv[2], b"alive")
    print("registered", flush=True)
    await asyncio.Event().wait()

asyncio.run(main())
"""


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[RegistryServer, Recorder]]:
    """A registry service, and what a local (embedded) client of the same ensemble sees of the
    workers (the empty start already taken)."""
    ensemble = EmbeddedEnsemble(tmp_path / "registry")
    server = RegistryServer(ensemble)
    local = EmbeddedRegistry(ensemble)
    await server.start()
    await local.start()
    seen = Recorder()
    local.watch_children(WORKERS, seen)
    assert await seen.next() == {}
    yield server, seen
    await local.stop()
    await server.stop()


async def test_a_killed_client_process_loses_its_session_at_once(
    served: tuple[RegistryServer, Recorder],
) -> None:
    server, seen = served
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _CLIENT, server.address, NODE, stdout=subprocess.PIPE
    )
    try:
        assert proc.stdout is not None
        assert await asyncio.wait_for(proc.stdout.readline(), WAIT) == b"registered\n"
        assert await seen.next() == {NAME: b"alive"}
        proc.send_signal(signal.SIGKILL)
        # The session timeout is a minute: only the broken stream can end the session this soon.
        assert await seen.next() == {}
        await asyncio.wait_for(_no_sessions(server), WAIT)
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()


async def _no_sessions(server: RegistryServer) -> None:
    while server.servicer.sessions:
        await asyncio.sleep(0.01)


async def test_a_silent_client_expires_after_its_session_timeout(
    served: tuple[RegistryServer, Recorder],
) -> None:
    server, seen = served
    async with grpc.aio.insecure_channel(server.address) as channel:
        call = pb_grpc.RegistryServiceStub(channel).Session()
        opening = pb.SessionRequest(call=pb.REGISTRY_CALL_OPEN)
        opening.session_timeout.FromTimedelta(timedelta(seconds=1))
        await call.write(opening)
        opened = await call.read()
        assert isinstance(opened, pb.SessionResponse)
        assert opened.reply == pb.REGISTRY_REPLY_OPENED
        await call.write(
            pb.SessionRequest(call_id=1, call=pb.REGISTRY_CALL_REGISTER, path=NODE, data=b"x")
        )
        assert await seen.next() == {NAME: b"x"}
        # No heartbeat from here on, the stream left open: the server expires the session.
        assert await seen.next() == {}
        replies = []
        while isinstance(response := await call.read(), pb.SessionResponse):
            replies.append(response.reply)
        assert pb.REGISTRY_REPLY_DONE in replies  # the register was answered before the end
        assert await call.code() == grpc.StatusCode.OK


class _SilentServicer(pb_grpc.RegistryServiceServicer):
    """Opens sessions, then says nothing until ``release`` is set: a hung registry."""

    def __init__(self) -> None:
        self.release = asyncio.Event()

    async def Session(
        self, request_iterator: AsyncIterator[pb.SessionRequest], context: object
    ) -> AsyncIterator[pb.SessionResponse]:
        yield pb.SessionResponse(reply=pb.REGISTRY_REPLY_OPENED, session_id=1)
        await self.release.wait()


async def test_a_silent_server_suspends_the_client_and_a_closed_stream_loses_the_session() -> None:
    servicer = _SilentServicer()
    name = pb.DESCRIPTOR.services_by_name["RegistryService"].full_name
    serving = Serving(
        [Service(name, servicer, pb_grpc.add_RegistryServiceServicer_to_server)], "127.0.0.1:0"
    )
    port = await serving.start()
    client = GrpcRegistry(f"127.0.0.1:{port}", session_timeout=0.6)
    states = Recorder()
    client.add_state_listener(states)
    try:
        await client.start()
        assert await states.next() is ConnectionState.CONNECTED
        assert await states.next() is ConnectionState.SUSPENDED  # 2/3 of a timeout of silence
        waiting = asyncio.create_task(client.children(WORKERS))  # waits for the connection
        await asyncio.sleep(0)
        assert not waiting.done()
        servicer.release.set()  # the server ends the stream: the session is over
        assert await states.next() is ConnectionState.LOST
        with pytest.raises(Unavailable, match="session"):
            await asyncio.wait_for(waiting, WAIT)  # it belonged to the session that ended
    finally:
        servicer.release.set()
        await client.stop()
        await serving.stop(0)


async def test_a_stream_that_never_opens_a_session_is_ended(tmp_path: Path) -> None:
    server = RegistryServer(EmbeddedEnsemble(tmp_path / "registry"), open_timeout=0.5)
    await server.start()
    try:
        async with grpc.aio.insecure_channel(server.address) as channel:
            call = pb_grpc.RegistryServiceStub(channel).Session()
            # Nothing sent: the server gives up on the stream instead of holding it for ever.
            assert not isinstance(await asyncio.wait_for(call.read(), WAIT), pb.SessionResponse)
            assert await call.code() == grpc.StatusCode.OK
            assert server.servicer.sessions == 0
    finally:
        await server.stop()
