"""Fixtures of the SDK and CLI integration tests: a fake master on a real gRPC server.

``fake`` starts a sync ``grpc.server`` on 127.0.0.1:0 serving :class:`FakeMaster` and
:class:`FakeLogs` over one :class:`World`; ``client`` is an SDK client connected to it with a fast
reconnect policy (so that stream-resumption tests take milliseconds).
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent import futures
from dataclasses import dataclass
from typing import Any

import grpc
import pytest

from dsched import Client, Reconnect
from dsched.v1 import log_service_pb2, log_service_pb2_grpc, master_service_pb2_grpc
from tests.integration.sdk.fake_master import FakeMaster
from tests.integration.sdk.fake_state import Log, World, rich_status


class FakeLogs(log_service_pb2_grpc.LogServiceServicer):
    """LogService over the World's logs; ``chunk`` bytes per frame, optional scripted breaks."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.chunk = 64 * 1024
        self.tail_breaks = 0  # how many tails break with UNAVAILABLE after their first frame
        self.offsets: list[int] = []  # the offset of every TailTaskLog request

    def _log(self, request: Any, context: Any) -> Log:
        log = self.world.logs.get(request.task_instance_id)
        if log is None:
            context.abort_with_status(
                rich_status(grpc.StatusCode.NOT_FOUND, "no log yet", reason="LOG_NOT_FOUND")
            )
            raise AssertionError("abort_with_status returned")
        return log

    def ReadTaskLog(self, request: Any, context: Any) -> Any:
        log = self._log(request, context)
        with self.world.cond:
            end = request.offset + (request.length or 1 << 20)
            data = bytes(log.data[request.offset : end])
            size = len(log.data)
            eol = log.terminal and request.offset + len(data) >= size
        return log_service_pb2.ReadTaskLogResponse(
            data=data,
            offset=request.offset,
            next_offset=request.offset + len(data),
            size=size,
            end_of_log=eol,
        )

    def TailTaskLog(self, request: Any, context: Any) -> Iterator[Any]:
        self.offsets.append(request.offset)
        world = self.world
        log = self._log(request, context)
        offset = request.offset
        sent = 0
        while context.is_active() and not world.stopping.is_set():
            with world.cond:
                if offset >= len(log.data) and not log.terminal and request.follow:
                    world.cond.wait(timeout=0.5)
                data = bytes(log.data[offset : offset + self.chunk])
                done = log.terminal and offset + len(data) >= len(log.data)
            if sent and self.tail_breaks:
                self.tail_breaks -= 1
                context.abort(grpc.StatusCode.UNAVAILABLE, "worker restarting")
            end = offset + len(data)
            last = done or (not request.follow and end >= len(log.data))
            yield log_service_pb2.TailTaskLogResponse(
                data=data, offset=offset, next_offset=end, end_of_log=done and last
            )
            sent += 1
            offset = end
            if last:
                return


@dataclass
class Fake:
    """A running fake: its address, its world, and its two servicers."""

    address: str
    world: World
    master: FakeMaster
    logs: FakeLogs


@pytest.fixture
def fake() -> Iterator[Fake]:
    world = World()
    master = FakeMaster(world)
    logs = FakeLogs(world)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=32))
    master_service_pb2_grpc.add_MasterServiceServicer_to_server(master, server)
    log_service_pb2_grpc.add_LogServiceServicer_to_server(logs, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield Fake(f"127.0.0.1:{port}", world, master, logs)
    finally:
        world.stop()
        server.stop(grace=None).wait()


@pytest.fixture
def client(fake: Fake) -> Iterator[Client]:
    fast = Reconnect(attempts=5, initial=0.01, maximum=0.05)
    with Client.connect(fake.address, timeout=10, reconnect=fast) as conn:
        yield conn
