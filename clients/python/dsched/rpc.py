"""The part of the client every group of calls shares: the channel, the stubs, the call wrapper.

:class:`dsched.client.Client` is assembled from groups of calls (:mod:`dsched.definitions`,
:mod:`dsched.instances`) that all derive from :class:`RpcBase`, so that each module stays one
subject. Only :meth:`RpcBase._call` turns gRPC failures into :mod:`dsched.errors` for unary calls;
streams do it in :mod:`dsched.streams`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import Any, Self, TypeVar

import grpc

from dsched.results import Page
from dsched.status import error_from_rpc
from dsched.streams import Reconnect
from dsched.v1 import log_service_pb2_grpc, master_service_pb2_grpc

Req = TypeVar("Req")
Resp = TypeVar("Resp")
T = TypeVar("T")

# The options of every channel to a dsched server: the SDK's, and the servers' own channels to
# each other (masters to workers and to other masters, workers to masters). Idle watch and
# log-follow streams ping every 30 s, which the servers are configured to permit; messages up to
# the 16 MiB a server takes (dsched_server.rpc.serving.MAX_MESSAGE_BYTES).
CHANNEL_OPTIONS: list[tuple[str, Any]] = [
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
    ("grpc.max_receive_message_length", 16 * 1024 * 1024),
    ("grpc.max_send_message_length", 16 * 1024 * 1024),
]


def request_id(given: str | None) -> str:
    """Returns ``given`` or a fresh UUID4: the idempotency key of one logical mutation."""
    return given or str(uuid.uuid4())


def iter_pages(fetch: Callable[[str], Page[T]]) -> Iterator[T]:
    """Yields the items of every page, calling ``fetch(page_token)`` until a page is the last.

    A server that hands back the token it was given would loop forever; that ends the iteration.
    """
    token = ""
    while True:
        page = fetch(token)
        yield from page.items
        if page.last or page.next_page_token == token:
            return
        token = page.next_page_token


class RpcBase:
    """Owns a channel to a master and the stubs of the services it serves.

    Args:
        channel: a grpc channel; the client owns it and closes it.
        timeout: default deadline in seconds of every unary call (streams have none).
        target: the server's address, used in error messages.
        reconnect: how watch and log streams reopen after UNAVAILABLE.
    """

    def __init__(
        self,
        channel: grpc.Channel,
        *,
        timeout: float = 30.0,
        target: str = "",
        reconnect: Reconnect | None = None,
    ) -> None:
        self._channel = channel
        self.timeout = timeout
        self.target = target
        self.reconnect = reconnect or Reconnect()
        self._master = master_service_pb2_grpc.MasterServiceStub(channel)
        self._logs = log_service_pb2_grpc.LogServiceStub(channel)

    def close(self) -> None:
        """Closes the channel; calls in flight end with CANCELLED."""
        self._channel.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.target!r})"

    def _call(self, method: grpc.UnaryUnaryMultiCallable[Req, Resp], request: Req) -> Resp:
        """Makes a unary call with the default deadline; raises the mapped dsched error."""
        try:
            return method(request, timeout=self.timeout)
        except grpc.RpcError as err:
            raise error_from_rpc(err, self.target) from None
