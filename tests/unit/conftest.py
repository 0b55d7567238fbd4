"""Fixtures for unit tests: attempts and events as plain protocol values."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from dsched.spec import ShellSpec
from dsched_server.protocol.event import TaskEvent, TaskEventType
from dsched_server.protocol.execution import TaskExecution

T0 = datetime(2024, 2, 29, 23, 59, 59, tzinfo=UTC)


@pytest.fixture
def make_execution() -> Callable[..., TaskExecution]:
    def make(**overrides: Any) -> TaskExecution:
        base = TaskExecution(
            task_instance_id=11,
            attempt=2,
            workflow_instance_id=5,
            workflow_code=9001,
            workflow_version=4,
            task_name="load",
            idempotency_key="5-load-2",
            kind=ShellSpec(script="echo hi"),
            owner_address="127.0.0.1:5678",
            owner_epoch=3,
            submit_time=T0,
        )
        return replace(base, **overrides)

    return make


@pytest.fixture
def make_event() -> Callable[..., TaskEvent]:
    def make(event_id: str, **overrides: Any) -> TaskEvent:
        base = TaskEvent(
            event_id=event_id,
            task_instance_id=11,
            attempt=2,
            workflow_instance_id=5,
            type=TaskEventType.RUNNING,
            event_time=T0,
            pid=4321,
            log_path="/data/logs/x.log",
        )
        return replace(base, **overrides)

    return make
