"""Checks, through real gRPC calls, that a master's two listeners serve what they must and nothing
else (ARCHITECTURE.md §1): clients reach no cluster service on the client listener, and reflection
there does not even name one. Synchronous, so that process tests call it directly and in-process
tests through ``asyncio.to_thread``."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2

from dsched.v1 import enums_pb2, master_service_pb2, master_service_pb2_grpc
from dsched.v1 import task_event_service_pb2 as events_pb2
from dsched.v1 import task_event_service_pb2_grpc as events_grpc
from dsched_server.master import CLIENT_SERVICES, CLUSTER_SERVICES

CALL_TIMEOUT_S = 10.0
COMMON = {
    "grpc.health.v1.Health",
    "grpc.reflection.v1alpha.ServerReflection",
    "grpc.reflection.v1.ServerReflection",
}
ON_CLIENT_LISTENER = {s.full_name for s in CLIENT_SERVICES} | COMMON
ON_CLUSTER_LISTENER = {s.full_name for s in CLUSTER_SERVICES} | COMMON


def listed_services(channel: grpc.Channel, version: str) -> set[str]:
    """The services that reflection (``v1alpha`` or ``v1``) lists on ``channel``."""
    # v1 and v1alpha messages are wire-identical, so the v1alpha classes serve for both.
    call = channel.stream_stream(
        f"/grpc.reflection.{version}.ServerReflection/ServerReflectionInfo",
        request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
        response_deserializer=reflection_pb2.ServerReflectionResponse.FromString,
    )
    request = reflection_pb2.ServerReflectionRequest(list_services="")
    [reply] = list(call(iter([request]), timeout=CALL_TIMEOUT_S))
    return {s.name for s in reply.list_services_response.service}


def forged_report(
    task_instance_id: int, workflow_instance_id: int, epoch: int
) -> Iterator[events_pb2.ReportTaskEventsRequest]:
    """What a client forging a task's success would send, guessing the worker's epoch."""
    event = events_pb2.TaskEvent(
        event_id=f"{epoch}-1",
        task_instance_id=task_instance_id,
        attempt=1,
        workflow_instance_id=workflow_instance_id,
        type=enums_pb2.TASK_EVENT_TYPE_SUCCEEDED,
    )
    yield events_pb2.ReportTaskEventsRequest(
        worker_address="127.0.0.1:1", worker_epoch=epoch, events=[event]
    )


def assert_cannot_report(
    client_address: str, task_instance_id: int = 1, workflow_instance_id: int = 1
) -> None:
    """A ReportTaskEvents call on the client listener answers UNIMPLEMENTED, whatever it says."""
    with grpc.insecure_channel(client_address) as channel:
        stub = events_grpc.TaskEventServiceStub(channel)
        for epoch in range(1, 6):  # epochs are small numbers: guessing them must not matter
            request = forged_report(task_instance_id, workflow_instance_id, epoch)
            with pytest.raises(grpc.RpcError) as err:
                list(stub.ReportTaskEvents(request, timeout=CALL_TIMEOUT_S))
            assert err.value.code() is grpc.StatusCode.UNIMPLEMENTED, err.value


def assert_listeners_split(client_address: str, cluster_address: str) -> None:
    """Each listener serves exactly its services (plus health and reflection), so a client on the
    client listener can neither call nor discover a cluster service, and the cluster listener
    serves no client API."""
    assert client_address != cluster_address
    assert_cannot_report(client_address)
    with grpc.insecure_channel(client_address) as channel:
        for version in ("v1alpha", "v1"):
            assert listed_services(channel, version) == ON_CLIENT_LISTENER
        health = health_pb2_grpc.HealthStub(channel)
        for service in CLUSTER_SERVICES:
            with pytest.raises(grpc.RpcError) as err:
                health.Check(health_pb2.HealthCheckRequest(service=service.full_name))
            assert err.value.code() is grpc.StatusCode.NOT_FOUND
        master = master_service_pb2_grpc.MasterServiceStub(channel)
        master.GetServerInfo(master_service_pb2.GetServerInfoRequest(), timeout=CALL_TIMEOUT_S)
    with grpc.insecure_channel(cluster_address) as channel:
        for version in ("v1alpha", "v1"):
            assert listed_services(channel, version) == ON_CLUSTER_LISTENER
        health = health_pb2_grpc.HealthStub(channel)
        for name in ("", *(s.full_name for s in CLUSTER_SERVICES)):
            reply = health.Check(health_pb2.HealthCheckRequest(service=name))
            assert reply.status == health_pb2.HealthCheckResponse.SERVING
        master = master_service_pb2_grpc.MasterServiceStub(channel)
        with pytest.raises(grpc.RpcError) as err:
            master.GetServerInfo(master_service_pb2.GetServerInfoRequest(), timeout=CALL_TIMEOUT_S)
        assert err.value.code() is grpc.StatusCode.UNIMPLEMENTED
