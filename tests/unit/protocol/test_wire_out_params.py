"""The event decoder keeps OUT parameters no task may receive out of the var pool."""

from __future__ import annotations

import logging

import pytest

from dsched.v1 import enums_pb2, task_event_service_pb2
from dsched_server.protocol.wire.event import event_from_proto


def test_refused_out_parameters_from_an_older_or_forged_worker_are_dropped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    msg = task_event_service_pb2.TaskEvent(
        event_id="e1",
        task_instance_id=7,
        attempt=1,
        workflow_instance_id=3,
        type=enums_pb2.TASK_EVENT_TYPE_SUCCEEDED,
        out_params={
            "rows": "42",
            "BASH_ENV": "$(touch /tmp/pwned)",
            "ld_preload": "/tmp/x.so",
            "not-a-name": "1",
            "nul": "a\x00b",
            "big": "v" * (64 * 1024 + 1),
        },
    )
    with caplog.at_level(logging.WARNING, logger="dsched_server.protocol.wire.checks"):
        event = event_from_proto(msg)
    assert dict(event.out_params) == {"rows": "42"}
    assert len(caplog.records) == 5
    assert all("task instance 7" in r.getMessage() for r in caplog.records)
