import datetime

from dsched.v1 import datasource_pb2 as _datasource_pb2
from dsched.v1 import enums_pb2 as _enums_pb2
from dsched.v1 import http_task_pb2 as _http_task_pb2
from dsched.v1 import python_task_pb2 as _python_task_pb2
from dsched.v1 import resources_pb2 as _resources_pb2
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

class TaskExecution(_message.Message):
    __slots__ = ("task_instance_id", "attempt", "workflow_instance_id", "workflow_code", "workflow_version", "task_name", "idempotency_key", "params", "timeout", "timeout_strategy", "dry_run", "owner_address", "owner_epoch", "submit_time", "queue_rank", "shell", "python", "spark", "http", "sql", "procedure", "earlier_application_ids", "datasource")
    class ParamsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    TASK_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_CODE_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_VERSION_FIELD_NUMBER: _ClassVar[int]
    TASK_NAME_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_STRATEGY_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    OWNER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    OWNER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    SUBMIT_TIME_FIELD_NUMBER: _ClassVar[int]
    QUEUE_RANK_FIELD_NUMBER: _ClassVar[int]
    SHELL_FIELD_NUMBER: _ClassVar[int]
    PYTHON_FIELD_NUMBER: _ClassVar[int]
    SPARK_FIELD_NUMBER: _ClassVar[int]
    HTTP_FIELD_NUMBER: _ClassVar[int]
    SQL_FIELD_NUMBER: _ClassVar[int]
    PROCEDURE_FIELD_NUMBER: _ClassVar[int]
    EARLIER_APPLICATION_IDS_FIELD_NUMBER: _ClassVar[int]
    DATASOURCE_FIELD_NUMBER: _ClassVar[int]
    task_instance_id: int
    attempt: int
    workflow_instance_id: int
    workflow_code: int
    workflow_version: int
    task_name: str
    idempotency_key: str
    params: _containers.ScalarMap[str, str]
    timeout: _duration_pb2.Duration
    timeout_strategy: _enums_pb2.TimeoutStrategy
    dry_run: bool
    owner_address: str
    owner_epoch: int
    submit_time: _timestamp_pb2.Timestamp
    queue_rank: int
    shell: _resources_pb2.ShellTask
    python: _python_task_pb2.PythonTask
    spark: _spark_pb2.SparkTask
    http: _http_task_pb2.HttpTask
    sql: _sql_pb2.SqlTask
    procedure: _sql_pb2.ProcedureTask
    earlier_application_ids: _containers.RepeatedScalarFieldContainer[str]
    datasource: TaskDatasource
    def __init__(self, task_instance_id: _Optional[int] = ..., attempt: _Optional[int] = ..., workflow_instance_id: _Optional[int] = ..., workflow_code: _Optional[int] = ..., workflow_version: _Optional[int] = ..., task_name: _Optional[str] = ..., idempotency_key: _Optional[str] = ..., params: _Optional[_Mapping[str, str]] = ..., timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., timeout_strategy: _Optional[_Union[_enums_pb2.TimeoutStrategy, str]] = ..., dry_run: _Optional[bool] = ..., owner_address: _Optional[str] = ..., owner_epoch: _Optional[int] = ..., submit_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., queue_rank: _Optional[int] = ..., shell: _Optional[_Union[_resources_pb2.ShellTask, _Mapping]] = ..., python: _Optional[_Union[_python_task_pb2.PythonTask, _Mapping]] = ..., spark: _Optional[_Union[_spark_pb2.SparkTask, _Mapping]] = ..., http: _Optional[_Union[_http_task_pb2.HttpTask, _Mapping]] = ..., sql: _Optional[_Union[_sql_pb2.SqlTask, _Mapping]] = ..., procedure: _Optional[_Union[_sql_pb2.ProcedureTask, _Mapping]] = ..., earlier_application_ids: _Optional[_Iterable[str]] = ..., datasource: _Optional[_Union[TaskDatasource, _Mapping]] = ...) -> None: ...

class TaskDatasource(_message.Message):
    __slots__ = ("name", "type", "host", "port", "database", "user", "password", "options", "error")
    class OptionsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    DATABASE_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    PASSWORD_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    name: str
    type: _datasource_pb2.DatasourceType
    host: str
    port: int
    database: str
    user: str
    password: str
    options: _containers.ScalarMap[str, str]
    error: str
    def __init__(self, name: _Optional[str] = ..., type: _Optional[_Union[_datasource_pb2.DatasourceType, str]] = ..., host: _Optional[str] = ..., port: _Optional[int] = ..., database: _Optional[str] = ..., user: _Optional[str] = ..., password: _Optional[str] = ..., options: _Optional[_Mapping[str, str]] = ..., error: _Optional[str] = ...) -> None: ...

class DispatchTaskRequest(_message.Message):
    __slots__ = ("task",)
    TASK_FIELD_NUMBER: _ClassVar[int]
    task: TaskExecution
    def __init__(self, task: _Optional[_Union[TaskExecution, _Mapping]] = ...) -> None: ...

class DispatchTaskResponse(_message.Message):
    __slots__ = ("outcome", "worker_epoch", "log_path", "reason")
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    WORKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    LOG_PATH_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    outcome: _enums_pb2.DispatchOutcome
    worker_epoch: int
    log_path: str
    reason: str
    def __init__(self, outcome: _Optional[_Union[_enums_pb2.DispatchOutcome, str]] = ..., worker_epoch: _Optional[int] = ..., log_path: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class DispatchTasksRequest(_message.Message):
    __slots__ = ("tasks",)
    TASKS_FIELD_NUMBER: _ClassVar[int]
    tasks: _containers.RepeatedCompositeFieldContainer[TaskExecution]
    def __init__(self, tasks: _Optional[_Iterable[_Union[TaskExecution, _Mapping]]] = ...) -> None: ...

class DispatchResult(_message.Message):
    __slots__ = ("task_instance_id", "attempt", "outcome", "log_path", "reason")
    TASK_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    LOG_PATH_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    task_instance_id: int
    attempt: int
    outcome: _enums_pb2.DispatchOutcome
    log_path: str
    reason: str
    def __init__(self, task_instance_id: _Optional[int] = ..., attempt: _Optional[int] = ..., outcome: _Optional[_Union[_enums_pb2.DispatchOutcome, str]] = ..., log_path: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class DispatchTasksResponse(_message.Message):
    __slots__ = ("worker_epoch", "results")
    WORKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    worker_epoch: int
    results: _containers.RepeatedCompositeFieldContainer[DispatchResult]
    def __init__(self, worker_epoch: _Optional[int] = ..., results: _Optional[_Iterable[_Union[DispatchResult, _Mapping]]] = ...) -> None: ...

class KillTaskRequest(_message.Message):
    __slots__ = ("task_instance_id", "attempt", "reason")
    TASK_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    task_instance_id: int
    attempt: int
    reason: str
    def __init__(self, task_instance_id: _Optional[int] = ..., attempt: _Optional[int] = ..., reason: _Optional[str] = ...) -> None: ...

class KillTaskResponse(_message.Message):
    __slots__ = ("found",)
    FOUND_FIELD_NUMBER: _ClassVar[int]
    found: bool
    def __init__(self, found: _Optional[bool] = ...) -> None: ...

class TakeOverTaskRequest(_message.Message):
    __slots__ = ("task_instance_id", "attempt", "owner_address", "owner_epoch")
    TASK_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    OWNER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    OWNER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    task_instance_id: int
    attempt: int
    owner_address: str
    owner_epoch: int
    def __init__(self, task_instance_id: _Optional[int] = ..., attempt: _Optional[int] = ..., owner_address: _Optional[str] = ..., owner_epoch: _Optional[int] = ...) -> None: ...

class TakeOverTaskResponse(_message.Message):
    __slots__ = ("found",)
    FOUND_FIELD_NUMBER: _ClassVar[int]
    found: bool
    def __init__(self, found: _Optional[bool] = ...) -> None: ...
