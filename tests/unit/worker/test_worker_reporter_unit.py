"""The events the reporter makes of an attempt's reports (no master: nothing is sent here)."""

from __future__ import annotations

import time
from dataclasses import fields
from datetime import UTC, datetime, timedelta

from dsched.backoff import Backoff
from dsched_server.protocol.event import AttemptReport, TaskEventType
from dsched_worker.outbox import Outbox
from dsched_worker.reporter import Reporter

NOW = datetime(2024, 3, 1, 12, 0, tzinfo=UTC)


async def test_an_event_carries_every_field_of_its_report_and_owns_its_out_params(
    tmp_path, make_execution
) -> None:
    reporter = Reporter(Outbox(tmp_path / "outbox"), clock=lambda: NOW, backoff=Backoff())
    out_params = {"rows": "42"}
    outcome = AttemptReport(
        type=TaskEventType.SUCCEEDED,
        exit_code=0,
        out_params=out_params,
        pid=4321,
        log_path="/data/logs/x.log",
        message="done",
        application_id="application_1700000000000_0001",
    )

    event = await reporter.report(make_execution(), outcome)

    for field in fields(AttemptReport):
        assert getattr(event, field.name) == getattr(outcome, field.name), field.name
    assert (event.task_instance_id, event.attempt, event.event_time) == (11, 2, NOW)
    out_params["rows"] = "0"  # the task type's dict changes later: the event keeps what it said
    assert event.out_params == {"rows": "42"}


async def test_an_event_carries_the_time_of_its_fact_not_of_its_report(
    tmp_path, make_execution
) -> None:
    reporter = Reporter(Outbox(tmp_path / "outbox"), clock=lambda: NOW, backoff=Backoff())
    running = AttemptReport(type=TaskEventType.RUNNING, pid=1)

    two_seconds_ago = await reporter.report(
        make_execution(), running, happened=time.monotonic() - 2.0
    )
    ahead = await reporter.report(make_execution(), running, happened=time.monotonic() + 5.0)

    assert NOW - timedelta(seconds=2.5) < two_seconds_ago.event_time <= NOW - timedelta(seconds=2)
    assert ahead.event_time == NOW  # a fact is never dated after its report
