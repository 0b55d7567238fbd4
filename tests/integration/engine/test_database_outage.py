"""A master whose metadata database goes away and comes back (ARCHITECTURE.md §4).

A master and a worker in the test's event loop (embedded registry) reach a real PostgreSQL or
MariaDB through :class:`~tests.tcp_proxy.TcpProxy`; ``cut()`` plays the database going down (new
connections refused, open ones reset) and ``heal()`` its return. Each test asserts what clients see
(UNAVAILABLE with reason DATABASE_UNAVAILABLE, never INTERNAL; health NOT_SERVING then SERVING; a
watch that survives) and that every instance still ends with each task run exactly once (a ledger
of task starts), without restarting anything.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable
from datetime import timedelta
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc import aio
from grpc_health.v1 import health_pb2, health_pb2_grpc
from sqlalchemy import update
from sqlalchemy.engine import make_url

from dsched.v1 import enums_pb2 as T
from dsched.v1 import log_service_pb2 as logs_pb
from dsched.v1 import master_service_pb2 as pb
from dsched_server.coord.embedded import EmbeddedRegistry
from dsched_server.store import models
from dsched_server.store.availability import DATABASE_UNAVAILABLE
from dsched_worker.app import Worker, WorkerOptions
from tests.conftest import _Server
from tests.integration.api.conftest import (
    NEVER_BUSY,
    WAIT_S,
    Cluster,
    Gate,
    assert_status,
    failure,
    master_sees,
    online_workflow,
    run_to_end,
    shell,
    start,
    start_cluster,
    task_is,
    watch_to_end,
    watch_until,
)
from tests.tcp_proxy import TcpProxy

pytestmark = pytest.mark.timeout(120)
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
RUNNING = T.TASK_INSTANCE_STATE_RUNNING


class Ledger:
    """One line per task run that started: task name, task instance id, attempt, worker."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.append = (
            'echo "$DSCHED_TASK_NAME $DSCHED_TASK_INSTANCE_ID $DSCHED_ATTEMPT '
            f'$DSCHED_WORKER_ADDRESS" >> "{path}"; echo "ran $DSCHED_TASK_NAME"'
        )

    def runs(self) -> list[list[str]]:
        return [line.split() for line in self.path.read_text().splitlines()]


@contextlib.asynccontextmanager
async def proxied(
    server: _Server, tmp: Path, **master_options: Any
) -> AsyncIterator[tuple[Cluster, TcpProxy]]:
    """A fresh database on ``server``, reached only through a proxy, and a cluster on it."""
    with server.database() as url:
        target = make_url(url)
        assert target.port is not None
        with TcpProxy(target.port) as proxy:
            via = target.set(host="127.0.0.1", port=proxy.port)
            async with start_cluster(
                via.render_as_string(hide_password=False), tmp, **master_options
            ) as c:
                yield c, proxy


async def health_reaches(channel: aio.Channel, status: int) -> None:
    """Follows the overall health (Watch pushes every change) until it reports ``status``."""
    stub = health_pb2_grpc.HealthStub(channel)
    call = stub.Watch(health_pb2.HealthCheckRequest(service=""))
    try:
        async with asyncio.timeout(WAIT_S):
            async for reply in call:
                if reply.status == status:
                    return
    finally:
        call.cancel()
    raise AssertionError("the health stream ended")


async def follow_log(c: Cluster, task_instance_id: int) -> bytes:
    """Follows a task's log to its end; returns it."""
    received = b""
    request = logs_pb.TailTaskLogRequest(task_instance_id=task_instance_id, follow=True)
    async with asyncio.timeout(WAIT_S):
        async for frame in c.logs.TailTaskLog(request):
            received += frame.data
            if frame.end_of_log:
                return received
    raise AssertionError(f"the log stream ended without end_of_log after {received!r}")


async def two_task_run(c: Cluster, ledger: Ledger, gate: Gate) -> int:
    """Starts ``a -> b`` (``a`` waits on ``gate``) and returns once ``a`` runs."""
    tasks = [shell("a", f"{ledger.append}\n{gate.wait}"), shell("b", ledger.append, ["a"])]
    await online_workflow(c, "p", "wf", tasks)
    started = await start(c, "p", "wf")
    await watch_until(c, started.id, task_is("a", RUNNING))
    return started.id


@pytest.mark.parametrize("kind", ["postgresql", "mariadb"])
async def test_every_rpc_answers_unavailable_while_the_database_is_down_and_health_follows(
    kind: str,
    _servers: dict[str, _Server],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with proxied(_servers[kind], tmp_path) as (c, proxy):
        await online_workflow(c, "p", "wf", [shell("a", "true")])
        caplog.set_level(logging.INFO)
        proxy.cut()

        calls: list[Awaitable[Any]] = [
            c.stub.StartWorkflow(pb.StartWorkflowRequest(project="p", workflow="wf")),
            c.stub.GetWorkflow(pb.GetWorkflowRequest(project="p", name="wf")),
            c.stub.ListWorkflowInstances(pb.ListWorkflowInstancesRequest()),
            c.stub.CreateProject(pb.CreateProjectRequest(project={"name": "q"})),
        ]
        for call in calls:
            assert_status(await failure(call), grpc.StatusCode.UNAVAILABLE, DATABASE_UNAVAILABLE)
        await health_reaches(c.channel, NOT_SERVING)

        proxy.heal()
        await health_reaches(c.channel, SERVING)
        started = await start(c, "p", "wf")
        done = await run_to_end(c, started.id)
        assert done.state == T.WORKFLOW_INSTANCE_STATE_SUCCEEDED

    text = caplog.text
    assert text.count("metadata database unreachable") == 1, text  # one line per outage
    assert "metadata database reachable again" in text
    assert "Traceback" not in text and "unhandled error" not in text


async def test_a_runner_whose_write_failed_is_reloaded_when_the_database_is_back(
    _servers: dict[str, _Server], tmp_path: Path
) -> None:
    ledger, gate = Ledger(tmp_path / "ledger"), Gate(tmp_path / "gate")
    # No sweep during the test: only the reload's own retries may bring the instance back.
    async with proxied(_servers["postgresql"], tmp_path, sweep_interval=3600) as (c, proxy):
        instance_id = await two_task_run(c, ledger, gate)
        master = c.master
        assert master.reloads is not None
        watch = asyncio.create_task(watch_to_end(c, instance_id))  # open across the outage

        runner = master.runners.get(instance_id)
        assert runner is not None
        a = next(t.ti_id for t in runner.state.tracks.values() if t.task == "a")

        proxy.cut()
        tail = asyncio.create_task(follow_log(c, a))  # opened during the outage
        gate.open()  # a ends: its result cannot be written, so the runner stops
        async with asyncio.timeout(WAIT_S):
            while not master.reloads.pending(instance_id):
                await asyncio.sleep(0.05)  # test tooling: waits for the engine to notice
        assert master.runners.get(instance_id) is None  # nothing drives it while the DB is away
        await health_reaches(c.channel, NOT_SERVING)

        proxy.heal()
        seen = await watch
        assert seen.events[-1].workflow_state == T.WORKFLOW_INSTANCE_STATE_SUCCEEDED
        assert master.reloads.reloaded >= 1
        assert b"\nran a\n" in await tail  # the whole log, to its end
    assert sorted(run[0] for run in ledger.runs()) == ["a", "b"]  # each ran once


async def test_the_sweep_drives_an_owned_instance_that_nothing_drives(
    _servers: dict[str, _Server], tmp_path: Path
) -> None:
    ledger, gate = Ledger(tmp_path / "ledger"), Gate(tmp_path / "gate")
    async with proxied(_servers["postgresql"], tmp_path, sweep_interval=0.5) as (c, _):
        instance_id = await two_task_run(c, ledger, gate)
        master = c.master
        assert master.reloads is not None
        runner = master.runners.get(instance_id)
        assert runner is not None
        # Lose the runner without a reload (what a bug would do): nothing else asks for one.
        await runner.stop()
        assert master.runners.get(instance_id) is None
        assert not master.reloads.pending(instance_id)
        gate.open()

        done = await run_to_end(c, instance_id)
        assert done.events[-1].workflow_state == T.WORKFLOW_INSTANCE_STATE_SUCCEEDED
        assert master.reloads.swept >= 1
    assert sorted(run[0] for run in ledger.runs()) == ["a", "b"]


async def test_a_reloaded_attempt_goes_back_to_the_worker_it_was_sent_to(
    _servers: dict[str, _Server], tmp_path: Path
) -> None:
    ledger, gate = Ledger(tmp_path / "ledger"), Gate(tmp_path / "gate")
    # No warm-up: whichever worker runs a, the other one is idle and the selector's choice for a
    # new dispatch, so only the pin can send a back to where it runs.
    async with proxied(_servers["postgresql"], tmp_path, warmup=timedelta(0)) as (c, _):
        registry = EmbeddedRegistry(c.ensemble)
        spare = Worker(
            WorkerOptions(
                data_dir=tmp_path / "spare", port=0, slots=8, thresholds=NEVER_BUSY, stop_grace=2
            ),
            registry=registry,
        )
        await registry.start()
        await spare.start()
        try:
            await master_sees(c.master, spare.address)
            instance_id = await two_task_run(c, ledger, gate)
            runner = c.master.runners.get(instance_id)
            assert runner is not None
            track = next(t for t in runner.state.tracks.values() if t.task == "a")
            assert track.job is not None and track.job.sent
            ti_id, sent_to = track.ti_id, track.job.target
            # The runner sent a to a worker but its record of that was lost (the write failed):
            # the store says a was never dispatched.
            await runner.stop()
            async with c.master.db.transaction() as conn:
                ti = models.table(models.TaskInstance)
                await conn.execute(
                    update(ti)
                    .where(ti.c.id == ti_id)
                    .values(state="SUBMITTED", host="", worker_epoch=0)
                )
            assert c.master.reloads is not None
            c.master.reloads.request(instance_id, {ti_id: sent_to})
            gate.open()
            done = await run_to_end(c, instance_id)
        finally:
            await spare.stop()
            await registry.stop()
    assert done.events[-1].workflow_state == T.WORKFLOW_INSTANCE_STATE_SUCCEEDED
    runs = ledger.runs()
    assert sorted(run[0] for run in runs) == ["a", "b"], runs  # a did not run a second time
    assert [run[3] for run in runs if run[0] == "a"] == [sent_to]
