"""One kazoo client seen from the event loop: its connection states, its sessions, its calls.

:class:`ZooKeeperConnection` is what the ZooKeeper registry, its watches
(:mod:`~dsched_server.coord.zk_watch`) and its queues (:mod:`~dsched_server.coord.zk_queue`) build
on. kazoo reports states from its connection thread; they are replayed on the loop that called
``start`` (:mod:`~dsched_server.coord.kazoo_bridge`) as CONNECTED, SUSPENDED and LOST. After an
expiry kazoo opens a new session by itself: we report LOST, then CONNECTED. If kazoo ever showed a
new session without a LOST first, LOST is reported anyway: the owner's reaction to it is what
keeps ownership safe.

A call (:meth:`~ZooKeeperConnection.op`) belongs to the session it started in. A dropped connection
is waited out and the call retried in the same session; if the session ends meanwhile the call
raises Unavailable rather than land in the next session. (kazoo does not bind a request to a
session, so a call issued in the instant between an expiry and our LOST can still reach the new
session; callers that create ephemeral nodes check the owner of what they made.)
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionClosedError, ConnectionLoss, NoAuthError, SessionExpiredError
from kazoo.protocol.states import KazooState

from dsched.errors import FailedPrecondition, PermissionDenied, Unavailable
from dsched_server.coord.kazoo_bridge import LoopBridge
from dsched_server.coord.registry import ConnectionState, StateListener, call_state_listener

_log = logging.getLogger(__name__)

_KAZOO_STATES = {
    KazooState.CONNECTED: ConnectionState.CONNECTED,
    KazooState.SUSPENDED: ConnectionState.SUSPENDED,
    KazooState.LOST: ConnectionState.LOST,
}
# Between reconnection attempts kazoo backs off exponentially, by default up to an hour; a client
# must be back well within its session timeout after a ZooKeeper restart, and a worker within its
# self-fence deadline (kazoo varies each pause by +-40 %, so at most 0.7 s here). A refused connect
# costs nothing.
_CONNECTION_RETRY = {"max_tries": -1, "delay": 0.1, "backoff": 2, "max_delay": 0.5}
CLOSE_TIMEOUT_S = 3.0  # how long ``stop`` waits for kazoo to close before abandoning the client


@dataclass(eq=False)
class ZooKeeperSession:
    """One ZooKeeper session as the loop knows it; ``ended`` is set at LOST or ``stop``."""

    id: int
    ended: asyncio.Event = field(default_factory=asyncio.Event)


class ZooKeeperConnection:
    """A kazoo client and the session it holds, driven from one event loop.

    ``on_connected`` runs on the loop after every CONNECTED (a new session or the same one back):
    kazoo drops its watches with the connection, so they must be armed again. Before ``start`` and
    after ``stop`` the state is LOST; ``stop`` notifies no state listener.
    """

    def __init__(
        self,
        hosts: str,
        *,
        session_timeout: float,
        connect_timeout: float,
        auth: tuple[str, str] | None,
        acl: list[Any] | None,
        on_connected: Callable[[], None],
    ) -> None:
        self.hosts = hosts
        self._session_timeout = session_timeout
        self._connect_timeout = connect_timeout
        self._auth = auth
        self._acl = acl
        self._on_connected = on_connected
        self._client: Any = None
        self._bridge: LoopBridge | None = None
        self.running = False
        self.state = ConnectionState.LOST
        self._session: ZooKeeperSession | None = None
        self.connects = 0  # CONNECTED transitions seen; a call that lost its connection waits +1
        self._changed = asyncio.Event()  # set and replaced at every state change
        self._listeners: list[StateListener] = []
        self._tasks: set[asyncio.Task[Any]] = set()

    @property
    def client_id(self) -> tuple[int, bytes] | None:
        """``(session id, password)`` of the live session; None while disconnected."""
        return None if self._client is None else self._client.client_id

    def add_state_listener(self, listener: StateListener) -> None:
        self._listeners.append(listener)

    async def start(self) -> None:
        """Connects; returns once CONNECTED. Unavailable after ``connect_timeout`` seconds."""
        self._bridge = LoopBridge(asyncio.get_running_loop())
        client = KazooClient(
            hosts=self.hosts,
            timeout=self._session_timeout,
            auth_data=None if self._auth is None else [("digest", ":".join(self._auth))],
            default_acl=self._acl,
            connection_retry=dict(_CONNECTION_RETRY),
        )
        client.add_listener(lambda state: self._on_kazoo_state(client, state))
        self._client = client
        self.running = True
        try:
            await LoopBridge.blocking(client.start_async)
            await asyncio.wait_for(self._wait_connected(), self._connect_timeout)
        except BaseException as exc:
            await self.stop()
            if isinstance(exc, TimeoutError):
                raise Unavailable(
                    f"cannot reach ZooKeeper at {self.hosts} within {self._connect_timeout:g} s"
                ) from None
            raise

    async def stop(self) -> bool:
        """Closes the session (its ephemeral nodes and locks go at once) and joins kazoo's threads.
        Background tasks are cancelled; waiting calls raise FailedPrecondition. False if kazoo
        did not close within :data:`CLOSE_TIMEOUT_S` (ZooKeeper does not answer): the client is
        abandoned, its daemon threads die with the process and the server ends the session when
        it times out."""
        self.running = False
        if self._session is not None:
            self._session.ended.set()
            self._session = None
        self.state = ConnectionState.LOST
        self._changed.set()
        self._changed = asyncio.Event()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        client, self._client = self._client, None
        if client is None:
            return True
        closing = functools.partial(_close_client, client)
        closed = await LoopBridge.abandonable(closing, timeout=CLOSE_TIMEOUT_S, name="kazoo-close")
        if not closed:
            _log.warning(
                "the ZooKeeper client did not close within %g s: abandoned", CLOSE_TIMEOUT_S
            )
        return closed

    # -- sessions --------------------------------------------------------------------------------

    def current_session(self) -> ZooKeeperSession | None:
        """The session, if connected right now."""
        return self._session if self.state is ConnectionState.CONNECTED else None

    async def live_session(self, bound: ZooKeeperSession | None = None) -> ZooKeeperSession:
        """The session to act in, once connected. A call belongs to the session it started in
        (``bound``, by default the current one): if that one ends while the call waits, the call
        raises Unavailable instead of landing in the next session (where it could undo the owner's
        reaction to LOST). A call made between LOST and the new session waits for the new one."""
        bound = bound or self._session
        while True:
            self.require_running()
            current = self._session
            if bound is not None and current is not bound:
                raise Unavailable("the registry session expired while the call waited")
            if self.state is ConnectionState.CONNECTED and current is not None:
                return current
            await self._changed.wait()

    async def next_connect(self, connects: int) -> None:
        """Waits for a CONNECTED after the ``connects``-th (or for ``stop``)."""
        while self.running and self.connects <= connects:
            await self._changed.wait()

    async def until(self, session: ZooKeeperSession, event: asyncio.Event) -> None:
        """Waits for ``event``; raises Unavailable if ``session`` ends first."""
        waits = [asyncio.ensure_future(event.wait()), asyncio.ensure_future(session.ended.wait())]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for wait in waits:
                wait.cancel()
        if not event.is_set():
            self.require_running()
            raise Unavailable("the registry session ended while waiting")

    def require_running(self) -> None:
        if not self.running:
            raise FailedPrecondition("the registry client is not started")

    # -- calls -----------------------------------------------------------------------------------

    async def op(
        self, session: ZooKeeperSession, method: str, *args: Any, retry: bool = True, **kw: Any
    ) -> Any:
        """Runs the kazoo call ``client.<method>(*args, **kw)`` (an ``*_async`` one) in
        ``session``. A dropped connection is waited out and the call retried once it is back in the
        same session (``retry=False``: ConnectionLoss is raised then, for calls that must not run
        twice); the end of the session raises Unavailable, a missing permission PermissionDenied."""
        while True:
            connects = self.connects
            try:
                return await self.raw(method, *args, **kw)
            except ConnectionLoss:
                await self.next_connect(connects)
                await self.live_session(bound=session)
                if not retry:
                    raise
            except (SessionExpiredError, ConnectionClosedError):
                self.require_running()
                raise Unavailable("the registry session ended during the call") from None
            except NoAuthError as exc:
                raise PermissionDenied(
                    f"the registry's credentials do not grant this ({exc!r})"
                ) from exc

    async def raw(self, method: str, *args: Any, **kw: Any) -> Any:
        """One kazoo call, no retry. Raises FailedPrecondition when the client is stopped."""
        self.require_running()
        assert self._bridge is not None
        return await self._bridge.result(getattr(self._client, method)(*args, **kw))

    def hop(self, callback: Callable[..., None], *args: object) -> None:
        """From a kazoo thread (a watch callback): runs ``callback(*args)`` on the loop."""
        if self._bridge is not None:
            self._bridge.call(callback, *args)

    def spawn(self, coro: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        """A background task that ``stop`` cancels."""
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # -- states (kazoo's thread, then the loop) --------------------------------------------------

    def _on_kazoo_state(self, client: Any, state: KazooState) -> None:
        # kazoo's connection thread: note the session the state belongs to, then hop.
        session_id = client._session_id if state == KazooState.CONNECTED else None
        assert self._bridge is not None
        self._bridge.call(self._apply_state, client, _KAZOO_STATES[state], session_id)

    def _apply_state(self, client: Any, state: ConnectionState, session_id: int | None) -> None:
        if client is not self._client or not self.running:
            return  # a stopped client's last words
        if state is ConnectionState.CONNECTED:
            assert session_id is not None
            if self._session is not None and self._session.id != session_id:
                self._end_session()  # a new session without LOST first: report it anyway
            if self._session is None:
                self._session = ZooKeeperSession(session_id)
            self.connects += 1
            self._set_state(ConnectionState.CONNECTED)
            self._on_connected()
        elif state is ConnectionState.SUSPENDED:
            if self.state is ConnectionState.CONNECTED:
                self._set_state(ConnectionState.SUSPENDED)
        else:
            self._end_session()

    def _end_session(self) -> None:
        if self._session is not None:
            self._session.ended.set()
            self._session = None
        if self.state is not ConnectionState.LOST:
            self._set_state(ConnectionState.LOST)

    def _set_state(self, state: ConnectionState) -> None:
        self.state = state
        self._changed.set()
        self._changed = asyncio.Event()
        assert self._bridge is not None
        for listener in self._listeners:
            # Scheduled, not called: a listener must not re-enter the registry mid-change.
            self._bridge.loop.call_soon(call_state_listener, listener, state)

    async def _wait_connected(self) -> None:
        while self.state is not ConnectionState.CONNECTED:
            await self._changed.wait()


def _close_client(client: Any) -> None:
    # Blocking (joins kazoo's threads): runs in a worker thread.
    try:
        client.stop()
    finally:
        client.close()
