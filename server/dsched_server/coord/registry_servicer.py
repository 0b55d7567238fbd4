"""``RegistryService``: the embedded registry served over gRPC, one stream per session.

A standalone keeps its registry (:class:`~dsched_server.coord.ensemble.EmbeddedEnsemble`) in its
own process; the worker process it starts reaches it through this service
(:class:`~dsched_server.coord.grpc_registry.GrpcRegistry` on the other side). Each stream gets one
:class:`~dsched_server.coord.embedded.EmbeddedRegistry` client of the ensemble, so what a remote
session can do and what it leaves behind are exactly an embedded session's. The session ends, and
its ephemeral nodes, locks and elections with it, when the stream ends (the client stopped or
died: a killed process's connection is reset by the kernel), when the client goes silent for its
session timeout (a hung process, as a ZooKeeper session expires), or by :meth:`expire`. It ends
*before* the stream is closed, so a client that sees its stream end finds its nodes already gone.

Calls are handled in the order they arrive, except lock and election waits, which run beside the
others until granted and are held until released.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager

import grpc

from dsched.errors import DschedError, InvalidArgument
from dsched.v1 import registry_service_pb2 as pb
from dsched.v1 import registry_service_pb2_grpc as pb_grpc
from dsched_server.coord.embedded import EmbeddedRegistry
from dsched_server.coord.ensemble import EmbeddedEnsemble
from dsched_server.coord.registry import ConnectionState
from dsched_server.rpc.serving import Service, Serving

_log = logging.getLogger(__name__)

# The session timeouts a client may ask for (seconds): ZooKeeper's usual bounds.
MIN_SESSION_TIMEOUT_S = 0.5
MAX_SESSION_TIMEOUT_S = 600.0

_Outgoing = asyncio.Queue[pb.SessionResponse | None]


def _failed(call_id: int, exc: DschedError) -> pb.SessionResponse:
    return pb.SessionResponse(
        call_id=call_id,
        reply=pb.REGISTRY_REPLY_FAILED,
        error_code=exc.code,
        error_message=exc.message,
    )


class _Session:
    """The server side of one stream: an embedded registry session and what the client holds."""

    def __init__(self, ensemble: EmbeddedEnsemble, number: int, timeout: float) -> None:
        self.number = number
        self.timeout = timeout
        self.registry = EmbeddedRegistry(ensemble)
        self.out: _Outgoing = asyncio.Queue()
        self._releases: dict[int, Callable[[], None]] = {}  # watch/lock/election call id -> release
        self._holds: set[asyncio.Task[None]] = set()
        self._held: dict[int, asyncio.Task[None]] = {}  # lock/election call id -> its hold
        self._heard = 0.0
        self._closed = False

    async def open(self) -> None:
        await self.registry.start()
        self._heard = asyncio.get_running_loop().time()
        # The embedded client reconnects by itself after an expiry; a remote session must not
        # outlive its embedded one, so an expiry (an ensemble test hook) ends the stream.
        self.registry.add_state_listener(self._on_state)

    def _on_state(self, state: ConnectionState) -> None:
        if state is ConnectionState.LOST:
            asyncio.get_running_loop().create_task(self.close())

    async def close(self) -> None:
        """Ends the session (nodes, locks, elections go at once), then the stream."""
        if self._closed:
            return
        self._closed = True
        for release in self._releases.values():
            release()
        self._releases.clear()
        await self.registry.stop()
        for task in list(self._holds):
            task.cancel()
        self.out.put_nowait(None)

    async def read(self, requests: AsyncIterator[pb.SessionRequest]) -> None:
        """Handles the client's calls until its stream ends, then ends the session."""
        loop = asyncio.get_running_loop()
        try:
            async for request in requests:
                self._heard = loop.time()
                if self._closed:
                    break
                await self._handle(request)
        except grpc.RpcError:
            pass  # the stream broke: the client is gone
        finally:
            await self.close()

    async def watchdog(self) -> None:
        """Beats every third of the timeout; ends the session after a timeout of silence."""
        loop = asyncio.get_running_loop()
        while not self._closed:
            await asyncio.sleep(self.timeout / 3)
            if loop.time() - self._heard > self.timeout:
                _log.warning(
                    "registry session %d: nothing heard for %g s, expiring it",
                    self.number,
                    self.timeout,
                )
                await self.close()
                return
            self.out.put_nowait(pb.SessionResponse(reply=pb.REGISTRY_REPLY_HEARTBEAT))

    async def _handle(self, request: pb.SessionRequest) -> None:
        call, call_id, registry = request.call, request.call_id, self.registry
        if call == pb.REGISTRY_CALL_HEARTBEAT:
            return
        if call == pb.REGISTRY_CALL_RELEASE:
            release = self._releases.pop(request.target, None)
            if release is not None:
                release()
            hold = self._held.pop(request.target, None)
            if hold is not None:
                # Answered once the lock or the place in the queue is given up, as a ZooKeeper
                # delete is: whoever the holder tells next finds it free.
                await asyncio.gather(hold, return_exceptions=True)
            self.out.put_nowait(pb.SessionResponse(call_id=call_id, reply=pb.REGISTRY_REPLY_DONE))
            return
        try:
            if call == pb.REGISTRY_CALL_WATCH:
                self._releases[call_id] = registry.watch_children(
                    request.path, lambda children: self._snapshot(call_id, children)
                )
            elif call == pb.REGISTRY_CALL_LOCK:
                self._hold(call_id, registry.lock(request.path))
            elif call == pb.REGISTRY_CALL_LEAD:
                self._hold(call_id, registry.leadership(request.path, request.identifier))
            else:
                self.out.put_nowait(await self._answer(request))
        except DschedError as exc:
            self.out.put_nowait(_failed(call_id, exc))

    async def _answer(self, request: pb.SessionRequest) -> pb.SessionResponse:
        """Makes a call that is answered at once."""
        call, registry = request.call, self.registry
        answer = pb.SessionResponse(call_id=request.call_id, reply=pb.REGISTRY_REPLY_DONE)
        if call == pb.REGISTRY_CALL_REGISTER:
            await registry.register(request.path, request.data)
        elif call == pb.REGISTRY_CALL_UPDATE:
            await registry.update(request.path, request.data)
        elif call == pb.REGISTRY_CALL_UNREGISTER:
            await registry.unregister(request.path)
        elif call == pb.REGISTRY_CALL_CHILDREN:
            answer.children.update(await registry.children(request.path))
        elif call == pb.REGISTRY_CALL_LEADER:
            leader = await registry.leader(request.path)
            if leader is not None:
                answer.leader = leader
        elif call == pb.REGISTRY_CALL_NEXT_EPOCH:
            answer.epoch = await registry.next_epoch()
        else:
            raise InvalidArgument(f"unknown registry call {call}")
        return answer

    def _snapshot(self, call_id: int, children: Mapping[str, bytes]) -> None:
        if not self._closed:
            self.out.put_nowait(
                pb.SessionResponse(
                    call_id=call_id, reply=pb.REGISTRY_REPLY_SNAPSHOT, children=children
                )
            )

    def _hold(self, call_id: int, held: AbstractAsyncContextManager[None]) -> None:
        """Waits for the lock or election beside the other calls; answers once it is held and
        holds it until the client releases it (or the session ends)."""

        async def hold() -> None:
            try:
                async with held:
                    self.out.put_nowait(
                        pb.SessionResponse(call_id=call_id, reply=pb.REGISTRY_REPLY_DONE)
                    )
                    await asyncio.Event().wait()  # until cancelled by the release
            except DschedError as exc:
                self._releases.pop(call_id, None)
                self._held.pop(call_id, None)
                self.out.put_nowait(_failed(call_id, exc))

        task = asyncio.get_running_loop().create_task(hold(), name=f"registry-hold-{call_id}")
        self._holds.add(task)
        task.add_done_callback(self._holds.discard)
        self._held[call_id] = task

        def release() -> None:
            task.cancel()

        self._releases[call_id] = release


class RegistryServicer(pb_grpc.RegistryServiceServicer):
    """Serves sessions on ``ensemble``; :meth:`expire` ends one as a timeout would. A stream that
    does not open a session within ``open_timeout`` seconds is ended (it holds nothing yet)."""

    def __init__(self, ensemble: EmbeddedEnsemble, *, open_timeout: float = 10.0) -> None:
        self._ensemble = ensemble
        self._open_timeout = open_timeout
        self._numbers = itertools.count(1)
        self._sessions: dict[int, _Session] = {}

    @property
    def sessions(self) -> int:
        """How many sessions are open."""
        return len(self._sessions)

    async def expire(self, number: int) -> None:
        """Ends session ``number`` as its timeout would (a test hook). No-op if it is over."""
        session = self._sessions.get(number)
        if session is not None:
            await session.close()

    async def close(self) -> None:
        """Ends every session (the standalone is stopping)."""
        for session in list(self._sessions.values()):
            await session.close()

    async def Session(
        self,
        request_iterator: AsyncIterator[pb.SessionRequest],
        context: grpc.aio.ServicerContext[pb.SessionRequest, pb.SessionResponse],
    ) -> AsyncIterator[pb.SessionResponse]:
        try:
            first = await asyncio.wait_for(anext(aiter(request_iterator), None), self._open_timeout)
        except TimeoutError:
            first = None
        if first is None:
            return
        timeout = first.session_timeout.ToTimedelta().total_seconds()
        if first.call != pb.REGISTRY_CALL_OPEN or not (
            MIN_SESSION_TIMEOUT_S <= timeout <= MAX_SESSION_TIMEOUT_S
        ):
            raise InvalidArgument(
                "a registry session opens with REGISTRY_CALL_OPEN and a session timeout of "
                f"{MIN_SESSION_TIMEOUT_S:g} to {MAX_SESSION_TIMEOUT_S:g} s"
            )
        session = _Session(self._ensemble, next(self._numbers), timeout)
        await session.open()
        self._sessions[session.number] = session
        tasks = [
            asyncio.create_task(session.read(request_iterator), name="registry-session-read"),
            asyncio.create_task(session.watchdog(), name="registry-session-watchdog"),
        ]
        try:
            yield pb.SessionResponse(reply=pb.REGISTRY_REPLY_OPENED, session_id=session.number)
            while (response := await session.out.get()) is not None:
                yield response
        finally:
            self._sessions.pop(session.number, None)
            await session.close()
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await task


class RegistryServer:
    """``RegistryService`` on ``ensemble``, with health and reflection, bound to ``bind``
    (``127.0.0.1:0``: loopback, any free port). ``address`` is the bound ``host:port``."""

    def __init__(
        self, ensemble: EmbeddedEnsemble, bind: str = "127.0.0.1:0", *, open_timeout: float = 10.0
    ) -> None:
        self.servicer = RegistryServicer(ensemble, open_timeout=open_timeout)
        name = pb.DESCRIPTOR.services_by_name["RegistryService"].full_name
        register = pb_grpc.add_RegistryServiceServicer_to_server
        self._serving = Serving([Service(name, self.servicer, register)], bind)
        self._host = bind.rsplit(":", 1)[0]
        self.address = ""

    async def start(self) -> None:
        port = await self._serving.start()
        self.address = f"{self._host}:{port}"

    async def stop(self) -> None:
        """Ends every session (their nodes go), then the server."""
        await self.servicer.close()
        await self._serving.stop(grace=1.0)
