"""dsched: the Python SDK of a distributed DAG workflow scheduler.

Workflows as code::

    from dsched import Shell, Workflow

    with Workflow("hello", project="demo") as wf:
        Shell("greet", "echo hello") >> Shell("bye", "echo bye")
    print(wf.run().state)

and a synchronous client for everything else (:class:`Client`). Errors raised by the server arrive
as the classes of :mod:`dsched.errors`, exported here (``except dsched.NotFound``).

``import dsched`` loads nothing but this module: every name below is imported on first use
(PEP 562), so that a program which only needs, say, the errors or the enums does not pay for
gRPC and protobuf, and nothing here ever reaches for the server's packages (a test checks it).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    # What type checkers and IDEs see; at run time __getattr__ resolves the same names.
    from dsched.client import Client, default_client
    from dsched.datasources import Datasource, DatasourceType
    from dsched.errors import (
        Aborted,
        AlreadyExists,
        ControlPending,
        DschedError,
        FailedPrecondition,
        FieldViolation,
        IllegalTransition,
        Internal,
        InvalidArgument,
        InvalidWorkflow,
        NotFound,
        OutOfRange,
        OwnershipLost,
        PermissionDenied,
        ResourceExhausted,
        Unauthenticated,
        Unavailable,
    )
    from dsched.http_spec import HttpMethod, HttpSpec
    from dsched.http_task import Http
    from dsched.options import (
        CommandType,
        FailureStrategy,
        Priority,
        ReleaseState,
        TaskDependType,
        TimeoutStrategy,
    )
    from dsched.python_spec import PythonSpec
    from dsched.python_task import Python, task
    from dsched.results import (
        ClusterMember,
        InstanceEvent,
        LogChunk,
        Page,
        Project,
        ServerInfo,
        ServerRole,
        ServerStatus,
        TaskInstance,
        WatchFrame,
        WorkflowInfo,
        WorkflowInstance,
        WorkflowVersionInfo,
    )
    from dsched.schedules import Schedule
    from dsched.spark_task import Spark
    from dsched.spec import ShellSpec, TaskSpec, WorkflowSpec
    from dsched.sql_tasks import Param, Procedure, Sql
    from dsched.states import InstanceEventKind, TaskState, WorkflowState
    from dsched.streams import Reconnect
    from dsched.tasks import AllOf, AnyOf, Dependency, Dependent, Shell, Task
    from dsched.workflow import Workflow, collect

# module -> the names it exports here; the imports above and __all__ name the same (a test checks).
_EXPORTS: dict[str, tuple[str, ...]] = {
    "dsched.client": ("Client", "default_client"),
    "dsched.errors": (
        "Aborted",
        "AlreadyExists",
        "ControlPending",
        "DschedError",
        "FailedPrecondition",
        "FieldViolation",
        "IllegalTransition",
        "Internal",
        "InvalidArgument",
        "InvalidWorkflow",
        "NotFound",
        "OutOfRange",
        "OwnershipLost",
        "PermissionDenied",
        "ResourceExhausted",
        "Schedule",
        "Unauthenticated",
        "Unavailable",
    ),
    "dsched.options": (
        "CommandType",
        "FailureStrategy",
        "Priority",
        "ReleaseState",
        "TaskDependType",
        "TimeoutStrategy",
    ),
    "dsched.results": (
        "ClusterMember",
        "InstanceEvent",
        "LogChunk",
        "Page",
        "Project",
        "ServerInfo",
        "ServerRole",
        "ServerStatus",
        "TaskInstance",
        "WatchFrame",
        "WorkflowInfo",
        "WorkflowInstance",
        "WorkflowVersionInfo",
    ),
    "dsched.http_spec": ("HttpMethod", "HttpSpec"),
    "dsched.http_task": ("Http",),
    "dsched.python_spec": ("PythonSpec",),
    "dsched.python_task": ("Python", "task"),
    "dsched.datasources": ("Datasource", "DatasourceType"),
    "dsched.schedules": ("Schedule",),
    "dsched.spark_task": ("Spark",),
    "dsched.sql_tasks": ("Param", "Procedure", "Sql"),
    "dsched.spec": ("ShellSpec", "TaskSpec", "WorkflowSpec"),
    "dsched.states": ("InstanceEventKind", "TaskState", "WorkflowState"),
    "dsched.streams": ("Reconnect",),
    "dsched.tasks": ("AllOf", "AnyOf", "Dependency", "Dependent", "Shell", "Task"),
    "dsched.workflow": ("Workflow", "collect"),
}
_MODULE_OF = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = [
    "Aborted",
    "AllOf",
    "AlreadyExists",
    "AnyOf",
    "Client",
    "ClusterMember",
    "CommandType",
    "ControlPending",
    "Datasource",
    "DatasourceType",
    "Dependency",
    "Dependent",
    "DschedError",
    "FailedPrecondition",
    "FailureStrategy",
    "FieldViolation",
    "Http",
    "HttpMethod",
    "HttpSpec",
    "IllegalTransition",
    "InstanceEvent",
    "InstanceEventKind",
    "Internal",
    "InvalidArgument",
    "InvalidWorkflow",
    "LogChunk",
    "NotFound",
    "OutOfRange",
    "OwnershipLost",
    "Page",
    "Param",
    "PermissionDenied",
    "Priority",
    "Procedure",
    "Project",
    "Python",
    "PythonSpec",
    "Reconnect",
    "ReleaseState",
    "ResourceExhausted",
    "Schedule",
    "ServerInfo",
    "ServerRole",
    "ServerStatus",
    "Shell",
    "ShellSpec",
    "Spark",
    "Sql",
    "Task",
    "TaskDependType",
    "TaskInstance",
    "TaskSpec",
    "TaskState",
    "TimeoutStrategy",
    "Unauthenticated",
    "Unavailable",
    "WatchFrame",
    "Workflow",
    "WorkflowInfo",
    "WorkflowInstance",
    "WorkflowSpec",
    "WorkflowState",
    "WorkflowVersionInfo",
    "collect",
    "default_client",
    "task",
]


if not TYPE_CHECKING:
    # Hidden from type checkers: a module __getattr__ would make mypy accept any attribute of dsched
    # (a misspelt ``dsched.Clinet`` would type as object instead of failing the check).

    def __getattr__(name: str) -> object:
        module = _MODULE_OF.get(name)
        if module is None:
            raise AttributeError(f"module 'dsched' has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value  # later lookups skip __getattr__
        return value

    def __dir__() -> list[str]:
        return sorted({*globals(), *__all__})
