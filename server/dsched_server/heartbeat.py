"""Heartbeats: what a server says about its host in its registry node, and whether it takes work.

Three parts, kept apart so that the logic is testable without a real host:

- :func:`sample_host` reads the host through psutil (the one psutil seam, off the event loop).
- :func:`status_for` turns a sample, the thresholds and the slot count into NORMAL or BUSY.
- :func:`encode_heartbeat` / :func:`decode_heartbeat` convert :class:`HeartbeatInfo` to and from the
  ``dsched.v1.RegistryNode`` bytes stored as node data (the one proto seam for heartbeats). It is
  cluster-internal: it holds the fencing epoch, which clients never see (ARCHITECTURE.md §4).

Usages are fractions in 0..1. The BUSY rule is DolphinScheduler's (``isOverload``: a usage
*strictly* above its threshold), plus "all slots taken" for workers. DolphinScheduler's thresholds
are 0.7; ours default to 0.9 because a developer laptop idles above 0.7 memory and would never take
work.
"""

from __future__ import annotations

import asyncio
import math
import os
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import psutil
from google.protobuf.message import DecodeError

from dsched.convert import SERVER_STATUS
from dsched.errors import FieldViolation, InvalidArgument
from dsched.results import ServerStatus as ServerStatus
from dsched.v1 import registry_pb2


@dataclass(frozen=True, slots=True, kw_only=True)
class HostSample:
    """One reading of the host. ``load_average`` is the 1-minute load per CPU (may exceed 1)."""

    cpu_usage: float
    memory_usage: float
    load_average: float
    disk_usage: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Thresholds:
    """Usages above which a server reports BUSY (fractions in (0, 1])."""

    cpu: float = 0.9
    memory: float = 0.9
    disk: float = 0.9


@dataclass(frozen=True, slots=True, kw_only=True)
class HeartbeatInfo:
    """The content of a server's registry node. Times are timezone-aware (UTC)."""

    cpu_usage: float
    memory_usage: float
    load_average: float
    disk_usage: float
    slots_total: int
    slots_in_use: int
    start_time: datetime
    report_time: datetime
    status: ServerStatus
    epoch: int
    pid: int
    queued: int = 0  # attempts waiting for a slot (workers)
    cluster_address: str = ""  # masters: where workers report; "" from masters before it existed

    @classmethod
    def from_sample(
        cls,
        sample: HostSample,
        *,
        thresholds: Thresholds,
        slots_total: int,
        slots_in_use: int,
        start_time: datetime,
        report_time: datetime,
        epoch: int,
        pid: int,
        queued: int = 0,
        cluster_address: str = "",
    ) -> HeartbeatInfo:
        """A heartbeat for ``sample`` with the status :func:`status_for` gives it."""
        return cls(
            cpu_usage=sample.cpu_usage,
            memory_usage=sample.memory_usage,
            load_average=sample.load_average,
            disk_usage=sample.disk_usage,
            slots_total=slots_total,
            slots_in_use=slots_in_use,
            start_time=start_time,
            report_time=report_time,
            status=status_for(sample, thresholds, slots_in_use, slots_total),
            epoch=epoch,
            pid=pid,
            queued=queued,
            cluster_address=cluster_address,
        )


def status_for(
    sample: HostSample, thresholds: Thresholds, slots_in_use: int, slots_total: int
) -> ServerStatus:
    """BUSY if a usage is strictly above its threshold or every slot is taken, else NORMAL.

    A server without slots (``slots_total <= 0``) is judged on its usages alone: a master reports
    its capacity as 0 when it does not count it.
    """
    over = (
        sample.cpu_usage > thresholds.cpu
        or sample.memory_usage > thresholds.memory
        or sample.disk_usage > thresholds.disk
    )
    full = slots_total > 0 and slots_in_use >= slots_total
    return ServerStatus.BUSY if over or full else ServerStatus.NORMAL


async def sample_host(data_dir: Path) -> HostSample:
    """Reads CPU, memory, load and the usage of the disk holding ``data_dir`` (which need not exist
    yet: its nearest existing ancestor is measured).

    CPU usage is measured since the previous call (psutil's ``interval=None``), so the first reading
    of a process is 0.0; heartbeats come every few seconds, which makes the later ones meaningful.
    """
    return await asyncio.to_thread(_sample_blocking, data_dir)


# psutil.cpu_percent(interval=None) measures since the previous call *in this process*. A standalone
# master and worker both sample, milliseconds apart, so the second would measure a window of a few
# milliseconds (reading 0 or 100 %, and an idle worker would call itself BUSY). Readings closer
# together than this share one measurement instead.
_CPU_SHARE_S = 0.25
_cpu_lock = threading.Lock()
_cpu_last: tuple[float, float] | None = None  # (monotonic time, usage)


def _cpu_usage() -> float:
    global _cpu_last
    with _cpu_lock:
        now = time.monotonic()
        if _cpu_last is not None and now - _cpu_last[0] < _CPU_SHARE_S:
            return _cpu_last[1]
        usage = _fraction(psutil.cpu_percent(interval=None) / 100.0)
        _cpu_last = (now, usage)
        return usage


def _sample_blocking(data_dir: Path) -> HostSample:
    probe = data_dir.absolute()
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    cpus = os.cpu_count() or 1
    return HostSample(
        cpu_usage=_cpu_usage(),
        memory_usage=_fraction(psutil.virtual_memory().percent / 100.0),
        load_average=max(0.0, psutil.getloadavg()[0] / cpus),
        disk_usage=_fraction(psutil.disk_usage(str(probe)).percent / 100.0),
    )


def _fraction(value: float) -> float:
    return min(1.0, max(0.0, value))


def encode_heartbeat(info: HeartbeatInfo) -> bytes:
    """The ``dsched.v1.RegistryNode`` bytes of ``info``."""
    message = registry_pb2.RegistryNode(
        cpu_usage=info.cpu_usage,
        memory_usage=info.memory_usage,
        load_average=info.load_average,
        disk_usage=info.disk_usage,
        slots_total=info.slots_total,
        slots_in_use=info.slots_in_use,
        status=SERVER_STATUS.number(info.status),
        epoch=info.epoch,
        pid=info.pid,
        queued=info.queued,
        cluster_address=info.cluster_address,
    )
    message.start_time.FromDatetime(info.start_time)
    message.report_time.FromDatetime(info.report_time)
    return message.SerializeToString()


def decode_heartbeat(data: bytes) -> HeartbeatInfo:
    """Parses node data written by :func:`encode_heartbeat`.

    Raises :class:`~dsched.errors.InvalidArgument` for bytes that are not a heartbeat, a status that
    is not NORMAL or BUSY (so an empty node is not mistaken for an idle server) or usages that are
    not finite numbers. Callers skip such members. Nodes written before ``cluster_address`` existed
    parse with it empty.
    """
    message = registry_pb2.RegistryNode()
    try:
        message.ParseFromString(data)
    except DecodeError as exc:
        raise InvalidArgument(
            "registry node data is not a heartbeat",
            violations=[FieldViolation("heartbeat", str(exc))],
        ) from exc
    violations: list[FieldViolation] = []
    known = SERVER_STATUS.by_number.get(message.status)
    status = None if known is None else ServerStatus(known)
    if status is None:
        violations.append(FieldViolation("heartbeat.status", "must be NORMAL or BUSY"))
    for name in ("cpu_usage", "memory_usage", "load_average", "disk_usage"):
        if not math.isfinite(getattr(message, name)):
            violations.append(FieldViolation(f"heartbeat.{name}", "must be a finite number"))
    if violations or status is None:
        raise InvalidArgument("invalid heartbeat", violations=violations)
    return HeartbeatInfo(
        cpu_usage=message.cpu_usage,
        memory_usage=message.memory_usage,
        load_average=message.load_average,
        disk_usage=message.disk_usage,
        slots_total=message.slots_total,
        slots_in_use=message.slots_in_use,
        start_time=message.start_time.ToDatetime(tzinfo=UTC),
        report_time=message.report_time.ToDatetime(tzinfo=UTC),
        status=status,
        epoch=message.epoch,
        pid=message.pid,
        queued=message.queued,
        cluster_address=message.cluster_address,
    )
