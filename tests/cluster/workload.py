"""Workloads and observations for the scenarios: workflows of ledger tasks, and database probes
that tell where work is (who owns which instance, which worker runs which attempt).

Every task is a :meth:`~tests.cluster.ledger.TaskLedger.script` that sleeps: cheap on 2 cores,
and long enough to straddle a fault.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from dsched import Shell, Workflow
from tests.cluster.harness import Cluster, Member
from tests.e2e.conftest import eventually

PROJECT = "chaos"


def define(
    cluster: Cluster,
    name: str,
    tasks: dict[str, float],
    edges: Iterable[tuple[str, str]] = (),
    *,
    retries: int = 0,
    effect: bool = True,
) -> str:
    """Puts workflow ``name`` online: one ledger task per ``tasks`` entry (name -> seconds of
    sleep; with ``effect``, the fenced effect before it ends), ``edges`` as (upstream,
    downstream). Returns the name."""
    with Workflow(name, project=PROJECT) as wf:
        shells = {
            task: Shell(task, cluster.ledger.script(seconds, effect=effect), retries=retries)
            for task, seconds in tasks.items()
        }
        for up, down in edges:
            shells[up] >> shells[down]
    wf.submit(cluster.client())
    return name


def start_many(cluster: Cluster, workflow: str, count: int) -> dict[str, int]:
    """Starts ``count`` runs; returns request id -> instance id."""
    started: dict[str, int] = {}
    for i in range(count):
        rid = f"{workflow}-{i}-{time.monotonic_ns()}"
        started[rid] = cluster.start_workflow(PROJECT, workflow, request_id=rid)
    return started


@dataclass(frozen=True, slots=True)
class RunningTask:
    ti: int
    wi: int
    task: str
    attempt: int
    host: str
    worker_epoch: int


def running_tasks(cluster: Cluster) -> list[RunningTask]:
    rows = cluster.db.query(
        "SELECT id, workflow_instance_id, task_name, attempt, host, worker_epoch "
        "FROM task_instances WHERE state = 'RUNNING' ORDER BY id"
    )
    return [
        RunningTask(int(r[0]), int(r[1]), str(r[2]), int(r[3]), str(r[4]), int(r[5])) for r in rows
    ]


def wait_running(cluster: Cluster, count: int, timeout: float = 30.0) -> list[RunningTask]:
    """Waits until at least ``count`` attempts are RUNNING (as recorded by the masters)."""

    def enough() -> list[RunningTask] | None:
        tasks = running_tasks(cluster)
        return tasks if len(tasks) >= count else None

    return eventually(enough, timeout=timeout, what=f"{count} RUNNING task instances")


def busiest_master(cluster: Cluster) -> tuple[Member, list[int]]:
    """The serving master owning the most RUNNING instances, and those instances."""
    owned: dict[int, list[int]] = {}
    for wi, epoch in cluster.db.query(
        "SELECT id, epoch FROM workflow_instances WHERE state = 'RUNNING' ORDER BY id"
    ):
        owned.setdefault(int(epoch), []).append(int(wi))
    live = {m.epoch: m for m in cluster.masters()}
    epoch = max((e for e in owned if e in live), key=lambda e: len(owned[e]))
    return live[epoch], owned[epoch]


def busiest_worker(cluster: Cluster) -> tuple[Member, list[RunningTask]]:
    """The serving worker running the most attempts, and those attempts."""
    tasks = running_tasks(cluster)
    by_address = Counter(t.host for t in tasks)
    live = {m.address: m for m in cluster.workers()}
    address = max((a for a in by_address if a in live), key=lambda a: by_address[a])
    return live[address], [t for t in tasks if t.host == address]


def unfinished_of_epoch(cluster: Cluster, epoch: int) -> int:
    """Instances still stamped with master ``epoch`` and not terminal."""
    return int(
        cluster.db.scalar(
            "SELECT count(*) FROM workflow_instances WHERE epoch = $1 "
            "AND state NOT IN ('SUCCEEDED', 'FAILED', 'STOPPED', 'PAUSED')",
            epoch,
        )
    )


@dataclass(frozen=True, slots=True)
class Attempt:
    ti: int
    attempt: int
    state: str
    valid: bool
    worker_epoch: int
    retry_times: int


def attempts_of(cluster: Cluster, wi: int, task: str) -> list[Attempt]:
    """Every attempt of one logical task, in attempt order."""
    rows = cluster.db.query(
        "SELECT id, attempt, state, valid, worker_epoch, retry_times FROM task_instances "
        "WHERE workflow_instance_id = $1 AND task_name = $2 ORDER BY attempt",
        wi,
        task,
    )
    return [
        Attempt(int(r[0]), int(r[1]), str(r[2]), bool(r[3]), int(r[4]), int(r[5])) for r in rows
    ]


def event_kinds(cluster: Cluster, kind: str) -> Counter[int]:
    """How many events of ``kind`` each instance has."""
    rows = cluster.db.query(
        "SELECT workflow_instance_id, count(*) FROM instance_events WHERE kind = $1 GROUP BY 1",
        kind,
    )
    return Counter({int(r[0]): int(r[1]) for r in rows})


def first_event_after(cluster: Cluster, kind: str, wall: float) -> float | None:
    """Seconds from ``wall`` (time.time()) to the first event of ``kind`` written after it (the
    masters stamp events with this host's clock), or None if there is none."""
    at = cluster.db.scalar(
        "SELECT extract(epoch FROM min(create_time)) FROM instance_events "
        "WHERE kind = $1 AND create_time >= to_timestamp($2) AT TIME ZONE 'UTC'",
        kind,
        wall,
    )
    return None if at is None else float(at) - wall


def since(t0: float) -> float:
    return time.monotonic() - t0
