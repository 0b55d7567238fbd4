"""The shipped example, the way the README tells users to run it: ``dsched submit`` and
``dsched run --wait --logs`` against a standalone server, then ``dsched show``; and ``make run``'s
script, which starts its own server."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from dsched import Client, WorkflowState
from tests.e2e.conftest import (
    REPO,
    Standalone,
    assert_ran,
    by_task,
    clean_env,
    cli,
    instance_id_from_run,
    parse_table,
)

EXAMPLE = REPO / "clients" / "python" / "examples" / "etl_pipeline.py"
CLEANERS = ("clean_orders", "clean_customers", "clean_products")
TASKS = ("extract", *CLEANERS, "join", "report", "publish")
UPSTREAM = {
    "extract": (),
    **{c: ("extract",) for c in CLEANERS},
    "join": CLEANERS,
    "report": ("join",),
    "publish": ("report",),
}


def _log_lines(lines: list[str], task: str) -> list[int]:
    """Indexes of the output lines that carry ``task``'s log (``task | ...``)."""
    return [i for i, line in enumerate(lines) if line.startswith(f"{task} | ")]


def _event_index(lines: list[str], task: str, state: str) -> int:
    """Index of the event line ``HH:MM:SS  task  STATE``."""
    pattern = re.compile(rf"^\d\d:\d\d:\d\d  {re.escape(task)}  {state}\b")
    return next(i for i, line in enumerate(lines) if pattern.match(line))


@pytest.mark.timeout(120)
def test_example_pipeline_via_cli(server: Standalone, client: Client) -> None:
    submitted = cli(server, "submit", str(EXAMPLE))
    assert submitted.returncode == 0, submitted.stderr
    assert re.search(r"^examples/etl_pipeline  version \d+  ONLINE$", submitted.stdout, re.M)

    run = cli(server, "run", "etl_pipeline", "--project", "examples", "--wait", "--logs")
    assert run.returncode == 0, run.stdout + run.stderr
    instance_id = instance_id_from_run(run.stdout)
    lines = run.stdout.splitlines()
    assert re.match(rf"instance {instance_id} SUCCEEDED in ", lines[-1]), lines[-1]

    # Every task's log arrives live, each line prefixed with the task's name.
    for task in TASKS:
        assert _log_lines(lines, task), f"no log lines of {task} in:\n{run.stdout}"
        assert f"{task} | [dsched] finished at " in run.stdout
    key = f"{instance_id}-extract-1"
    assert f"extract | extracting batch 2026-11-21 (attempt 1, key {key})" in lines
    for table in ("orders", "customers", "products"):
        assert f"clean_{table} | cleaning {table}: 1250 rows from extract" in lines
    # OUT parameters flow: extract's `rows` reached the cleaners, join's `joined` reached report.
    assert "report | report for 2026-11-21: 1180 joined rows" in lines

    # Plausible live order: a task's log and its SUCCEEDED event come before its successors start.
    for task, ups in UPSTREAM.items():
        first_own = min(_log_lines(lines, task))
        for up in ups:
            assert max(_log_lines(lines, up)) < first_own, f"{up}'s log after {task}'s"
            assert _event_index(lines, up, "SUCCEEDED") < _event_index(lines, task, "RUNNING")

    shown = cli(server, "show", str(instance_id))
    assert shown.returncode == 0, shown.stderr
    assert re.search(r"^state:\s+SUCCEEDED$", shown.stdout, re.M)
    rows = parse_table(shown.stdout.split("\n\n", 1)[1])
    assert sorted(r["TASK"] for r in rows) == sorted(TASKS)
    assert all(r["STATE"] == "SUCCEEDED" and r["ATTEMPT"] == "1" for r in rows), rows
    assert all(r["EXIT CODE"] == "0" for r in rows), rows

    # The same run through the SDK: fan-out and fan-in respected to the timestamp.
    instance = client.get_instance(instance_id)
    assert instance.state is WorkflowState.SUCCEEDED
    assert instance.var_pool == {"rows": "1250", "joined": "1180"}
    tasks = {name: tis[-1] for name, tis in by_task(client, instance_id).items()}
    assert set(tasks) == set(TASKS)
    for task, ups in UPSTREAM.items():
        ti = tasks[task]
        assert_ran(ti)
        assert ti.start_time is not None
        for up in ups:
            up_end = tasks[up].end_time
            assert up_end is not None and up_end <= ti.start_time, f"{task} started before {up}"
    assert tasks["join"].out_params == {"joined": "1180"}
    first_start, last_end = tasks["extract"].start_time, tasks["publish"].end_time
    assert instance.start_time is not None and first_start is not None
    assert instance.end_time is not None and last_end is not None
    assert instance.start_time <= first_start and last_end <= instance.end_time


def _demo(data_dir: Path, timeout: float, **env: str) -> subprocess.CompletedProcess[str]:
    data_dir.mkdir()
    # As a newcomer runs it: whatever Spark needs, the script sets (not the test's environment).
    demo_env = {k: v for k, v in clean_env(**env).items() if k != "SPARK_LOCAL_IP"}
    return subprocess.run(
        [str(REPO / "scripts" / "demo")],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**demo_env, "DSCHED_DEMO_DIR": str(data_dir)},
        cwd=REPO,
        stdin=subprocess.DEVNULL,
    )


def _stopped_cleanly(data_dir: Path) -> None:
    server_log = (data_dir / "standalone.log").read_text()
    assert "is up" in server_log and "dsched standalone: stopped" in server_log


@pytest.mark.timeout(180)
def test_make_run_demo_script_shell_etl(tmp_path: Path) -> None:
    """``DSCHED_DEMO=etl make run``: own server, the shell example with logs, ``show``, shutdown."""
    data_dir = tmp_path / "demo"
    result = _demo(data_dir, 150, DSCHED_DEMO="etl")
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    out = result.stdout
    assert "report | report for 2026-11-21: 1180 joined rows" in out
    assert re.search(r"^instance \d+ SUCCEEDED in ", out, re.M), out[-2000:]
    shown = out.split("==> the instance", 1)[1]
    rows = parse_table(shown.split("\n\n", 1)[1])
    assert len(rows) == len(TASKS) and all(r["STATE"] == "SUCCEEDED" for r in rows), rows
    _stopped_cleanly(data_dir)  # the script's server was stopped on the way out


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_make_run_demo_script_spark_pipeline(tmp_path: Path) -> None:
    """``make run``: the daily Spark pipeline on its own server: the live logs, the Spark
    application id in ``show``, one Parquet partition and one summary row, shutdown."""
    data_dir = tmp_path / "demo"
    result = _demo(data_dir, 840)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    out = result.stdout
    # The script's SPARK_LOCAL_IP reached spark-submit through the server's worker: Spark warns
    # when it is unset and resolving the host name (90 s on some hosts) picks the address.
    assert "Set SPARK_LOCAL_IP if you need to bind" not in out, out[-3000:]
    assert "datasource warehouse (SQLITE) created" in out
    assert re.search(r"^generate \| wrote 5000 orders for \d{8} to ", out, re.M), out[-3000:]
    assert re.search(r"^passed \| check passed for \d{8}", out, re.M), out[-3000:]
    assert re.search(r"^instance \d+ SUCCEEDED in ", out, re.M), out[-3000:]
    shown = out.split("==> the instance", 1)[1].split("==> the result", 1)[0]
    rows = {r["TASK"]: r for r in parse_table(shown.split("\n\n", 1)[1].split("\n\n", 1)[0])}
    assert set(rows) == {"generate", "transform", "load", "check", "passed"}, rows
    assert all(r["STATE"] == "SUCCEEDED" for r in rows.values()), rows
    assert rows["transform"]["APPLICATION"].startswith("local-"), rows["transform"]
    result_part = out.split("==> the result", 1)[1]
    assert re.search(r"marts/daily_sales/dt=\d{8}  1 file\(s\)", result_part), result_part
    assert re.search(r"^  \d{8}\s+5000\s+\d+\.\d{2}  \w+$", result_part, re.M), result_part
    _stopped_cleanly(data_dir)
