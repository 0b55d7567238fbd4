"""The README's main job, ``clients/python/examples/daily_sales.py``, on a real standalone with
real Spark (``local[2]``) and a SQLite datasource, driven through the CLI as a user would: a
7-day backfill makes 7 Parquet partitions and 7 summary rows, each transform with its own Spark
application id; running one day again replaces that day's partition and row instead of adding to
them, and leaves the other days alone."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from dsched import Client, TaskState, WorkflowState
from tests.e2e.conftest import REPO, Standalone, cli
from tests.e2e.spark_jobs import standalone_for_spark

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(1800)]

EXAMPLE = REPO / "clients" / "python" / "examples" / "daily_sales.py"
# Schedule times 2-8 Nov at 02:00 (the workflow's schedule gives the time of day, so the range
# must end at 02:00 to include 8 Nov): business dates (the day before each) 1 Nov .. 7 Nov.
DAYS = [f"202611{d:02d}" for d in range(1, 8)]
TASKS = {"generate", "transform", "load", "check", "passed"}
BACKFILL_TIMEOUT_S = 1200.0


@pytest.fixture(scope="module")
def spark_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Standalone]:
    yield from standalone_for_spark(tmp_path_factory.mktemp("daily-sales"))


def _partitions(warehouse: Path) -> dict[str, list[str]]:
    """The mart's partitions: dt -> the names of its Parquet files."""
    mart = warehouse / "marts" / "daily_sales"
    return {
        p.name.removeprefix("dt="): sorted(f.name for f in p.glob("*.parquet"))
        for p in sorted(mart.glob("dt=*"))
    }


def _summary(warehouse: Path) -> list[tuple[str, int, float, str]]:
    with sqlite3.connect(warehouse / "summary.db") as db:
        return list(
            db.execute("SELECT dt, orders, revenue, top_store FROM daily_summary ORDER BY dt")
        )


def _backfill(server: Standalone, warehouse: Path, *dates: str) -> int:
    args = (
        ["--dates", ",".join(dates)]
        if dates
        else ["--start", "2026-11-02", "--end", "2026-11-08T02:00"]
    )
    done = cli(
        server,
        "--project", "examples",
        "backfill", "daily_sales", *args, "--parallel", "2", "--param", f"warehouse={warehouse}",
        timeout=BACKFILL_TIMEOUT_S,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    match = re.match(r"backfill (\d+) ", done.stdout)
    assert match, done.stdout
    return int(match.group(1))


def test_a_week_backfilled_then_one_day_rerun(spark_server: Standalone, tmp_path: Path) -> None:
    warehouse = tmp_path / "warehouse"
    warehouse.mkdir()
    created = cli(
        spark_server, "datasource", "create", "warehouse",
        "--type", "sqlite", "--database", str(warehouse / "summary.db"),
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    submitted = cli(spark_server, "submit", str(EXAMPLE))
    assert submitted.returncode == 0, submitted.stderr

    week = _backfill(spark_server, warehouse)
    parts = _partitions(warehouse)
    assert list(parts) == DAYS and all(parts.values()), parts
    rows = _summary(warehouse)
    assert [r[0] for r in rows] == DAYS
    assert all(orders == 5000 and revenue > 0 for _, orders, revenue, _ in rows), rows

    with Client.connect(spark_server.address) as client:
        runs = [i for i in client.iter_instances(project="examples") if i.backfill_id == week]
        assert len(runs) == len(DAYS) and {r.state for r in runs} == {WorkflowState.SUCCEEDED}
        app_ids = []
        for run in runs:
            tasks = {t.task_name: t for t in client.iter_task_instances(run.id)}
            assert set(tasks) == TASKS and {t.state for t in tasks.values()} == {
                TaskState.SUCCEEDED
            }
            app_ids.append(tasks["transform"].application_id)
        assert all(a.startswith("local-") for a in app_ids) and len(set(app_ids)) == len(DAYS)

    # 4 Nov again (business date 3 Nov): its partition and row are replaced, not added to.
    _backfill(spark_server, warehouse, "2026-11-04")
    again = _partitions(warehouse)
    assert list(again) == DAYS
    assert again["20261103"] != parts["20261103"]  # rewritten (Spark names files per write)...
    assert len(again["20261103"]) == len(parts["20261103"])  # ...as many files, not twice as many
    assert {d: f for d, f in again.items() if d != "20261103"} == {
        d: f for d, f in parts.items() if d != "20261103"
    }  # the other days untouched
    assert _summary(warehouse) == rows  # one row per day, the same figures (the data is seeded)
