"""Conversions between engine records and worker-facing protos (the engine's only pb2 seam)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import UTC

from google.protobuf import duration_pb2, timestamp_pb2

from dsched.names import param_name_problem
from dsched.options import TimeoutStrategy
from dsched.server.engine.jobs import DispatchSpec
from dsched.server.engine.messages import Ack, Decision, EventType, TaskEventData
from dsched.spec import MAX_PARAM_VALUE_BYTES, ShellSpec
from dsched.v1 import enums_pb2, resources_pb2, task_event_service_pb2, worker_service_pb2

log = logging.getLogger(__name__)

_STRATEGY = {
    TimeoutStrategy.WARN: enums_pb2.TIMEOUT_STRATEGY_WARN,
    TimeoutStrategy.FAIL: enums_pb2.TIMEOUT_STRATEGY_FAIL,
    TimeoutStrategy.WARN_FAIL: enums_pb2.TIMEOUT_STRATEGY_WARN_FAIL,
}
_EVENT_TYPES = {
    enums_pb2.TASK_EVENT_TYPE_RUNNING: EventType.RUNNING,
    enums_pb2.TASK_EVENT_TYPE_SUCCEEDED: EventType.SUCCEEDED,
    enums_pb2.TASK_EVENT_TYPE_FAILED: EventType.FAILED,
    enums_pb2.TASK_EVENT_TYPE_KILLED: EventType.KILLED,
}
_DECISIONS = {
    Decision.ACCEPTED: enums_pb2.TASK_EVENT_DECISION_ACCEPTED,
    Decision.DUPLICATE: enums_pb2.TASK_EVENT_DECISION_DUPLICATE,
    Decision.REJECTED_STALE: enums_pb2.TASK_EVENT_DECISION_REJECTED_STALE,
    Decision.NOT_OWNER: enums_pb2.TASK_EVENT_DECISION_NOT_OWNER,
    Decision.RETRY_LATER: enums_pb2.TASK_EVENT_DECISION_RETRY_LATER,
}


def task_execution(spec: DispatchSpec) -> worker_service_pb2.TaskExecution:
    timeout = duration_pb2.Duration()
    timeout.FromTimedelta(spec.timeout)
    submit = timestamp_pb2.Timestamp()
    submit.FromDatetime(spec.submit_time)
    msg = worker_service_pb2.TaskExecution(
        task_instance_id=spec.task_instance_id,
        attempt=spec.attempt,
        workflow_instance_id=spec.workflow_instance_id,
        workflow_code=spec.workflow_code,
        workflow_version=spec.workflow_version,
        task_name=spec.task_name,
        idempotency_key=spec.idempotency_key,
        params=dict(spec.params),
        timeout=timeout,
        timeout_strategy=_STRATEGY[spec.timeout_strategy],
        dry_run=spec.dry_run,
        owner_address=spec.owner_address,
        owner_epoch=spec.owner_epoch,
        submit_time=submit,
    )
    if isinstance(spec.kind, ShellSpec):
        msg.shell.CopyFrom(resources_pb2.ShellTask(script=spec.kind.script))
    return msg


def event_from_proto(msg: task_event_service_pb2.TaskEvent) -> TaskEventData | None:
    """The event as a record, or None if its type is not one the master knows."""
    kind = _EVENT_TYPES.get(msg.type)
    if kind is None:
        return None
    return TaskEventData(
        event_id=msg.event_id,
        task_instance_id=msg.task_instance_id,
        attempt=msg.attempt,
        workflow_instance_id=msg.workflow_instance_id,
        type=kind,
        event_time=msg.event_time.ToDatetime(tzinfo=UTC),
        exit_code=msg.exit_code,
        out_params=_out_params(msg.task_instance_id, msg.out_params),
        pid=msg.pid,
        log_path=msg.log_path,
        message=msg.message,
    )


def _out_params(task_instance_id: int, params: Mapping[str, str]) -> dict[str, str]:
    """A task's OUT parameters without those no task may receive: a name :mod:`dsched.names`
    refuses, a NUL or an over-long value. A worker drops them before it reports; an older or a
    forged one might not, and they would reach the next task's environment and the var pool."""
    kept: dict[str, str] = {}
    for name, value in params.items():
        if (
            param_name_problem(name) is None
            and "\x00" not in value
            and len(value.encode()) <= MAX_PARAM_VALUE_BYTES
        ):
            kept[name] = value
        else:
            log.warning(
                "task instance %d reported an OUT parameter no task may receive; dropped: %r",
                task_instance_id,
                name[:128],
            )
    return kept


def ack_to_proto(event_id: str, ack: Ack) -> task_event_service_pb2.TaskEventAck:
    return task_event_service_pb2.TaskEventAck(
        event_id=event_id,
        decision=_DECISIONS[ack.decision],
        owner_address=ack.owner_address,
        reason=ack.reason,
    )
