"""JSON shapes of the store's document columns (task specs, run options, scopes).

Durations are stored as integer milliseconds and enums by their permanent value names.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict
from datetime import timedelta
from typing import Any

from dsched.dependency import (
    Cycle,
    DependencyFailure,
    DependencyGroup,
    DependencyItem,
    DependentSpec,
    Relation,
)
from dsched.http_spec import HttpSpec, http_from_json, http_to_json
from dsched.options import FailureStrategy, Priority, TaskDependType, TimeoutStrategy
from dsched.python_spec import PythonSpec
from dsched.spark import DeployMode, SparkProgram, SparkSpec
from dsched.spec import ShellSpec, TaskKind, TaskSpec
from dsched.sql import (
    ParamDirection,
    ParamType,
    ProcedureParamSpec,
    ProcedureSpec,
    SqlSpec,
    SqlType,
)
from dsched_server.core.records import RunOptions, RunScope


def _ms(value: timedelta) -> int:
    return int(value / timedelta(milliseconds=1))


def task_type(spec: TaskSpec) -> str:
    if isinstance(spec.kind, ShellSpec):
        return "SHELL"
    if isinstance(spec.kind, DependentSpec):
        return "DEPENDENT"
    if isinstance(spec.kind, SparkSpec):
        return "SPARK"
    if isinstance(spec.kind, PythonSpec):
        return "PYTHON"
    if isinstance(spec.kind, HttpSpec):
        return "HTTP"
    if isinstance(spec.kind, SqlSpec):
        return "SQL"
    if isinstance(spec.kind, ProcedureSpec):
        return "PROCEDURE"
    raise ValueError(f"unsupported task kind {spec.kind!r}")


def task_to_json(spec: TaskSpec) -> dict[str, Any]:
    """Everything of a task but its name and upstream edges (those have their own columns)."""
    kind: dict[str, Any] = {}
    if isinstance(spec.kind, ShellSpec):
        kind = {"script": spec.kind.script}
    elif isinstance(spec.kind, DependentSpec):
        kind = _dependent_to_json(spec.kind)
    elif isinstance(spec.kind, SparkSpec):
        kind = _spark_to_json(spec.kind)
    elif isinstance(spec.kind, PythonSpec):
        kind = {"script": spec.kind.script, "interpreter": spec.kind.interpreter}
    elif isinstance(spec.kind, HttpSpec):
        kind = http_to_json(spec.kind)
    elif isinstance(spec.kind, SqlSpec | ProcedureSpec):
        kind = asdict(spec.kind)  # enums are StrEnums: their values in JSON
    return {
        "kind": kind,
        "description": spec.description,
        "priority": spec.priority.value,
        "worker_group": spec.worker_group,
        "retries": spec.retries,
        "retry_interval_ms": _ms(spec.retry_interval),
        "timeout_ms": _ms(spec.timeout),
        "timeout_strategy": spec.timeout_strategy.value,
        "delay_ms": _ms(spec.delay),
        "params": dict(spec.params),
        "disabled": spec.disabled,
    }


def task_from_json(
    name: str, task_type_name: str, doc: Mapping[str, Any], upstream: tuple[str, ...]
) -> TaskSpec:
    kind: TaskKind | None = None
    if task_type_name == "SHELL":
        kind = ShellSpec(script=doc["kind"]["script"])
    elif task_type_name == "DEPENDENT":
        kind = _dependent_from_json(doc["kind"])
    elif task_type_name == "SPARK":
        kind = _spark_from_json(doc["kind"])
    elif task_type_name == "PYTHON":
        kind = PythonSpec(
            script=doc["kind"]["script"], interpreter=doc["kind"].get("interpreter", "")
        )
    elif task_type_name == "HTTP":
        kind = http_from_json(doc["kind"])
    elif task_type_name == "SQL":
        kind = _sql_from_json(doc["kind"])
    elif task_type_name == "PROCEDURE":
        kind = _procedure_from_json(doc["kind"])
    return TaskSpec(
        name=name,
        kind=kind,
        description=doc.get("description", ""),
        upstream=upstream,
        priority=Priority(doc.get("priority", Priority.MEDIUM.value)),
        worker_group=doc.get("worker_group", ""),
        retries=int(doc.get("retries", 0)),
        retry_interval=timedelta(milliseconds=doc.get("retry_interval_ms", 0)),
        timeout=timedelta(milliseconds=doc.get("timeout_ms", 0)),
        timeout_strategy=TimeoutStrategy(doc.get("timeout_strategy", TimeoutStrategy.FAIL.value)),
        delay=timedelta(milliseconds=doc.get("delay_ms", 0)),
        params=dict(doc.get("params", {})),
        disabled=bool(doc.get("disabled", False)),
    )


def _sql_from_json(doc: Mapping[str, Any]) -> SqlSpec:
    return SqlSpec(
        datasource=doc["datasource"],
        sql=doc["sql"],
        type=SqlType(doc["type"]),
        pre_statements=tuple(doc["pre_statements"]),
        post_statements=tuple(doc["post_statements"]),
        allow_multiple_statements=bool(doc["allow_multiple_statements"]),
        row_limit=int(doc["row_limit"]),
        out_params=dict(doc["out_params"]),
        rows_param=doc["rows_param"],
    )


def _procedure_from_json(doc: Mapping[str, Any]) -> ProcedureSpec:
    return ProcedureSpec(
        datasource=doc["datasource"],
        procedure=doc["procedure"],
        params=tuple(
            ProcedureParamSpec(
                name=p["name"],
                direction=ParamDirection(p["direction"]),
                type=ParamType(p["type"]),
                value=p["value"],
            )
            for p in doc["params"]
        ),
    )


def _dependent_to_json(kind: DependentSpec) -> dict[str, Any]:
    return {
        "relation": kind.relation.value,
        "on_failure": kind.on_failure.value,
        "failure_wait_ms": _ms(kind.failure_wait),
        "check_interval_ms": _ms(kind.check_interval),
        "groups": [
            {
                "relation": g.relation.value,
                "items": [
                    {
                        "project": i.project,
                        "workflow": i.workflow,
                        "task": i.task,
                        "cycle": i.cycle.value,
                        "date_value": i.date_value,
                    }
                    for i in g.items
                ],
            }
            for g in kind.groups
        ],
    }


def _dependent_from_json(doc: Mapping[str, Any]) -> DependentSpec:
    return DependentSpec(
        relation=Relation(doc["relation"]),
        on_failure=DependencyFailure(doc["on_failure"]),
        failure_wait=timedelta(milliseconds=doc["failure_wait_ms"]),
        check_interval=timedelta(milliseconds=doc["check_interval_ms"]),
        groups=tuple(
            DependencyGroup(
                relation=Relation(g["relation"]),
                items=tuple(
                    DependencyItem(
                        project=i["project"],
                        workflow=i["workflow"],
                        task=i["task"],
                        cycle=Cycle(i["cycle"]),
                        date_value=i["date_value"],
                    )
                    for i in g["items"]
                ),
            )
            for g in doc["groups"]
        ),
    )


def scope_to_json(scope: RunScope) -> dict[str, Any]:
    return {"start_tasks": list(scope.start_tasks), "depend_type": scope.depend_type.value}


def scope_from_json(doc: Mapping[str, Any]) -> RunScope:
    return RunScope(
        start_tasks=tuple(doc.get("start_tasks", ())),
        depend_type=TaskDependType(doc.get("depend_type", TaskDependType.TASK_POST.value)),
    )


def options_to_json(options: RunOptions) -> dict[str, Any]:
    return {
        "params": dict(options.params),
        "scope": scope_to_json(options.scope),
        "failure_strategy": options.failure_strategy.value,
        "priority": options.priority.value,
        "worker_group": options.worker_group,
        "dry_run": options.dry_run,
        "dispatch_timeout": (
            None if options.dispatch_timeout is None else options.dispatch_timeout.total_seconds()
        ),
    }


def options_from_json(doc: Mapping[str, Any]) -> RunOptions:
    return RunOptions(
        params=dict(doc.get("params", {})),
        scope=scope_from_json(doc.get("scope", {})),
        failure_strategy=FailureStrategy(doc.get("failure_strategy", "CONTINUE")),
        priority=Priority(doc.get("priority", "MEDIUM")),
        worker_group=doc.get("worker_group", ""),
        dry_run=bool(doc.get("dry_run", False)),
        dispatch_timeout=(
            None
            if doc.get("dispatch_timeout") is None
            else timedelta(seconds=float(doc["dispatch_timeout"]))
        ),
    )


# Stored under their own names; the enums by value, the lists as JSON arrays.
_SPARK_PLAIN = (
    "script",
    "main_file",
    "main_class",
    "master",
    "driver_cores",
    "driver_memory",
    "executor_cores",
    "executor_memory",
    "num_executors",
    "app_name",
)


def _spark_to_json(kind: SparkSpec) -> dict[str, Any]:
    return {
        **{name: getattr(kind, name) for name in _SPARK_PLAIN},
        "program_type": kind.program_type.value,
        "deploy_mode": kind.deploy_mode.value,
        "conf": dict(kind.conf),
        "py_files": list(kind.py_files),
        "files": list(kind.files),
        "args": list(kind.args),
    }


def _spark_from_json(doc: Mapping[str, Any]) -> SparkSpec:
    return SparkSpec(
        **{name: doc[name] for name in _SPARK_PLAIN if name in doc},
        program_type=SparkProgram(doc["program_type"]),
        deploy_mode=DeployMode(doc.get("deploy_mode", DeployMode.CLIENT.value)),
        conf=dict(doc.get("conf", {})),
        py_files=tuple(doc.get("py_files", ())),
        files=tuple(doc.get("files", ())),
        args=tuple(doc.get("args", ())),
    )
