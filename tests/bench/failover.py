"""Failover speed of a cluster with the default timeouts: a master or a worker is killed with
SIGKILL, and the bench times how long its work waits for a new owner.

Each trial starts :data:`RUNS` runs of a one-task workflow whose task sleeps longer than the trial,
waits until every task runs, picks the victim (the master owning the most of those instances, or
the worker running the most of those tasks), kills it (a worker together with its task processes)
and reads the database until its work was taken over:

- a master: its instances' FAILOVER event (a survivor moved them off the dead epoch, with a
  recovery command each) and the first CLAIMED event after it (a survivor drives them again);
- a worker: its attempts' NEED_FAULT_TOLERANCE event (failed over) and the start of each
  replacement attempt (running again on the other worker).

Each time is the latest over the victim's instances or attempts, from the kill (the harness's wall
clock) to the event (the masters' wall clock) or the start (the worker's), all on this machine.
Then the trial's runs are stopped and a fresh member replaces the victim, so every trial meets the
same cluster. The target is the median of the takeovers, <= 6 s (ARCHITECTURE.md §4).
"""

from __future__ import annotations

import contextlib
import statistics

from dsched import Shell, Workflow
from tests.bench.common import Row
from tests.cluster.harness import Cluster, Member
from tests.e2e.conftest import eventually

TARGET_S = 6.0
RUNS = 4
TASK_S = 40  # outlives a trial
TIMEOUT_S = 60.0
PROJECT, WORKFLOW = "bench", "bench_failover"

Trial = tuple[float, float]  # (taken over, running again) seconds after the kill


def define(cluster: Cluster) -> None:
    with Workflow(WORKFLOW, project=PROJECT) as wf:
        Shell("hold", f"sleep {TASK_S}")
    wf.submit(cluster.client())


def master_trial(cluster: Cluster) -> Trial:
    ids = _start_running(cluster)
    owners: dict[int, list[int]] = {}
    for wi, epoch in cluster.db.query(
        "SELECT id, epoch FROM workflow_instances WHERE id = ANY($1)", ids
    ):
        owners.setdefault(int(epoch), []).append(int(wi))
    live = {m.epoch: m for m in cluster.masters()}
    epoch = max((e for e in owners if e in live), key=lambda e: len(owners[e]))
    victim, owned = live[epoch], owners[epoch]

    wall = _kill(cluster, victim, tasks=False)
    taken = _latest(cluster, _EVENT, ("FAILOVER", owned), len(owned), wall)
    claimed = _latest(cluster, _EVENT, ("CLAIMED", owned), len(owned), wall)
    _stop(cluster, ids)
    cluster.add_master()
    return taken, claimed


def worker_trial(cluster: Cluster, slots: int) -> Trial:
    ids = _start_running(cluster)
    rows = cluster.db.query(
        "SELECT id, workflow_instance_id, host FROM task_instances "
        "WHERE workflow_instance_id = ANY($1) AND state = 'RUNNING'",
        ids,
    )
    live = {m.address: m for m in cluster.workers()}
    hosts = [str(r[2]) for r in rows if str(r[2]) in live]
    victim = live[max(set(hosts), key=hosts.count)]
    lost = [(int(r[0]), int(r[1])) for r in rows if str(r[2]) == victim.address]

    wall = _kill(cluster, victim, tasks=True)
    tis, wis = [t for t, _ in lost], [wi for _, wi in lost]
    failed_over = _latest(cluster, _TASK_EVENT, ("NEED_FAULT_TOLERANCE", tis), len(tis), wall)
    rerun = _latest(cluster, _RERUN, (wis,), len(wis), wall)
    _stop(cluster, ids)
    cluster.add_worker(slots=slots)
    return failed_over, rerun


def rows(masters: list[Trial], workers: list[Trial]) -> list[Row]:
    """The report rows: medians, each trial's figures in the metric's name."""

    def row(what: str, values: list[float], target: float | None) -> Row:
        median = statistics.median(values)
        trials = ", ".join(f"{v:.1f}" for v in values)
        met = target is None or median <= target
        limit = "-" if target is None else f"<= {target:g}"
        return (f"{what} (s; {trials})", f"{median:.1f}", limit, met)

    n = len(masters)
    return [
        row(f"kill -9 master -> FAILOVER, median of {n}", [t for t, _ in masters], TARGET_S),
        row("kill -9 master -> claimed by a survivor", [c for _, c in masters], None),
        row(f"kill -9 worker -> failed over, median of {n}", [t for t, _ in workers], TARGET_S),
        row("kill -9 worker -> re-run started", [r for _, r in workers], None),
    ]


def _start_running(cluster: Cluster) -> list[int]:
    ids = [cluster.start_workflow(PROJECT, WORKFLOW) for _ in range(RUNS)]
    eventually(
        lambda: (
            cluster.db.scalar(
                "SELECT count(*) FROM task_instances WHERE workflow_instance_id = ANY($1) "
                "AND state = 'RUNNING'",
                ids,
            )
            == RUNS
        ),
        timeout=TIMEOUT_S,
        what=f"{RUNS} tasks running",
    )
    return ids


def _kill(cluster: Cluster, victim: Member, *, tasks: bool) -> float:
    cluster.kill9(victim, tasks=tasks)
    assert victim.killed_wall is not None
    return victim.killed_wall


# Per key (instance or task instance), its first time (epoch seconds) after the kill.
_EVENT = (
    "SELECT workflow_instance_id, extract(epoch FROM min(create_time)) FROM instance_events "
    "WHERE kind = $1 AND workflow_instance_id = ANY($2) "
    "AND create_time >= to_timestamp($3) AT TIME ZONE 'UTC' GROUP BY 1"
)
_TASK_EVENT = (
    "SELECT task_instance_id, extract(epoch FROM min(create_time)) FROM instance_events "
    "WHERE task_state = $1 AND task_instance_id = ANY($2) "
    "AND create_time >= to_timestamp($3) AT TIME ZONE 'UTC' GROUP BY 1"
)
_RERUN = (  # the replacement attempts' start, stamped by their worker
    "SELECT workflow_instance_id, extract(epoch FROM min(start_time)) FROM task_instances "
    "WHERE workflow_instance_id = ANY($1) AND attempt > 1 "
    "AND start_time >= to_timestamp($2) AT TIME ZONE 'UTC' GROUP BY 1"
)


def _latest(
    cluster: Cluster, sql: str, params: tuple[object, ...], count: int, wall: float
) -> float:
    """Seconds from the kill at ``wall`` (the query's last parameter) to the latest of the keys'
    first times, once all ``count`` keys have one."""

    def all_there() -> float | None:
        found = cluster.db.query(sql, *params, wall)
        if len(found) < count:
            return None
        return max(float(at) for _, at in found) - wall

    return eventually(all_there, timeout=TIMEOUT_S, interval=0.2, what=f"times of {params}")


def _stop(cluster: Cluster, ids: list[int]) -> None:
    """Stops the trial's runs through their owners, so their tasks do not pile up."""
    by_epoch = {m.epoch: m for m in cluster.masters()}
    for wi, epoch in cluster.db.query(
        "SELECT id, epoch FROM workflow_instances WHERE id = ANY($1)", ids
    ):
        owner = by_epoch.get(int(epoch))
        if owner is not None:
            with contextlib.suppress(Exception):  # finished or moving: it ends by itself anyway
                cluster.client(owner).stop_instance(int(wi))

    def ended() -> bool:
        return not cluster.db.scalar(
            "SELECT count(*) FROM task_instances WHERE workflow_instance_id = ANY($1) "
            "AND state IN ('SUBMITTED', 'DISPATCHED', 'RUNNING')",
            ids,
        )

    with contextlib.suppress(AssertionError):  # reported by the next trial if it matters
        eventually(ended, timeout=TIMEOUT_S, what="the trial's tasks ended")
