"""Cron-storm benchmark of standalone dsched (issue 10, acceptance 6a): 10,000 online schedules of
a one-task workflow (``true``) all firing on the same second; the time from that fire time until
all 10,000 runs are durable (target: <= 3 s) and until all are RUNNING (reported), a count from
the store proving each schedule fired exactly once, and the idle CPU of the server processes
(master + worker child) with those 10,000 schedules online between fires (target: <= 2 % of
one core).

The schedules are created and put online through the API by a pool of client threads (not
measured); their cron is a 6-field one on a single second a bit after the creation is expected to
end (estimated from the first schedules' rate), so each fires once in the bench. The figures are
read from the standalone's SQLite store (``dsched.db`` in its data directory), not from the API:

* durable: polled every 50 ms (the count of ``schedule_fires`` rows at the fire time); also the
  server's own stamp (the last fire row's ``create_time``), which does not depend on the poll;
* RUNNING: the last scheduled instance's ``start_time`` (stamped by the server) minus the fire time;
* exactly once: fire rows per (schedule, fire time), scheduled instances, distinct schedules.

Longer than ``make bench`` can absorb (creating 10,000 schedules, then 10,000 runs, then the idle
window): ``make bench-storm`` runs it. Alone: ``python -m tests.bench.cron_storm [--schedules N]
[--repeat N] [--idle S] [--no-settle]`` from the repository root; with ``--repeat`` each run
has a fresh server and the medians are reported.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psutil

from dsched import Client, Schedule, Shell, Workflow
from tests.bench.common import Row, default_slots, report, settle

SCHEDULES = 10_000
DURABLE_TARGET_S = 3.0
IDLE_TARGET_PCT = 2.0
IDLE_S = 20.0
THREADS = 16
POLL_S = 0.05
# Seconds between the estimated end of the creation and the fire time: room for the estimate's
# error and for the scheduler's 5 s refresh to read the last schedules put online.
MARGIN_S = 20.0
WORKFLOW = "bench_storm"


@dataclass(frozen=True, slots=True)
class StormRun:
    """Seconds from the fire time until all runs were durable (as polled, and by the server's
    stamps) and until all were RUNNING; the exactly-once counts; idle CPU in % of one core."""

    durable_s: float
    durable_stamp_s: float
    running_s: float
    fire_rows: int
    max_rows_per_fire: int
    instances: int
    distinct_schedules: int
    idle_pct: float


def _data_dir(pid: int) -> Path:
    """The standalone's data directory, from its command line (``--data-dir DIR``)."""
    argv = psutil.Process(pid).cmdline()
    return Path(argv[argv.index("--data-dir") + 1])


def _ts(value: str | None) -> datetime:
    assert value is not None
    return datetime.fromisoformat(value).replace(tzinfo=UTC)


def _create(client: Client, ids: range, cron: str) -> int:
    made = 0
    for _ in ids:
        info = client.create_schedule("bench", WORKFLOW, Schedule(cron, online=False))
        client.set_schedule_online(info.id)
        made += 1
    return made


def _create_all(address: str, count: int, cron: str) -> None:
    """Creates ``count`` schedules and puts them online, ``THREADS`` clients at a time."""
    chunks = [range(i, min(count, i + 100)) for i in range(0, count, 100)]

    def work(chunk: range) -> int:
        with Client.connect(address) as c:
            return _create(c, chunk, cron)

    with ThreadPoolExecutor(THREADS) as pool:
        assert sum(pool.map(work, chunks)) == count


def _cron_at(when: datetime) -> str:
    """A 6-field cron firing at ``when`` (UTC, whole second) and next a year later."""
    return f"{when.second} {when.minute} {when.hour} {when.day} {when.month} *"


def _wait_count(db: sqlite3.Connection, sql: str, args: tuple[object, ...], want: int) -> None:
    while db.execute(sql, args).fetchone()[0] < want:
        time.sleep(POLL_S)  # the bench's own wait, not a server path


def _idle_pct(pids: list[int], seconds: float) -> float:
    """CPU of the server processes themselves (not their task children) in % of one core."""
    procs = [psutil.Process(p) for p in pids]

    def cpu() -> float:
        return sum(t.user + t.system for t in (p.cpu_times() for p in procs))

    before, began = cpu(), time.monotonic()
    time.sleep(seconds)
    return 100 * (cpu() - before) / (time.monotonic() - began)


def storm(client: Client, address: str, pids: list[int], count: int, idle_s: float) -> StormRun:
    with Workflow(WORKFLOW, project="bench") as wf:
        Shell("only", "true")
    wf.submit(client=client)
    # The rate of the first schedules sets the fire time; they get a cron that never fires in
    # the bench (1 January), then the rest the real one, then the first are updated to it.
    probe = min(200, count)
    began = time.monotonic()
    _create_all(address, probe, "0 0 0 1 1 *")
    rate = probe / (time.monotonic() - began)
    fire = (datetime.now(UTC) + timedelta(seconds=(count - probe) / rate * 1.3 + MARGIN_S)).replace(
        microsecond=0
    )
    cron = _cron_at(fire)
    for info in list(client.list_schedules(project="bench", workflow=WORKFLOW)):
        client.update_schedule(info.id, "bench", WORKFLOW, Schedule(cron))
    _create_all(address, count - probe, cron)
    lead = (fire - datetime.now(UTC)).total_seconds()
    print(f"{count} schedules online at {rate:.0f}/s; {lead:.1f} s before the fire", flush=True)
    assert lead > 5, "creation ran into the fire time: raise MARGIN_S"

    db = sqlite3.connect(f"file:{_data_dir(pids[0]) / 'dsched.db'}?mode=ro", uri=True)
    db.execute("PRAGMA busy_timeout = 5000")
    fire_s = fire.replace(tzinfo=None).isoformat(sep=" ")
    _wait_count(db, "SELECT count(*) FROM schedule_fires WHERE fire_time >= ?", (fire_s,), count)
    durable_s = (datetime.now(UTC) - fire).total_seconds()
    sched = "FROM workflow_instances WHERE trigger = 'SCHEDULE'"
    _wait_count(db, f"SELECT count(start_time) {sched}", (), count)
    last_fire_row = _ts(db.execute("SELECT max(create_time) FROM schedule_fires").fetchone()[0])
    last_start = _ts(db.execute(f"SELECT max(start_time) {sched}").fetchone()[0])
    fire_rows, max_rows = db.execute(
        "SELECT count(*), max(n) FROM (SELECT count(*) AS n FROM schedule_fires "
        "GROUP BY schedule_id, fire_time)"
    ).fetchone()
    instances, distinct = db.execute(
        f"SELECT count(*), count(DISTINCT schedule_id) {sched}"
    ).fetchone()
    # Idle: after every run has ended, between this fire and the next (a year on).
    _wait_count(db, f"SELECT count(*) {sched} AND state IN ('SUCCEEDED', 'FAILED')", (), count)
    db.close()
    time.sleep(2)  # the last runs' tails (events, releases)
    return StormRun(
        durable_s=durable_s,
        durable_stamp_s=(last_fire_row - fire).total_seconds(),
        running_s=(last_start - fire).total_seconds(),
        fire_rows=fire_rows,
        max_rows_per_fire=max_rows,
        instances=instances,
        distinct_schedules=distinct,
        idle_pct=_idle_pct(pids, idle_s),
    )


def rows(run: StormRun, count: int = SCHEDULES) -> list[Row]:
    once = (
        run.fire_rows == count
        and run.max_rows_per_fire == 1
        and run.instances == count
        and run.distinct_schedules == count
    )
    return [
        (
            f"storm: fire to {count} runs durable (s)",
            f"{run.durable_s:.2f}",
            f"<= {DURABLE_TARGET_S:g}",
            run.durable_s <= DURABLE_TARGET_S,
        ),
        ("storm: same, by the last fire row's stamp (s)", f"{run.durable_stamp_s:.2f}", "-", True),
        (f"storm: fire to {count} runs RUNNING (s)", f"{run.running_s:.2f}", "-", True),
        (
            "storm: fire rows / max per fire / runs / schedules",
            f"{run.fire_rows}/{run.max_rows_per_fire}/{run.instances}/{run.distinct_schedules}",
            f"{count}/1/{count}/{count}",
            once,
        ),
        (
            f"storm: idle CPU, {count} online (% core)",
            f"{run.idle_pct:.2f}",
            f"<= {IDLE_TARGET_PCT:g}",
            run.idle_pct <= IDLE_TARGET_PCT,
        ),
    ]


def main() -> int:
    from tests.bench.standalone_bench import standalone  # its server (which imports common)

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--schedules", type=int, default=SCHEDULES)
    parser.add_argument("--repeat", type=int, default=1, help="runs; the medians are reported")
    parser.add_argument("--idle", type=float, default=IDLE_S, help="seconds of idle CPU")
    parser.add_argument("--slots", type=int, default=default_slots(), help="the worker's")
    parser.add_argument("--no-settle", action="store_true", help="see tests/bench/common.py")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    runs = []
    for n in range(args.repeat):
        if not args.no_settle:
            settle("cron storm")
        with standalone(args.slots) as (address, pids), Client.connect(address) as c:
            c.ensure_project("bench")
            run = storm(c, address, pids, args.schedules, args.idle)
        runs.append(run)
        print(f"run {n + 1}: {run}", flush=True)
    fields = StormRun.__dataclass_fields__
    median = StormRun(*(statistics.median(getattr(r, f) for r in runs) for f in fields))
    title = (
        f"cron storm: {args.schedules} schedules of a one-task workflow firing on one second, "
        f"median of {args.repeat}; {args.slots} slots, {os.cpu_count()} CPUs, load average "
        f"{load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end"
    )
    return report(title, rows(median, args.schedules))


if __name__ == "__main__":
    sys.exit(main())
