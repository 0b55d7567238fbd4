"""Pause and stop on the wire when the owner cannot apply them in time: the call answers
CONTROL_STATUS_PENDING (grpcurl shows it, the SDK raises ControlPending) with the instance as it is,
the control stays recorded, and the master that takes the instance over applies it; the same
request then answers APPLIED. The owner is made unreachable by handing the instance to an epoch
that does not exist, at an address nobody listens on, as a dead master would leave it."""

from __future__ import annotations

import asyncio
import json

from sqlalchemy import update

import dsched
from dsched_server.engine.failover import fail_over_epoch
from dsched_server.store import controls, models
from tests.conftest import free_port
from tests.integration.api.conftest import (
    Cluster,
    Gate,
    enums,
    online_workflow,
    pb,
    run_to_end,
    shell,
    start,
    task_instances,
    task_is,
    watch_until,
)
from tests.integration.api.test_grpcurl import Grpcurl, pick

DEAD_EPOCH = 9999
WI = models.table(models.WorkflowInstance)


async def orphaned_run(cluster: Cluster, gate: Gate) -> int:
    """An instance whose first task runs (behind ``gate``), then left by its owner: the master
    stops driving it and the store names a dead epoch at a closed port as its owner."""
    await online_workflow(cluster, "p", "w", [shell("a", gate.wait), shell("b", "true", ["a"])])
    started = await start(cluster, "p", "w")
    await watch_until(cluster, started.id, task_is("a", enums.TASK_INSTANCE_STATE_RUNNING))
    runner = cluster.master.runners.get(started.id)
    assert runner is not None
    await runner.stop()
    async with cluster.master.db.transaction() as conn:
        await conn.execute(
            update(WI)
            .where(WI.c.id == started.id)
            .values(epoch=DEAD_EPOCH, host=f"127.0.0.1:{free_port()}")
        )
    return started.id


async def adopt(cluster: Cluster) -> None:
    """What the failover check does once the dead epoch's delay is over."""
    assert cluster.master.services is not None
    assert await fail_over_epoch(cluster.master.services, DEAD_EPOCH, "is gone") == 1


async def test_grpcurl_shows_a_pending_stop_and_then_the_applied_one(
    cluster: Cluster, gate: Gate
) -> None:
    instance_id = await orphaned_run(cluster, gate)
    grpcurl = Grpcurl(cluster)
    request = {"id": instance_id, "request_id": "stop-1"}

    code, out, err = await grpcurl.run(
        "dsched.v1.MasterService/StopWorkflowInstance", data=request, flags=("-max-time", "3")
    )

    assert code == 0, err
    reply = json.loads(out)
    assert reply["status"] == "CONTROL_STATUS_PENDING"
    assert reply["instance"]["state"] == "WORKFLOW_INSTANCE_STATE_RUNNING"
    async with cluster.master.db.read() as conn:
        recorded = await controls.find(conn, "stop-1")
    assert recorded is not None and recorded.pending

    await adopt(cluster)
    done = await run_to_end(cluster, instance_id)
    assert done.state == enums.WORKFLOW_INSTANCE_STATE_STOPPED
    applied = await grpcurl.call("StopWorkflowInstance", request)
    assert applied["status"] == "CONTROL_STATUS_APPLIED"
    assert pick(applied["instance"], "state") == "WORKFLOW_INSTANCE_STATE_STOPPED"
    tis = await task_instances(cluster, instance_id, superseded=True)
    assert [(t.task_name, t.state) for t in tis] == [("a", enums.TASK_INSTANCE_STATE_KILLED)]


async def test_the_sdk_raises_control_pending_and_a_repeat_returns_the_paused_instance(
    cluster: Cluster, gate: Gate
) -> None:
    instance_id = await orphaned_run(cluster, gate)
    with dsched.Client.connect(cluster.address, timeout=3) as client:
        try:
            await asyncio.to_thread(client.pause_instance, instance_id, request_id="pause-1")
        except dsched.ControlPending as pending:
            assert pending.request_id == "pause-1"
            assert pending.instance.state is dsched.WorkflowState.RUNNING
            assert pending.metadata["state"] == "RUNNING"
        else:
            raise AssertionError("the pause was applied although nobody drove the instance")

        await adopt(cluster)
        gate.open()
        again = await asyncio.to_thread(client.pause_instance, instance_id, request_id="pause-1")
    assert again.state in (dsched.WorkflowState.READY_PAUSE, dsched.WorkflowState.PAUSED)
    done = await run_to_end(cluster, instance_id)
    assert done.state == enums.WORKFLOW_INSTANCE_STATE_PAUSED
    tis = await task_instances(cluster, instance_id)
    assert [(t.task_name, t.state) for t in tis] == [("a", enums.TASK_INSTANCE_STATE_SUCCEEDED)]


async def test_a_control_of_a_driven_instance_answers_applied_on_the_wire(
    cluster: Cluster, gate: Gate
) -> None:
    await online_workflow(cluster, "p", "w", [shell("a", gate.wait)])
    started = await start(cluster, "p", "w")
    await watch_until(cluster, started.id, task_is("a", enums.TASK_INSTANCE_STATE_RUNNING))
    reply = await cluster.stub.StopWorkflowInstance(
        pb.StopWorkflowInstanceRequest(id=started.id, request_id="s")
    )
    assert reply.status == enums.CONTROL_STATUS_APPLIED
    assert reply.instance.state == enums.WORKFLOW_INSTANCE_STATE_READY_STOP
    assert (await run_to_end(cluster, started.id)).state == enums.WORKFLOW_INSTANCE_STATE_STOPPED
