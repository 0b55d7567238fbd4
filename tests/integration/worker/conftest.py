"""Fakes and fixtures for worker integration tests: a real :class:`Worker` on 127.0.0.1:0, an
in-memory registry, and fake masters serving ``TaskEventService`` on real gRPC servers.

Test modules use the fixtures only (the fakes are reached through them), so nothing imports this
file.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc import aio

from dsched.backoff import Backoff
from dsched.options import TimeoutStrategy
from dsched.spec import ShellSpec
from dsched.v1 import (
    log_service_pb2_grpc,
    task_event_service_pb2,
    task_event_service_pb2_grpc,
    worker_service_pb2,
    worker_service_pb2_grpc,
)
from dsched_server.coord.registry import (
    ChildrenListener,
    ConnectionState,
    Registry,
    StateListener,
)
from dsched_server.heartbeat import HostSample
from dsched_server.protocol.ack import Ack, AckDecision
from dsched_server.protocol.event import TaskEvent, TaskEventType
from dsched_server.protocol.execution import TaskExecution
from dsched_server.protocol.wire.ack import acks_to_proto
from dsched_server.protocol.wire.event import event_from_proto
from dsched_server.protocol.wire.execution import execution_to_proto
from dsched_worker.agent import Sampler
from dsched_worker.app import Worker, WorkerOptions

WAIT_S = 20.0


async def idle_host() -> HostSample:
    return HostSample(cpu_usage=0.0, memory_usage=0.0, load_average=0.0, disk_usage=0.0)


class FakeRegistry:
    """The Registry protocol in memory. ``set_state`` plays connection changes (LOST drops
    nodes)."""

    def __init__(self) -> None:
        self._state = ConnectionState.CONNECTED
        self.nodes: dict[str, bytes] = {}
        self.updates = 0  # heartbeats published after the registration
        self._listeners: list[StateListener] = []
        self._epoch = 100
        self._changed = asyncio.Condition()
        self._locks: dict[str, asyncio.Lock] = {}

    @property
    def state(self) -> ConnectionState:
        return self._state

    async def start(self) -> None:
        self._state = ConnectionState.CONNECTED

    async def stop(self) -> None:
        self.nodes.clear()

    def add_state_listener(self, listener: StateListener) -> None:
        self._listeners.append(listener)

    async def register(self, path: str, data: bytes) -> None:
        await self._set(path, data)

    async def update(self, path: str, data: bytes) -> None:
        self.updates += 1
        await self._set(path, data)

    async def unregister(self, path: str) -> None:
        async with self._changed:
            self.nodes.pop(path, None)
            self._changed.notify_all()

    async def children(self, path: str) -> dict[str, bytes]:
        prefix = path.rstrip("/") + "/"
        return {k[len(prefix) :]: v for k, v in self.nodes.items() if k.startswith(prefix)}

    def watch_children(self, path: str, listener: ChildrenListener) -> Callable[[], None]:
        raise NotImplementedError("the worker does not watch")

    @contextlib.asynccontextmanager
    async def lock(self, name: str) -> AsyncIterator[None]:
        async with self._locks.setdefault(name, asyncio.Lock()):
            yield

    def leadership(
        self, name: str, identifier: str
    ) -> contextlib.AbstractAsyncContextManager[None]:
        raise NotImplementedError("the worker does not run for election")

    async def leader(self, name: str) -> str | None:
        raise NotImplementedError("the worker does not run for election")

    async def next_epoch(self) -> int:
        self._epoch += 1
        return self._epoch

    def set_state(self, state: ConnectionState) -> None:
        self._state = state
        if state is ConnectionState.LOST:
            self.nodes.clear()
        for listener in list(self._listeners):
            listener(state)

    async def wait_for(self, predicate: Callable[[dict[str, bytes]], bool]) -> None:
        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(lambda: predicate(self.nodes)), WAIT_S)

    async def _set(self, path: str, data: bytes) -> None:
        async with self._changed:
            self.nodes[path] = data
            self._changed.notify_all()


@dataclass
class Received:
    event: TaskEvent
    worker_epoch: int
    worker_address: str
    request: int = 0  # which request of the master's (counted from 1) carried it


Decide = Callable[[TaskEvent], Ack | None]


class FakeMaster(task_event_service_pb2_grpc.TaskEventServiceServicer):
    """A TaskEventService on a real server. Applies each event id once (DUPLICATE afterwards) unless
    ``decide`` answers otherwise; ``decide`` returning None withholds the ack. ``break_after``
    aborts the stream once, upon receiving that many events in total."""

    def __init__(self) -> None:
        self.received: list[Received] = []
        self.applied: dict[str, TaskEvent] = {}
        self.decide: Decide | None = None
        self.break_after: int | None = None
        self.streams = 0
        self.requests = 0
        self.address = ""
        self._server: aio.Server | None = None
        self._changed = asyncio.Condition()

    async def start(self) -> None:
        self._server = aio.server()
        task_event_service_pb2_grpc.add_TaskEventServiceServicer_to_server(self, self._server)
        port = self._server.add_insecure_port("127.0.0.1:0")
        await self._server.start()
        self.address = f"127.0.0.1:{port}"

    async def stop(self) -> None:
        if self._server is not None:
            await self._server.stop(0)

    async def ReportTaskEvents(
        self,
        request_iterator: AsyncIterator[task_event_service_pb2.ReportTaskEventsRequest],
        context: Any,
    ) -> AsyncIterator[task_event_service_pb2.ReportTaskEventsResponse]:
        self.streams += 1
        async for request in request_iterator:
            self.requests += 1
            acks = []
            for msg in request.events:
                event = event_from_proto(msg)
                async with self._changed:
                    self.received.append(
                        Received(event, request.worker_epoch, request.worker_address, self.requests)
                    )
                    self._changed.notify_all()
                if self.break_after is not None and len(self.received) >= self.break_after:
                    self.break_after = None
                    await context.abort(grpc.StatusCode.UNAVAILABLE, "injected stream failure")
                ack = self._decide(event)
                if ack is not None:
                    acks.append(ack)
            if acks:
                yield acks_to_proto(acks)

    def _decide(self, event: TaskEvent) -> Ack | None:
        if self.decide is not None:
            custom = self.decide(event)
            if custom is None or custom.decision is not AckDecision.ACCEPTED:
                return custom
        if event.event_id in self.applied:
            return Ack(event_id=event.event_id, decision=AckDecision.DUPLICATE)
        self.applied[event.event_id] = event
        return Ack(event_id=event.event_id, decision=AckDecision.ACCEPTED)

    async def wait_for(self, predicate: Callable[[FakeMaster], bool]) -> None:
        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(lambda: predicate(self)), WAIT_S)

    async def wait_terminal(self, task_instance_id: int) -> TaskEvent:
        """Waits until the worker *sent* a terminal event of the attempt; returns it."""
        await self.wait_for(lambda m: m.terminal(task_instance_id) is not None)
        found = self.terminal(task_instance_id)
        assert found is not None
        return found

    def terminal(self, task_instance_id: int) -> TaskEvent | None:
        for r in self.received:
            if r.event.task_instance_id == task_instance_id and r.event.type.terminal:
                return r.event
        return None

    def types_of(self, task_instance_id: int) -> list[TaskEventType]:
        """Event types applied for the attempt, in application order."""
        return [e.type for e in self.applied.values() if e.task_instance_id == task_instance_id]


@dataclass
class Harness:
    """One test's world: a registry, a default fake master, and workers started on demand."""

    tmp_path: Path
    registry: FakeRegistry
    master: FakeMaster
    workers: list[Worker] = field(default_factory=list)
    masters: list[FakeMaster] = field(default_factory=list)
    channels: list[aio.Channel] = field(default_factory=list)
    _next_id: Iterator[int] = field(default_factory=lambda: iter(range(1000, 10**9)))

    @property
    def data_dir(self) -> Path:
        return self.tmp_path / "data"

    def options(self, **overrides: Any) -> WorkerOptions:
        base = WorkerOptions(
            data_dir=self.data_dir,
            port=0,
            slots=4,
            heartbeat_interval=0.5,
            kill_grace=1.0,
            progress_interval=0.2,
            stop_grace=2.0,
            flush_timeout=0.2,
            report_backoff=Backoff(initial=0.02, maximum=0.2),
        )
        return replace(base, **overrides)

    async def worker(
        self,
        sampler: Sampler | None = None,
        environ: dict[str, str] | None = None,
        registry: Registry | None = None,
        **overrides: Any,
    ) -> Worker:
        # An idle host unless a test says otherwise: the real host's load must not make it BUSY.
        worker = Worker(
            self.options(**overrides),
            registry=registry or self.registry,
            sampler=sampler or idle_host,
            environ=environ,
        )
        await worker.start()
        self.workers.append(worker)
        return worker

    async def extra_master(self) -> FakeMaster:
        master = FakeMaster()
        await master.start()
        self.masters.append(master)
        return master

    def execution(self, script: str, **overrides: Any) -> TaskExecution:
        ti = next(self._next_id)
        base = TaskExecution(
            task_instance_id=ti,
            attempt=1,
            workflow_instance_id=77,
            workflow_code=4242,
            workflow_version=3,
            task_name=f"task-{ti}",
            idempotency_key=f"77-task-{ti}-1",
            kind=ShellSpec(script=script),
            owner_address=self.master.address,
            owner_epoch=9,
            submit_time=datetime(2024, 5, 6, 23, 30, tzinfo=UTC),
            timeout=timedelta(0),
            timeout_strategy=TimeoutStrategy.FAIL,
        )
        return replace(base, **overrides)

    def stub(self, worker: Worker) -> worker_service_pb2_grpc.WorkerServiceAsyncStub:
        return worker_service_pb2_grpc.WorkerServiceStub(self._channel(worker.address))

    def log_stub(self, worker: Worker) -> log_service_pb2_grpc.LogServiceAsyncStub:
        return log_service_pb2_grpc.LogServiceStub(self._channel(worker.address))

    async def dispatch(
        self, worker: Worker, execution: TaskExecution
    ) -> worker_service_pb2.DispatchTaskResponse:
        request = worker_service_pb2.DispatchTaskRequest(task=execution_to_proto(execution))
        return await self.stub(worker).DispatchTask(request, timeout=WAIT_S)

    def _channel(self, address: str) -> aio.Channel:
        channel = aio.insecure_channel(address)
        self.channels.append(channel)
        return channel

    async def close(self) -> None:
        for worker in self.workers:
            await worker.stop(grace=0.5)
        for channel in self.channels:
            await channel.close()
        for master in [self.master, *self.masters]:
            await master.stop()


class Gate:
    """A named pipe a task script blocks on (``read _ < "$GATE"``) until the test opens the gate.

    The test holds the pipe open read-write, so the script's open never blocks and a line written
    before the script reads it is kept in the pipe's buffer."""

    def __init__(self, path: Path) -> None:
        self.path = path
        os.mkfifo(path)
        self._fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)

    def open(self) -> None:
        os.write(self._fd, b"go\n")

    def close(self) -> None:
        os.close(self._fd)


@pytest.fixture
async def harness(tmp_path: Path) -> AsyncIterator[Harness]:
    master = FakeMaster()
    await master.start()
    h = Harness(tmp_path=tmp_path, registry=FakeRegistry(), master=master)
    try:
        yield h
    finally:
        await h.close()


@pytest.fixture
def gate(tmp_path: Path) -> Iterator[Callable[[str], Gate]]:
    gates: list[Gate] = []

    def make(name: str) -> Gate:
        gates.append(Gate(tmp_path / name))
        return gates[-1]

    yield make
    for g in gates:
        g.close()


def _live_members(pgid: int) -> list[int]:
    """Processes of group ``pgid`` that are not zombies (dead, waiting for a parent to reap
    them)."""
    alive = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            alive.append(int(entry.name))
    return alive


async def _wait_group_gone(pgid: int) -> None:
    # Right after the worker reports the end, members may still be exiting; once dead they are
    # zombies until pid 1 (not the worker: they were reparented) reaps them. Neither gives an event
    # to wait on, so check a bounded number of times.
    for _ in range(400):
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        await asyncio.sleep(0.025)
    raise AssertionError(f"process group {pgid} still exists; alive: {_live_members(pgid)}")


@pytest.fixture
def live_members() -> Callable[[int], list[int]]:
    return _live_members


@pytest.fixture
def group_gone() -> Callable[[int], Awaitable[None]]:
    """Waits (bounded) until no process of the group exists any more."""
    return _wait_group_gone
