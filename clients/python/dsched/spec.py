"""Workflow definitions as plain values, and their validation.

The SDK validates a workflow with :func:`validate_workflow` before any RPC, and the server
validates every definition it receives with the same function, so both sides agree on what a valid
DAG is. Field paths in violations use the proto field names (``workflow.tasks[2].upstream_tasks``),
so they read the same in an SDK exception and in a grpcurl error.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta

from dsched.dependency import DependentSpec, dependent_violations
from dsched.errors import FieldViolation, InvalidArgument, InvalidWorkflow
from dsched.http_spec import HttpSpec, http_violations
from dsched.names import (
    PARAMETER_NAME_REASONS,
    name_violation,
    param_name_violation,
    param_path,
    reason_for,
    worker_group_violation,
)
from dsched.options import Priority, TimeoutStrategy
from dsched.python_spec import PythonSpec, python_violations
from dsched.spark import SparkSpec, spark_violations
from dsched.sql import ProcedureSpec, SqlSpec, procedure_violations, sql_violations
from dsched.templates import template_violations
from dsched.text import CONTROL_RE, NOT_TEXT, SURROGATE_RE, script_violation
from dsched.text import MAX_SCRIPT_BYTES as MAX_SCRIPT_BYTES
from dsched.text import text_violation as text_violation

# Limits. They bound memory and work per request (a hostile client cannot make the master build a
# million-node graph) and stay far above what a hand-written pipeline needs.
MAX_DESCRIPTION_LENGTH = 1024
MAX_TASKS = 2000
MAX_EDGES = 20000
MAX_UPSTREAMS_PER_TASK = 1000
MAX_PARAMS = 256
MAX_PARAM_VALUE_BYTES = 64 * 1024
MAX_RETRIES = 100
MAX_RETRY_INTERVAL = timedelta(hours=24)
MAX_DELAY = timedelta(hours=24)
MAX_TIMEOUT = timedelta(days=7)
# Size limits (README: Limits). They keep every answer that carries a definition or an instance
# far below the 4 MiB a gRPC client accepts by default (the arithmetic is in
# dsched_server.api.pages) and a task's environment below Linux's ARG_MAX (2 MiB by default):
# a definition's parameters, the var pool and the start parameters are at most 3 * 256 KiB.
MAX_DEFINITION_BYTES = 2 * 1024 * 1024  # the Workflow message of CreateWorkflow/UpdateWorkflow
MAX_SCRIPTS_BYTES = 1024 * 1024  # every script of a definition together (UTF-8)
# Names plus values (UTF-8) of the parameters of one request: a definition's global and local
# parameters together, a run's start parameters, a task's OUT parameters, an instance's var pool.
MAX_PARAMS_BYTES = 256 * 1024
MAX_VAR_POOL_PARAMS = 1024  # distinct OUT parameters an instance collects from its tasks

_CONTROL_RE = CONTROL_RE  # the names other modules import from here
_SURROGATE_RE = SURROGATE_RE
_NOT_TEXT = NOT_TEXT


@dataclass(frozen=True, slots=True, kw_only=True)
class ShellSpec:
    """A bash script (see ``ShellTask`` in the proto for how parameters reach it)."""

    script: str


TaskKind = ShellSpec | DependentSpec | PythonSpec | SparkSpec | HttpSpec | SqlSpec | ProcedureSpec


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskSpec:
    """One task of a workflow definition."""

    name: str
    kind: TaskKind | None
    description: str = ""
    upstream: tuple[str, ...] = ()
    priority: Priority = Priority.MEDIUM
    worker_group: str = ""
    retries: int = 0
    retry_interval: timedelta = timedelta(0)
    timeout: timedelta = timedelta(0)
    timeout_strategy: TimeoutStrategy = TimeoutStrategy.FAIL
    delay: timedelta = timedelta(0)
    params: Mapping[str, str] = field(default_factory=dict)
    disabled: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkflowSpec:
    """A workflow definition as the user wrote it (no server-assigned code or version)."""

    project: str
    name: str
    tasks: tuple[TaskSpec, ...]
    description: str = ""
    params: Mapping[str, str] = field(default_factory=dict)


def params_violations(path: str, params: Mapping[str, str]) -> list[FieldViolation]:
    """Checks a parameter map: names follow :mod:`dsched.names`, values are bounded text without
    NUL."""
    out: list[FieldViolation] = []
    if len(params) > MAX_PARAMS:
        out.append(FieldViolation(path, f"more than {MAX_PARAMS} parameters"))
        return out
    for key, value in params.items():
        where = param_path(path, key)
        bad_name = param_name_violation(path, key)
        if bad_name is not None:
            out.append(bad_name)
        if _SURROGATE_RE.search(value):
            out.append(FieldViolation(where, f"value {_NOT_TEXT}"))
        elif len(value.encode()) > MAX_PARAM_VALUE_BYTES:
            out.append(FieldViolation(where, "value is larger than 64 KiB"))
        elif "\x00" in value:
            out.append(FieldViolation(where, "value contains a NUL character"))
    return out


def params_bytes(params: Mapping[str, str]) -> int:
    """The size of a parameter map as :data:`MAX_PARAMS_BYTES` counts it: names plus values."""
    return sum(_utf8(key) + _utf8(value) for key, value in params.items())


def _utf8(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))  # lone surrogates are reported elsewhere


def params_size_violation(
    path: str, maps: Iterable[Mapping[str, str]], what: str = "the parameters"
) -> FieldViolation | None:
    """A violation if the parameter maps together exceed :data:`MAX_PARAMS_BYTES`."""
    total = sum(params_bytes(m) for m in maps)
    if total <= MAX_PARAMS_BYTES:
        return None
    return FieldViolation(
        path, f"{what} total {total} bytes (names and values); at most {MAX_PARAMS_BYTES}"
    )


def encoded_size(spec: WorkflowSpec) -> int:
    """An upper bound of ``spec``'s size as the Workflow message of CreateWorkflow, counted without
    protobuf so that the SDK and the server (and the pure core) count alike: the exact bytes of
    every text and of its framing, and the most each number, enum and duration can take (a task's
    scalars are at most 74 bytes; ``tests/unit/sdk/test_spec_sizes.py`` compares with protobuf)."""
    tasks = sum(_len_field(_task_size(t), tag=1) for t in spec.tasks)
    return (
        _text_field(spec.project)
        + _text_field(spec.name)
        + _text_field(spec.description)
        + tasks
        + _map_size(spec.params)
    )


# Upper bounds of a task's scalar fields: priority, retries (any int32: a negative one takes 10
# bytes), three durations (seconds <= 10 bytes, nanos <= 5, framing 4), timeout strategy, disabled.
_TASK_SCALARS = 2 + 11 + 3 * 19 + 2 + 2


def _task_size(task: TaskSpec) -> int:
    size = (
        _text_field(task.name)
        + _text_field(task.description)
        + sum(_text_field(up) for up in task.upstream)
        + _text_field(task.worker_group)
        + _map_size(task.params)
        + _TASK_SCALARS
    )
    if isinstance(task.kind, ShellSpec):
        size += _len_field(_text_field(task.kind.script), tag=2)  # field 20: a 2-byte tag
    elif isinstance(task.kind, DependentSpec):
        size += _len_field(_dependent_size(task.kind), tag=2)  # field 21
    elif isinstance(task.kind, SparkSpec):
        size += _len_field(spark_bytes(task.kind), tag=2)  # field 23
    elif isinstance(task.kind, PythonSpec):
        kind = _text_field(task.kind.script) + _text_field(task.kind.interpreter)
        size += _len_field(kind, tag=2)  # field 22
    elif isinstance(task.kind, HttpSpec):
        size += _len_field(_http_size(task.kind), tag=2)  # field 26
    elif isinstance(task.kind, SqlSpec):
        size += _len_field(_sql_size(task.kind), tag=2)  # field 24
    elif isinstance(task.kind, ProcedureSpec):
        size += _len_field(_procedure_size(task.kind), tag=2)  # field 25
    return size


# A SPARK task's scalars: two enums and three int32 (a negative one takes 10 bytes).
_SPARK_SCALARS = 2 * 2 + 3 * 11


def spark_bytes(kind: SparkSpec) -> int:
    """An upper bound of a SPARK task's size as its SparkTask message."""
    texts = (kind.script, kind.main_file, kind.main_class, kind.master, kind.driver_memory)
    more = (kind.executor_memory, kind.app_name)
    return (
        sum(_text_field(t) for t in (*texts, *more))
        + sum(_len_field(_utf8(t), tag=1) for t in (*kind.py_files, *kind.files, *kind.args))
        + _map_size(kind.conf)
        + _SPARK_SCALARS
    )


# An HTTP task's scalars: the method, the timeout, the response cap; each status code at most 10
# bytes plus the packed field's framing.
_HTTP_SCALARS = 2 + 19 + 11 + 3


def _http_size(kind: HttpSpec) -> int:
    texts = (kind.url, kind.body, kind.body_contains, kind.response_param)
    return (
        sum(_text_field(t) for t in texts)
        + _map_size(kind.headers)
        + 10 * len(kind.expected_status)
        + _HTTP_SCALARS
    )


def _sql_size(kind: SqlSpec) -> int:
    texts = [kind.datasource, kind.sql, kind.rows_param]
    lists = [*kind.pre_statements, *kind.post_statements]
    # type (2), allow_multiple_statements (2), row_limit (<= 11)
    return (
        sum(_text_field(t) for t in texts)
        + sum(_len_field(_utf8(t), tag=1) for t in lists)
        + _map_size(kind.out_params)
        + 15
    )


def _procedure_size(kind: ProcedureSpec) -> int:
    params = sum(
        _len_field(_text_field(p.name) + _text_field(p.value) + 2 * _ENUM, tag=1)
        for p in kind.params
    )
    return _text_field(kind.datasource) + _text_field(kind.procedure) + params


# A DEPENDENT task's scalars: two enums and two durations; a group's and an item's one enum.
_DEPENDENT_SCALARS = 2 + 2 + 2 * 19
_ENUM = 2


def _dependent_size(kind: DependentSpec) -> int:
    groups = 0
    for group in kind.groups:
        items = sum(
            _len_field(
                _text_field(i.project)
                + _text_field(i.workflow)
                + _text_field(i.task)
                + _text_field(i.date_value)
                + _ENUM,
                tag=1,
            )
            for i in group.items
        )
        groups += _len_field(items + _ENUM, tag=1)
    return groups + _DEPENDENT_SCALARS


def _map_size(params: Mapping[str, str]) -> int:
    # A map entry carries its key and value even when they are empty.
    return sum(
        _len_field(_len_field(_utf8(k), tag=1) + _len_field(_utf8(v), tag=1), tag=1)
        for k, v in params.items()
    )


def _text_field(text: str) -> int:
    return _len_field(_utf8(text), tag=1) if text else 0


def _len_field(size: int, *, tag: int) -> int:
    """A length-delimited field: tag, length varint, payload."""
    return tag + (max(size, 1).bit_length() + 6) // 7 + size


def size_violations(spec: WorkflowSpec) -> list[FieldViolation]:
    """The size limits of a definition, checked before anything else (reason
    DEFINITION_TOO_LARGE): its parameters, its scripts, then its whole encoding."""
    out: list[FieldViolation] = []
    params = params_size_violation(
        "workflow.params",
        [spec.params, *(t.params for t in spec.tasks)],
        "the definition's parameters (global and every task's)",
    )
    if params is not None:
        out.append(params)
    scripts = sum(
        _utf8(t.kind.script)
        for t in spec.tasks
        if isinstance(t.kind, ShellSpec | PythonSpec | SparkSpec)
    )
    if scripts > MAX_SCRIPTS_BYTES:
        out.append(
            FieldViolation(
                "workflow.tasks", f"the scripts total {scripts} bytes; at most {MAX_SCRIPTS_BYTES}"
            )
        )
    size = encoded_size(spec)
    if size > MAX_DEFINITION_BYTES:
        out.append(
            FieldViolation(
                "workflow",
                f"the definition is {size} bytes encoded; at most {MAX_DEFINITION_BYTES}",
            )
        )
    return out


def _duration_violation(path: str, value: timedelta, limit: timedelta) -> FieldViolation | None:
    if value < timedelta(0):
        return FieldViolation(path, "must not be negative")
    if value > limit:
        return FieldViolation(path, f"must be at most {limit}")
    return None


def _kind_violations(path: str, task: TaskSpec, spec: WorkflowSpec) -> list[FieldViolation]:
    """The violations of what the task runs (field paths under its kind's proto field)."""
    kind = task.kind
    if kind is None:
        return [FieldViolation(f"{path}.kind", "a task type (e.g. shell) is required")]
    if isinstance(kind, ShellSpec):
        found = script_violation(f"{path}.shell.script", kind.script)
        return [] if found is None else [found]
    if isinstance(kind, SparkSpec):
        return spark_violations(f"{path}.spark", kind)
    if isinstance(kind, PythonSpec):
        return python_violations(f"{path}.python", kind)
    if isinstance(kind, HttpSpec):
        return http_violations(f"{path}.http", kind)
    if isinstance(kind, SqlSpec):
        return sql_violations(f"{path}.sql", kind)
    if isinstance(kind, ProcedureSpec):
        return procedure_violations(f"{path}.procedure", kind)
    return dependent_violations(f"{path}.dependent", kind, project=spec.project, workflow=spec.name)


def _task_violations(path: str, task: TaskSpec, spec: WorkflowSpec) -> list[FieldViolation]:
    found: list[FieldViolation | None] = [
        name_violation(f"{path}.name", task.name, "task name"),
        text_violation(f"{path}.description", task.description, MAX_DESCRIPTION_LENGTH),
        _duration_violation(f"{path}.retry_interval", task.retry_interval, MAX_RETRY_INTERVAL),
        _duration_violation(f"{path}.timeout", task.timeout, MAX_TIMEOUT),
        _duration_violation(f"{path}.delay", task.delay, MAX_DELAY),
    ]
    if not 0 <= task.retries <= MAX_RETRIES:
        found.append(FieldViolation(f"{path}.retries", f"must be between 0 and {MAX_RETRIES}"))
    if task.worker_group:
        found.append(worker_group_violation(f"{path}.worker_group", task.worker_group))
    found.extend(_kind_violations(path, task, spec))
    if len(task.upstream) > MAX_UPSTREAMS_PER_TASK:
        found.append(FieldViolation(f"{path}.upstream_tasks", "too many upstream tasks"))
    out = [v for v in found if v is not None]
    out.extend(params_violations(f"{path}.params", task.params))
    return out


def find_cycle(edges: Mapping[str, Iterable[str]]) -> list[str] | None:
    """Returns one cycle as a closed path ``[a, b, ..., a]``, or None if the graph is acyclic.

    ``edges`` maps each node to its upstream nodes. Iterative (no recursion limit on deep chains).
    """
    white, grey, black = 0, 1, 2
    color = dict.fromkeys(edges, white)
    for root in edges:
        if color[root] != white:
            continue
        stack: list[tuple[str, list[str]]] = [(root, list(edges[root]))]
        color[root] = grey
        while stack:
            node, pending = stack[-1]
            if not pending:
                color[node] = black
                stack.pop()
                continue
            nxt = pending.pop()
            state = color.get(nxt, black)
            if state == grey:
                path = [n for n, _ in stack]
                cycle = [*path[path.index(nxt) :], nxt]
                cycle.reverse()  # report in execution order: upstream first
                return cycle
            if state == white:
                color[nxt] = grey
                stack.append((nxt, list(edges[nxt])))
    return None


def _graph_violations(tasks: tuple[TaskSpec, ...]) -> tuple[list[FieldViolation], bool]:
    """Checks names are unique and edges point at known tasks, then looks for a cycle."""
    out: list[FieldViolation] = []
    index: dict[str, int] = {}
    for i, task in enumerate(tasks):
        if task.name in index:
            out.append(
                FieldViolation(f"workflow.tasks[{i}].name", f"duplicate task name {task.name!r}")
            )
        else:
            index[task.name] = i
    edge_count = 0
    for i, task in enumerate(tasks):
        seen: set[str] = set()
        for up in task.upstream:
            edge_count += 1
            path = f"workflow.tasks[{i}].upstream_tasks"
            if up == task.name:
                out.append(FieldViolation(path, f"task {task.name!r} depends on itself"))
            elif up not in index:
                out.append(FieldViolation(path, f"unknown upstream task {up!r}"))
            elif up in seen:
                out.append(FieldViolation(path, f"upstream task {up!r} listed twice"))
            seen.add(up)
    if edge_count > MAX_EDGES:
        out.append(FieldViolation("workflow.tasks", f"more than {MAX_EDGES} edges"))
    if out:
        return out, False
    cycle = find_cycle({t.name: t.upstream for t in tasks})
    if cycle is None:
        return out, False
    where = index[cycle[1]]
    out.append(
        FieldViolation(f"workflow.tasks[{where}].upstream_tasks", "cycle: " + " -> ".join(cycle))
    )
    return out, True


def validate_workflow(spec: WorkflowSpec) -> tuple[list[FieldViolation], bool]:
    """Returns every violation of ``spec`` and whether one of them is a cycle."""
    found: list[FieldViolation | None] = [
        name_violation("workflow.project", spec.project, "project name"),
        name_violation("workflow.name", spec.name, "workflow name"),
        text_violation("workflow.description", spec.description, MAX_DESCRIPTION_LENGTH),
    ]
    out = [v for v in found if v is not None]
    out.extend(params_violations("workflow.params", spec.params))
    out.extend(template_violations("workflow.params", spec.params))
    if not spec.tasks:
        out.append(FieldViolation("workflow.tasks", "a workflow needs at least one task"))
        return out, False
    if len(spec.tasks) > MAX_TASKS:
        out.append(FieldViolation("workflow.tasks", f"more than {MAX_TASKS} tasks"))
        return out, False
    for i, task in enumerate(spec.tasks):
        out.extend(_task_violations(f"workflow.tasks[{i}]", task, spec))
        out.extend(template_violations(f"workflow.tasks[{i}].params", task.params))
    graph, cyclic = _graph_violations(spec.tasks)
    out.extend(graph)
    return out, cyclic


def check_workflow(spec: WorkflowSpec, earlier: Iterable[FieldViolation] = ()) -> None:
    """Raises if ``spec`` is invalid or ``earlier`` (violations the caller found decoding the
    request) is not empty: :class:`InvalidWorkflow` with reason DEFINITION_TOO_LARGE for a size
    limit (checked first, and alone), CYCLE_DETECTED for a cycle, else INVALID_WORKFLOW; or
    :class:`InvalidArgument` when a parameter name is refused (reason RESERVED_PARAMETER_NAME or
    INVALID_PARAMETER_NAME: :func:`dsched.names.reason_for`)."""
    violations = list(earlier)
    too_large = size_violations(spec)
    cyclic = False
    if too_large:
        violations.extend(too_large)
    else:
        found, cyclic = validate_workflow(spec)
        violations.extend(found)
    if not violations:
        return
    message = f"workflow {spec.name!r} is invalid"
    metadata = {"project": spec.project, "workflow": spec.name}
    if any(v.reason in PARAMETER_NAME_REASONS for v in violations):
        # The class the server's answer decodes to, so that local and remote checks raise alike.
        raise InvalidArgument(
            message,
            reason=reason_for(violations, "INVALID_ARGUMENT"),
            metadata=metadata,
            violations=violations,
        )
    if too_large:
        raise InvalidWorkflow(
            message, reason="DEFINITION_TOO_LARGE", metadata=metadata, violations=violations
        )
    raise InvalidWorkflow(
        message,
        reason="CYCLE_DETECTED" if cyclic else "INVALID_WORKFLOW",
        metadata=metadata,
        violations=violations,
    )
