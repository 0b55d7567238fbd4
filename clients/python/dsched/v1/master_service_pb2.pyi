import datetime

from dsched.v1 import backfill_pb2 as _backfill_pb2
from dsched.v1 import datasource_pb2 as _datasource_pb2
from dsched.v1 import enums_pb2 as _enums_pb2
from dsched.v1 import schedule_pb2 as _schedule_pb2
from dsched.v1 import resources_pb2 as _resources_pb2
from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CreateProjectRequest(_message.Message):
    __slots__ = ("project", "request_id")
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    project: _resources_pb2.Project
    request_id: str
    def __init__(self, project: _Optional[_Union[_resources_pb2.Project, _Mapping]] = ..., request_id: _Optional[str] = ...) -> None: ...

class CreateProjectResponse(_message.Message):
    __slots__ = ("project",)
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    project: _resources_pb2.Project
    def __init__(self, project: _Optional[_Union[_resources_pb2.Project, _Mapping]] = ...) -> None: ...

class GetProjectRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class GetProjectResponse(_message.Message):
    __slots__ = ("project",)
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    project: _resources_pb2.Project
    def __init__(self, project: _Optional[_Union[_resources_pb2.Project, _Mapping]] = ...) -> None: ...

class ListProjectsRequest(_message.Message):
    __slots__ = ("page_size", "page_token")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListProjectsResponse(_message.Message):
    __slots__ = ("projects", "next_page_token")
    PROJECTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    projects: _containers.RepeatedCompositeFieldContainer[_resources_pb2.Project]
    next_page_token: str
    def __init__(self, projects: _Optional[_Iterable[_Union[_resources_pb2.Project, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class DeleteProjectRequest(_message.Message):
    __slots__ = ("name", "request_id")
    NAME_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    name: str
    request_id: str
    def __init__(self, name: _Optional[str] = ..., request_id: _Optional[str] = ...) -> None: ...

class DeleteProjectResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class CreateWorkflowRequest(_message.Message):
    __slots__ = ("workflow", "request_id")
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    workflow: _resources_pb2.Workflow
    request_id: str
    def __init__(self, workflow: _Optional[_Union[_resources_pb2.Workflow, _Mapping]] = ..., request_id: _Optional[str] = ...) -> None: ...

class CreateWorkflowResponse(_message.Message):
    __slots__ = ("workflow",)
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    workflow: _resources_pb2.Workflow
    def __init__(self, workflow: _Optional[_Union[_resources_pb2.Workflow, _Mapping]] = ...) -> None: ...

class UpdateWorkflowRequest(_message.Message):
    __slots__ = ("workflow", "request_id", "expected_version")
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_VERSION_FIELD_NUMBER: _ClassVar[int]
    workflow: _resources_pb2.Workflow
    request_id: str
    expected_version: int
    def __init__(self, workflow: _Optional[_Union[_resources_pb2.Workflow, _Mapping]] = ..., request_id: _Optional[str] = ..., expected_version: _Optional[int] = ...) -> None: ...

class UpdateWorkflowResponse(_message.Message):
    __slots__ = ("workflow",)
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    workflow: _resources_pb2.Workflow
    def __init__(self, workflow: _Optional[_Union[_resources_pb2.Workflow, _Mapping]] = ...) -> None: ...

class GetWorkflowRequest(_message.Message):
    __slots__ = ("project", "name", "version")
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    project: str
    name: str
    version: int
    def __init__(self, project: _Optional[str] = ..., name: _Optional[str] = ..., version: _Optional[int] = ...) -> None: ...

class GetWorkflowResponse(_message.Message):
    __slots__ = ("workflow",)
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    workflow: _resources_pb2.Workflow
    def __init__(self, workflow: _Optional[_Union[_resources_pb2.Workflow, _Mapping]] = ...) -> None: ...

class ListWorkflowsRequest(_message.Message):
    __slots__ = ("project", "page_size", "page_token")
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    project: str
    page_size: int
    page_token: str
    def __init__(self, project: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListWorkflowsResponse(_message.Message):
    __slots__ = ("workflows", "next_page_token")
    WORKFLOWS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    workflows: _containers.RepeatedCompositeFieldContainer[_resources_pb2.Workflow]
    next_page_token: str
    def __init__(self, workflows: _Optional[_Iterable[_Union[_resources_pb2.Workflow, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ListWorkflowVersionsRequest(_message.Message):
    __slots__ = ("project", "name", "page_size", "page_token")
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    project: str
    name: str
    page_size: int
    page_token: str
    def __init__(self, project: _Optional[str] = ..., name: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListWorkflowVersionsResponse(_message.Message):
    __slots__ = ("versions", "next_page_token")
    VERSIONS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    versions: _containers.RepeatedCompositeFieldContainer[_resources_pb2.WorkflowVersion]
    next_page_token: str
    def __init__(self, versions: _Optional[_Iterable[_Union[_resources_pb2.WorkflowVersion, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class DeleteWorkflowRequest(_message.Message):
    __slots__ = ("project", "name", "request_id")
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    project: str
    name: str
    request_id: str
    def __init__(self, project: _Optional[str] = ..., name: _Optional[str] = ..., request_id: _Optional[str] = ...) -> None: ...

class DeleteWorkflowResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class SetWorkflowReleaseStateRequest(_message.Message):
    __slots__ = ("project", "name", "release_state", "request_id")
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    RELEASE_STATE_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    project: str
    name: str
    release_state: _enums_pb2.ReleaseState
    request_id: str
    def __init__(self, project: _Optional[str] = ..., name: _Optional[str] = ..., release_state: _Optional[_Union[_enums_pb2.ReleaseState, str]] = ..., request_id: _Optional[str] = ...) -> None: ...

class SetWorkflowReleaseStateResponse(_message.Message):
    __slots__ = ("workflow",)
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    workflow: _resources_pb2.Workflow
    def __init__(self, workflow: _Optional[_Union[_resources_pb2.Workflow, _Mapping]] = ...) -> None: ...

class StartWorkflowRequest(_message.Message):
    __slots__ = ("project", "workflow", "params", "start_tasks", "task_depend_type", "failure_strategy", "priority", "worker_group", "dry_run", "request_id", "dispatch_timeout", "schedule_time", "time_zone")
    class ParamsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    START_TASKS_FIELD_NUMBER: _ClassVar[int]
    TASK_DEPEND_TYPE_FIELD_NUMBER: _ClassVar[int]
    FAILURE_STRATEGY_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    WORKER_GROUP_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    DISPATCH_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    SCHEDULE_TIME_FIELD_NUMBER: _ClassVar[int]
    TIME_ZONE_FIELD_NUMBER: _ClassVar[int]
    project: str
    workflow: str
    params: _containers.ScalarMap[str, str]
    start_tasks: _containers.RepeatedScalarFieldContainer[str]
    task_depend_type: _enums_pb2.TaskDependType
    failure_strategy: _enums_pb2.FailureStrategy
    priority: _enums_pb2.Priority
    worker_group: str
    dry_run: bool
    request_id: str
    dispatch_timeout: _duration_pb2.Duration
    schedule_time: _timestamp_pb2.Timestamp
    time_zone: str
    def __init__(self, project: _Optional[str] = ..., workflow: _Optional[str] = ..., params: _Optional[_Mapping[str, str]] = ..., start_tasks: _Optional[_Iterable[str]] = ..., task_depend_type: _Optional[_Union[_enums_pb2.TaskDependType, str]] = ..., failure_strategy: _Optional[_Union[_enums_pb2.FailureStrategy, str]] = ..., priority: _Optional[_Union[_enums_pb2.Priority, str]] = ..., worker_group: _Optional[str] = ..., dry_run: _Optional[bool] = ..., request_id: _Optional[str] = ..., dispatch_timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., schedule_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., time_zone: _Optional[str] = ...) -> None: ...

class StartWorkflowResponse(_message.Message):
    __slots__ = ("instance",)
    INSTANCE_FIELD_NUMBER: _ClassVar[int]
    instance: _resources_pb2.WorkflowInstance
    def __init__(self, instance: _Optional[_Union[_resources_pb2.WorkflowInstance, _Mapping]] = ...) -> None: ...

class PauseWorkflowInstanceRequest(_message.Message):
    __slots__ = ("id", "request_id")
    ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    id: int
    request_id: str
    def __init__(self, id: _Optional[int] = ..., request_id: _Optional[str] = ...) -> None: ...

class PauseWorkflowInstanceResponse(_message.Message):
    __slots__ = ("instance", "status")
    INSTANCE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    instance: _resources_pb2.WorkflowInstance
    status: _enums_pb2.ControlStatus
    def __init__(self, instance: _Optional[_Union[_resources_pb2.WorkflowInstance, _Mapping]] = ..., status: _Optional[_Union[_enums_pb2.ControlStatus, str]] = ...) -> None: ...

class StopWorkflowInstanceRequest(_message.Message):
    __slots__ = ("id", "request_id")
    ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    id: int
    request_id: str
    def __init__(self, id: _Optional[int] = ..., request_id: _Optional[str] = ...) -> None: ...

class StopWorkflowInstanceResponse(_message.Message):
    __slots__ = ("instance", "status")
    INSTANCE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    instance: _resources_pb2.WorkflowInstance
    status: _enums_pb2.ControlStatus
    def __init__(self, instance: _Optional[_Union[_resources_pb2.WorkflowInstance, _Mapping]] = ..., status: _Optional[_Union[_enums_pb2.ControlStatus, str]] = ...) -> None: ...

class ResumeWorkflowInstanceRequest(_message.Message):
    __slots__ = ("id", "request_id")
    ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    id: int
    request_id: str
    def __init__(self, id: _Optional[int] = ..., request_id: _Optional[str] = ...) -> None: ...

class ResumeWorkflowInstanceResponse(_message.Message):
    __slots__ = ("instance",)
    INSTANCE_FIELD_NUMBER: _ClassVar[int]
    instance: _resources_pb2.WorkflowInstance
    def __init__(self, instance: _Optional[_Union[_resources_pb2.WorkflowInstance, _Mapping]] = ...) -> None: ...

class RerunWorkflowInstanceRequest(_message.Message):
    __slots__ = ("id", "request_id")
    ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    id: int
    request_id: str
    def __init__(self, id: _Optional[int] = ..., request_id: _Optional[str] = ...) -> None: ...

class RerunWorkflowInstanceResponse(_message.Message):
    __slots__ = ("instance",)
    INSTANCE_FIELD_NUMBER: _ClassVar[int]
    instance: _resources_pb2.WorkflowInstance
    def __init__(self, instance: _Optional[_Union[_resources_pb2.WorkflowInstance, _Mapping]] = ...) -> None: ...

class RecoverFailedWorkflowInstanceRequest(_message.Message):
    __slots__ = ("id", "request_id")
    ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    id: int
    request_id: str
    def __init__(self, id: _Optional[int] = ..., request_id: _Optional[str] = ...) -> None: ...

class RecoverFailedWorkflowInstanceResponse(_message.Message):
    __slots__ = ("instance",)
    INSTANCE_FIELD_NUMBER: _ClassVar[int]
    instance: _resources_pb2.WorkflowInstance
    def __init__(self, instance: _Optional[_Union[_resources_pb2.WorkflowInstance, _Mapping]] = ...) -> None: ...

class ExecuteFromTaskRequest(_message.Message):
    __slots__ = ("id", "start_tasks", "task_depend_type", "request_id")
    ID_FIELD_NUMBER: _ClassVar[int]
    START_TASKS_FIELD_NUMBER: _ClassVar[int]
    TASK_DEPEND_TYPE_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    id: int
    start_tasks: _containers.RepeatedScalarFieldContainer[str]
    task_depend_type: _enums_pb2.TaskDependType
    request_id: str
    def __init__(self, id: _Optional[int] = ..., start_tasks: _Optional[_Iterable[str]] = ..., task_depend_type: _Optional[_Union[_enums_pb2.TaskDependType, str]] = ..., request_id: _Optional[str] = ...) -> None: ...

class ExecuteFromTaskResponse(_message.Message):
    __slots__ = ("instance",)
    INSTANCE_FIELD_NUMBER: _ClassVar[int]
    instance: _resources_pb2.WorkflowInstance
    def __init__(self, instance: _Optional[_Union[_resources_pb2.WorkflowInstance, _Mapping]] = ...) -> None: ...

class GetWorkflowInstanceRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: int
    def __init__(self, id: _Optional[int] = ...) -> None: ...

class GetWorkflowInstanceResponse(_message.Message):
    __slots__ = ("instance",)
    INSTANCE_FIELD_NUMBER: _ClassVar[int]
    instance: _resources_pb2.WorkflowInstance
    def __init__(self, instance: _Optional[_Union[_resources_pb2.WorkflowInstance, _Mapping]] = ...) -> None: ...

class ListWorkflowInstancesRequest(_message.Message):
    __slots__ = ("project", "workflow", "states", "submitted_after", "page_size", "page_token")
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    STATES_FIELD_NUMBER: _ClassVar[int]
    SUBMITTED_AFTER_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    project: str
    workflow: str
    states: _containers.RepeatedScalarFieldContainer[_enums_pb2.WorkflowInstanceState]
    submitted_after: _timestamp_pb2.Timestamp
    page_size: int
    page_token: str
    def __init__(self, project: _Optional[str] = ..., workflow: _Optional[str] = ..., states: _Optional[_Iterable[_Union[_enums_pb2.WorkflowInstanceState, str]]] = ..., submitted_after: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListWorkflowInstancesResponse(_message.Message):
    __slots__ = ("instances", "next_page_token")
    INSTANCES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    instances: _containers.RepeatedCompositeFieldContainer[_resources_pb2.WorkflowInstance]
    next_page_token: str
    def __init__(self, instances: _Optional[_Iterable[_Union[_resources_pb2.WorkflowInstance, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class WatchWorkflowInstanceRequest(_message.Message):
    __slots__ = ("id", "after_sequence", "keep_open", "state_only")
    ID_FIELD_NUMBER: _ClassVar[int]
    AFTER_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    KEEP_OPEN_FIELD_NUMBER: _ClassVar[int]
    STATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    id: int
    after_sequence: int
    keep_open: bool
    state_only: bool
    def __init__(self, id: _Optional[int] = ..., after_sequence: _Optional[int] = ..., keep_open: _Optional[bool] = ..., state_only: _Optional[bool] = ...) -> None: ...

class WatchWorkflowInstanceResponse(_message.Message):
    __slots__ = ("events", "cursor", "state")
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[_resources_pb2.InstanceEvent]
    cursor: int
    state: _enums_pb2.WorkflowInstanceState
    def __init__(self, events: _Optional[_Iterable[_Union[_resources_pb2.InstanceEvent, _Mapping]]] = ..., cursor: _Optional[int] = ..., state: _Optional[_Union[_enums_pb2.WorkflowInstanceState, str]] = ...) -> None: ...

class GetTaskInstanceRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: int
    def __init__(self, id: _Optional[int] = ...) -> None: ...

class GetTaskInstanceResponse(_message.Message):
    __slots__ = ("task_instance",)
    TASK_INSTANCE_FIELD_NUMBER: _ClassVar[int]
    task_instance: _resources_pb2.TaskInstance
    def __init__(self, task_instance: _Optional[_Union[_resources_pb2.TaskInstance, _Mapping]] = ...) -> None: ...

class ListTaskInstancesRequest(_message.Message):
    __slots__ = ("workflow_instance_id", "include_superseded", "page_size", "page_token")
    WORKFLOW_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_SUPERSEDED_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    workflow_instance_id: int
    include_superseded: bool
    page_size: int
    page_token: str
    def __init__(self, workflow_instance_id: _Optional[int] = ..., include_superseded: _Optional[bool] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListTaskInstancesResponse(_message.Message):
    __slots__ = ("task_instances", "next_page_token")
    TASK_INSTANCES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    task_instances: _containers.RepeatedCompositeFieldContainer[_resources_pb2.TaskInstance]
    next_page_token: str
    def __init__(self, task_instances: _Optional[_Iterable[_Union[_resources_pb2.TaskInstance, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ForceTaskInstanceSuccessRequest(_message.Message):
    __slots__ = ("id", "request_id")
    ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    id: int
    request_id: str
    def __init__(self, id: _Optional[int] = ..., request_id: _Optional[str] = ...) -> None: ...

class ForceTaskInstanceSuccessResponse(_message.Message):
    __slots__ = ("task_instance", "instance")
    TASK_INSTANCE_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_FIELD_NUMBER: _ClassVar[int]
    task_instance: _resources_pb2.TaskInstance
    instance: _resources_pb2.WorkflowInstance
    def __init__(self, task_instance: _Optional[_Union[_resources_pb2.TaskInstance, _Mapping]] = ..., instance: _Optional[_Union[_resources_pb2.WorkflowInstance, _Mapping]] = ...) -> None: ...

class ListClusterMembersRequest(_message.Message):
    __slots__ = ("role",)
    ROLE_FIELD_NUMBER: _ClassVar[int]
    role: _enums_pb2.ServerRole
    def __init__(self, role: _Optional[_Union[_enums_pb2.ServerRole, str]] = ...) -> None: ...

class ListClusterMembersResponse(_message.Message):
    __slots__ = ("members",)
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    members: _containers.RepeatedCompositeFieldContainer[_resources_pb2.ClusterMember]
    def __init__(self, members: _Optional[_Iterable[_Union[_resources_pb2.ClusterMember, _Mapping]]] = ...) -> None: ...

class GetServerInfoRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetServerInfoResponse(_message.Message):
    __slots__ = ("version", "api_version", "role", "address", "start_time", "counters")
    class CountersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    VERSION_FIELD_NUMBER: _ClassVar[int]
    API_VERSION_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    COUNTERS_FIELD_NUMBER: _ClassVar[int]
    version: str
    api_version: str
    role: _enums_pb2.ServerRole
    address: str
    start_time: _timestamp_pb2.Timestamp
    counters: _containers.ScalarMap[str, int]
    def __init__(self, version: _Optional[str] = ..., api_version: _Optional[str] = ..., role: _Optional[_Union[_enums_pb2.ServerRole, str]] = ..., address: _Optional[str] = ..., start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., counters: _Optional[_Mapping[str, int]] = ...) -> None: ...

class CleanUpHistoryRequest(_message.Message):
    __slots__ = ("older_than", "kinds", "dry_run", "request_id")
    OLDER_THAN_FIELD_NUMBER: _ClassVar[int]
    KINDS_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    older_than: _duration_pb2.Duration
    kinds: _containers.RepeatedScalarFieldContainer[_enums_pb2.HistoryKind]
    dry_run: bool
    request_id: str
    def __init__(self, older_than: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., kinds: _Optional[_Iterable[_Union[_enums_pb2.HistoryKind, str]]] = ..., dry_run: _Optional[bool] = ..., request_id: _Optional[str] = ...) -> None: ...

class CleanUpHistoryResponse(_message.Message):
    __slots__ = ("tallies", "dry_run")
    TALLIES_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    tallies: _containers.RepeatedCompositeFieldContainer[HistoryTally]
    dry_run: bool
    def __init__(self, tallies: _Optional[_Iterable[_Union[HistoryTally, _Mapping]]] = ..., dry_run: _Optional[bool] = ...) -> None: ...

class HistoryTally(_message.Message):
    __slots__ = ("kind", "count", "oldest", "newest")
    KIND_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    OLDEST_FIELD_NUMBER: _ClassVar[int]
    NEWEST_FIELD_NUMBER: _ClassVar[int]
    kind: _enums_pb2.HistoryKind
    count: int
    oldest: _timestamp_pb2.Timestamp
    newest: _timestamp_pb2.Timestamp
    def __init__(self, kind: _Optional[_Union[_enums_pb2.HistoryKind, str]] = ..., count: _Optional[int] = ..., oldest: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., newest: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...
