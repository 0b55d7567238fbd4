"""What the master serves besides its API: health, reflection (v1alpha and v1), cluster membership
and its own description; and what each of its two listeners serves."""

from __future__ import annotations

import asyncio
import os
from datetime import UTC, datetime, timedelta

import pytest
from google.protobuf import descriptor_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from dsched.v1 import master_service_pb2, registry_pb2
from tests.integration.api.conftest import (
    SUCCEEDED,
    WAIT_S,
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
from tests.listeners import ON_CLIENT_LISTENER, assert_cannot_report, assert_listeners_split

SERVICES = ON_CLIENT_LISTENER
REFLECTION_METHODS = {
    "v1alpha": "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
    "v1": "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
}


@pytest.mark.parametrize("service", ["", "dsched.v1.MasterService", "dsched.v1.LogService"])
async def test_health_check_is_serving(cluster: Cluster, service: str) -> None:
    stub = health_pb2_grpc.HealthStub(cluster.channel)
    reply = await stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=WAIT_S)
    assert reply.status == health_pb2.HealthCheckResponse.SERVING


async def test_health_watch_reports_serving(cluster: Cluster) -> None:
    stub = health_pb2_grpc.HealthStub(cluster.channel)
    call = stub.Watch(health_pb2.HealthCheckRequest(service="dsched.v1.MasterService"))
    try:
        first = await call.read()
    finally:
        call.cancel()
    assert isinstance(first, health_pb2.HealthCheckResponse)
    assert first.status == health_pb2.HealthCheckResponse.SERVING


async def _reflect(
    cluster: Cluster, version: str, *requests: reflection_pb2.ServerReflectionRequest
) -> list[reflection_pb2.ServerReflectionResponse]:
    # v1 and v1alpha messages are wire-identical, so the v1alpha classes serve for both.
    call = cluster.channel.stream_stream(
        REFLECTION_METHODS[version],
        request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
        response_deserializer=reflection_pb2.ServerReflectionResponse.FromString,
    )(iter(requests), timeout=WAIT_S)
    return [response async for response in call]


@pytest.mark.parametrize("version", ["v1alpha", "v1"])
async def test_reflection_lists_every_service(cluster: Cluster, version: str) -> None:
    [reply] = await _reflect(
        cluster, version, reflection_pb2.ServerReflectionRequest(list_services="")
    )
    names = {s.name for s in reply.list_services_response.service}
    assert names == SERVICES


@pytest.mark.parametrize("version", ["v1alpha", "v1"])
async def test_reflection_serves_the_contract(cluster: Cluster, version: str) -> None:
    replies = await _reflect(
        cluster,
        version,
        reflection_pb2.ServerReflectionRequest(file_containing_symbol="dsched.v1.MasterService"),
        reflection_pb2.ServerReflectionRequest(
            file_containing_symbol="dsched.v1.StartWorkflowRequest"
        ),
        reflection_pb2.ServerReflectionRequest(file_containing_symbol="dsched.v1.NoSuchThing"),
    )
    assert len(replies) == 3
    files = {}
    for blob in replies[0].file_descriptor_response.file_descriptor_proto:
        proto = descriptor_pb2.FileDescriptorProto.FromString(blob)
        files[proto.name] = proto
    service_file = files["dsched/v1/master_service.proto"]
    [service] = service_file.service
    expected = {
        m.name for m in master_service_pb2.DESCRIPTOR.services_by_name["MasterService"].methods
    }
    assert {m.name for m in service.method} == expected
    assert "StartWorkflow" in expected and "WatchWorkflowInstance" in expected
    assert replies[1].file_descriptor_response.file_descriptor_proto
    assert replies[2].error_response.error_code == 5  # NOT_FOUND for an unknown symbol


async def test_reflection_alpha_stub(cluster: Cluster) -> None:
    # The generated v1alpha stub, as reflection clients in other languages use it.
    stub = reflection_pb2_grpc.ServerReflectionStub(cluster.channel)
    call = stub.ServerReflectionInfo(
        iter([reflection_pb2.ServerReflectionRequest(list_services="")])
    )
    replies = [r async for r in call]
    assert {s.name for s in replies[0].list_services_response.service} >= SERVICES


async def test_cluster_members_show_master_and_worker_with_heartbeats(cluster: Cluster) -> None:
    reply = await cluster.stub.ListClusterMembers(pb.ListClusterMembersRequest())
    assert [(m.role, m.address) for m in reply.members] == [
        (enums.SERVER_ROLE_MASTER, cluster.address),
        (enums.SERVER_ROLE_WORKER, cluster.worker.address),
    ]
    master, worker = reply.members
    assert worker.group == "default"
    now = datetime.now(UTC)
    assert master.cluster_address == cluster.master.cluster_address != cluster.address
    assert worker.cluster_address == ""
    for member in (master, worker):
        hb = member.heartbeat
        # Not even as an unknown field: the registry node's epoch (a fencing token) stays inside.
        assert registry_pb2.RegistryNode.FromString(hb.SerializeToString()).epoch == 0
        assert hb.pid == os.getpid()
        assert hb.status == enums.SERVER_STATUS_NORMAL
        assert hb.slots_total > 0 and 0 <= hb.slots_in_use <= hb.slots_total
        for usage in (hb.cpu_usage, hb.memory_usage, hb.disk_usage):
            assert 0.0 <= usage <= 1.0
        assert hb.memory_usage > 0.0 and hb.disk_usage > 0.0  # real samples of this host
        assert hb.load_average >= 0.0
        start = hb.start_time.ToDatetime(tzinfo=UTC)
        report = hb.report_time.ToDatetime(tzinfo=UTC)
        assert now - timedelta(minutes=5) < start <= report <= now + timedelta(seconds=5)
    assert worker.heartbeat.slots_total == cluster.worker.options.slots
    # A fresh worker is in warm-up: its weight is above the floor but below its full value.
    assert 1.0 <= worker.weight < 100.0 and master.weight == 0.0

    masters = await cluster.stub.ListClusterMembers(
        pb.ListClusterMembersRequest(role=enums.SERVER_ROLE_MASTER)
    )
    assert [m.address for m in masters.members] == [cluster.address]
    workers = await cluster.stub.ListClusterMembers(
        pb.ListClusterMembersRequest(role=enums.SERVER_ROLE_WORKER)
    )
    assert [m.address for m in workers.members] == [cluster.worker.address]


async def test_cluster_members_report_a_workers_backlog(cluster: Cluster, gate: Gate) -> None:
    slots = cluster.worker.options.slots
    tasks = [shell(f"t{i}", gate.wait) for i in range(slots + 2)]  # two more than it can run
    await online_workflow(cluster, "p", "fan-out", tasks)
    started = await start(cluster, "p", "fan-out")
    try:
        # The worker publishes its backlog in its heartbeat as soon as it changes.
        async with asyncio.timeout(WAIT_S):
            while (seen := cluster.master.workers.get(cluster.worker.address)) is None or (
                seen.heartbeat.queued < 2
            ):
                await cluster.master.workers.changed()
        reply = await cluster.stub.ListClusterMembers(pb.ListClusterMembersRequest())
        master, worker = reply.members
        assert (worker.heartbeat.slots_in_use, worker.heartbeat.queued) == (slots, 2)
        assert master.heartbeat.queued == 0
    finally:
        gate.open()
    done = await run_to_end(cluster, started.id)
    assert done.state == SUCCEEDED


async def test_server_info_describes_the_master(cluster: Cluster) -> None:
    info = await cluster.stub.GetServerInfo(pb.GetServerInfoRequest())
    assert info.api_version == "dsched.v1"
    assert info.role == enums.SERVER_ROLE_MASTER
    assert info.address == cluster.address
    assert info.version
    assert info.start_time.ToDatetime(tzinfo=UTC) == cluster.master.start_time
    assert {"stale_events", "ownership_lost", "commands_claimed"} <= set(info.counters)
    # Transitions refused where state is written: by the runner's batches, by the store overall.
    assert {"illegal_transitions", "refused_task_instances", "refused_workflow_instances"} <= set(
        info.counters
    )
    assert all(value >= 0 for value in info.counters.values())


async def test_clients_reach_no_cluster_service(cluster: Cluster) -> None:
    # TaskEventService (where workers report results) is on the cluster listener only; reflection
    # on the client listener does not name it (tests/listeners.py).
    await asyncio.to_thread(assert_listeners_split, cluster.address, cluster.master.cluster_address)


async def test_a_forged_result_on_the_client_port_changes_nothing(cluster: Cluster) -> None:
    gate = Gate(cluster.tmp / "gate")
    await online_workflow(cluster, "p", "held", [shell("t", gate.wait)])
    started = await start(cluster, "p", "held")
    seen = await watch_until(cluster, started.id, task_is("t", enums.TASK_INSTANCE_STATE_RUNNING))
    ti_id = seen.task_instance_id("t")

    await asyncio.to_thread(assert_cannot_report, cluster.address, ti_id, started.id)

    [ti] = await task_instances(cluster, started.id)
    assert ti.state == enums.TASK_INSTANCE_STATE_RUNNING  # the forged SUCCEEDED never arrived
    gate.open()
    done = await run_to_end(cluster, started.id)
    assert done.events[-1].workflow_state == enums.WORKFLOW_INSTANCE_STATE_SUCCEEDED
