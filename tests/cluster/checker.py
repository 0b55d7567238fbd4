"""The checker: after a scenario has healed and drained, what went wrong, counted.

:func:`check` waits (bounded) for every started instance to end, then reads the database, the raw
ledger, the fenced effect tables and the masters' counters, and returns a :class:`Report`:

- ``lost``: starts whose instance never came to be or never left SUBMITTED (a lost command);
  ``stuck``: other instances still not terminal after the drain; ``failed``: terminal, not
  SUCCEEDED (every scenario's workflows are meant to succeed).
- ``dup_instances``: instances beyond one per start request (the database is the test's own, so
  every instance in it was started by the test); ``commands_left``: command rows never consumed.
- ``reruns``: logical tasks (workflow instance, task name) with more than one attempt row.
- ``raw_dup_concurrent``: logical tasks with two runs (ledger starts) whose lifetimes overlapped;
  ``overlap_s``: the seconds they overlapped, summed; ``raw_dup_success``: logical tasks with two
  or more ``end`` lines. A run without an end line lasted until its ``term`` line, until the
  harness SIGKILLed it or saw it die, or, if it still lives, until now; ``open_runs`` counts runs
  whose end is none of these (dead, time unknown: counted as lasting until the check, an upper
  bound);
  ``orphans`` counts runs still alive after the drain (nobody supervises them any more).
- ``crashed``: members that exited although the harness neither killed nor stopped them (a
  server must survive every fault here); ``tracebacks``: tracebacks in the members' logs
  (reported: some faults make servers log one).
- ``fenced_dup``: logical tasks with more than one accepted effect (must be 0 where every stale
  run outlives its attempt's failover); ``fence_breaches``: effects accepted after their attempt
  was failed over (must be 0 always: the fence itself failed);
  ``fenced_missing``: succeeded logical tasks with no accepted effect; ``fenced_rejected``: effect
  tries the fence refused.

Each scenario prints :meth:`Report.line` and calls :meth:`Report.assert_invariants`, then asserts
what is particular to it.
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path

from tests.cluster.harness import Cluster
from tests.cluster.ledger import LedgerLine

WORKFLOW_TERMINAL = ("SUCCEEDED", "FAILED", "STOPPED", "PAUSED")
DRAIN_POLL_S = 0.25

Logical = tuple[int, str]


@dataclass
class Report:
    scenario: str
    starts: int = 0
    instances: int = 0
    succeeded: int = 0
    failed: int = 0
    lost: int = 0
    stuck: int = 0
    dup_instances: int = 0
    commands_left: int = 0
    reruns: int = 0
    runs: int = 0
    raw_dup_concurrent: int = 0
    raw_dup_success: int = 0
    overlap_s: float = 0.0
    open_runs: int = 0
    orphans: int = 0
    fenced_dup: int = 0
    fenced_missing: int = 0
    fenced_rejected: int = 0
    fence_breaches: int = 0
    crashed: int = 0
    tracebacks: int = 0
    counters: Counter[str] = field(default_factory=Counter)
    timings: dict[str, float] = field(default_factory=dict)
    notes: dict[str, object] = field(default_factory=dict)  # scenario-specific, printed last
    details: list[str] = field(default_factory=list)

    def line(self) -> str:
        """The scenario's one-line report."""
        c = self.counters
        times = " ".join(f"{k}={v:.1f}s" for k, v in self.timings.items())
        times += "".join(f" {k}={v}" for k, v in self.notes.items())
        return (
            f"[{self.scenario}] starts={self.starts} instances={self.instances} "
            f"ok={self.succeeded} failed={self.failed} lost={self.lost} stuck={self.stuck} "
            f"dup_instances={self.dup_instances} cmds_left={self.commands_left} "
            f"runs={self.runs} reruns={self.reruns} raw_dup_concurrent={self.raw_dup_concurrent} "
            f"overlap_s={self.overlap_s:.1f} raw_dup_success={self.raw_dup_success} "
            f"open_runs={self.open_runs} orphans={self.orphans} fenced_dup={self.fenced_dup} "
            f"fenced_missing={self.fenced_missing} fenced_rejected={self.fenced_rejected} "
            f"fence_breaches={self.fence_breaches} crashed={self.crashed} "
            f"tracebacks={self.tracebacks} "
            f"stale_events={c['stale_events']} stale_writes={c['stale_writes']} "
            f"ownership_lost={c['ownership_lost']} claimed={c['commands_claimed']} "
            f"lost_race={c['commands_lost_race']} taken_over={c['instances_taken_over']} "
            f"tasks_failed_over={c['tasks_failed_over']} {times}"
        ).rstrip()

    def assert_invariants(self, *, tolerate: Iterable[str] = ()) -> None:
        """The invariants every fault-injection scenario keeps. ``tolerate`` names the
        counts a scenario expects above 0 by design and asserts on its own terms."""
        names = (
            "lost",
            "stuck",
            "failed",
            "dup_instances",
            "commands_left",
            "fenced_dup",
            "fenced_missing",
            "fence_breaches",
            "crashed",
        )
        bad = {n: getattr(self, n) for n in names if n not in tolerate and getattr(self, n)}
        assert not bad, f"{self.scenario}: invariants broken {bad}\n{self.line()}\n" + "\n".join(
            self.details
        )


def drain(cluster: Cluster, ids: set[int], timeout: float) -> dict[int, str]:
    """Waits (bounded) until every instance of ``ids`` is terminal; returns each one's state."""
    deadline = time.monotonic() + timeout
    while True:
        rows = cluster.db.query("SELECT id, state FROM workflow_instances WHERE id = ANY($1)", ids)
        states = {int(r[0]): str(r[1]) for r in rows}
        if all(states.get(i) in WORKFLOW_TERMINAL for i in ids) or time.monotonic() > deadline:
            return states
        time.sleep(DRAIN_POLL_S)


def check(
    cluster: Cluster,
    scenario: str,
    started: dict[str, int],
    *,
    drain_timeout: float = 60.0,
    timings: dict[str, float] | None = None,
) -> Report:
    """Drains, then counts (see the module docstring). ``started`` maps each start's request id
    to the instance id it was answered with."""
    ids = set(started.values())
    states = drain(cluster, ids, drain_timeout)
    report = Report(scenario, starts=len(started), timings=dict(timings or {}))
    all_rows = cluster.db.query("SELECT id, state FROM workflow_instances")
    report.instances = len(all_rows)
    report.dup_instances = max(0, len(all_rows) - len(ids)) + (len(started) - len(ids))
    for i in sorted(ids):
        state = states.get(i)
        if state is None or state == "SUBMITTED":
            report.lost += 1
            report.details.append(f"lost: instance {i} is {state}")
        elif state not in WORKFLOW_TERMINAL:
            report.stuck += 1
            report.details.append(f"stuck: instance {i} is {state}")
        elif state == "SUCCEEDED":
            report.succeeded += 1
        else:
            report.failed += 1
            report.details.append(f"failed: instance {i} ended {state}")
    report.commands_left = int(cluster.db.scalar("SELECT count(*) FROM commands"))
    _count_tasks(cluster, report)
    _count_runs(cluster, report)
    report.counters = cluster.counters()
    for member in cluster.members:
        if member.state in ("running", "paused") and not member.alive:
            report.crashed += 1
            report.details.append(f"crashed: {member!r} exited {member.proc.returncode}")
        report.tracebacks += member.log().count("Traceback")
    return report


def _count_tasks(cluster: Cluster, report: Report) -> None:
    attempts: Counter[Logical] = Counter()
    succeeded: set[Logical] = set()
    for wi, task, state in cluster.db.query(
        "SELECT workflow_instance_id, task_name, state FROM task_instances"
    ):
        key = (int(wi), str(task))
        attempts[key] += 1
        if state == "SUCCEEDED":
            succeeded.add(key)
    report.reruns = sum(1 for n in attempts.values() if n > 1)
    effects: Counter[Logical] = Counter()
    for wi, task in cluster.db.query(
        "SELECT t.workflow_instance_id, t.task_name FROM chaos_effects e "
        "JOIN task_instances t ON t.id = e.ti"
    ):
        effects[(int(wi), str(task))] += 1
    report.fenced_dup = sum(1 for n in effects.values() if n > 1)
    missing = sorted(succeeded - set(effects))
    report.fenced_missing = len(missing)
    report.details += [f"fenced_dup: {k} has {n} effects" for k, n in effects.items() if n > 1]
    report.details += [f"fenced_missing: {k} succeeded without an effect" for k in missing]
    report.fenced_rejected = int(
        cluster.db.scalar("SELECT count(*) FROM chaos_tries WHERE NOT accepted")
    )
    breaches = cluster.db.query(_BREACHES)
    report.fence_breaches = len(breaches)
    report.details += [
        f"fence breach: effect of ti {ti} attempt {a} at {at}" for ti, a, at in breaches
    ]


# Effects accepted after their attempt had lost ownership (its NEED_FAULT_TOLERANCE event): the
# fence let a stale incarnation write. Event times are taken when the master's batch begins, a
# few milliseconds before it commits; the half second absorbs that, not a real breach.
_BREACHES = (
    "SELECT e.ti, e.attempt, e.at FROM chaos_effects e JOIN ("
    " SELECT task_instance_id, min(create_time) AS lost FROM instance_events"
    " WHERE task_state = 'NEED_FAULT_TOLERANCE' GROUP BY 1) f ON f.task_instance_id = e.ti"
    " WHERE e.at > (f.lost AT TIME ZONE 'UTC') + interval '0.5 second'"
)


def _count_runs(cluster: Cluster, report: Report) -> None:
    assert cluster.death_watch.error is None, cluster.death_watch.error
    cluster.death_watch.poll()
    now = time.time()
    by_run: dict[tuple[int, int, int], list[LedgerLine]] = defaultdict(list)
    for line in cluster.ledger.lines():
        by_run[line.run].append(line)
    spans: dict[Logical, list[tuple[float, float]]] = defaultdict(list)
    ends: Counter[Logical] = Counter()
    for run, lines in by_run.items():
        start = next((x for x in lines if x.kind == "start"), None)
        if start is None:
            continue
        finish = next((x for x in lines if x.kind in ("end", "term")), None)
        if finish is not None:
            stop = finish.at
            ends[start.logical] += finish.kind == "end"
        elif run[2] in cluster.deaths:
            stop = cluster.deaths[run[2]]
        else:
            stop = now
            if _running(run[2]):
                report.orphans += 1
                report.details.append(f"orphan: run {run} still runs after the drain")
            else:
                report.open_runs += 1
        spans[start.logical].append((start.at, stop))
    report.runs = sum(len(s) for s in spans.values())
    report.raw_dup_success = sum(1 for n in ends.values() if n > 1)
    for logical, runs in spans.items():
        overlap = sum(max(0.0, min(a[1], b[1]) - max(a[0], b[0])) for a, b in combinations(runs, 2))
        if overlap > 0:
            report.raw_dup_concurrent += 1
            report.overlap_s += overlap
            report.details.append(f"raw_dup_concurrent: {logical} overlapped {overlap:.1f}s")


def _running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")
