"""``dsched backfill`` and ``dsched backfills`` against a real standalone: start and follow with the
progress line, detach and re-attach, pause, resume, cancel, the listing, and a refused request."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

from dsched import Client, Shell, Workflow, WorkflowState
from tests.e2e.conftest import Standalone, cli, parse_table, wait_for_file_sh


def test_a_followed_backfill_runs_every_date_once(
    server: Standalone, client: Client, project: str, tmp_path: Path
) -> None:
    days = tmp_path / "days"
    with Workflow("daily", project=project, params={"DT": "$[yyyyMMdd]", "TAG": "global"}) as wf:
        Shell("t", f'echo "day $DT $TAG" >> {days}')
    wf.submit(client)
    done = cli(
        server,
        "--project", project,
        "backfill", "daily", "--start", "2026-02-26", "--end", "2026-03-02", "--parallel", "2",
        "--param", "TAG=from-cli",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    backfill_id = int(re.match(r"backfill (\d+) ", done.stdout).group(1))  # type: ignore[union-attr]
    assert "5 dates" in done.stdout
    assert "[##############################] 5/5  ok 5" in done.stdout  # the last progress line
    assert "SUCCEEDED  5 succeeded, 0 failed, 0 skipped of 5" in done.stdout
    runs = [i for i in client.iter_instances(project=project) if i.backfill_id == backfill_id]
    assert sorted(r.schedule_time for r in runs if r.schedule_time) == [
        datetime(2026, 2, d, tzinfo=UTC) for d in (26, 27, 28)
    ] + [datetime(2026, 3, d, tzinfo=UTC) for d in (1, 2)]
    assert {r.state for r in runs} == {WorkflowState.SUCCEEDED}
    # --param is each run's start parameter: it overrides the workflow's global value
    assert sorted(days.read_text().splitlines()) == [
        f"day {d} from-cli" for d in ("20260226", "20260227", "20260228", "20260301", "20260302")
    ]

    listed = parse_table(cli(server, "--project", project, "backfills").stdout)
    assert [(r["ID"], r["STATE"], r["DONE"]) for r in listed] == [
        (str(backfill_id), "SUCCEEDED", "5/5")
    ]


def test_detach_pause_resume_cancel_and_watch(
    server: Standalone, client: Client, project: str, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    with Workflow("daily", project=project) as wf:
        Shell("t", wait_for_file_sh(gate))
    wf.submit(client)
    started = cli(
        server, "--project", project, "backfill", "daily", "--dates",
        "2026-01-01,2026-01-02,2026-01-03", "--detach",
    )  # fmt: skip
    assert started.returncode == 0, started.stderr
    backfill_id = re.match(r"backfill (\d+) ", started.stdout).group(1)  # type: ignore[union-attr]
    paused = cli(server, "backfill", "pause", backfill_id)
    assert paused.returncode == 0 and "PAUSED" in paused.stdout
    again = cli(server, "backfill", "pause", backfill_id)
    assert again.returncode == 1 and "is PAUSED" in again.stderr
    assert cli(server, "backfill", "resume", backfill_id).returncode == 0
    gate.touch()
    watched = cli(server, "backfill", "watch", backfill_id)
    assert watched.returncode == 0, watched.stderr
    assert "SUCCEEDED  3 succeeded" in watched.stdout
    cancelled = cli(server, "backfill", "cancel", backfill_id)
    assert cancelled.returncode == 1 and "cannot cancel" in cancelled.stderr


def test_a_request_that_cannot_be_honoured_is_refused(server: Standalone, project: str) -> None:
    refused = cli(
        server, "--project", project, "backfill", "daily",
        "--start", "2000-01-01", "--end", "2099-12-31", "--cron", "* * * * *",
    )  # fmt: skip
    assert refused.returncode in (1, 2)
    assert "error:" in refused.stderr
