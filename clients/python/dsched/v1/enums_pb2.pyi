from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from typing import ClassVar as _ClassVar

DESCRIPTOR: _descriptor.FileDescriptor

class WorkflowInstanceState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    WORKFLOW_INSTANCE_STATE_UNSPECIFIED: _ClassVar[WorkflowInstanceState]
    WORKFLOW_INSTANCE_STATE_SUBMITTED: _ClassVar[WorkflowInstanceState]
    WORKFLOW_INSTANCE_STATE_RUNNING: _ClassVar[WorkflowInstanceState]
    WORKFLOW_INSTANCE_STATE_READY_PAUSE: _ClassVar[WorkflowInstanceState]
    WORKFLOW_INSTANCE_STATE_PAUSED: _ClassVar[WorkflowInstanceState]
    WORKFLOW_INSTANCE_STATE_READY_STOP: _ClassVar[WorkflowInstanceState]
    WORKFLOW_INSTANCE_STATE_STOPPED: _ClassVar[WorkflowInstanceState]
    WORKFLOW_INSTANCE_STATE_FAILED: _ClassVar[WorkflowInstanceState]
    WORKFLOW_INSTANCE_STATE_SUCCEEDED: _ClassVar[WorkflowInstanceState]
    WORKFLOW_INSTANCE_STATE_FAILOVER: _ClassVar[WorkflowInstanceState]

class TaskInstanceState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TASK_INSTANCE_STATE_UNSPECIFIED: _ClassVar[TaskInstanceState]
    TASK_INSTANCE_STATE_SUBMITTED: _ClassVar[TaskInstanceState]
    TASK_INSTANCE_STATE_DELAY_EXECUTION: _ClassVar[TaskInstanceState]
    TASK_INSTANCE_STATE_DISPATCHED: _ClassVar[TaskInstanceState]
    TASK_INSTANCE_STATE_RUNNING: _ClassVar[TaskInstanceState]
    TASK_INSTANCE_STATE_SUCCEEDED: _ClassVar[TaskInstanceState]
    TASK_INSTANCE_STATE_FAILED: _ClassVar[TaskInstanceState]
    TASK_INSTANCE_STATE_KILLED: _ClassVar[TaskInstanceState]
    TASK_INSTANCE_STATE_PAUSED: _ClassVar[TaskInstanceState]
    TASK_INSTANCE_STATE_NEED_FAULT_TOLERANCE: _ClassVar[TaskInstanceState]
    TASK_INSTANCE_STATE_FORCED_SUCCESS: _ClassVar[TaskInstanceState]

class FailureStrategy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FAILURE_STRATEGY_UNSPECIFIED: _ClassVar[FailureStrategy]
    FAILURE_STRATEGY_CONTINUE: _ClassVar[FailureStrategy]
    FAILURE_STRATEGY_END: _ClassVar[FailureStrategy]

class TaskDependType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TASK_DEPEND_TYPE_UNSPECIFIED: _ClassVar[TaskDependType]
    TASK_DEPEND_TYPE_TASK_ONLY: _ClassVar[TaskDependType]
    TASK_DEPEND_TYPE_TASK_PRE: _ClassVar[TaskDependType]
    TASK_DEPEND_TYPE_TASK_POST: _ClassVar[TaskDependType]

class Priority(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PRIORITY_UNSPECIFIED: _ClassVar[Priority]
    PRIORITY_HIGHEST: _ClassVar[Priority]
    PRIORITY_HIGH: _ClassVar[Priority]
    PRIORITY_MEDIUM: _ClassVar[Priority]
    PRIORITY_LOW: _ClassVar[Priority]
    PRIORITY_LOWEST: _ClassVar[Priority]

class TimeoutStrategy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TIMEOUT_STRATEGY_UNSPECIFIED: _ClassVar[TimeoutStrategy]
    TIMEOUT_STRATEGY_WARN: _ClassVar[TimeoutStrategy]
    TIMEOUT_STRATEGY_FAIL: _ClassVar[TimeoutStrategy]
    TIMEOUT_STRATEGY_WARN_FAIL: _ClassVar[TimeoutStrategy]

class ReleaseState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RELEASE_STATE_UNSPECIFIED: _ClassVar[ReleaseState]
    RELEASE_STATE_OFFLINE: _ClassVar[ReleaseState]
    RELEASE_STATE_ONLINE: _ClassVar[ReleaseState]

class CommandType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    COMMAND_TYPE_UNSPECIFIED: _ClassVar[CommandType]
    COMMAND_TYPE_START: _ClassVar[CommandType]
    COMMAND_TYPE_RESUME: _ClassVar[CommandType]
    COMMAND_TYPE_RECOVER_FAILED: _ClassVar[CommandType]
    COMMAND_TYPE_RERUN: _ClassVar[CommandType]
    COMMAND_TYPE_EXECUTE_FROM_TASK: _ClassVar[CommandType]
    COMMAND_TYPE_FAILOVER: _ClassVar[CommandType]

class TaskEventType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TASK_EVENT_TYPE_UNSPECIFIED: _ClassVar[TaskEventType]
    TASK_EVENT_TYPE_RUNNING: _ClassVar[TaskEventType]
    TASK_EVENT_TYPE_SUCCEEDED: _ClassVar[TaskEventType]
    TASK_EVENT_TYPE_FAILED: _ClassVar[TaskEventType]
    TASK_EVENT_TYPE_KILLED: _ClassVar[TaskEventType]

class TaskEventDecision(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TASK_EVENT_DECISION_UNSPECIFIED: _ClassVar[TaskEventDecision]
    TASK_EVENT_DECISION_ACCEPTED: _ClassVar[TaskEventDecision]
    TASK_EVENT_DECISION_DUPLICATE: _ClassVar[TaskEventDecision]
    TASK_EVENT_DECISION_REJECTED_STALE: _ClassVar[TaskEventDecision]
    TASK_EVENT_DECISION_NOT_OWNER: _ClassVar[TaskEventDecision]
    TASK_EVENT_DECISION_RETRY_LATER: _ClassVar[TaskEventDecision]

class DispatchOutcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DISPATCH_OUTCOME_UNSPECIFIED: _ClassVar[DispatchOutcome]
    DISPATCH_OUTCOME_ACCEPTED: _ClassVar[DispatchOutcome]
    DISPATCH_OUTCOME_ALREADY_ACCEPTED: _ClassVar[DispatchOutcome]
    DISPATCH_OUTCOME_REJECTED_FULL: _ClassVar[DispatchOutcome]
    DISPATCH_OUTCOME_REJECTED_UNAVAILABLE: _ClassVar[DispatchOutcome]

class ServerRole(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SERVER_ROLE_UNSPECIFIED: _ClassVar[ServerRole]
    SERVER_ROLE_MASTER: _ClassVar[ServerRole]
    SERVER_ROLE_WORKER: _ClassVar[ServerRole]

class ServerStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SERVER_STATUS_UNSPECIFIED: _ClassVar[ServerStatus]
    SERVER_STATUS_NORMAL: _ClassVar[ServerStatus]
    SERVER_STATUS_BUSY: _ClassVar[ServerStatus]

class InstanceEventKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    INSTANCE_EVENT_KIND_UNSPECIFIED: _ClassVar[InstanceEventKind]
    INSTANCE_EVENT_KIND_STATE: _ClassVar[InstanceEventKind]
    INSTANCE_EVENT_KIND_CLAIMED: _ClassVar[InstanceEventKind]
    INSTANCE_EVENT_KIND_FAILOVER: _ClassVar[InstanceEventKind]
    INSTANCE_EVENT_KIND_TIMEOUT_WARNING: _ClassVar[InstanceEventKind]
    INSTANCE_EVENT_KIND_RETRY_SCHEDULED: _ClassVar[InstanceEventKind]
    INSTANCE_EVENT_KIND_WAITING: _ClassVar[InstanceEventKind]
    INSTANCE_EVENT_KIND_CONTROL: _ClassVar[InstanceEventKind]

class ControlStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CONTROL_STATUS_UNSPECIFIED: _ClassVar[ControlStatus]
    CONTROL_STATUS_APPLIED: _ClassVar[ControlStatus]
    CONTROL_STATUS_PENDING: _ClassVar[ControlStatus]

class HistoryKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    HISTORY_KIND_UNSPECIFIED: _ClassVar[HistoryKind]
    HISTORY_KIND_REQUEST_IDS: _ClassVar[HistoryKind]
    HISTORY_KIND_EVENTS: _ClassVar[HistoryKind]
    HISTORY_KIND_INSTANCES: _ClassVar[HistoryKind]

class RunTrigger(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RUN_TRIGGER_UNSPECIFIED: _ClassVar[RunTrigger]
    RUN_TRIGGER_MANUAL: _ClassVar[RunTrigger]
    RUN_TRIGGER_SCHEDULE: _ClassVar[RunTrigger]
    RUN_TRIGGER_BACKFILL: _ClassVar[RunTrigger]
WORKFLOW_INSTANCE_STATE_UNSPECIFIED: WorkflowInstanceState
WORKFLOW_INSTANCE_STATE_SUBMITTED: WorkflowInstanceState
WORKFLOW_INSTANCE_STATE_RUNNING: WorkflowInstanceState
WORKFLOW_INSTANCE_STATE_READY_PAUSE: WorkflowInstanceState
WORKFLOW_INSTANCE_STATE_PAUSED: WorkflowInstanceState
WORKFLOW_INSTANCE_STATE_READY_STOP: WorkflowInstanceState
WORKFLOW_INSTANCE_STATE_STOPPED: WorkflowInstanceState
WORKFLOW_INSTANCE_STATE_FAILED: WorkflowInstanceState
WORKFLOW_INSTANCE_STATE_SUCCEEDED: WorkflowInstanceState
WORKFLOW_INSTANCE_STATE_FAILOVER: WorkflowInstanceState
TASK_INSTANCE_STATE_UNSPECIFIED: TaskInstanceState
TASK_INSTANCE_STATE_SUBMITTED: TaskInstanceState
TASK_INSTANCE_STATE_DELAY_EXECUTION: TaskInstanceState
TASK_INSTANCE_STATE_DISPATCHED: TaskInstanceState
TASK_INSTANCE_STATE_RUNNING: TaskInstanceState
TASK_INSTANCE_STATE_SUCCEEDED: TaskInstanceState
TASK_INSTANCE_STATE_FAILED: TaskInstanceState
TASK_INSTANCE_STATE_KILLED: TaskInstanceState
TASK_INSTANCE_STATE_PAUSED: TaskInstanceState
TASK_INSTANCE_STATE_NEED_FAULT_TOLERANCE: TaskInstanceState
TASK_INSTANCE_STATE_FORCED_SUCCESS: TaskInstanceState
FAILURE_STRATEGY_UNSPECIFIED: FailureStrategy
FAILURE_STRATEGY_CONTINUE: FailureStrategy
FAILURE_STRATEGY_END: FailureStrategy
TASK_DEPEND_TYPE_UNSPECIFIED: TaskDependType
TASK_DEPEND_TYPE_TASK_ONLY: TaskDependType
TASK_DEPEND_TYPE_TASK_PRE: TaskDependType
TASK_DEPEND_TYPE_TASK_POST: TaskDependType
PRIORITY_UNSPECIFIED: Priority
PRIORITY_HIGHEST: Priority
PRIORITY_HIGH: Priority
PRIORITY_MEDIUM: Priority
PRIORITY_LOW: Priority
PRIORITY_LOWEST: Priority
TIMEOUT_STRATEGY_UNSPECIFIED: TimeoutStrategy
TIMEOUT_STRATEGY_WARN: TimeoutStrategy
TIMEOUT_STRATEGY_FAIL: TimeoutStrategy
TIMEOUT_STRATEGY_WARN_FAIL: TimeoutStrategy
RELEASE_STATE_UNSPECIFIED: ReleaseState
RELEASE_STATE_OFFLINE: ReleaseState
RELEASE_STATE_ONLINE: ReleaseState
COMMAND_TYPE_UNSPECIFIED: CommandType
COMMAND_TYPE_START: CommandType
COMMAND_TYPE_RESUME: CommandType
COMMAND_TYPE_RECOVER_FAILED: CommandType
COMMAND_TYPE_RERUN: CommandType
COMMAND_TYPE_EXECUTE_FROM_TASK: CommandType
COMMAND_TYPE_FAILOVER: CommandType
TASK_EVENT_TYPE_UNSPECIFIED: TaskEventType
TASK_EVENT_TYPE_RUNNING: TaskEventType
TASK_EVENT_TYPE_SUCCEEDED: TaskEventType
TASK_EVENT_TYPE_FAILED: TaskEventType
TASK_EVENT_TYPE_KILLED: TaskEventType
TASK_EVENT_DECISION_UNSPECIFIED: TaskEventDecision
TASK_EVENT_DECISION_ACCEPTED: TaskEventDecision
TASK_EVENT_DECISION_DUPLICATE: TaskEventDecision
TASK_EVENT_DECISION_REJECTED_STALE: TaskEventDecision
TASK_EVENT_DECISION_NOT_OWNER: TaskEventDecision
TASK_EVENT_DECISION_RETRY_LATER: TaskEventDecision
DISPATCH_OUTCOME_UNSPECIFIED: DispatchOutcome
DISPATCH_OUTCOME_ACCEPTED: DispatchOutcome
DISPATCH_OUTCOME_ALREADY_ACCEPTED: DispatchOutcome
DISPATCH_OUTCOME_REJECTED_FULL: DispatchOutcome
DISPATCH_OUTCOME_REJECTED_UNAVAILABLE: DispatchOutcome
SERVER_ROLE_UNSPECIFIED: ServerRole
SERVER_ROLE_MASTER: ServerRole
SERVER_ROLE_WORKER: ServerRole
SERVER_STATUS_UNSPECIFIED: ServerStatus
SERVER_STATUS_NORMAL: ServerStatus
SERVER_STATUS_BUSY: ServerStatus
INSTANCE_EVENT_KIND_UNSPECIFIED: InstanceEventKind
INSTANCE_EVENT_KIND_STATE: InstanceEventKind
INSTANCE_EVENT_KIND_CLAIMED: InstanceEventKind
INSTANCE_EVENT_KIND_FAILOVER: InstanceEventKind
INSTANCE_EVENT_KIND_TIMEOUT_WARNING: InstanceEventKind
INSTANCE_EVENT_KIND_RETRY_SCHEDULED: InstanceEventKind
INSTANCE_EVENT_KIND_WAITING: InstanceEventKind
INSTANCE_EVENT_KIND_CONTROL: InstanceEventKind
CONTROL_STATUS_UNSPECIFIED: ControlStatus
CONTROL_STATUS_APPLIED: ControlStatus
CONTROL_STATUS_PENDING: ControlStatus
HISTORY_KIND_UNSPECIFIED: HistoryKind
HISTORY_KIND_REQUEST_IDS: HistoryKind
HISTORY_KIND_EVENTS: HistoryKind
HISTORY_KIND_INSTANCES: HistoryKind
RUN_TRIGGER_UNSPECIFIED: RunTrigger
RUN_TRIGGER_MANUAL: RunTrigger
RUN_TRIGGER_SCHEDULE: RunTrigger
RUN_TRIGGER_BACKFILL: RunTrigger
