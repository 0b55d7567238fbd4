"""A real master and worker on 127.0.0.1:0, and helpers that speak the raw wire contract.

``cluster`` starts, in the test's event loop, a :class:`~dsched_server.master.Master` and a
:class:`~dsched_worker.app.Worker` that share one :class:`EmbeddedEnsemble` (one registry session
each, as in a cluster), both with ``port=0`` and data directories under ``tmp_path``, over SQLite.
:func:`start_cluster` does the same for any database URL (the ``db_url`` smoke tests).

The tests talk to the master with generated ``grpc.aio`` stubs from ``dsched.v1``, never the SDK,
so what is asserted is the wire contract itself; :func:`failure` decodes a rejected call's
``google.rpc.Status`` (``ErrorInfo`` and ``BadRequest``) from its trailers.

Load thresholds are set to 1.0 (never BUSY) so that a loaded test machine cannot make the worker
refuse work; heartbeats still carry real host samples.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import duration_pb2
from google.rpc import error_details_pb2
from grpc import aio
from grpc_status import rpc_status
from sqlalchemy import func, select

from dsched.v1 import (
    enums_pb2,
    log_service_pb2_grpc,
    master_service_pb2,
    master_service_pb2_grpc,
    resources_pb2,
)
from dsched_server.coord.embedded import EmbeddedEnsemble, EmbeddedRegistry
from dsched_server.heartbeat import Thresholds
from dsched_server.master import Master, MasterOptions
from dsched_server.store import models
from dsched_worker.app import Worker, WorkerOptions

WAIT_S = 30.0  # bound of every wait on a stream or a state; far above what a run here takes
NEVER_BUSY = Thresholds(cpu=1.0, memory=1.0, disk=1.0)

pb = master_service_pb2
res = resources_pb2
enums = enums_pb2

SUCCEEDED = enums_pb2.WORKFLOW_INSTANCE_STATE_SUCCEEDED
FAILED = enums_pb2.WORKFLOW_INSTANCE_STATE_FAILED
TERMINAL = frozenset(
    {
        enums_pb2.WORKFLOW_INSTANCE_STATE_SUCCEEDED,
        enums_pb2.WORKFLOW_INSTANCE_STATE_FAILED,
        enums_pb2.WORKFLOW_INSTANCE_STATE_STOPPED,
        enums_pb2.WORKFLOW_INSTANCE_STATE_PAUSED,
    }
)


# ------------------------------------------------------------------------------ the servers


@dataclass
class Cluster:
    """A running master + worker and raw stubs on one channel to the master."""

    master: Master
    worker: Worker
    channel: aio.Channel
    stub: master_service_pb2_grpc.MasterServiceAsyncStub
    logs: log_service_pb2_grpc.LogServiceAsyncStub
    tmp: Path
    ensemble: EmbeddedEnsemble

    @property
    def address(self) -> str:
        return self.master.address

    @property
    def port(self) -> int:
        return int(self.master.address.rsplit(":", 1)[1])


@contextlib.asynccontextmanager
async def start_cluster(db_url: str, tmp: Path, **master_options: Any) -> AsyncIterator[Cluster]:
    """Starts registry sessions, then the master (with ``master_options`` over the defaults),
    then the worker; stops them in reverse."""
    ensemble = EmbeddedEnsemble(tmp / "registry")
    master_registry = EmbeddedRegistry(ensemble)
    worker_registry = EmbeddedRegistry(ensemble)
    options = {"thresholds": NEVER_BUSY, **master_options}
    master = Master(
        MasterOptions(db_url=db_url, data_dir=tmp / "master", port=0, cluster_port=0, **options),
        registry=master_registry,
    )
    worker = Worker(
        WorkerOptions(
            data_dir=tmp / "worker", port=0, slots=8, thresholds=NEVER_BUSY, stop_grace=2.0
        ),
        registry=worker_registry,
    )
    async with contextlib.AsyncExitStack() as stack:
        await master_registry.start()
        stack.push_async_callback(master_registry.stop)
        await worker_registry.start()
        stack.push_async_callback(worker_registry.stop)
        await master.start()
        stack.push_async_callback(master.stop)
        await worker.start()
        stack.push_async_callback(worker.stop)
        await master_sees(master, worker.address)
        channel = aio.insecure_channel(master.address)
        stack.push_async_callback(channel.close)
        await asyncio.wait_for(channel.channel_ready(), WAIT_S)
        yield Cluster(
            master=master,
            worker=worker,
            channel=channel,
            stub=master_service_pb2_grpc.MasterServiceStub(channel),
            logs=log_service_pb2_grpc.LogServiceStub(channel),
            tmp=tmp,
            ensemble=ensemble,
        )


async def master_sees(master: Master, worker_address: str) -> None:
    """Waits (bounded) until the master's worker directory lists the worker."""
    async with asyncio.timeout(WAIT_S):
        while master.workers.get(worker_address) is None:
            await master.workers.changed()


@contextlib.asynccontextmanager
async def extra_worker(
    c: Cluster, group: str, thresholds: Thresholds = NEVER_BUSY
) -> AsyncIterator[Worker]:
    """One more worker, of ``group``, on its own registry session; stopped on exit."""
    registry = EmbeddedRegistry(c.ensemble)
    worker = Worker(
        WorkerOptions(data_dir=c.tmp / group, port=0, group=group, thresholds=thresholds),
        registry=registry,
    )
    async with contextlib.AsyncExitStack() as stack:
        await registry.start()
        stack.push_async_callback(registry.stop)
        await worker.start()
        stack.push_async_callback(worker.stop)
        await master_sees(c.master, worker.address)
        yield worker


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    async with start_cluster(f"sqlite+aiosqlite:///{tmp_path / 'dsched.db'}", tmp_path) as c:
        yield c


# ------------------------------------------------------------------------------ errors


@dataclass(frozen=True)
class Failure:
    """A rejected call as it arrived: status code, message and the decoded rich details."""

    code: grpc.StatusCode
    message: str
    reason: str
    domain: str
    metadata: Mapping[str, str]
    violations: tuple[tuple[str, str], ...]

    @property
    def fields(self) -> list[str]:
        return [f for f, _ in self.violations]

    def describe(self, field_path: str) -> str:
        """The description of the first violation of ``field_path``."""
        for f, description in self.violations:
            if f == field_path:
                return description
        raise AssertionError(f"no violation of {field_path!r} in {self.violations}")


def decode(err: aio.AioRpcError) -> Failure:
    """Decodes the ``google.rpc.Status`` carried in the trailers of ``err``."""
    status = rpc_status.from_call(err)
    assert status is not None, f"no grpc-status-details-bin in {err.code()}: {err.details()}"
    assert status.code == err.code().value[0]
    infos: list[error_details_pb2.ErrorInfo] = []
    violations: list[tuple[str, str]] = []
    for detail in status.details:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            infos.append(info)
        elif detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad = error_details_pb2.BadRequest()
            detail.Unpack(bad)
            violations.extend((v.field, v.description) for v in bad.field_violations)
    assert len(infos) == 1, f"expected one ErrorInfo, got {infos}"
    return Failure(
        code=err.code(),
        message=status.message,
        reason=infos[0].reason,
        domain=infos[0].domain,
        metadata=dict(infos[0].metadata),
        violations=tuple(violations),
    )


async def failure(call: Awaitable[Any]) -> Failure:
    """Awaits a unary call that must fail; returns its decoded status."""
    try:
        response = await asyncio.wait_for(call, WAIT_S)
    except aio.AioRpcError as err:
        return decode(err)
    raise AssertionError(f"the call succeeded: {response}")


async def stream_failure(stream: Any) -> Failure:
    """Reads a server stream that must fail; returns its decoded status."""
    try:
        async with asyncio.timeout(WAIT_S):
            async for frame in stream:
                raise AssertionError(f"the stream sent a frame: {frame}")
    except aio.AioRpcError as err:
        return decode(err)
    raise AssertionError("the stream ended without an error")


def assert_invalid(
    got: Failure, field_path: str, *, reason: str = "INVALID_ARGUMENT", contains: str = ""
) -> None:
    """INVALID_ARGUMENT, ErrorInfo{reason, domain "dsched"} and a violation of ``field_path``."""
    assert got.code == grpc.StatusCode.INVALID_ARGUMENT, got
    assert got.domain == "dsched", got
    assert got.reason == reason, got
    assert field_path in got.fields, got
    if contains:
        assert contains in got.describe(field_path), got


def assert_status(got: Failure, code: grpc.StatusCode, reason: str) -> None:
    assert (got.code, got.reason, got.domain) == (code, reason, "dsched"), got


# ------------------------------------------------------------------------------ definitions


def shell(
    name: str, script: str, upstream: Iterable[str] = (), **fields: Any
) -> res.TaskDefinition:
    return res.TaskDefinition(
        name=name, upstream_tasks=list(upstream), shell=res.ShellTask(script=script), **fields
    )


def seconds(value: int) -> duration_pb2.Duration:
    return duration_pb2.Duration(seconds=value)


def workflow(
    project: str, name: str, tasks: Iterable[res.TaskDefinition], **fields: Any
) -> res.Workflow:
    return res.Workflow(project=project, name=name, tasks=list(tasks), **fields)


def chain(*names: str, script: str = "echo {name}") -> list[res.TaskDefinition]:
    """Tasks ``names[0] -> names[1] -> ...``, each echoing its name."""
    return [
        shell(n, script.format(name=n), [names[i - 1]] if i else []) for i, n in enumerate(names)
    ]


async def create_project(c: Cluster, name: str) -> res.Project:
    reply = await c.stub.CreateProject(pb.CreateProjectRequest(project=res.Project(name=name)))
    return reply.project


async def online_workflow(
    c: Cluster, project: str, name: str, tasks: Iterable[res.TaskDefinition], **fields: Any
) -> res.Workflow:
    """Creates the project if needed, then the workflow, and puts it ONLINE."""
    try:
        await create_project(c, project)
    except aio.AioRpcError as err:
        if err.code() != grpc.StatusCode.ALREADY_EXISTS:
            raise
    await c.stub.CreateWorkflow(
        pb.CreateWorkflowRequest(workflow=workflow(project, name, tasks, **fields))
    )
    reply = await c.stub.SetWorkflowReleaseState(
        pb.SetWorkflowReleaseStateRequest(
            project=project, name=name, release_state=enums.RELEASE_STATE_ONLINE
        )
    )
    return reply.workflow


async def start(c: Cluster, project: str, name: str, **fields: Any) -> res.WorkflowInstance:
    reply = await c.stub.StartWorkflow(
        pb.StartWorkflowRequest(project=project, workflow=name, **fields)
    )
    return reply.instance


# ------------------------------------------------------------------------------ watching


@dataclass
class Watched:
    """What a watch stream delivered: every event in order, the frames' cursors and states."""

    events: list[res.InstanceEvent] = field(default_factory=list)
    cursors: list[int] = field(default_factory=list)
    states: list[int] = field(default_factory=list)

    @property
    def cursor(self) -> int:
        return self.cursors[-1] if self.cursors else 0

    @property
    def state(self) -> int:
        return self.states[-1] if self.states else 0

    def task_states(self, task: str) -> list[int]:
        return [e.task_state for e in self.events if e.task_name == task]

    def workflow_states(self) -> list[int]:
        return [e.workflow_state for e in self.events if not e.task_instance_id]

    def task_instance_id(self, task: str) -> int:
        """The newest task instance id of ``task`` seen on the stream."""
        ids = [e.task_instance_id for e in self.events if e.task_name == task]
        assert ids, f"no event of task {task!r}"
        return ids[-1]


async def watch_to_end(c: Cluster, instance_id: int, after: int = 0) -> Watched:
    """Follows WatchWorkflowInstance until the server ends the stream (after the terminal event)."""
    seen = Watched()
    request = pb.WatchWorkflowInstanceRequest(id=instance_id, after_sequence=after)
    async with asyncio.timeout(WAIT_S):
        async for frame in c.stub.WatchWorkflowInstance(request):
            seen.events.extend(frame.events)
            seen.cursors.append(frame.cursor)
            seen.states.append(frame.state)
    return seen


async def run_to_end(c: Cluster, instance_id: int, after: int = 0) -> Watched:
    """Like :func:`watch_to_end`, and checks that the last event is a terminal workflow event."""
    seen = await watch_to_end(c, instance_id, after)
    assert seen.events, "the stream sent no events"
    last = seen.events[-1]
    assert last.task_instance_id == 0 and last.workflow_state in TERMINAL, last
    return seen


async def watch_until(
    c: Cluster,
    instance_id: int,
    predicate: Callable[[res.InstanceEvent], bool],
    after: int = 0,
) -> Watched:
    """Follows the stream (kept open) until an event satisfies ``predicate``, then hangs up."""
    seen = Watched()
    request = pb.WatchWorkflowInstanceRequest(id=instance_id, after_sequence=after, keep_open=True)
    call = c.stub.WatchWorkflowInstance(request)
    try:
        async with asyncio.timeout(WAIT_S):
            async for frame in call:
                seen.events.extend(frame.events)
                seen.cursors.append(frame.cursor)
                seen.states.append(frame.state)
                if any(predicate(e) for e in frame.events):
                    return seen
    finally:
        call.cancel()
    raise AssertionError("the kept-open stream ended")


def task_is(task: str, state: int) -> Callable[[res.InstanceEvent], bool]:
    return lambda e: e.task_name == task and e.task_state == state


def workflow_is(state: int) -> Callable[[res.InstanceEvent], bool]:
    return lambda e: e.task_instance_id == 0 and e.workflow_state == state


async def task_instances(
    c: Cluster, instance_id: int, *, superseded: bool = False
) -> list[res.TaskInstance]:
    found: list[res.TaskInstance] = []
    token = ""
    while True:  # a page holds up to 1000 items and 3 MiB: large OUT parameters take several
        reply = await c.stub.ListTaskInstances(
            pb.ListTaskInstancesRequest(
                workflow_instance_id=instance_id,
                include_superseded=superseded,
                page_size=1000,
                page_token=token,
            )
        )
        found.extend(reply.task_instances)
        token = reply.next_page_token
        if not token:
            return found


async def instance(c: Cluster, instance_id: int) -> res.WorkflowInstance:
    reply = await c.stub.GetWorkflowInstance(pb.GetWorkflowInstanceRequest(id=instance_id))
    return reply.instance


# ------------------------------------------------------------------------------ gates


class Gate:
    """A file a task script waits for; the test opens the gate by creating it. The waiting is done
    by the task process, so the test itself never sleeps."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @property
    def wait(self) -> str:
        return f"until [ -e '{self.path}' ]; do sleep 0.02; done"

    def open(self) -> None:
        self.path.touch()


@pytest.fixture
def gate(tmp_path: Path) -> Gate:
    return Gate(tmp_path / "gate")


# ------------------------------------------------------------------------------ the store


_TABLES = [
    models.Project,
    models.Workflow,
    models.WorkflowVersion,
    models.TaskDefinition,
    models.TaskEdge,
    models.WorkflowInstance,
    models.Command,
    models.TaskInstance,
    models.InstanceEvent,
    models.RequestLog,
    models.ControlRequest,
]


async def row_counts(c: Cluster) -> dict[str, int]:
    """The number of rows of every table a client request can write, read on the master's
    Database."""
    counts: dict[str, int] = {}
    async with c.master.db.read() as conn:
        for model in _TABLES:
            table = models.table(model)
            counts[table.name] = int(await conn.scalar(select(func.count()).select_from(table)))
    return counts


@dataclass(frozen=True)
class Snapshot:
    """What a client can see through the API, plus the row counts of the store."""

    projects: list[bytes]
    workflows: list[bytes]
    instances: list[bytes]
    rows: dict[str, int]


async def snapshot(c: Cluster) -> Snapshot:
    projects = (await c.stub.ListProjects(pb.ListProjectsRequest(page_size=1000))).projects
    workflows: list[bytes] = []
    for p in projects:
        reply = await c.stub.ListWorkflows(pb.ListWorkflowsRequest(project=p.name, page_size=1000))
        workflows.extend(w.SerializeToString(deterministic=True) for w in reply.workflows)
    instances = await c.stub.ListWorkflowInstances(pb.ListWorkflowInstancesRequest(page_size=1000))
    return Snapshot(
        projects=[p.SerializeToString(deterministic=True) for p in projects],
        workflows=workflows,
        instances=[i.SerializeToString(deterministic=True) for i in instances.instances],
        rows=await row_counts(c),
    )


async def still_serves(c: Cluster) -> None:
    """One valid call: the server answers normally after whatever came before."""
    info = await c.stub.GetServerInfo(pb.GetServerInfoRequest(), timeout=WAIT_S)
    assert info.address == c.address
    assert info.start_time.ToDatetime(tzinfo=UTC) == c.master.start_time
