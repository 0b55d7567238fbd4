"""Names in any script end to end on a real standalone server: created and run through the SDK,
shown, listed and followed through the CLI; task logs stay under numeric paths; parameter names
the server refuses are refused by the CLI with exit code 2."""

from __future__ import annotations

import re
import secrets
from pathlib import Path

from dsched import Client, Shell, Workflow, WorkflowState
from dsched.cli.format import width
from tests.e2e.conftest import Standalone, cli, parse_table

WORKFLOW = "每日报表"
TASKS = ["抽取", "清洗 (华东)", "加载"]


def test_chinese_names_are_created_run_shown_and_logged(server: Standalone, client: Client) -> None:
    project = f"数据平台-{secrets.token_hex(3)}"
    with Workflow(WORKFLOW, project=project, params={"day": "2026-11-25"}) as wf:
        steps = [Shell(name, 'echo "任务 $DSCHED_TASK_NAME 日期 $day"') for name in TASKS]
        steps[0] >> steps[1] >> steps[2]
    run = wf.run(client=client, timeout=60)

    assert run.state is WorkflowState.SUCCEEDED
    assert (run.project, run.workflow) == (project, WORKFLOW)
    stored = client.get_workflow(project, WORKFLOW)
    assert stored.name == WORKFLOW and [t.name for t in stored.spec.tasks] == TASKS

    shown = cli(server, "show", str(run.id))
    assert shown.returncode == 0, shown.stderr
    table = shown.stdout.split("\n\n", 1)[1]
    rows = parse_table(table)
    assert [(r["TASK"], r["STATE"]) for r in rows] == [(n, "SUCCEEDED") for n in TASKS]
    # Columns line up on a terminal: every row's state starts at the same display column.
    lines = [line for line in table.splitlines() if line.strip()]
    starts = {
        width(line[: line.index(state)])
        for line, state in zip(lines, ["STATE", *["SUCCEEDED"] * 3], strict=True)
    }
    assert len(starts) == 1, table

    listed = cli(server, "instances", "--project", project, "--workflow", WORKFLOW)
    assert listed.returncode == 0, listed.stderr
    assert [r["WORKFLOW"] for r in parse_table(listed.stdout)] == [f"{project}/{WORKFLOW}"]

    tasks = {t.task_name: t for t in client.iter_task_instances(run.id)}
    for name in TASKS:
        ti = tasks[name]
        logged = cli(server, "logs", str(ti.id))
        assert logged.returncode == 0, logged.stderr
        assert f"任务 {name} 日期 2026-11-25\n" in logged.stdout
        # Names never reach a path: logs/<yyyymmdd>/<code>/<version>/<instance>-<task inst>.log
        relative = Path(ti.log_path).relative_to(server.data_dir)
        assert re.fullmatch(r"worker/logs/\d{8}/\d+/\d+/\d+-\d+\.log", str(relative)), relative


def test_the_cli_refuses_reserved_and_non_identifier_parameter_names(
    server: Standalone, client: Client
) -> None:
    project = f"名前-{secrets.token_hex(3)}"
    with Workflow("日次", project=project) as wf:
        Shell("表示", "true")
    wf.submit(client=client)
    for param, reason, field in [
        ("BASH_ENV=$(touch /tmp/x)", "RESERVED_PARAMETER_NAME", "params['BASH_ENV']"),
        ("Ld_Preload=/tmp/x.so", "RESERVED_PARAMETER_NAME", "params['Ld_Preload']"),
        ("日期=2026-11-25", "INVALID_PARAMETER_NAME", "params['日期']"),
    ]:
        refused = cli(server, "--project", project, "run", "日次", "--param", param)
        assert refused.returncode == 2, refused
        assert field in refused.stderr, refused.stderr
        assert ("reserved" if reason.startswith("RESERVED") else "not an identifier") in (
            refused.stderr
        )
    assert list(client.iter_instances(project=project)) == []
