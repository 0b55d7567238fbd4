"""Registration, heartbeat and fencing of a real Worker against an in-memory registry."""

from __future__ import annotations

import os

from dsched.v1 import enums_pb2, registry_pb2
from dsched_server.constants import WORKERS_PATH
from dsched_server.coord.registry import ConnectionState
from dsched_server.heartbeat import HostSample, Thresholds
from dsched_server.protocol.event import TaskEventType


def heartbeat(harness, worker) -> registry_pb2.RegistryNode:
    return registry_pb2.RegistryNode.FromString(harness.registry.nodes[worker.agent.path])


async def test_registers_an_ephemeral_node_with_its_heartbeat(harness):
    async def sampler() -> HostSample:
        return HostSample(cpu_usage=0.25, memory_usage=0.5, load_average=1.5, disk_usage=0.75)

    worker = await harness.worker(sampler=sampler, slots=3, group="etl")

    path = f"{WORKERS_PATH}/etl@{worker.address}"
    assert worker.agent.path == path
    beat = heartbeat(harness, worker)
    assert (beat.slots_total, beat.slots_in_use) == (3, 0)
    assert beat.epoch == worker.epoch > 0
    assert beat.pid == os.getpid()
    assert beat.status == enums_pb2.SERVER_STATUS_NORMAL
    assert (beat.cpu_usage, beat.memory_usage, beat.load_average, beat.disk_usage) == (
        0.25,
        0.5,
        1.5,
        0.75,
    )
    assert beat.start_time.seconds > 0 and beat.report_time.seconds >= beat.start_time.seconds

    await worker.stop(grace=1)
    assert path not in harness.registry.nodes


async def test_heartbeat_turns_busy_at_once_when_slots_fill(harness, gate):
    worker = await harness.worker(slots=1, heartbeat_interval=60)  # only poke() can publish
    g = gate("gate")
    await harness.dispatch(worker, harness.execution(f'read _ < "{g.path}"'))

    def status(nodes: dict[str, bytes]) -> tuple[int, int]:
        beat = registry_pb2.RegistryNode.FromString(nodes[worker.agent.path])
        return beat.status, beat.slots_in_use

    await harness.registry.wait_for(lambda n: status(n) == (enums_pb2.SERVER_STATUS_BUSY, 1))
    g.open()
    await harness.registry.wait_for(lambda n: status(n) == (enums_pb2.SERVER_STATUS_NORMAL, 0))


async def test_a_queued_attempt_taking_a_freed_slot_publishes_no_heartbeat(harness, gate):
    """The load changes when the slots fill and when one frees and stays free; a queued attempt
    that takes a freed slot at once leaves the worker as full as it was (a heartbeat per attempt
    in a wide fan-out told the masters nothing)."""
    worker = await harness.worker(slots=1, heartbeat_interval=60)  # only poke() can publish
    first, second = gate("first"), gate("second")
    a = harness.execution(f'read _ < "{first.path}"')
    b = harness.execution(f'read _ < "{second.path}"')
    c = harness.execution("true")
    for execution in (a, b, c):
        await harness.dispatch(worker, execution)

    def status(nodes: dict[str, bytes]) -> tuple[int, int]:
        beat = registry_pb2.RegistryNode.FromString(nodes[worker.agent.path])
        return beat.status, beat.slots_in_use

    await harness.registry.wait_for(lambda n: status(n) == (enums_pb2.SERVER_STATUS_BUSY, 1))
    busy = harness.registry.updates
    first.open()
    await harness.master.wait_terminal(a.task_instance_id)
    await harness.master.wait_for(lambda m: TaskEventType.RUNNING in m.types_of(b.task_instance_id))
    second.open()
    await harness.master.wait_terminal(c.task_instance_id)
    await harness.registry.wait_for(lambda n: status(n) == (enums_pb2.SERVER_STATUS_NORMAL, 0))

    assert busy == 1  # the first attempt filled the only slot
    assert harness.registry.updates == 2  # and the last one freed it; nothing in between


async def test_overloaded_host_is_busy_and_a_failing_sampler_keeps_the_heartbeat(harness):
    calls = {"n": 0}

    async def sampler() -> HostSample:
        calls["n"] += 1
        if calls["n"] > 1:
            raise OSError("psutil failed")
        return HostSample(cpu_usage=0.95, memory_usage=0.1, load_average=0.1, disk_usage=0.1)

    worker = await harness.worker(
        sampler=sampler, heartbeat_interval=0.05, thresholds=Thresholds(cpu=0.9)
    )
    assert heartbeat(harness, worker).status == enums_pb2.SERVER_STATUS_BUSY
    await harness.registry.wait_for(lambda _: calls["n"] >= 3)  # later beats keep coming
    assert heartbeat(harness, worker).cpu_usage == 0.95  # the last good sample is reused


async def test_suspended_registry_rejects_new_dispatches_until_connected(harness):
    worker = await harness.worker()
    registry = harness.registry

    registry.set_state(ConnectionState.SUSPENDED)
    rejected = await harness.dispatch(worker, harness.execution("true"))
    registry.set_state(ConnectionState.CONNECTED)
    execution = harness.execution("true")
    accepted = await harness.dispatch(worker, execution)

    assert rejected.outcome == enums_pb2.DISPATCH_OUTCOME_REJECTED_UNAVAILABLE
    assert "registry" in rejected.reason
    assert accepted.outcome == enums_pb2.DISPATCH_OUTCOME_ACCEPTED
    assert (await harness.master.wait_terminal(execution.task_instance_id)).type.terminal


async def test_lost_session_fences_and_reregisters_with_a_new_epoch(harness, gate, group_gone):
    worker = await harness.worker(slots=1)
    registry = harness.registry
    g = gate("gate")
    marker = harness.tmp_path / "queued-ran"
    running = harness.execution(f'read _ < "{g.path}"\necho finished')
    queued = harness.execution(f'touch "{marker}"')
    await harness.dispatch(worker, running)
    await harness.dispatch(worker, queued)
    await harness.master.wait_for(lambda m: len(m.applied) == 1)  # RUNNING of the first
    pgid = harness.master.received[0].event.pid
    old_epoch = worker.epoch

    registry.set_state(ConnectionState.LOST)
    during = await harness.dispatch(worker, harness.execution("true"))
    registry.set_state(ConnectionState.CONNECTED)
    await registry.wait_for(
        lambda nodes: (
            worker.agent.path in nodes
            and registry_pb2.RegistryNode.FromString(nodes[worker.agent.path]).slots_in_use == 0
        )
    )
    after = harness.execution("true")
    accepted = await harness.dispatch(worker, after)
    await harness.master.wait_terminal(after.task_instance_id)

    assert during.outcome == enums_pb2.DISPATCH_OUTCOME_REJECTED_UNAVAILABLE
    assert worker.epoch > old_epoch
    assert heartbeat(harness, worker).epoch == worker.epoch
    assert accepted.worker_epoch == worker.epoch
    assert harness.master.types_of(running.task_instance_id) == [TaskEventType.RUNNING]
    assert harness.master.types_of(queued.task_instance_id) == []
    assert not marker.exists()
    await group_gone(pgid)
    new_events = [
        r for r in harness.master.received if r.event.task_instance_id == after.task_instance_id
    ]
    assert {r.worker_epoch for r in new_events} == {worker.epoch}
    assert all(e.event_id.startswith(f"{worker.epoch}-") for e in (r.event for r in new_events))
