"""Masters and workers on a real ZooKeeper and a real PostgreSQL / MariaDB: sharing commands,
surviving the loss of a session, handing over on stop. Every test reads a task ledger (one line
per attempt that actually started: task instance, attempt, worker epoch) and the store, and asserts
that nothing was lost and nothing ran twice."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

import pytest

from dsched.v1 import enums_pb2 as T
from dsched.v1 import master_service_pb2 as pb
from dsched_server.constants import MASTERS_PATH
from dsched_server.heartbeat import Thresholds
from dsched_server.master import Master
from dsched_server.store import instances
from dsched_server.store import task_instances as ti_repo
from tests.integration.api.conftest import (
    WAIT_S,
    Cluster,
    Gate,
    online_workflow,
    run_to_end,
    shell,
    start,
    task_instances,
    task_is,
    watch_until,
)
from tests.integration.engine.conftest import ZkCluster, seen_by

pytestmark = pytest.mark.timeout(120)
SESSION_FENCE_S = 2.0  # the worker's self-fence deadline (half its session timeout)


class Ledger:
    def __init__(self, path: Path) -> None:
        self.path = path

    @property
    def append(self) -> str:
        return (
            'echo "$DSCHED_TASK_NAME $DSCHED_TASK_INSTANCE_ID $DSCHED_ATTEMPT '
            f'$DSCHED_WORKER_EPOCH" >> "{self.path}"'
        )

    def lines(self) -> list[list[str]]:
        if not self.path.exists():
            return []
        return [line.split() for line in self.path.read_text().splitlines()]

    def runs_of(self, task: str) -> int:
        return sum(1 for line in self.lines() if line[0] == task)


async def claims(c: Cluster, instance_id: int) -> list[str]:
    done = await run_to_end(c, instance_id)
    return [e.message for e in done.events if e.kind == T.INSTANCE_EVENT_KIND_CLAIMED]


async def owner_epoch(master: Master, instance_id: int) -> int:
    async with master.db.read() as conn:
        return (await instances.get_instance(conn, instance_id)).epoch


async def worker_epoch(master: Master, task_instance_id: int) -> int:
    async with master.db.read() as conn:
        return (await ti_repo.get(conn, task_instance_id)).worker_epoch


@dataclass
class SlowRun:
    """Two masters and a worker; an instance started on ``a`` whose first task runs (behind a
    gate) and whose second task follows it. Both tasks append to ``ledger``."""

    a: Master
    b: Master
    api_a: Cluster
    api_b: Cluster
    ledger: Ledger
    gate: Gate
    instance_id: int

    async def owner(self) -> tuple[Master, Master, Cluster]:
        """The master driving the instance (usually a, which wrote the command; b may have
        claimed it in its slot), the other one and the API of the other one."""
        if await owner_epoch(self.a, self.instance_id) == self.a.epoch:
            return self.a, self.b, self.api_b
        return self.b, self.a, self.api_a


async def slow_run(zk_cluster: ZkCluster, tmp_path: Path, failover_delay: float) -> SlowRun:
    a = await zk_cluster.master(failover_delay=failover_delay)
    b = await zk_cluster.master(failover_delay=failover_delay)
    await zk_cluster.worker()
    api_a, api_b = await zk_cluster.api(a), await zk_cluster.api(b)
    ledger, gate = Ledger(tmp_path / "ledger"), Gate(tmp_path / "gate")
    tasks = [
        shell("slow", f"{ledger.append}\n{gate.wait}"),
        shell("after", ledger.append, ["slow"]),
    ]
    await online_workflow(api_a, "p", "slow", tasks)
    started = await start(api_a, "p", "slow")  # written by a, so claimed by a
    await watch_until(api_a, started.id, task_is("slow", T.TASK_INSTANCE_STATE_RUNNING))
    return SlowRun(a, b, api_a, api_b, ledger, gate, started.id)


async def test_two_masters_split_the_commands_and_every_start_runs_once(
    zk_cluster: ZkCluster, tmp_path: Path
) -> None:
    a, b = await zk_cluster.master(), await zk_cluster.master()
    await zk_cluster.worker()
    api_a, api_b = await zk_cluster.api(a), await zk_cluster.api(b)
    ledger = Ledger(tmp_path / "ledger")
    await online_workflow(api_a, "p", "one", [shell("t", ledger.append)])

    started = []
    for i in range(12):
        api = api_a if i % 2 else api_b
        started.append(await start(api, "p", "one", request_id=f"r-{i}"))
    for instance in started:
        assert len(await claims(api_a, instance.id)) == 1  # claimed once, by one master

    assert ledger.runs_of("t") == 12 and len({line[1] for line in ledger.lines()}) == 12
    assert a.services is not None and b.services is not None
    claimed = a.services.metrics.commands_claimed + b.services.metrics.commands_claimed
    assert claimed == 12

    members = (await api_a.stub.ListClusterMembers(pb.ListClusterMembersRequest())).members
    masters = {m.address: m.cluster_address for m in members if m.role == T.SERVER_ROLE_MASTER}
    assert masters == {a.address: a.cluster_address, b.address: b.cluster_address}
    assert [m.address for m in members if m.role == T.SERVER_ROLE_WORKER] == [
        zk_cluster.workers[0].address
    ]


async def test_a_master_that_lost_its_session_comes_back_as_a_new_epoch_and_its_task_is_adopted(
    zk_cluster: ZkCluster, tmp_path: Path
) -> None:
    run = await slow_run(zk_cluster, tmp_path, failover_delay=1.0)
    ledger, gate, started_id = run.ledger, run.gate, run.instance_id
    a, b, api_b = await run.owner()
    old_epoch = a.epoch

    zk_cluster.expire(a)
    async with asyncio.timeout(WAIT_S):
        while await owner_epoch(b, started_id) == old_epoch:
            await asyncio.sleep(0.05)  # the store has no change feed to wait on
    gate.open()
    done = await run_to_end(api_b, started_id)

    assert done.state == T.WORKFLOW_INSTANCE_STATE_SUCCEEDED
    # a re-registers as a new incarnation. Its instance is taken over as soon as its node is gone,
    # so the run may end before a has reconnected and registered again: wait for it (bounded).
    async with asyncio.timeout(WAIT_S):
        while a.epoch <= old_epoch or sorted(await b.registry.children(MASTERS_PATH)) != sorted(
            [a.address, b.address]
        ):
            await asyncio.sleep(0.05)  # registration has no event this test could wait on
    assert ledger.runs_of("slow") == 1 and ledger.runs_of("after") == 1  # adopted, not re-run
    tis = await task_instances(api_b, started_id, superseded=True)
    assert sorted((t.task_name, t.attempt) for t in tis) == [("after", 1), ("slow", 1)]
    assert any(e.kind == T.INSTANCE_EVENT_KIND_FAILOVER for e in done.events)
    assert await owner_epoch(b, started_id) != old_epoch


async def test_a_worker_that_lost_its_session_is_fenced_and_its_task_runs_again_once(
    zk_cluster: ZkCluster, tmp_path: Path
) -> None:
    master = await zk_cluster.master(failover_delay=1.0)
    first = await zk_cluster.worker(fence_after=SESSION_FENCE_S)
    api = await zk_cluster.api(master)
    ledger, gate = Ledger(tmp_path / "ledger"), Gate(tmp_path / "gate")
    await online_workflow(api, "p", "w", [shell("job", f"{ledger.append}\n{gate.wait}")])
    started = await start(api, "p", "w")
    await watch_until(api, started.id, task_is("job", T.TASK_INSTANCE_STATE_RUNNING))
    old_epoch = first.epoch

    zk_cluster.expire(first)
    seen = await watch_until(
        api,
        started.id,
        lambda e: (
            e.kind == T.INSTANCE_EVENT_KIND_STATE
            and e.task_state == T.TASK_INSTANCE_STATE_NEED_FAULT_TOLERANCE
        ),
    )
    assert seen.events
    await watch_until(
        api,
        started.id,
        lambda e: (
            e.task_name == "job"
            and e.task_state == T.TASK_INSTANCE_STATE_RUNNING
            and e.task_instance_id != seen.task_instance_id("job")
        ),
    )
    gate.open()
    done = await run_to_end(api, started.id)

    assert done.state == T.WORKFLOW_INSTANCE_STATE_SUCCEEDED
    assert first.epoch > old_epoch
    tis = sorted(await task_instances(api, started.id, superseded=True), key=lambda t: t.attempt)
    assert [(t.attempt, t.state, t.valid, t.retry_times) for t in tis] == [
        (1, T.TASK_INSTANCE_STATE_NEED_FAULT_TOLERANCE, False, 0),
        (2, T.TASK_INSTANCE_STATE_SUCCEEDED, True, 0),  # a failover uses up no retry
    ]
    epochs = [await worker_epoch(master, t.id) for t in tis]  # from the store: clients see none
    assert epochs[0] == old_epoch and epochs[1] != old_epoch
    assert [line[2] for line in ledger.lines()] == ["1", "2"]  # each attempt started once
    assert master.services.metrics.tasks_failed_over == 1  # type: ignore[union-attr]


async def test_a_stopped_master_hands_its_instances_over_without_waiting(
    zk_cluster: ZkCluster, tmp_path: Path
) -> None:
    run = await slow_run(zk_cluster, tmp_path, failover_delay=60.0)
    ledger, gate, started_id = run.ledger, run.gate, run.instance_id
    owner, survivor, api = await run.owner()

    await owner.stop()
    gate.open()
    done = await run_to_end(api, started_id)

    assert done.state == T.WORKFLOW_INSTANCE_STATE_SUCCEEDED
    # Handed over by the stopping master itself, not found orphaned by the survivor.
    (failover,) = [e.message for e in done.events if e.kind == T.INSTANCE_EVENT_KIND_FAILOVER]
    assert f"owner epoch {owner.epoch} was stopped" in failover, failover
    assert await owner_epoch(survivor, started_id) == survivor.epoch
    assert ledger.runs_of("slow") == 1 and ledger.runs_of("after") == 1
    await seen_by(survivor, zk_cluster.workers[0])  # it still sees the worker after owner left


async def test_a_busy_master_claims_nothing_and_its_commands_run_elsewhere(
    zk_cluster: ZkCluster, tmp_path: Path
) -> None:
    # Any memory use is over a threshold of 0: this master reports BUSY from its first heartbeat.
    busy = await zk_cluster.master(thresholds=Thresholds(cpu=1.0, memory=0.0, disk=1.0))
    idle = await zk_cluster.master()
    await zk_cluster.worker()
    api_busy, api_idle = await zk_cluster.api(busy), await zk_cluster.api(idle)
    ledger = Ledger(tmp_path / "ledger")
    await online_workflow(api_busy, "p", "b", [shell("t", ledger.append)])

    started = [await start(api_busy, "p", "b", request_id=f"b-{i}") for i in range(4)]
    for instance in started:
        (claim,) = await claims(api_idle, instance.id)
        assert idle.address in claim  # its slot, or taken over once it waited long enough
    assert busy.services is not None and busy.services.metrics.commands_claimed == 0
    assert ledger.runs_of("t") == 4
