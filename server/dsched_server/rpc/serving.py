"""Builds a ``grpc.aio`` server the way every dsched server needs it.

Every server gets: the error interceptor, gRPC health checking (overall and per service; a server
reports NOT_SERVING while something it cannot work without is away, see :meth:`Serving.report`), and
server
reflection under both ``grpc.reflection.v1alpha`` and ``grpc.reflection.v1``. grpcio-reflection
only ships v1alpha; the two protocols are wire-identical, so the same servicer is mounted a second
time under the v1 name (some clients, such as ``buf curl``, speak only v1).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import grpc
from grpc import aio
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import _async as reflection_aio
from grpc_reflection.v1alpha import reflection, reflection_pb2

from dsched_server.rpc.interceptor import ErrorInterceptor

# The largest message a server takes or sends, chosen on purpose. Every valid request is far
# smaller (a definition is at most 2 MiB, README "Limits") and every answer fits the 4 MiB of a
# default client (dsched_server.api.pages), but an oversized request up to this size still reaches
# the validation and gets a clear INVALID_ARGUMENT naming the limit and the field (40 scripts of
# 255 KiB are 10 MiB) instead of a bare RESOURCE_EXHAUSTED from gRPC; beyond it, gRPC refuses the
# message before it is buffered whole, which bounds the memory one call can take.
MAX_MESSAGE_BYTES = 16 * 1024 * 1024

# Keepalive: clients ping every 30 s on idle streams (log follow, watch); the server must allow it
# or it answers GOAWAY "too_many_pings" and long-lived streams die.
SERVER_OPTIONS: list[tuple[str, Any]] = [
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
    ("grpc.http2.max_pings_without_data", 0),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.so_reuseport", 0),
]

REFLECTION_V1 = "grpc.reflection.v1.ServerReflection"


@dataclass(frozen=True, slots=True)
class Service:
    """A servicer and the generated function that registers it, plus its full service name."""

    name: str
    servicer: object
    register: Callable[[Any, aio.Server], None]


class Serving:
    """A running gRPC server with health and reflection. ``start`` binds; ``stop`` drains."""

    def __init__(self, services: Sequence[Service], bind: str) -> None:
        self._services = list(services)
        self._bind = bind
        self.server = aio.server(interceptors=[ErrorInterceptor()], options=SERVER_OPTIONS)
        self.health = health.aio.HealthServicer()
        self.port = 0
        self._serving = True  # what health should say (see report)
        self._health_task: asyncio.Task[None] | None = None

    async def start(self) -> int:
        """Registers everything, binds ``bind`` (port 0 picks a free port) and returns the port."""
        for svc in self._services:
            svc.register(svc.servicer, self.server)
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.server)
        names = [svc.name for svc in self._services]
        names += [health_pb2.DESCRIPTOR.services_by_name["Health"].full_name]
        names += [reflection.SERVICE_NAME, REFLECTION_V1]
        servicer = reflection_aio.ReflectionServicer(names)
        reflection.enable_server_reflection(names, self.server)
        self.server.add_generic_rpc_handlers(
            (
                grpc.method_handlers_generic_handler(
                    REFLECTION_V1,
                    {
                        "ServerReflectionInfo": grpc.stream_stream_rpc_method_handler(
                            servicer.ServerReflectionInfo,
                            request_deserializer=reflection_pb2.ServerReflectionRequest.FromString,
                            response_serializer=reflection_pb2.ServerReflectionResponse.SerializeToString,
                        )
                    },
                ),
            )
        )
        self.port = self.server.add_insecure_port(self._bind)
        if self.port == 0:
            raise OSError(f"cannot bind gRPC server to {self._bind}")
        await self.server.start()
        await self._apply_health()
        return self.port

    def report(self, serving: bool) -> None:
        """Sets the health of the server and of every service to SERVING or NOT_SERVING (e.g.
        while the metadata database is away). Callable from callbacks; the last report wins, and
        after :meth:`stop` began health stays NOT_SERVING."""
        self._serving = serving
        if self._health_task is None or self._health_task.done():
            self._health_task = asyncio.get_running_loop().create_task(self._apply_health())

    async def _apply_health(self) -> None:
        while True:
            serving = self._serving
            status = health_pb2.HealthCheckResponse.SERVING
            if not serving:
                status = health_pb2.HealthCheckResponse.NOT_SERVING
            for name in ["", *[svc.name for svc in self._services]]:
                await self.health.set(name, status)
            if self._serving == serving:  # no report arrived while these were being set
                return

    async def stop(self, grace: float = 5.0) -> None:
        """Reports NOT_SERVING, then stops accepting calls and waits up to ``grace`` for running
        ones."""
        if self._health_task is not None:
            self._health_task.cancel()
            await asyncio.gather(self._health_task, return_exceptions=True)
        await self.health.enter_graceful_shutdown()
        await self.server.stop(grace)
