"""Schedules end to end on a real standalone: a workflow file's ``schedule=`` created and put online
by submit, runs fired every 2 seconds with their fire time as schedule time (and time parameters
counting from it), ``dsched schedules``, ``dsched schedule preview|off``."""

from __future__ import annotations

import time
from datetime import UTC
from zoneinfo import ZoneInfo

from dsched import Client, Schedule, Shell, Workflow, WorkflowInstance, WorkflowState
from dsched.options import RunTrigger
from tests.e2e.conftest import Standalone, cli, parse_table, wait_done


def test_a_workflow_schedule_fires_every_2_seconds(
    server: Standalone, client: Client, project: str
) -> None:
    with Workflow(
        "tick",
        project=project,
        params={"AT": "$[yyyyMMddHHmmss]"},
        schedule=Schedule("*/2 * * * * *", tz="Europe/Berlin"),
    ) as wf:
        Shell("t", 'echo "at $AT"; echo "\\${setValue(at=$AT)}"')
    wf.submit(client)
    (info,) = client.list_schedules(project=project)
    assert info.online and info.next_fire_time is not None

    deadline = time.monotonic() + 30
    runs: list[WorkflowInstance] = []
    while len(runs) < 3 and time.monotonic() < deadline:
        runs = [
            i for i in client.iter_instances(project=project) if i.trigger is RunTrigger.SCHEDULE
        ]
        time.sleep(0.2)  # a test waiting for fire times to pass
    assert len(runs) >= 3
    listed = parse_table(cli(server, "--project", project, "schedules").stdout)
    assert [(r["ID"], r["STATE"]) for r in listed] == [(str(info.id), "on")]
    off = cli(server, "schedule", "off", str(info.id))
    assert off.returncode == 0 and " off " in off.stdout

    times = [r.schedule_time for r in runs if r.schedule_time is not None]
    assert len(set(times)) == len(times) and all(t.second % 2 == 0 for t in times)
    done = wait_done(client, runs[-1].id)
    assert done.state is WorkflowState.SUCCEEDED
    assert done.time_zone == "Europe/Berlin"
    assert done.schedule_time is not None
    local = done.schedule_time.astimezone(ZoneInfo("Europe/Berlin"))
    assert done.var_pool["at"] == local.strftime("%Y%m%d%H%M%S")  # counted from the fire time

    preview = cli(server, "schedule", "preview", str(info.id), "--count", "5")
    assert preview.returncode == 0 and len(preview.stdout.splitlines()) == 5
    assert runs[0].schedule_time is not None and runs[0].schedule_time.tzinfo is UTC
