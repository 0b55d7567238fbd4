""":class:`TaskExecution` and the dispatch requests that carry it."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from dsched import convert_kinds
from dsched.convert import spark_from_proto, spark_to_proto
from dsched.errors import FieldViolation, InvalidArgument
from dsched.http_spec import HttpSpec, http_violations
from dsched.names import name_violation
from dsched.options import TimeoutStrategy
from dsched.python_spec import PythonSpec, python_violations
from dsched.spark import SparkSpec, application_ids_violations, spark_violations
from dsched.spec import MAX_SCRIPT_BYTES, MAX_TIMEOUT, ShellSpec
from dsched.v1 import enums_pb2, worker_service_pb2
from dsched_server.protocol.execution import TaskExecution, WorkerKind
from dsched_server.protocol.wire import checks
from dsched_server.protocol.wire.datasource import datasource_from, put_sql_kind, sql_kind_from

MAX_KEY_LENGTH = 256
MAX_DISPATCH_BATCH = 1000  # tasks per DispatchTasks call (bounds one request's work)
# The fields that mean the same, under the same name and type, in the value and the message.
_IDS = ("task_instance_id", "attempt", "workflow_instance_id", "workflow_code")
_SAME = (
    *_IDS,
    "workflow_version",
    "task_name",
    "owner_address",
    "owner_epoch",
    "dry_run",
    "queue_rank",
)
MAX_QUEUE_RANK = 1000


def execution_to_proto(execution: TaskExecution) -> worker_service_pb2.TaskExecution:
    msg = worker_service_pb2.TaskExecution(
        **checks.same_named(execution, _SAME),
        idempotency_key=execution.idempotency_key,
        params=dict(execution.params),
        timeout=checks.to_duration(execution.timeout),
        timeout_strategy=f"TIMEOUT_STRATEGY_{execution.timeout_strategy.value}",
        submit_time=checks.to_timestamp(execution.submit_time),
        earlier_application_ids=list(execution.earlier_application_ids),
    )
    if isinstance(execution.kind, ShellSpec):
        msg.shell.script = execution.kind.script
    elif isinstance(execution.kind, SparkSpec):
        msg.spark.CopyFrom(spark_to_proto(execution.kind))
    elif not put_sql_kind(msg, execution):
        convert_kinds.kind_into(msg, execution.kind)
    return msg


def dispatch_request(
    executions: Sequence[TaskExecution],
) -> worker_service_pb2.DispatchTasksRequest:
    return worker_service_pb2.DispatchTasksRequest(
        tasks=[execution_to_proto(e) for e in executions]
    )


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
    checks.positive(f"{path}.task_instance_id", task.task_instance_id, out)
    checks.positive(f"{path}.attempt", task.attempt, out)
    checks.positive(f"{path}.workflow_instance_id", task.workflow_instance_id, out)
    checks.not_negative(f"{path}.workflow_code", task.workflow_code, out)
    checks.not_negative(f"{path}.workflow_version", task.workflow_version, out)
    checks.not_negative(f"{path}.owner_epoch", task.owner_epoch, out)
    if not 0 <= task.queue_rank <= MAX_QUEUE_RANK:
        out.append(FieldViolation(f"{path}.queue_rank", f"must be 0 to {MAX_QUEUE_RANK}"))
    found = name_violation(f"{path}.task_name", task.task_name, "task name")
    if found is not None:
        out.append(found)
    checks.address(f"{path}.owner_address", task.owner_address, out)
    key = task.idempotency_key or f"{task.workflow_instance_id}-{task.task_name}-{task.attempt}"
    if len(key) > MAX_KEY_LENGTH or not key.isprintable():
        out.append(
            FieldViolation(f"{path}.idempotency_key", "must be printable, at most 256 chars")
        )
    checks.params(f"{path}.params", task.params, out)
    timeout = checks.duration(f"{path}.timeout", task.timeout, MAX_TIMEOUT, out)
    strategy = _timeout_strategy(task.timeout_strategy, path, out)
    kind = _kind(task, path, out)
    datasource = datasource_from(task, kind, path, out)
    if task.earlier_application_ids:  # empty in nearly every dispatch: nothing to check
        out.extend(
            application_ids_violations(
                f"{path}.earlier_application_ids", task.earlier_application_ids
            )
        )
    submit = (
        checks.timestamp(f"{path}.submit_time", task.submit_time, out)
        if task.HasField("submit_time")
        else now
    )
    if len(out) > before or kind is None:
        return None
    return TaskExecution(
        **checks.same_named(task, _SAME),
        idempotency_key=key,
        kind=kind,
        datasource=datasource,
        submit_time=submit,
        params=dict(task.params),
        timeout=timeout,
        timeout_strategy=strategy,
        earlier_application_ids=tuple(task.earlier_application_ids),
    )


def _timeout_strategy(value: int, path: str, out: list[FieldViolation]) -> TimeoutStrategy:
    if value == enums_pb2.TIMEOUT_STRATEGY_UNSPECIFIED:
        return TimeoutStrategy.FAIL  # the proto's documented default
    found = checks.enum_member(
        TimeoutStrategy, enums_pb2.TimeoutStrategy, "TIMEOUT_STRATEGY_", value
    )
    if found is None:
        out.append(FieldViolation(f"{path}.timeout_strategy", f"unknown value {value}"))
        return TimeoutStrategy.FAIL
    return found


def _kind(
    msg: worker_service_pb2.TaskExecution, path: str, out: list[FieldViolation]
) -> WorkerKind | None:
    which = msg.WhichOneof("kind")
    if which == "shell":
        script = msg.shell.script
        if len(script.encode()) > MAX_SCRIPT_BYTES:
            out.append(FieldViolation(f"{path}.shell.script", "is larger than 256 KiB"))
        elif "\x00" in script:
            out.append(FieldViolation(f"{path}.shell.script", "contains a NUL character"))
        return ShellSpec(script=script)
    if which == "spark":
        spark = spark_from_proto(msg.spark, f"{path}.spark", out)
        out.extend(spark_violations(f"{path}.spark", spark))
        return spark
    sql = sql_kind_from(msg, which, path, out)
    if sql is not None:
        return sql
    kind = convert_kinds.kind_from(msg, which, path, out)
    if isinstance(kind, PythonSpec):
        out.extend(python_violations(f"{path}.python", kind))
    elif isinstance(kind, HttpSpec):
        out.extend(http_violations(f"{path}.http", kind))
    else:
        out.append(FieldViolation(f"{path}.kind", "a task type (e.g. shell) is required"))
    return kind
