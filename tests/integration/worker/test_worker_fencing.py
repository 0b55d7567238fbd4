"""Self-fencing of a worker cut off from the registry, its fencing token, and orphan clean-up."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from dsched.v1 import registry_pb2
from dsched_server.coord.registry import ConnectionState
from dsched_server.protocol.event import TaskEventType
from dsched_worker import orphans
from dsched_worker.orphans import ProcessRecords, recorded
from tests import lifeline
from tests.integration.worker.conftest import Harness


async def test_suspended_longer_than_the_fence_deadline_kills_tasks_and_takes_a_new_epoch(
    harness: Harness, gate: Callable[[str], object], group_gone: Callable[[int], Awaitable[None]]
) -> None:
    worker = await harness.worker(fence_after=0.3)
    g = gate("gate")
    running = harness.execution(f'read _ < "{g.path}"')  # type: ignore[attr-defined]
    await harness.dispatch(worker, running)
    await harness.master.wait_for(lambda m: len(m.applied) == 1)  # its RUNNING event
    pgid = harness.master.received[0].event.pid
    old_epoch = worker.epoch

    harness.registry.set_state(ConnectionState.SUSPENDED)
    await group_gone(pgid)  # killed by the fence, without hearing of a lost session
    harness.registry.set_state(ConnectionState.CONNECTED)
    # The session survived, but the killed attempt must be failed over: a new epoch says so.
    await harness.registry.wait_for(
        lambda nodes: (
            worker.agent is not None
            and worker.agent.path in nodes
            and registry_pb2.RegistryNode.FromString(nodes[worker.agent.path]).epoch > old_epoch
        )
    )
    assert worker.epoch > old_epoch
    assert harness.master.types_of(running.task_instance_id) == [TaskEventType.RUNNING]


async def test_a_short_suspension_changes_nothing(harness: Harness) -> None:
    worker = await harness.worker(fence_after=30.0)
    epoch = worker.epoch
    harness.registry.set_state(ConnectionState.SUSPENDED)
    await asyncio.sleep(0.05)
    harness.registry.set_state(ConnectionState.CONNECTED)
    execution = harness.execution("true")
    await harness.dispatch(worker, execution)
    end = await harness.master.wait_terminal(execution.task_instance_id)
    assert end.type is TaskEventType.SUCCEEDED
    assert worker.epoch == epoch


async def test_tasks_get_the_worker_identity_and_fencing_token(harness: Harness) -> None:
    worker = await harness.worker()
    out = harness.tmp_path / "env"
    script = f'echo "$DSCHED_WORKER_ADDRESS $DSCHED_WORKER_EPOCH $DSCHED_FENCING_TOKEN" > "{out}"'
    execution = harness.execution(script, attempt=3)
    await harness.dispatch(worker, execution)
    await harness.master.wait_terminal(execution.task_instance_id)
    assert out.read_text().split() == [
        worker.address,
        str(worker.epoch),
        f"{worker.epoch}:3",
    ]


def _spawn_group(*argv: str) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(argv, start_new_session=True)
    lifeline.guard(proc)
    return proc


async def test_leftover_process_groups_of_an_earlier_run_are_killed(
    tmp_path: Path, group_gone: Callable[[int], Awaitable[None]]
) -> None:
    records = ProcessRecords(tmp_path / "pgids")
    # A task whose leader still runs, and one whose leader exited but left a child behind.
    whole = _spawn_group("sleep", "60")
    headless = _spawn_group("bash", "-c", "sleep 60 & echo started")
    records.record(whole.pid)
    records.record(headless.pid)
    headless.wait(timeout=10)
    # An unrelated process group that was never recorded is left alone.
    bystander = _spawn_group("sleep", "60")
    try:
        killed = ProcessRecords(tmp_path / "pgids").kill_leftovers()
        assert sorted(killed) == sorted([whole.pid, headless.pid])
        assert whole.wait(timeout=10) == -signal.SIGKILL  # (reaped here: it is our child)
        await group_gone(whole.pid)
        await group_gone(headless.pid)
        assert bystander.poll() is None
        assert list((tmp_path / "pgids").iterdir()) == []
    finally:
        for proc in (whole, bystander):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


async def test_a_recorded_pid_now_used_by_another_process_is_not_killed(tmp_path: Path) -> None:
    records = ProcessRecords(tmp_path / "pgids")
    other = _spawn_group("sleep", "60")
    try:
        # The record says the group's leader started long before this process did: a reused pid.
        (tmp_path / "pgids").mkdir()
        (tmp_path / "pgids" / str(other.pid)).write_text("1.0")
        assert records.kill_leftovers() == []
        assert other.poll() is None
    finally:
        os.killpg(other.pid, signal.SIGKILL)
        other.wait(timeout=10)


async def test_finished_tasks_leave_no_records(harness: Harness) -> None:
    worker = await harness.worker()
    execution = harness.execution("sleep 0.1")
    await harness.dispatch(worker, execution)
    await harness.master.wait_terminal(execution.task_instance_id)
    pgids = harness.data_dir / "pgids"
    assert not pgids.exists() or recorded(pgids) == {}


async def test_the_records_of_many_tasks_stay_one_small_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(orphans, "COMPACT_BYTES", 500)
    directory = tmp_path / "pgids"
    records = ProcessRecords(directory)
    records.record(os.getpid())  # a long task: live throughout
    for _ in range(200):
        records.record(os.getppid())
        records.forget(os.getppid())
        assert (directory / orphans.LOG_NAME).stat().st_size < 600

    assert list(recorded(directory)) == [os.getpid()]
    assert [p.name for p in directory.iterdir()] == [orphans.LOG_NAME]
    records.forget(os.getpid())
    assert recorded(directory) == {}
