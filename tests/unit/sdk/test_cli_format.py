"""How the CLI shows what started a run and the schedule time it counts from."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

from dsched.cli import format as fmt
from dsched.options import RunTrigger
from dsched.results import WorkflowInstance
from dsched.states import WorkflowState

FIRE = datetime(2026, 10, 25, 0, 30, tzinfo=UTC)  # the first 02:30 of Berlin's fall-back night


BASE = WorkflowInstance(
    id=7,
    project="p",
    workflow="nightly",
    workflow_code=1,
    workflow_version=1,
    state=WorkflowState.RUNNING,
)


def instance(**fields: Any) -> WorkflowInstance:
    return dataclasses.replace(BASE, **fields)


def test_a_scheduled_run_shows_its_schedule_and_fire_time_in_its_zone() -> None:
    run = instance(
        schedule_time=FIRE,
        time_zone="Europe/Berlin",
        trigger=RunTrigger.SCHEDULE,
        schedule_id=3,
    )
    header = fmt.instance_header(run)
    assert "trigger:   SCHEDULE (schedule 3)\n" in header
    assert "scheduled: 2026-10-25 02:30:00 Europe/Berlin\n" in header
    row = fmt.instance_rows([run]).splitlines()[1]
    assert "SCHEDULE" in row


def test_backfill_manual_and_unknown_zone() -> None:
    backfill = instance(schedule_time=FIRE, trigger=RunTrigger.BACKFILL, backfill_id=9)
    assert fmt.trigger(backfill) == "BACKFILL (backfill 9)"
    assert fmt.trigger(instance()) == "MANUAL"
    assert fmt.zoned(None, "UTC") == "-"
    # A zone the client's tz database lacks: shown in UTC, said so, not an error.
    assert fmt.zoned(FIRE, "Mars/Olympus_Mons") == "2026-10-25 00:30:00 UTC"
