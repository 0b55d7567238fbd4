"""dsched: the Python SDK of a distributed DAG workflow scheduler.

Workflows as code::

    from dsched import Shell, Workflow

    with Workflow("hello", project="demo") as wf:
        Shell("greet", "echo hello") >> Shell("bye", "echo bye")
    print(wf.run().state)

and a synchronous client for everything else (:class:`Client`). Errors raised by the server arrive
as the classes of :mod:`dsched.errors`, exported here (``except dsched.NotFound``).
"""

from dsched.client import Client, default_client
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
from dsched.options import (
    CommandType,
    FailureStrategy,
    Priority,
    ReleaseState,
    TaskDependType,
    TimeoutStrategy,
)
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
from dsched.spec import ShellSpec, TaskSpec, WorkflowSpec
from dsched.states import InstanceEventKind, TaskState, WorkflowState
from dsched.streams import Reconnect
from dsched.tasks import Shell, Task
from dsched.workflow import Workflow, collect

__all__ = [
    "Aborted",
    "AlreadyExists",
    "Client",
    "ClusterMember",
    "CommandType",
    "ControlPending",
    "DschedError",
    "FailedPrecondition",
    "FailureStrategy",
    "FieldViolation",
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
    "PermissionDenied",
    "Priority",
    "Project",
    "Reconnect",
    "ReleaseState",
    "ResourceExhausted",
    "ServerInfo",
    "ServerRole",
    "ServerStatus",
    "Shell",
    "ShellSpec",
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
]
