"""The worker's one seam between ``dsched.v1`` messages and its records.

Input from the wire is checked here: :func:`execution_from_request` either returns a valid
:class:`TaskExecution` or raises :class:`dsched.errors.InvalidArgument` listing every bad field (the
server's error interceptor turns it into INVALID_ARGUMENT with ``BadRequest`` details). Nothing else
in the worker looks inside a ``_pb2`` message.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta

from google.protobuf import duration_pb2, timestamp_pb2
from google.protobuf.message import DecodeError

from dsched.errors import FieldViolation, InvalidArgument
from dsched.names import (
    INVALID_PARAMETER_NAME,
    name_violation,
    param_name_problem,
    param_path,
)
from dsched.options import TimeoutStrategy
from dsched.spec import (
    MAX_DESCRIPTION_LENGTH,
    MAX_PARAM_VALUE_BYTES,
    MAX_SCRIPT_BYTES,
    MAX_TIMEOUT,
    ShellSpec,
    text_violation,
)
from dsched.v1 import (
    enums_pb2,
    log_service_pb2,
    resources_pb2,
    task_event_service_pb2,
    worker_service_pb2,
)
from dsched.worker.execution import (
    Ack,
    AckDecision,
    AttemptKey,
    Dispatch,
    DispatchOutcome,
    TaskEvent,
    TaskEventType,
    TaskExecution,
)

MAX_LOG_READ = 1024 * 1024  # ReadTaskLog's default and largest length
# Resolved parameters are global + local + upstream OUT values, so there may be more of them than a
# definition may declare; this only bounds the work a hostile request can cause.
MAX_RESOLVED_PARAMS = 4096
MAX_KEY_LENGTH = 256
MAX_DISPATCH_BATCH = 1000  # tasks per DispatchTasks call (bounds one request's work)
# Addresses are dialled and written into outbox file headers: no whitespace or control characters.
ADDRESS_RE = re.compile(r"[A-Za-z0-9._:\[\]%/-]{1,255}\Z")


def _positive(path: str, value: int, out: list[FieldViolation]) -> None:
    if value <= 0:
        out.append(FieldViolation(path, "must be positive"))


def _not_negative(path: str, value: int, out: list[FieldViolation]) -> None:
    if value < 0:
        out.append(FieldViolation(path, "must not be negative"))


def address_violation(path: str, value: str) -> FieldViolation | None:
    """Checks a ``host:port`` style address a worker may dial."""
    if not value:
        return FieldViolation(path, "must not be empty")
    if not ADDRESS_RE.match(value):
        return FieldViolation(path, "must be an address such as host:port")
    return None


def _params(path: str, params: Mapping[str, str], out: list[FieldViolation]) -> None:
    """Names outside the grammar are refused; reserved names are accepted here and left out of
    the task's environment with a note in its log (:mod:`dsched.worker.tasks.environment`), so
    that a definition stored before a name became reserved still runs."""
    if len(params) > MAX_RESOLVED_PARAMS:
        out.append(FieldViolation(path, f"more than {MAX_RESOLVED_PARAMS} parameters"))
        return
    for key, value in params.items():
        where = param_path(path, key)
        problem = param_name_problem(key)
        if problem is not None and problem[0] == INVALID_PARAMETER_NAME:
            out.append(FieldViolation(where, problem[1], problem[0]))
        if len(value.encode()) > MAX_PARAM_VALUE_BYTES:
            out.append(FieldViolation(where, "value is larger than 64 KiB"))
        elif "\x00" in value:
            out.append(FieldViolation(where, "value contains a NUL character"))


def _timeout(
    msg: worker_service_pb2.TaskExecution, path: str, out: list[FieldViolation]
) -> timedelta:
    if msg.timeout.seconds < 0 or msg.timeout.nanos < 0:
        out.append(FieldViolation(f"{path}.timeout", "must not be negative"))
        return timedelta(0)
    value = msg.timeout.ToTimedelta()
    if value > MAX_TIMEOUT:
        out.append(FieldViolation(f"{path}.timeout", f"must be at most {MAX_TIMEOUT}"))
    return value


def _timeout_strategy(value: int, path: str, out: list[FieldViolation]) -> TimeoutStrategy:
    if value == enums_pb2.TIMEOUT_STRATEGY_UNSPECIFIED:
        return TimeoutStrategy.FAIL  # the proto's documented default
    try:
        return TimeoutStrategy(
            enums_pb2.TimeoutStrategy.Name(value).removeprefix("TIMEOUT_STRATEGY_")
        )
    except ValueError:
        out.append(FieldViolation(f"{path}.timeout_strategy", f"unknown value {value}"))
        return TimeoutStrategy.FAIL


def _shell(
    msg: worker_service_pb2.TaskExecution, path: str, out: list[FieldViolation]
) -> ShellSpec | None:
    if msg.WhichOneof("kind") != "shell":
        out.append(FieldViolation(f"{path}.kind", "a task type (e.g. shell) is required"))
        return None
    script = msg.shell.script
    if len(script.encode()) > MAX_SCRIPT_BYTES:
        out.append(FieldViolation(f"{path}.shell.script", "is larger than 256 KiB"))
    elif "\x00" in script:
        out.append(FieldViolation(f"{path}.shell.script", "contains a NUL character"))
    return ShellSpec(script=script)


def execution_from_request(
    msg: worker_service_pb2.DispatchTaskRequest, *, now: datetime
) -> TaskExecution:
    """Validates a dispatch request and returns its attempt. ``now`` stands in for a missing
    ``submit_time`` (it only picks the log's date folder)."""
    if not msg.HasField("task"):
        raise InvalidArgument(
            "dispatch request has no task", violations=[FieldViolation("task", "is required")]
        )
    out: list[FieldViolation] = []
    execution = execution_from_proto(msg.task, "task", out, now=now)
    if out or execution is None:
        raise InvalidArgument("invalid task execution", violations=out)
    return execution


def executions_from_request(
    msg: worker_service_pb2.DispatchTasksRequest, *, now: datetime
) -> list[TaskExecution]:
    """Validates a batch dispatch: every task must be valid, or none is accepted."""
    out: list[FieldViolation] = []
    if not 1 <= len(msg.tasks) <= MAX_DISPATCH_BATCH:
        out.append(FieldViolation("tasks", f"must hold 1 to {MAX_DISPATCH_BATCH} tasks"))
        raise InvalidArgument("invalid batch dispatch", violations=out)
    found = [execution_from_proto(t, f"tasks[{i}]", out, now=now) for i, t in enumerate(msg.tasks)]
    executions = [e for e in found if e is not None]
    if out or len(executions) != len(found):
        raise InvalidArgument("invalid batch dispatch", violations=out)
    return executions


def execution_from_proto(
    task: worker_service_pb2.TaskExecution,
    path: str,
    out: list[FieldViolation],
    *,
    now: datetime,
) -> TaskExecution | None:
    """Decodes one attempt, appending problems (field paths under ``path``) to ``out``."""
    before = len(out)
    _positive(f"{path}.task_instance_id", task.task_instance_id, out)
    _positive(f"{path}.attempt", task.attempt, out)
    _positive(f"{path}.workflow_instance_id", task.workflow_instance_id, out)
    _not_negative(f"{path}.workflow_code", task.workflow_code, out)
    _not_negative(f"{path}.workflow_version", task.workflow_version, out)
    _not_negative(f"{path}.owner_epoch", task.owner_epoch, out)
    found = [
        name_violation(f"{path}.task_name", task.task_name, "task name"),
        address_violation(f"{path}.owner_address", task.owner_address),
    ]
    out.extend(v for v in found if v is not None)
    key = task.idempotency_key or f"{task.workflow_instance_id}-{task.task_name}-{task.attempt}"
    if len(key) > MAX_KEY_LENGTH or not key.isprintable():
        out.append(
            FieldViolation(f"{path}.idempotency_key", "must be printable, at most 256 chars")
        )
    _params(f"{path}.params", task.params, out)
    timeout = _timeout(task, path, out)
    strategy = _timeout_strategy(task.timeout_strategy, path, out)
    kind = _shell(task, path, out)
    if len(out) > before or kind is None:
        return None
    submit = task.submit_time.ToDatetime(tzinfo=UTC) if task.HasField("submit_time") else now
    return TaskExecution(
        task_instance_id=task.task_instance_id,
        attempt=task.attempt,
        workflow_instance_id=task.workflow_instance_id,
        workflow_code=task.workflow_code,
        workflow_version=task.workflow_version,
        task_name=task.task_name,
        idempotency_key=key,
        kind=kind,
        owner_address=task.owner_address,
        owner_epoch=task.owner_epoch,
        submit_time=submit,
        params=dict(task.params),
        timeout=timeout,
        timeout_strategy=strategy,
        dry_run=task.dry_run,
    )


def execution_to_proto(execution: TaskExecution) -> worker_service_pb2.TaskExecution:
    """The wire form of an attempt (masters and tests build dispatch requests with it)."""
    msg = worker_service_pb2.TaskExecution(
        task_instance_id=execution.task_instance_id,
        attempt=execution.attempt,
        workflow_instance_id=execution.workflow_instance_id,
        workflow_code=execution.workflow_code,
        workflow_version=execution.workflow_version,
        task_name=execution.task_name,
        idempotency_key=execution.idempotency_key,
        params=dict(execution.params),
        timeout_strategy=f"TIMEOUT_STRATEGY_{execution.timeout_strategy.value}",
        dry_run=execution.dry_run,
        owner_address=execution.owner_address,
        owner_epoch=execution.owner_epoch,
        shell=resources_pb2.ShellTask(script=execution.kind.script),
    )
    msg.timeout.CopyFrom(_duration(execution.timeout))
    msg.submit_time.CopyFrom(_timestamp(execution.submit_time))
    return msg


def _attempt_key(task_instance_id: int, attempt: int, out: list[FieldViolation]) -> AttemptKey:
    _positive("task_instance_id", task_instance_id, out)
    _positive("attempt", attempt, out)
    return AttemptKey(task_instance_id, attempt)


def kill_from_request(msg: worker_service_pb2.KillTaskRequest) -> tuple[AttemptKey, str]:
    """Validates a KillTask request; returns the attempt and the reason."""
    out: list[FieldViolation] = []
    key = _attempt_key(msg.task_instance_id, msg.attempt, out)
    found = text_violation("reason", msg.reason, MAX_DESCRIPTION_LENGTH)
    if found is not None:
        out.append(found)
    if out:
        raise InvalidArgument("invalid kill request", violations=out)
    return key, msg.reason


def take_over_from_request(
    msg: worker_service_pb2.TakeOverTaskRequest,
) -> tuple[AttemptKey, str, int]:
    """Validates a TakeOverTask request; returns the attempt, the new owner and its epoch."""
    out: list[FieldViolation] = []
    key = _attempt_key(msg.task_instance_id, msg.attempt, out)
    found = address_violation("owner_address", msg.owner_address)
    if found is not None:
        out.append(found)
    _not_negative("owner_epoch", msg.owner_epoch, out)
    if out:
        raise InvalidArgument("invalid take-over request", violations=out)
    return key, msg.owner_address, msg.owner_epoch


def log_read_from_request(
    msg: log_service_pb2.ReadTaskLogRequest | log_service_pb2.TailTaskLogRequest,
) -> tuple[int, int, int]:
    """Validates a log request; returns (task instance id, offset, length). A length of 0 (and the
    tail request, which has none) means :data:`MAX_LOG_READ`; larger lengths are capped to it."""
    out: list[FieldViolation] = []
    _positive("task_instance_id", msg.task_instance_id, out)
    _not_negative("offset", msg.offset, out)
    length = msg.length if isinstance(msg, log_service_pb2.ReadTaskLogRequest) else 0
    _not_negative("length", length, out)
    if out:
        raise InvalidArgument("invalid log request", violations=out)
    return msg.task_instance_id, msg.offset, min(length or MAX_LOG_READ, MAX_LOG_READ)


def read_log_response(
    data: bytes, *, offset: int, size: int, end_of_log: bool
) -> log_service_pb2.ReadTaskLogResponse:
    return log_service_pb2.ReadTaskLogResponse(
        data=data, offset=offset, next_offset=offset + len(data), size=size, end_of_log=end_of_log
    )


def tail_frame(
    data: bytes, *, offset: int, end_of_log: bool = False
) -> log_service_pb2.TailTaskLogResponse:
    return log_service_pb2.TailTaskLogResponse(
        data=data, offset=offset, next_offset=offset + len(data), end_of_log=end_of_log
    )


def dispatch_to_proto(
    dispatch: Dispatch, worker_epoch: int
) -> worker_service_pb2.DispatchTaskResponse:
    return worker_service_pb2.DispatchTaskResponse(
        outcome=f"DISPATCH_OUTCOME_{dispatch.outcome.value}",
        worker_epoch=worker_epoch,
        log_path=dispatch.log_path,
        reason=dispatch.reason,
    )


def dispatch_result_to_proto(
    execution: TaskExecution, dispatch: Dispatch
) -> worker_service_pb2.DispatchResult:
    return worker_service_pb2.DispatchResult(
        task_instance_id=execution.task_instance_id,
        attempt=execution.attempt,
        outcome=f"DISPATCH_OUTCOME_{dispatch.outcome.value}",
        log_path=dispatch.log_path,
        reason=dispatch.reason,
    )


def dispatch_outcome_from_proto(value: int) -> DispatchOutcome:
    return DispatchOutcome(enums_pb2.DispatchOutcome.Name(value).removeprefix("DISPATCH_OUTCOME_"))


def event_to_proto(event: TaskEvent) -> task_event_service_pb2.TaskEvent:
    msg = task_event_service_pb2.TaskEvent(
        event_id=event.event_id,
        task_instance_id=event.task_instance_id,
        attempt=event.attempt,
        workflow_instance_id=event.workflow_instance_id,
        type=f"TASK_EVENT_TYPE_{event.type.value}",
        exit_code=event.exit_code,
        out_params=dict(event.out_params),
        pid=event.pid,
        log_path=event.log_path,
        message=event.message,
    )
    msg.event_time.CopyFrom(_timestamp(event.event_time))
    return msg


def event_from_proto(msg: task_event_service_pb2.TaskEvent) -> TaskEvent:
    """Raises ValueError for an event type this worker never writes (a corrupt outbox file)."""
    name = enums_pb2.TaskEventType.Name(msg.type).removeprefix("TASK_EVENT_TYPE_")
    return TaskEvent(
        event_id=msg.event_id,
        task_instance_id=msg.task_instance_id,
        attempt=msg.attempt,
        workflow_instance_id=msg.workflow_instance_id,
        type=TaskEventType(name),
        event_time=msg.event_time.ToDatetime(tzinfo=UTC),
        exit_code=msg.exit_code,
        out_params=dict(msg.out_params),
        pid=msg.pid,
        log_path=msg.log_path,
        message=msg.message,
    )


def event_to_bytes(event: TaskEvent) -> bytes:
    return event_to_proto(event).SerializeToString(deterministic=True)


def event_from_bytes(data: bytes) -> TaskEvent:
    """Raises ValueError for bytes that are not a TaskEvent this worker could have written."""
    try:
        msg = task_event_service_pb2.TaskEvent.FromString(data)
    except DecodeError as exc:  # not a ValueError in every protobuf implementation
        raise ValueError(f"not a TaskEvent: {exc}") from exc
    return event_from_proto(msg)


def report_request(
    worker_address: str, worker_epoch: int, events: Sequence[TaskEvent]
) -> task_event_service_pb2.ReportTaskEventsRequest:
    return task_event_service_pb2.ReportTaskEventsRequest(
        worker_address=worker_address,
        worker_epoch=worker_epoch,
        events=[event_to_proto(e) for e in events],
    )


def acks_from_proto(msg: task_event_service_pb2.ReportTaskEventsResponse) -> list[Ack]:
    """Unknown decision values (a newer master) become UNSPECIFIED, which the reporter retries."""
    out = []
    for ack in msg.acks:
        try:
            name = enums_pb2.TaskEventDecision.Name(ack.decision)
            decision = AckDecision(name.removeprefix("TASK_EVENT_DECISION_"))
        except ValueError:
            decision = AckDecision.UNSPECIFIED
        out.append(
            Ack(
                event_id=ack.event_id,
                decision=decision,
                owner_address=ack.owner_address,
                reason=ack.reason,
            )
        )
    return out


def acks_to_proto(acks: Iterable[Ack]) -> task_event_service_pb2.ReportTaskEventsResponse:
    """The master's side of :func:`acks_from_proto` (used by masters and test fakes)."""
    return task_event_service_pb2.ReportTaskEventsResponse(
        acks=[
            task_event_service_pb2.TaskEventAck(
                event_id=a.event_id,
                decision=f"TASK_EVENT_DECISION_{a.decision.value}",
                owner_address=a.owner_address,
                reason=a.reason,
            )
            for a in acks
        ]
    )


def _timestamp(value: datetime) -> timestamp_pb2.Timestamp:
    ts = timestamp_pb2.Timestamp()
    ts.FromDatetime(value.astimezone(UTC))
    return ts


def _duration(value: timedelta) -> duration_pb2.Duration:
    d = duration_pb2.Duration()
    d.FromTimedelta(value)
    return d
