"""Heartbeats: the BUSY rule, the proto round trip, and one real reading of this host."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from dsched.errors import InvalidArgument
from dsched.v1 import enums_pb2, registry_pb2, resources_pb2
from dsched_server.heartbeat import (
    HeartbeatInfo,
    HostSample,
    ServerStatus,
    Thresholds,
    decode_heartbeat,
    encode_heartbeat,
    sample_host,
    status_for,
)

NORMAL, BUSY = ServerStatus.NORMAL, ServerStatus.BUSY
IDLE = HostSample(cpu_usage=0.1, memory_usage=0.2, load_average=0.3, disk_usage=0.4)
T = Thresholds(cpu=0.7, memory=0.8, disk=0.9)


@pytest.mark.parametrize(
    ("sample", "in_use", "total", "status"),
    [
        (IDLE, 0, 8, NORMAL),
        (IDLE, 7, 8, NORMAL),
        (IDLE, 8, 8, BUSY),  # every slot taken
        (IDLE, 9, 8, BUSY),
        (IDLE, 5, 0, NORMAL),  # no slot count: judged on usage alone
        (replace(IDLE, cpu_usage=0.7), 0, 8, NORMAL),  # at the threshold is still fine
        (replace(IDLE, cpu_usage=0.71), 0, 8, BUSY),
        (replace(IDLE, memory_usage=0.8), 0, 8, NORMAL),
        (replace(IDLE, memory_usage=0.81), 0, 8, BUSY),
        (replace(IDLE, disk_usage=0.9), 0, 8, NORMAL),
        (replace(IDLE, disk_usage=0.91), 0, 8, BUSY),
        (replace(IDLE, load_average=5.0), 0, 8, NORMAL),  # load is reported, not a BUSY rule
    ],
)
def test_status_for(sample: HostSample, in_use: int, total: int, status: ServerStatus) -> None:
    assert status_for(sample, T, in_use, total) is status


def test_default_thresholds_leave_room_on_a_busy_laptop() -> None:
    laptop = HostSample(cpu_usage=0.85, memory_usage=0.85, load_average=1.2, disk_usage=0.85)
    assert Thresholds() == Thresholds(cpu=0.9, memory=0.9, disk=0.9)
    assert status_for(laptop, Thresholds(), 0, 4) is NORMAL


def info(**changes: object) -> HeartbeatInfo:
    base = HeartbeatInfo.from_sample(
        IDLE,
        thresholds=T,
        slots_total=16,
        slots_in_use=3,
        start_time=datetime(2026, 1, 2, 3, 4, 5, 600000, tzinfo=UTC),
        report_time=datetime(2026, 1, 2, 3, 5, 0, tzinfo=UTC),
        epoch=42,
        pid=4321,
        cluster_address="10.0.0.5:5679",
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def test_from_sample_takes_the_status_of_the_rule() -> None:
    assert info().status is NORMAL
    full = HeartbeatInfo.from_sample(
        IDLE,
        thresholds=T,
        slots_total=2,
        slots_in_use=2,
        start_time=info().start_time,
        report_time=info().report_time,
        epoch=1,
        pid=1,
    )
    assert full.status is BUSY


@pytest.mark.parametrize("status", [NORMAL, BUSY])
def test_encode_decode_round_trip(status: ServerStatus) -> None:
    original = info(status=status)
    data = encode_heartbeat(original)
    assert isinstance(data, bytes)
    assert decode_heartbeat(data) == original
    message = registry_pb2.RegistryNode.FromString(data)  # the wire shape other languages read
    assert message.epoch == 42 and message.pid == 4321 and message.slots_in_use == 3
    assert message.cluster_address == "10.0.0.5:5679"
    assert message.start_time.ToDatetime(tzinfo=UTC) == original.start_time


def test_decode_reads_nodes_written_before_the_cluster_address() -> None:
    # Fields 1-12 are those of the Heartbeat that was the node data before: such a node still
    # parses, with its epoch, and without a cluster address (its master served workers on its
    # client address).
    old = registry_pb2.RegistryNode.FromString(encode_heartbeat(info()))
    old.ClearField("cluster_address")
    decoded = decode_heartbeat(old.SerializeToString())
    assert decoded == replace(info(), cluster_address="")
    assert decoded.epoch == 42


@pytest.mark.parametrize(
    ("data", "field"),
    [
        (b"\xff\xff\xff", "heartbeat"),
        (b"", "heartbeat.status"),  # an empty node is not an idle server
        (
            resources_pb2.Heartbeat(
                status=enums_pb2.SERVER_STATUS_NORMAL, cpu_usage=float("nan")
            ).SerializeToString(),
            "heartbeat.cpu_usage",
        ),
    ],
)
def test_decode_rejects_what_is_not_a_heartbeat(data: bytes, field: str) -> None:
    with pytest.raises(InvalidArgument) as err:
        decode_heartbeat(data)
    assert field in [v.field for v in err.value.violations]


async def test_sample_host_reads_sane_values(tmp_path: Path) -> None:
    # Real psutil on this machine; the data dir need not exist yet.
    for _ in range(2):  # the first CPU reading of a process is 0.0 by construction
        sample = await sample_host(tmp_path / "not" / "yet")
    for usage in (sample.cpu_usage, sample.memory_usage, sample.disk_usage):
        assert 0.0 <= usage <= 1.0
    assert sample.memory_usage > 0.0 and sample.disk_usage > 0.0
    assert 0.0 <= sample.load_average < 1000.0
