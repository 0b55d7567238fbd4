"""Pause and stop sent to the master that does NOT drive the instance, on a real ZooKeeper and a
real PostgreSQL / MariaDB: recorded durably, applied at once by the owner (nudged over gRPC),
resolved deterministically when they conflict, idempotent on request_id, and applied by the master
that adopts the instance when its owner is gone. Every test reads the task ledger (one line per
attempt that started) and asserts that nothing ran twice and nothing ran that a stop forbade."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import pytest
from sqlalchemy import select

from dsched.v1 import enums_pb2 as T
from dsched.v1 import master_service_pb2 as pb
from dsched_server.engine.messages import ApplyControls, Message
from dsched_server.engine.runner import InstanceRunner
from dsched_server.store import models
from tests.integration.api.conftest import (
    WAIT_S,
    Cluster,
    assert_status,
    failure,
    instance,
    run_to_end,
    task_instances,
    watch_until,
    workflow_is,
)
from tests.integration.engine.conftest import ZkCluster
from tests.integration.engine.test_failover_on_zookeeper import SlowRun, owner_epoch, slow_run

pytestmark = pytest.mark.timeout(120)
APPLIED, PENDING = T.CONTROL_STATUS_APPLIED, T.CONTROL_STATUS_PENDING
CR = models.table(models.ControlRequest)


async def controls_of(run: SlowRun) -> list[tuple[str, str, str, str, int]]:
    """(request id, kind, requested by, outcome, applied by) of the instance's controls in order."""
    async with run.b.db.read() as conn:
        rows = await conn.execute(
            select(CR.c.request_id, CR.c.kind, CR.c.requested_by, CR.c.outcome, CR.c.applied_by)
            .where(CR.c.workflow_instance_id == run.instance_id)
            .order_by(CR.c.id)
        )
        return [(r.request_id, r.kind, r.requested_by, r.outcome, int(r.applied_by)) for r in rows]


async def pause(
    c: Cluster, instance_id: int, rid: str = "", timeout: float | None = None
) -> pb.PauseWorkflowInstanceResponse:
    request = pb.PauseWorkflowInstanceRequest(id=instance_id, request_id=rid)
    return await c.stub.PauseWorkflowInstance(request, timeout=timeout)


async def stop(
    c: Cluster, instance_id: int, rid: str = "", timeout: float | None = None
) -> pb.StopWorkflowInstanceResponse:
    request = pb.StopWorkflowInstanceRequest(id=instance_id, request_id=rid)
    return await c.stub.StopWorkflowInstance(request, timeout=timeout)


def lose_nudges(runner: InstanceRunner) -> asyncio.Event:
    """Makes ``runner`` lose every ApplyControls posted to it, as if the nudges never arrived,
    until the returned event is set."""
    found = asyncio.Event()
    post = runner.post

    def losing(message: Message) -> None:
        if not isinstance(message, ApplyControls) or found.is_set():
            post(message)

    runner.post = losing  # type: ignore[method-assign]
    return found


async def test_a_stop_sent_to_the_other_master_is_applied_at_once_by_the_owner(
    zk_cluster: ZkCluster, tmp_path: Path
) -> None:
    run = await slow_run(zk_cluster, tmp_path, failover_delay=10.0)
    assert await owner_epoch(run.b, run.instance_id) == run.a.epoch  # a drives it, b does not

    stopped = await stop(run.api_b, run.instance_id, "stop-via-b")

    assert stopped.status == APPLIED
    assert stopped.instance.state in (
        T.WORKFLOW_INSTANCE_STATE_READY_STOP,
        T.WORKFLOW_INSTANCE_STATE_STOPPED,
    )
    done = await run_to_end(run.api_a, run.instance_id)
    assert done.state == T.WORKFLOW_INSTANCE_STATE_STOPPED
    assert await controls_of(run) == [("stop-via-b", "STOP", run.b.address, "APPLIED", run.a.epoch)]
    assert any(e.message == f"stop requested on {run.b.address}" for e in done.events)
    # The running task was killed, the one after it never started; nothing ran twice.
    assert run.ledger.runs_of("slow") == 1 and run.ledger.runs_of("after") == 0
    tis = await task_instances(run.api_a, run.instance_id, superseded=True)
    assert [(t.task_name, t.state) for t in tis] == [("slow", T.TASK_INSTANCE_STATE_KILLED)]
    assert run.b.runners.get(run.instance_id) is None  # b never drove it


async def test_a_pause_sent_to_the_other_master_lets_the_running_task_finish(
    zk_cluster: ZkCluster, tmp_path: Path
) -> None:
    run = await slow_run(zk_cluster, tmp_path, failover_delay=10.0)

    paused = await pause(run.api_b, run.instance_id, "pause-via-b")

    assert (paused.status, paused.instance.state) == (
        APPLIED,
        T.WORKFLOW_INSTANCE_STATE_READY_PAUSE,
    )
    run.gate.open()
    done = await run_to_end(run.api_b, run.instance_id)
    assert done.state == T.WORKFLOW_INSTANCE_STATE_PAUSED
    assert run.ledger.runs_of("slow") == 1 and run.ledger.runs_of("after") == 0
    # Repeated on either master: the first answer, although pausing again is illegal now.
    assert await pause(run.api_b, run.instance_id, "pause-via-b") == paused
    assert await pause(run.api_a, run.instance_id, "pause-via-b") == paused


async def test_pause_then_stop_from_two_masters_ends_stopped_and_stop_then_pause_refuses_the_pause(
    zk_cluster: ZkCluster, tmp_path: Path
) -> None:
    run = await slow_run(zk_cluster, tmp_path, failover_delay=10.0)

    assert (await pause(run.api_b, run.instance_id, "p1")).status == APPLIED
    stopped = await stop(run.api_a, run.instance_id, "s1")  # the owner's own fast path
    assert stopped.status == APPLIED
    assert stopped.instance.state == T.WORKFLOW_INSTANCE_STATE_READY_STOP  # the task still runs
    late = await failure(pause(run.api_b, run.instance_id, "p2"))
    assert_status(late, grpc.StatusCode.FAILED_PRECONDITION, "ILLEGAL_TRANSITION")
    assert late.metadata["state"] in ("READY_STOP", "STOPPED")  # (the kill may be done already)

    done = await run_to_end(run.api_b, run.instance_id)
    assert done.state == T.WORKFLOW_INSTANCE_STATE_STOPPED
    assert [(r[0], r[3]) for r in await controls_of(run)] == [("p1", "APPLIED"), ("s1", "APPLIED")]
    assert run.ledger.runs_of("slow") == 1 and run.ledger.runs_of("after") == 0


async def test_a_request_id_reused_for_another_control_or_instance_is_refused(
    zk_cluster: ZkCluster, tmp_path: Path
) -> None:
    run = await slow_run(zk_cluster, tmp_path, failover_delay=10.0)
    assert (await stop(run.api_b, run.instance_id, "one-id")).status == APPLIED

    for api in (run.api_a, run.api_b):
        got = await failure(pause(api, run.instance_id, "one-id"))
        assert_status(got, grpc.StatusCode.FAILED_PRECONDITION, "REQUEST_ID_REUSED")
    await run_to_end(run.api_a, run.instance_id)
    other = await run.api_a.stub.StartWorkflow(
        pb.StartWorkflowRequest(project="p", workflow="slow")
    )
    got = await failure(stop(run.api_b, other.instance.id, "one-id"))
    assert_status(got, grpc.StatusCode.FAILED_PRECONDITION, "REQUEST_ID_REUSED")
    run.gate.open()
    assert (await run_to_end(run.api_b, other.instance.id)).state == (
        T.WORKFLOW_INSTANCE_STATE_SUCCEEDED
    )


async def test_a_stop_recorded_while_the_owner_is_gone_is_applied_by_the_master_that_adopts_it(
    zk_cluster: ZkCluster, tmp_path: Path
) -> None:
    # a loses its session: it drops the instance (and comes back as a new epoch). The stop reaches
    # b while nobody drives the instance; b records it, finds no owner to nudge, and applies it
    # when it adopts the instance. The running task is adopted and killed, never run again; the
    # task after it never starts.
    run = await slow_run(zk_cluster, tmp_path, failover_delay=1.0)
    old = run.a.epoch
    zk_cluster.expire(run.a)
    await asyncio.wait_for(run.a.runners.wait_idle(), WAIT_S)  # a dropped it: nobody drives it

    stopped = await stop(run.api_b, run.instance_id, "stop-while-gone", timeout=60)

    assert stopped.status == APPLIED
    assert await owner_epoch(run.b, run.instance_id) != old
    done = await run_to_end(run.api_b, run.instance_id)
    assert done.state == T.WORKFLOW_INSTANCE_STATE_STOPPED
    [(rid, kind, by, outcome, applied_by)] = await controls_of(run)
    assert (rid, kind, by, outcome) == ("stop-while-gone", "STOP", run.b.address, "APPLIED")
    assert applied_by not in (0, old)  # applied by the adopting epoch, not the dead one
    assert run.ledger.runs_of("slow") == 1 and run.ledger.runs_of("after") == 0
    tis = await task_instances(run.api_b, run.instance_id, superseded=True)
    assert [(t.task_name, t.attempt, t.state) for t in tis] == [
        ("slow", 1, T.TASK_INSTANCE_STATE_KILLED)
    ]


async def test_a_control_whose_deadline_passes_answers_pending_and_is_applied_later(
    zk_cluster: ZkCluster, tmp_path: Path
) -> None:
    # The owner's nudge endpoint is down (its runner cannot be reached) and nobody takes the
    # instance over for a while: the call answers PENDING with the instance as it is; the stop is
    # applied once the owner's fallback sweep finds it.
    run = await slow_run(zk_cluster, tmp_path, failover_delay=10.0)
    runner = run.a.runners.get(run.instance_id)
    assert runner is not None and run.a.control_sweep is not None
    held = lose_nudges(runner)

    pending = await stop(run.api_b, run.instance_id, "slow-stop", timeout=3)

    assert pending.status == PENDING
    assert pending.instance.state == T.WORKFLOW_INSTANCE_STATE_RUNNING
    assert [r[3] for r in await controls_of(run)] == ["PENDING"]
    held.set()
    assert await run.a.control_sweep.sweep_once() == 1
    await watch_until(run.api_b, run.instance_id, workflow_is(T.WORKFLOW_INSTANCE_STATE_STOPPED))
    again = await stop(run.api_b, run.instance_id, "slow-stop")  # the same request: now applied
    assert again.status == APPLIED
    assert again.instance.state == T.WORKFLOW_INSTANCE_STATE_STOPPED
    assert (await instance(run.api_a, run.instance_id)).state == T.WORKFLOW_INSTANCE_STATE_STOPPED
    assert run.ledger.runs_of("after") == 0


async def test_a_pending_pause_of_an_instance_that_ends_first_is_refused_and_says_so(
    zk_cluster: ZkCluster, tmp_path: Path
) -> None:
    run = await slow_run(zk_cluster, tmp_path, failover_delay=10.0)
    runner = run.a.runners.get(run.instance_id)
    assert runner is not None
    lose_nudges(runner)
    pending = await pause(run.api_b, run.instance_id, "late-pause", timeout=3)
    assert pending.status == PENDING

    run.gate.open()  # slow, then after, run to the end before any nudge gets through
    done = await run_to_end(run.api_b, run.instance_id)

    assert done.state == T.WORKFLOW_INSTANCE_STATE_SUCCEEDED
    assert run.ledger.runs_of("slow") == 1 and run.ledger.runs_of("after") == 1
    [(_, _, _, outcome, applied_by)] = await controls_of(run)
    assert (outcome, applied_by) == ("REJECTED", run.a.epoch)
    control_events = [e.message for e in done.events if e.kind == T.INSTANCE_EVENT_KIND_CONTROL]
    assert control_events == [
        f"pause requested on {run.b.address}; to be applied by master {run.a.address}",
        "1 requested control(s) not applied: the instance ended SUCCEEDED",
    ]
    for api in (run.api_a, run.api_b):  # the same request, asked again: refused, with the reason
        got = await failure(pause(api, run.instance_id, "late-pause"))
        assert_status(got, grpc.StatusCode.FAILED_PRECONDITION, "ILLEGAL_TRANSITION")
        assert "ended SUCCEEDED before the control was applied" in got.message


async def test_a_pause_and_a_stop_recorded_while_nobody_drives_the_instance_end_in_a_stop(
    zk_cluster: ZkCluster, tmp_path: Path
) -> None:
    # The owner's runner is gone (as after a failed batch): both controls are recorded, then the
    # rebuilt runner applies them in recording order before its first actions. A pause followed by
    # a stop is a stop: the running task is adopted and killed, the next one never starts.
    run = await slow_run(zk_cluster, tmp_path, failover_delay=10.0)
    runner = run.a.runners.get(run.instance_id)
    assert runner is not None and run.a.services is not None
    await runner.stop()

    first = await pause(run.api_b, run.instance_id, "p", timeout=2)
    second = await stop(run.api_b, run.instance_id, "s", timeout=2)
    assert {first.status, second.status} <= {PENDING, APPLIED}
    run.a.services.reload(run.instance_id, {})

    done = await run_to_end(run.api_b, run.instance_id)
    assert done.state == T.WORKFLOW_INSTANCE_STATE_STOPPED
    assert [(r[0], r[3], r[4]) for r in await controls_of(run)] == [
        ("p", "APPLIED", run.a.epoch),
        ("s", "APPLIED", run.a.epoch),
    ]
    assert run.ledger.runs_of("slow") == 1 and run.ledger.runs_of("after") == 0
    tis = await task_instances(run.api_a, run.instance_id, superseded=True)
    assert [(t.task_name, t.attempt, t.state) for t in tis] == [
        ("slow", 1, T.TASK_INSTANCE_STATE_KILLED)
    ]
