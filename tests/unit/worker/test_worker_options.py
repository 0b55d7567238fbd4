"""Mapping the shared settings onto the worker's options."""

from __future__ import annotations

from pathlib import Path

from dsched_server.config import Settings
from dsched_server.heartbeat import Thresholds
from dsched_worker.app import WorkerOptions


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
        task_env_allow="SPARK_HOME,HADOOP_*",
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
    assert options.task_env_allow == ("SPARK_HOME", "HADOOP_*")


def test_standalone_worker_lives_next_to_its_master() -> None:
    settings = Settings(role="standalone", data_dir=Path("/d"), port=5678, worker_port=0)

    options = WorkerOptions.from_settings(settings)

    assert options.data_dir == Path("/d/worker")
    assert options.port == 0


def test_a_cluster_worker_fences_before_any_master_can_rerun_its_tasks() -> None:
    def fence(timeout: float, delay: float) -> float | None:
        settings = Settings(
            role="worker",
            data_dir=Path("/d"),
            registry="127.0.0.1:2181/dsched",
            registry_session_timeout=timeout,
            failover_delay=delay,
        )
        return WorkerOptions.from_settings(settings).fence_after

    assert fence(6.0, 4.0) == 5.0  # a third of the session timeout, the failover delay, -1 s
    assert fence(6.0, 1.0) == 2.5  # the margin is at most half the failover delay
    assert fence(6.0, 0.0) == 2.0
    assert fence(3.0, 60.0) == 3.0  # at most one session timeout
    assert fence(4.0, 4.0) == 4.0  # the defaults
    for timeout, delay in [(4.0, 4.0), (6.0, 4.0), (10.0, 10.0), (20.0, 1.0), (2.0, 0.5)]:
        # Noticed up to 2/3 of a session after the last contact, fenced before the earliest re-run.
        assert 2 * timeout / 3 + (fence(timeout, delay) or 0) < timeout + delay + 1e-9


def test_a_standalone_worker_does_not_fence_on_its_own() -> None:
    settings = Settings(role="standalone", data_dir=Path("/d"), port=5678, worker_port=0)
    assert WorkerOptions.from_settings(settings).fence_after is None
