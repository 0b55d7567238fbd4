import datetime

from dsched.v1 import dependent_pb2 as _dependent_pb2
from dsched.v1 import enums_pb2 as _enums_pb2
from dsched.v1 import http_task_pb2 as _http_task_pb2
from dsched.v1 import python_task_pb2 as _python_task_pb2
from dsched.v1 import spark_pb2 as _spark_pb2
from dsched.v1 import sql_pb2 as _sql_pb2
from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Project(_message.Message):
    __slots__ = ("name", "description", "create_time", "update_time")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    create_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ShellTask(_message.Message):
    __slots__ = ("script",)
    SCRIPT_FIELD_NUMBER: _ClassVar[int]
    script: str
    def __init__(self, script: _Optional[str] = ...) -> None: ...

class TaskDefinition(_message.Message):
    __slots__ = ("name", "description", "upstream_tasks", "priority", "worker_group", "retries", "retry_interval", "timeout", "timeout_strategy", "delay", "params", "disabled", "shell", "dependent", "python", "spark", "http", "sql", "procedure")
    class ParamsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    UPSTREAM_TASKS_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    WORKER_GROUP_FIELD_NUMBER: _ClassVar[int]
    RETRIES_FIELD_NUMBER: _ClassVar[int]
    RETRY_INTERVAL_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_STRATEGY_FIELD_NUMBER: _ClassVar[int]
    DELAY_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    DISABLED_FIELD_NUMBER: _ClassVar[int]
    SHELL_FIELD_NUMBER: _ClassVar[int]
    DEPENDENT_FIELD_NUMBER: _ClassVar[int]
    PYTHON_FIELD_NUMBER: _ClassVar[int]
    SPARK_FIELD_NUMBER: _ClassVar[int]
    HTTP_FIELD_NUMBER: _ClassVar[int]
    SQL_FIELD_NUMBER: _ClassVar[int]
    PROCEDURE_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    upstream_tasks: _containers.RepeatedScalarFieldContainer[str]
    priority: _enums_pb2.Priority
    worker_group: str
    retries: int
    retry_interval: _duration_pb2.Duration
    timeout: _duration_pb2.Duration
    timeout_strategy: _enums_pb2.TimeoutStrategy
    delay: _duration_pb2.Duration
    params: _containers.ScalarMap[str, str]
    disabled: bool
    shell: ShellTask
    dependent: _dependent_pb2.DependentTask
    python: _python_task_pb2.PythonTask
    spark: _spark_pb2.SparkTask
    http: _http_task_pb2.HttpTask
    sql: _sql_pb2.SqlTask
    procedure: _sql_pb2.ProcedureTask
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., upstream_tasks: _Optional[_Iterable[str]] = ..., priority: _Optional[_Union[_enums_pb2.Priority, str]] = ..., worker_group: _Optional[str] = ..., retries: _Optional[int] = ..., retry_interval: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., timeout_strategy: _Optional[_Union[_enums_pb2.TimeoutStrategy, str]] = ..., delay: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., params: _Optional[_Mapping[str, str]] = ..., disabled: _Optional[bool] = ..., shell: _Optional[_Union[ShellTask, _Mapping]] = ..., dependent: _Optional[_Union[_dependent_pb2.DependentTask, _Mapping]] = ..., python: _Optional[_Union[_python_task_pb2.PythonTask, _Mapping]] = ..., spark: _Optional[_Union[_spark_pb2.SparkTask, _Mapping]] = ..., http: _Optional[_Union[_http_task_pb2.HttpTask, _Mapping]] = ..., sql: _Optional[_Union[_sql_pb2.SqlTask, _Mapping]] = ..., procedure: _Optional[_Union[_sql_pb2.ProcedureTask, _Mapping]] = ...) -> None: ...

class Workflow(_message.Message):
    __slots__ = ("project", "name", "code", "version", "description", "tasks", "params", "release_state", "create_time", "update_time")
    class ParamsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    RELEASE_STATE_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    project: str
    name: str
    code: int
    version: int
    description: str
    tasks: _containers.RepeatedCompositeFieldContainer[TaskDefinition]
    params: _containers.ScalarMap[str, str]
    release_state: _enums_pb2.ReleaseState
    create_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    def __init__(self, project: _Optional[str] = ..., name: _Optional[str] = ..., code: _Optional[int] = ..., version: _Optional[int] = ..., description: _Optional[str] = ..., tasks: _Optional[_Iterable[_Union[TaskDefinition, _Mapping]]] = ..., params: _Optional[_Mapping[str, str]] = ..., release_state: _Optional[_Union[_enums_pb2.ReleaseState, str]] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class WorkflowVersion(_message.Message):
    __slots__ = ("version", "description", "task_count", "create_time")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    TASK_COUNT_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    version: int
    description: str
    task_count: int
    create_time: _timestamp_pb2.Timestamp
    def __init__(self, version: _Optional[int] = ..., description: _Optional[str] = ..., task_count: _Optional[int] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class WorkflowInstance(_message.Message):
    __slots__ = ("id", "project", "workflow", "workflow_code", "workflow_version", "state", "command_type", "params", "start_tasks", "task_depend_type", "failure_strategy", "priority", "worker_group", "dry_run", "host", "run_times", "submit_time", "start_time", "end_time", "state_reason", "var_pool", "schedule_time", "time_zone", "trigger", "backfill_id", "schedule_id")
    class ParamsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class VarPoolEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_CODE_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_VERSION_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    COMMAND_TYPE_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    START_TASKS_FIELD_NUMBER: _ClassVar[int]
    TASK_DEPEND_TYPE_FIELD_NUMBER: _ClassVar[int]
    FAILURE_STRATEGY_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    WORKER_GROUP_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    RUN_TIMES_FIELD_NUMBER: _ClassVar[int]
    SUBMIT_TIME_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    STATE_REASON_FIELD_NUMBER: _ClassVar[int]
    VAR_POOL_FIELD_NUMBER: _ClassVar[int]
    SCHEDULE_TIME_FIELD_NUMBER: _ClassVar[int]
    TIME_ZONE_FIELD_NUMBER: _ClassVar[int]
    TRIGGER_FIELD_NUMBER: _ClassVar[int]
    BACKFILL_ID_FIELD_NUMBER: _ClassVar[int]
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    id: int
    project: str
    workflow: str
    workflow_code: int
    workflow_version: int
    state: _enums_pb2.WorkflowInstanceState
    command_type: _enums_pb2.CommandType
    params: _containers.ScalarMap[str, str]
    start_tasks: _containers.RepeatedScalarFieldContainer[str]
    task_depend_type: _enums_pb2.TaskDependType
    failure_strategy: _enums_pb2.FailureStrategy
    priority: _enums_pb2.Priority
    worker_group: str
    dry_run: bool
    host: str
    run_times: int
    submit_time: _timestamp_pb2.Timestamp
    start_time: _timestamp_pb2.Timestamp
    end_time: _timestamp_pb2.Timestamp
    state_reason: str
    var_pool: _containers.ScalarMap[str, str]
    schedule_time: _timestamp_pb2.Timestamp
    time_zone: str
    trigger: _enums_pb2.RunTrigger
    backfill_id: int
    schedule_id: int
    def __init__(self, id: _Optional[int] = ..., project: _Optional[str] = ..., workflow: _Optional[str] = ..., workflow_code: _Optional[int] = ..., workflow_version: _Optional[int] = ..., state: _Optional[_Union[_enums_pb2.WorkflowInstanceState, str]] = ..., command_type: _Optional[_Union[_enums_pb2.CommandType, str]] = ..., params: _Optional[_Mapping[str, str]] = ..., start_tasks: _Optional[_Iterable[str]] = ..., task_depend_type: _Optional[_Union[_enums_pb2.TaskDependType, str]] = ..., failure_strategy: _Optional[_Union[_enums_pb2.FailureStrategy, str]] = ..., priority: _Optional[_Union[_enums_pb2.Priority, str]] = ..., worker_group: _Optional[str] = ..., dry_run: _Optional[bool] = ..., host: _Optional[str] = ..., run_times: _Optional[int] = ..., submit_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., state_reason: _Optional[str] = ..., var_pool: _Optional[_Mapping[str, str]] = ..., schedule_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., time_zone: _Optional[str] = ..., trigger: _Optional[_Union[_enums_pb2.RunTrigger, str]] = ..., backfill_id: _Optional[int] = ..., schedule_id: _Optional[int] = ...) -> None: ...

class TaskInstance(_message.Message):
    __slots__ = ("id", "workflow_instance_id", "task_name", "attempt", "retry_times", "state", "valid", "host", "pid", "log_path", "exit_code", "submit_time", "start_time", "end_time", "out_params", "priority", "worker_group", "state_reason", "application_id")
    class OutParamsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_NAME_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    RETRY_TIMES_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    VALID_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    LOG_PATH_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    SUBMIT_TIME_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    OUT_PARAMS_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    WORKER_GROUP_FIELD_NUMBER: _ClassVar[int]
    STATE_REASON_FIELD_NUMBER: _ClassVar[int]
    APPLICATION_ID_FIELD_NUMBER: _ClassVar[int]
    id: int
    workflow_instance_id: int
    task_name: str
    attempt: int
    retry_times: int
    state: _enums_pb2.TaskInstanceState
    valid: bool
    host: str
    pid: int
    log_path: str
    exit_code: int
    submit_time: _timestamp_pb2.Timestamp
    start_time: _timestamp_pb2.Timestamp
    end_time: _timestamp_pb2.Timestamp
    out_params: _containers.ScalarMap[str, str]
    priority: _enums_pb2.Priority
    worker_group: str
    state_reason: str
    application_id: str
    def __init__(self, id: _Optional[int] = ..., workflow_instance_id: _Optional[int] = ..., task_name: _Optional[str] = ..., attempt: _Optional[int] = ..., retry_times: _Optional[int] = ..., state: _Optional[_Union[_enums_pb2.TaskInstanceState, str]] = ..., valid: _Optional[bool] = ..., host: _Optional[str] = ..., pid: _Optional[int] = ..., log_path: _Optional[str] = ..., exit_code: _Optional[int] = ..., submit_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., out_params: _Optional[_Mapping[str, str]] = ..., priority: _Optional[_Union[_enums_pb2.Priority, str]] = ..., worker_group: _Optional[str] = ..., state_reason: _Optional[str] = ..., application_id: _Optional[str] = ...) -> None: ...

class InstanceEvent(_message.Message):
    __slots__ = ("sequence", "workflow_instance_id", "task_instance_id", "task_name", "workflow_state", "task_state", "kind", "message", "create_time")
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_NAME_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_STATE_FIELD_NUMBER: _ClassVar[int]
    TASK_STATE_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    sequence: int
    workflow_instance_id: int
    task_instance_id: int
    task_name: str
    workflow_state: _enums_pb2.WorkflowInstanceState
    task_state: _enums_pb2.TaskInstanceState
    kind: _enums_pb2.InstanceEventKind
    message: str
    create_time: _timestamp_pb2.Timestamp
    def __init__(self, sequence: _Optional[int] = ..., workflow_instance_id: _Optional[int] = ..., task_instance_id: _Optional[int] = ..., task_name: _Optional[str] = ..., workflow_state: _Optional[_Union[_enums_pb2.WorkflowInstanceState, str]] = ..., task_state: _Optional[_Union[_enums_pb2.TaskInstanceState, str]] = ..., kind: _Optional[_Union[_enums_pb2.InstanceEventKind, str]] = ..., message: _Optional[str] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class Heartbeat(_message.Message):
    __slots__ = ("cpu_usage", "memory_usage", "load_average", "disk_usage", "slots_total", "slots_in_use", "start_time", "report_time", "status", "pid", "queued")
    CPU_USAGE_FIELD_NUMBER: _ClassVar[int]
    MEMORY_USAGE_FIELD_NUMBER: _ClassVar[int]
    LOAD_AVERAGE_FIELD_NUMBER: _ClassVar[int]
    DISK_USAGE_FIELD_NUMBER: _ClassVar[int]
    SLOTS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    SLOTS_IN_USE_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    REPORT_TIME_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    QUEUED_FIELD_NUMBER: _ClassVar[int]
    cpu_usage: float
    memory_usage: float
    load_average: float
    disk_usage: float
    slots_total: int
    slots_in_use: int
    start_time: _timestamp_pb2.Timestamp
    report_time: _timestamp_pb2.Timestamp
    status: _enums_pb2.ServerStatus
    pid: int
    queued: int
    def __init__(self, cpu_usage: _Optional[float] = ..., memory_usage: _Optional[float] = ..., load_average: _Optional[float] = ..., disk_usage: _Optional[float] = ..., slots_total: _Optional[int] = ..., slots_in_use: _Optional[int] = ..., start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., report_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., status: _Optional[_Union[_enums_pb2.ServerStatus, str]] = ..., pid: _Optional[int] = ..., queued: _Optional[int] = ...) -> None: ...

class ClusterMember(_message.Message):
    __slots__ = ("role", "address", "group", "heartbeat", "weight", "cluster_address")
    ROLE_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    role: _enums_pb2.ServerRole
    address: str
    group: str
    heartbeat: Heartbeat
    weight: float
    cluster_address: str
    def __init__(self, role: _Optional[_Union[_enums_pb2.ServerRole, str]] = ..., address: _Optional[str] = ..., group: _Optional[str] = ..., heartbeat: _Optional[_Union[Heartbeat, _Mapping]] = ..., weight: _Optional[float] = ..., cluster_address: _Optional[str] = ...) -> None: ...
