"""A registry client whose session lives in another process: ``RegistryService`` over gRPC.

The worker process a standalone starts uses it to reach the standalone's embedded registry
(:mod:`dsched_server.coord.registry_servicer` is the other side). It implements
:class:`~dsched_server.coord.registry.Registry` with ZooKeeper's semantics, so the worker runs the
code it runs in a cluster:

- One stream is one session. CONNECTED once the server says the session is open; SUSPENDED after
  two thirds of the session timeout without a word from the server (as kazoo does: the worker's
  fence deadline counts on it), CONNECTED again at the next one; LOST when the stream ends (the
  server ended the session: its nodes are gone by then), followed by a fresh session on a new
  stream, with back-off while the server cannot be reached. Both sides beat every third of the
  session timeout; the server ends a session it has not heard from for the timeout.
- A call belongs to the session it was made in: if that session ends before the answer, the call
  raises Unavailable (it never lands in the next session). A call made while no session is open
  waits for the next one. Watches outlive sessions: each new session watches their paths again and
  delivers the current children.
- Notifications (state changes, watch snapshots) are scheduled on the loop that called ``start``,
  never made inline.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import timedelta
from types import MappingProxyType

import grpc
from grpc import aio

from dsched.backoff import Backoff
from dsched.errors import DschedError, FailedPrecondition, Unavailable, error_class
from dsched.v1 import registry_service_pb2 as pb
from dsched.v1 import registry_service_pb2_grpc as pb_grpc
from dsched_server.constants import REGISTRY_SESSION_TIMEOUT_S
from dsched_server.coord.ensemble import Watch
from dsched_server.coord.registry import (
    ChildrenListener,
    ConnectionState,
    StateListener,
    call_state_listener,
    check_name,
    split_path,
)

__all__ = ["GrpcRegistry"]

_log = logging.getLogger(__name__)

# How long ``stop`` waits for the server to end the session before it abandons the stream.
CLOSE_TIMEOUT_S = 5.0


class _Link:
    """One stream, hence one session: its calls in flight and the watches it carries."""

    def __init__(self, call: aio.StreamStreamCall[pb.SessionRequest, pb.SessionResponse]) -> None:
        self.call = call
        self.number = 0
        self.alive = False
        self.outgoing: asyncio.Queue[pb.SessionRequest | None] = asyncio.Queue()
        self.pending: dict[int, asyncio.Future[pb.SessionResponse]] = {}
        self.watches: dict[int, Watch] = {}
        self._ids = itertools.count(1)

    def send(self, request: pb.SessionRequest) -> int:
        """Queues ``request`` under a new call id; returns the id."""
        request.call_id = next(self._ids)
        self.outgoing.put_nowait(request)
        return request.call_id

    def ask(self, request: pb.SessionRequest) -> asyncio.Future[pb.SessionResponse]:
        """Queues ``request``; the future gets its answer."""
        future = asyncio.get_running_loop().create_future()
        self.pending[self.send(request)] = future
        return future

    def end(self) -> None:
        """The session is over: every call still waiting raises Unavailable."""
        self.alive = False
        for future in self.pending.values():
            if not future.done():
                future.set_exception(Unavailable("the registry session ended"))
        self.pending.clear()
        self.outgoing.put_nowait(None)


async def _answer(future: asyncio.Future[pb.SessionResponse]) -> pb.SessionResponse:
    response = await future
    if response.reply == pb.REGISTRY_REPLY_FAILED:
        raise error_class(response.error_code, "")(response.error_message)
    return response


class GrpcRegistry:
    """A session on the registry served at ``address`` (see the module docstring).

    Before ``start`` and after ``stop`` the state is LOST; calls on a stopped client raise
    FailedPrecondition; ``stop`` does not notify the state listeners.
    """

    def __init__(
        self,
        address: str,
        *,
        session_timeout: float = REGISTRY_SESSION_TIMEOUT_S,
        backoff: Backoff | None = None,
    ) -> None:
        self.address = address
        self.session_timeout = session_timeout
        self._backoff = backoff or Backoff(initial=0.05, maximum=1.0)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._channel: aio.Channel | None = None
        self._running = False
        self._runner: asyncio.Task[None] | None = None
        self._link: _Link | None = None
        self._state = ConnectionState.LOST
        self._connected = asyncio.Event()
        self._listeners: list[StateListener] = []
        self._watches: dict[Watch, str] = {}

    @property
    def state(self) -> ConnectionState:
        return self._state

    @property
    def session_id(self) -> int:
        """The server's number of the current session; 0 while there is none."""
        link = self._link
        return link.number if link is not None and link.alive else 0

    async def start(self) -> None:
        if self._running:
            return
        self._loop = asyncio.get_running_loop()
        self._running = True
        self._connected.clear()
        self._channel = aio.insecure_channel(self.address)
        self._runner = self._loop.create_task(self._run(), name="grpc-registry")
        try:
            await asyncio.wait_for(self._connected.wait(), self.session_timeout)
        except TimeoutError:
            await self.stop()
            raise Unavailable(
                f"no registry session at {self.address} within {self.session_timeout:g} s"
            ) from None
        except BaseException:
            await self.stop()
            raise

    async def stop(self) -> None:
        if not self._running:
            return
        self._running = False
        link, runner, channel = self._link, self._runner, self._channel
        abandoned = False
        if link is not None and link.alive:
            # A clean end: the server ends the session (its nodes go) and then the stream.
            link.outgoing.put_nowait(None)
            if runner is not None:
                done, _ = await asyncio.wait({runner}, timeout=CLOSE_TIMEOUT_S)
                abandoned = not done
        if runner is not None:
            runner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await runner
        if link is not None:
            link.end()
        self._link = None
        self._state = ConnectionState.LOST
        self._connected.set()  # wakes waiting calls so that they see the client is stopped
        if channel is not None:
            await channel.close()
        if abandoned:
            raise Unavailable(
                f"the registry at {self.address} did not end the session within "
                f"{CLOSE_TIMEOUT_S:g} s: it ends when it times out"
            )

    def add_state_listener(self, listener: StateListener) -> None:
        self._listeners.append(listener)

    async def register(self, path: str, data: bytes) -> None:
        await self._ask(pb.SessionRequest(call=pb.REGISTRY_CALL_REGISTER, path=path, data=data))

    async def update(self, path: str, data: bytes) -> None:
        await self._ask(pb.SessionRequest(call=pb.REGISTRY_CALL_UPDATE, path=path, data=data))

    async def unregister(self, path: str) -> None:
        split_path(path)
        await self._ask(pb.SessionRequest(call=pb.REGISTRY_CALL_UNREGISTER, path=path))

    async def children(self, path: str) -> dict[str, bytes]:
        split_path(path)
        answer = await self._ask(pb.SessionRequest(call=pb.REGISTRY_CALL_CHILDREN, path=path))
        return dict(answer.children)

    def watch_children(self, path: str, listener: ChildrenListener) -> Callable[[], None]:
        split_path(path)
        watch = Watch(listener)
        self._watches[watch] = path
        link = self._link
        if link is not None and link.alive:
            self._watch(link, watch, path)

        def cancel() -> None:
            watch.active = False
            self._watches.pop(watch, None)
            current = self._link
            if current is None or not current.alive:
                return
            for call_id, watched in list(current.watches.items()):
                if watched is watch:
                    del current.watches[call_id]
                    current.send(pb.SessionRequest(call=pb.REGISTRY_CALL_RELEASE, target=call_id))

        return cancel

    def lock(self, name: str) -> AbstractAsyncContextManager[None]:
        check_name(name, "lock")
        return self._hold(pb.SessionRequest(call=pb.REGISTRY_CALL_LOCK, path=name))

    def leadership(self, name: str, identifier: str) -> AbstractAsyncContextManager[None]:
        check_name(name, "election")
        request = pb.SessionRequest(call=pb.REGISTRY_CALL_LEAD, path=name, identifier=identifier)
        return self._hold(request)

    async def leader(self, name: str) -> str | None:
        check_name(name, "election")
        answer = await self._ask(pb.SessionRequest(call=pb.REGISTRY_CALL_LEADER, path=name))
        return answer.leader if answer.HasField("leader") else None

    async def next_epoch(self) -> int:
        return (await self._ask(pb.SessionRequest(call=pb.REGISTRY_CALL_NEXT_EPOCH))).epoch

    # -- internals --------------------------------------------------------------------------------

    async def _ask(self, request: pb.SessionRequest) -> pb.SessionResponse:
        link = await self._live_link()
        return await _answer(link.ask(request))

    @asynccontextmanager
    async def _hold(self, request: pb.SessionRequest) -> AsyncIterator[None]:
        link = await self._live_link()
        granted = link.ask(request)
        ticket = request.call_id
        try:
            await _answer(granted)
            # A grant can reach a suspended client: it may use the lock only once it is back, and
            # only if its session (hence the lock) survived.
            if await self._live_link() is not link:
                raise Unavailable(f"the registry session ended while acquiring {request.path}")
            yield
        finally:
            # Leaves the queue (cancelled while waiting) or gives the lock back, and waits for it
            # as for a ZooKeeper delete; a session that ended took both with it.
            if link.alive:
                release = pb.SessionRequest(call=pb.REGISTRY_CALL_RELEASE, target=ticket)
                with contextlib.suppress(DschedError):
                    await _answer(link.ask(release))

    async def _live_link(self) -> _Link:
        """The session to act in, once connected; like the embedded registry's ``_live_session``:
        a call made in a session raises Unavailable if that session ends while it waits."""
        link = self._link
        bound = link if link is not None and link.alive else None
        while True:
            if not self._running:
                raise FailedPrecondition("the registry client is not started")
            current = self._link
            if bound is not None and current is not bound:
                raise Unavailable("the registry session expired while the call waited")
            if self._state is ConnectionState.CONNECTED and current is not None and current.alive:
                return current
            await self._connected.wait()

    def _watch(self, link: _Link, watch: Watch, path: str) -> None:
        call_id = link.send(pb.SessionRequest(call=pb.REGISTRY_CALL_WATCH, path=path))
        link.watches[call_id] = watch

    def _set_state(self, state: ConnectionState) -> None:
        if state is self._state:
            return
        self._state = state
        if state is ConnectionState.CONNECTED:
            self._connected.set()
        else:
            self._connected.clear()
        assert self._loop is not None
        for listener in self._listeners:
            self._loop.call_soon(call_state_listener, listener, state)

    async def _run(self) -> None:
        """Keeps a session open: one stream after another, with back-off while none opens."""
        loop = asyncio.get_running_loop()
        delays = self._backoff.delays()
        while True:
            began = loop.time()
            opened = await self._session()
            if not self._running:
                return
            if opened and loop.time() - began > self.session_timeout:
                delays = self._backoff.delays()  # it lasted: the next one starts at once
                await asyncio.sleep(0)  # LOST is observable (``state``) before the next session
            else:  # nothing to connect to, or a server that ends sessions at once
                await asyncio.sleep(next(delays, self._backoff.maximum))

    async def _session(self) -> bool:
        """One stream, from its opening to its end; True if the session opened."""
        assert self._channel is not None
        stub = pb_grpc.RegistryServiceStub(self._channel)
        link = _Link(stub.Session())
        self._link = link
        writer = asyncio.get_running_loop().create_task(self._write(link), name="registry-write")
        try:
            timeout = timedelta(seconds=self.session_timeout)
            open_request = pb.SessionRequest(call=pb.REGISTRY_CALL_OPEN)
            open_request.session_timeout.FromTimedelta(timeout)
            link.outgoing.put_nowait(open_request)
            first = await link.call.read()
            if not isinstance(first, pb.SessionResponse) or first.reply != pb.REGISTRY_REPLY_OPENED:
                return False
            link.number = first.session_id
            link.alive = True
            for watch, path in self._watches.items():
                self._watch(link, watch, path)
            self._set_state(ConnectionState.CONNECTED)
            await self._read(link)
            return True
        except grpc.RpcError as exc:
            if link.alive:
                _log.warning("registry session %d at %s broke: %s", link.number, self.address, exc)
            else:
                _log.debug("no registry session at %s: %s", self.address, exc)
            return link.number > 0
        finally:
            was_open = link.alive or link.number > 0
            link.end()
            writer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await writer
            link.call.cancel()
            if was_open and self._running:
                self._set_state(ConnectionState.LOST)

    async def _read(self, link: _Link) -> None:
        """Delivers answers and snapshots until the stream ends; notices silence (SUSPENDED)."""
        silence = self.session_timeout * 2 / 3
        while True:
            # Not wait_for: cancelling a read cancels the whole call.
            reading = asyncio.ensure_future(link.call.read())
            try:
                done, _ = await asyncio.wait({reading}, timeout=silence)
                if not done:
                    self._set_state(ConnectionState.SUSPENDED)
                response = await reading
            finally:
                reading.cancel()
            if not isinstance(response, pb.SessionResponse):
                return  # EOF
            self._set_state(ConnectionState.CONNECTED)
            if response.reply == pb.REGISTRY_REPLY_SNAPSHOT:
                watch = link.watches.get(response.call_id)
                if watch is not None:
                    assert self._loop is not None
                    self._loop.call_soon(watch.fire, MappingProxyType(dict(response.children)))
            elif response.reply in (pb.REGISTRY_REPLY_DONE, pb.REGISTRY_REPLY_FAILED):
                future = link.pending.pop(response.call_id, None)
                if future is not None and not future.done():
                    future.set_result(response)

    async def _write(self, link: _Link) -> None:
        """Sends the queued requests in order, and a heartbeat after a third of the timeout of
        quiet; a None in the queue ends the client's half of the stream."""
        beat = self.session_timeout / 3
        while True:
            try:
                request = await asyncio.wait_for(link.outgoing.get(), beat)
            except TimeoutError:
                request = pb.SessionRequest(call=pb.REGISTRY_CALL_HEARTBEAT)
            if request is None:
                with contextlib.suppress(grpc.RpcError):
                    await link.call.done_writing()
                return
            try:
                await link.call.write(request)
            except (grpc.RpcError, asyncio.InvalidStateError):
                return  # the stream is over; the reader finds out
