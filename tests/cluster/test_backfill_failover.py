"""Acceptance 3's last point: a master killed -9 mid-backfill, the backfill completing with every
date run exactly once. A real cluster (2 masters as processes, 1 worker, PostgreSQL, ZooKeeper)
backfills 40 daily dates, PARALLEL 3, of a workflow whose one task records its date (from the
parameter ``DT=$[yyyyMMdd]``) and its start and end in a ledger file. Once a third of the dates
are done, the master driving the most of its runs (the one it was created on when tied) is killed
-9: the surviving master must carry the backfill to SUCCEEDED (its sweep advances it, the failover
adopts the dead master's runs), each date run exactly once, never more than 3 runs at a time.
The lateness printed is how long a freed slot waited for the next date's task to start."""

from __future__ import annotations

import shlex
import statistics
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from dsched import Shell, Workflow
from dsched.options import BackfillState
from dsched.results import Backfill
from tests.cluster.harness import Cluster, Member
from tests.cluster.workload import PROJECT
from tests.e2e.conftest import eventually

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

DATES = 40
PARALLEL = 3
TASK_S = 0.3
FIRST = datetime(2026, 1, 1, tzinfo=UTC)
FINISHED = (BackfillState.SUCCEEDED, BackfillState.FAILED, BackfillState.CANCELLED)


def _task(ledger: Path) -> str:
    """The task body: ``<date> start|end <epoch secs>`` lines, appended (O_APPEND, short lines:
    concurrent runs never interleave them)."""
    out = shlex.quote(str(ledger))
    rec = f'printf "%s %s %s\\n" "$DT" "$1" "$(date +%s.%N)" >> {out}'
    return f"rec() {{ {rec}; }}\nrec start\nsleep {TASK_S}\nrec end\n"


def _ledger(path: Path) -> dict[str, list[tuple[str, float]]]:
    """date -> its (start|end, time) lines, in file order."""
    out: dict[str, list[tuple[str, float]]] = {}
    for raw in path.read_text().splitlines() if path.exists() else []:
        date, kind, at = raw.split()
        out.setdefault(date, []).append((kind, float(at)))
    return out


def _most_at_once(spans: list[tuple[float, float]]) -> int:
    """The most intervals open at one instant (an end before a start at the same instant)."""
    events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    most = now = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return most


def _driver(cluster: Cluster, backfill_id: int, creator: Member) -> tuple[Member, int]:
    """The live master owning the most of the backfill's running runs (the creator when tied),
    and how many it owns."""
    rows = cluster.db.query(
        "SELECT host, count(*) FROM workflow_instances WHERE backfill_id = $1"
        " AND state = 'RUNNING' GROUP BY host",
        backfill_id,
    )
    owned = Counter({str(r[0]): int(r[1]) for r in rows})
    driver = max(cluster.masters(), key=lambda m: (owned[m.address], m is creator))
    return driver, owned[driver.address]


def test_a_backfill_completes_once_per_date_when_its_master_is_killed(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster.start(masters=2, workers=1)
    ledger = cluster.run_dir / "backfill-ledger"
    with Workflow("daily", project=PROJECT, params={"DT": "$[yyyyMMdd]"}) as wf:
        Shell("t", _task(ledger))
    creator = cluster.masters()[0]
    client = cluster.client(creator)
    wf.submit(client)
    last = FIRST + (DATES - 1) * timedelta(days=1)
    created = client.create_backfill(PROJECT, "daily", start=FIRST, end=last, parallelism=PARALLEL)
    assert len(created.dates) == DATES

    def done() -> int:
        return sum(1 for lines in _ledger(ledger).values() if ("end" in {k for k, _ in lines}))

    eventually(lambda: done() >= DATES // 3, timeout=60, what="a third of the dates done")
    victim, owned = _driver(cluster, created.id, creator)
    cluster.kill9(victim, tasks=False)  # the worker's tasks run on; only the master dies
    killed = victim.killed_wall
    assert killed is not None
    done_at_kill = done()
    survivor = cluster.masters()[0]

    def finished() -> Backfill | None:
        got = cluster.client(survivor).get_backfill(created.id)
        return got if got.state in FINISHED else None

    final = eventually(finished, timeout=90, what="the backfill finished")
    assert final.state is BackfillState.SUCCEEDED, final
    assert final.progress.done == DATES

    expected = {(FIRST + n * timedelta(days=1)).strftime("%Y%m%d") for n in range(DATES)}
    lines = _ledger(ledger)
    starts = Counter({d: sum(1 for k, _ in v if k == "start") for d, v in lines.items()})
    assert set(starts) == expected, "no date lost, no other date run"
    assert [d for d, n in starts.items() if n != 1] == [], "each date run exactly once"
    spans = []
    for date, recs in lines.items():
        times = dict(recs)
        assert set(times) == {"start", "end"}, f"{date}: {recs}"
        spans.append((times["start"], times["end"]))
    assert _most_at_once(spans) <= PARALLEL, "never more than PARALLEL tasks at once"

    rows = cluster.db.query(
        "SELECT schedule_time, state, extract(epoch FROM start_time),"
        " extract(epoch FROM end_time) FROM workflow_instances"
        " WHERE backfill_id = $1 ORDER BY start_time",
        created.id,
    )
    assert sorted(r[0].strftime("%Y%m%d") for r in rows) == sorted(expected), "one run per date"
    assert {r[1] for r in rows} == {"SUCCEEDED"}
    runs = [(float(r[2]), float(r[3])) for r in rows]
    assert _most_at_once(runs) <= PARALLEL, "never more than PARALLEL runs at once"
    # Lateness from the tasks' own times (a run's recorded end may come late, from the master
    # that adopted it): the k-th task (0-based, by start) could start once k - 2 tasks had
    # ended, so the slot it took was free from the (k-2)-th end on.
    run_starts = sorted(s for s, _ in spans)
    ends = sorted(e for _, e in spans)
    late = [(run_starts[k], run_starts[k] - ends[k - PARALLEL]) for k in range(PARALLEL, DATES)]
    waits = [max(0.0, w) for _, w in late]
    near_kill = [max(0.0, w) for s, w in late if killed - 1 <= s]
    in_flight = sum(1 for s, e in runs if s <= killed <= e)
    with capsys.disabled():
        print(
            f"\nbackfill of {DATES} dates, PARALLEL {PARALLEL}, master {victim.name} "
            f"({'its creator, ' if victim is creator else ''}driving {owned} of its runs) "
            f"killed -9 after {done_at_kill} dates ended: SUCCEEDED, {DATES} runs, 0 lost, "
            f"0 duplicated, at most {_most_at_once(runs)} at once; wall "
            f"{max(e for _, e in runs) - min(s for s, _ in runs):.1f} s; task ended -> next "
            f"task started p50 {statistics.median(waits) * 1000:.0f} ms, max {max(waits):.2f} s "
            f"(after the kill: max {max(near_kill, default=0.0):.2f} s; "
            f"{in_flight} runs in flight at the kill)"
        )
