"""No client answer holds a fencing token (ARCHITECTURE.md §6).

Walks the descriptor of every message a client service can answer with, recursively (nested
messages, map values, stream frames), so that a field added later is caught as well. A field is
suspect if its name says epoch, fencing or token; the only exception is the pagination cursor
``next_page_token``, an opaque position in a list that grants nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

import pytest
from google.protobuf import descriptor_pb2
from google.protobuf.descriptor import Descriptor, ServiceDescriptor

from dsched.v1 import master_service_pb2, registry_pb2, resources_pb2, worker_service_pb2
from dsched_server.master import CLIENT_SERVICES, CLUSTER_SERVICES

SUSPECT = re.compile(r"epoch|fenc|token", re.IGNORECASE)
ALLOWED = {"next_page_token"}


def reachable(roots: Iterable[Descriptor]) -> Iterator[Descriptor]:
    """Every message type reachable from ``roots`` through message-typed fields, once each."""
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        message = todo.pop()
        if message.full_name in seen:
            continue
        seen.add(message.full_name)
        yield message
        todo += [f.message_type for f in message.fields if f.message_type is not None]


def answers(services: Iterable[ServiceDescriptor]) -> list[Descriptor]:
    return [m.output_type for s in services for m in s.methods]


def suspects(roots: Iterable[Descriptor]) -> list[str]:
    return [
        f"{message.full_name}.{f.name}"
        for message in reachable(roots)
        for f in message.fields
        if SUSPECT.search(f.name) and f.name not in ALLOWED
    ]


def test_client_services_are_the_master_and_log_services() -> None:
    # The walk below is only as good as this list; the listener tests check that the client
    # listener serves exactly these (tests/listeners.py).
    names = [s.full_name for s in CLIENT_SERVICES]
    assert names == ["dsched.v1.MasterService", "dsched.v1.LogService"]
    assert [s.full_name for s in CLUSTER_SERVICES] == [
        "dsched.v1.TaskEventService",
        "dsched.v1.MasterPeerService",
    ]


def test_no_client_answer_holds_a_fencing_token() -> None:
    roots = answers(CLIENT_SERVICES)
    walked = {m.full_name for m in reachable(roots)}
    # The walk reaches the resources that used to carry epochs, and the map entries and stream
    # frames inside answers.
    assert {
        "dsched.v1.WorkflowInstance",
        "dsched.v1.TaskInstance",
        "dsched.v1.ClusterMember",
        "dsched.v1.Heartbeat",
        "dsched.v1.GetServerInfoResponse",
        "dsched.v1.WatchWorkflowInstanceResponse",
        "dsched.v1.TailTaskLogResponse",
    } <= walked
    assert any(name.endswith("Entry") for name in walked)  # map fields are walked too
    assert suspects(roots) == []


def test_the_walk_finds_tokens_where_they_are() -> None:
    # Not vacuous: the cluster-internal messages do hold the tokens, and the walk finds them,
    # also when they sit a level down.
    assert suspects(answers(CLUSTER_SERVICES)) == []  # acks name no token either
    node = registry_pb2.DESCRIPTOR.message_types_by_name["RegistryNode"]
    assert "dsched.v1.RegistryNode.epoch" in suspects([node])
    inputs = [m.input_type for s in CLUSTER_SERVICES for m in s.methods]
    assert "dsched.v1.ReportTaskEventsRequest.worker_epoch" in suspects(inputs)
    dispatch = worker_service_pb2.DESCRIPTOR.message_types_by_name["DispatchTasksRequest"]
    nested = suspects([dispatch])
    assert "dsched.v1.TaskExecution.owner_epoch" in nested


@pytest.mark.parametrize(
    ("message", "field", "number"),
    [
        (resources_pb2.WorkflowInstance, "epoch", 16),
        (resources_pb2.TaskInstance, "worker_epoch", 9),
        (resources_pb2.Heartbeat, "epoch", 10),
        (master_service_pb2.GetServerInfoResponse, "epoch", 5),
    ],
)
def test_removed_token_fields_stay_reserved(message: type, field: str, number: int) -> None:
    # Reserved, so that nobody reuses the number or the name for something an old client would
    # read as an epoch.
    descriptor: Descriptor = message.DESCRIPTOR  # type: ignore[attr-defined]
    assert field not in descriptor.fields_by_name and number not in descriptor.fields_by_number
    file = descriptor_pb2.FileDescriptorProto.FromString(descriptor.file.serialized_pb)
    [proto] = [m for m in file.message_type if m.name == descriptor.name]
    assert field in proto.reserved_name
    assert any(r.start <= number < r.end for r in proto.reserved_range)
