"""Mapping the shared settings onto the worker's options."""

from __future__ import annotations

from pathlib import Path

from dsched.server.config import Settings
from dsched.server.heartbeat import Thresholds
from dsched.worker.app import WorkerOptions


def test_dedicated_worker_uses_the_data_dir_and_port() -> None:
    settings = Settings(
        role="worker",
        data_dir=Path("/srv/dsched"),
        host="10.0.0.5",
        port=1234,
        worker_group="gpu",
        worker_slots=7,
        heartbeat_interval=2.5,
        outbox_fsync=True,
        cpu_threshold=0.8,
    )

    options = WorkerOptions.from_settings(settings)

    assert options.data_dir == Path("/srv/dsched")
    assert (options.host, options.port, options.group, options.slots) == (
        "10.0.0.5",
        1234,
        "gpu",
        7,
    )
    assert options.heartbeat_interval == 2.5 and options.outbox_fsync
    assert options.thresholds == Thresholds(cpu=0.8, memory=0.9, disk=0.9)


def test_standalone_worker_lives_next_to_its_master() -> None:
    settings = Settings(role="standalone", data_dir=Path("/d"), port=5678, worker_port=0)

    options = WorkerOptions.from_settings(settings)

    assert options.data_dir == Path("/d/worker")
    assert options.port == 0
