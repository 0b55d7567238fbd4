import datetime

from dsched.v1 import enums_pb2 as _enums_pb2
from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class BackfillState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    BACKFILL_STATE_UNSPECIFIED: _ClassVar[BackfillState]
    BACKFILL_STATE_RUNNING: _ClassVar[BackfillState]
    BACKFILL_STATE_PAUSED: _ClassVar[BackfillState]
    BACKFILL_STATE_SUCCEEDED: _ClassVar[BackfillState]
    BACKFILL_STATE_FAILED: _ClassVar[BackfillState]
    BACKFILL_STATE_CANCELLED: _ClassVar[BackfillState]

class BackfillOrder(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    BACKFILL_ORDER_UNSPECIFIED: _ClassVar[BackfillOrder]
    BACKFILL_ORDER_ASCENDING: _ClassVar[BackfillOrder]
    BACKFILL_ORDER_DESCENDING: _ClassVar[BackfillOrder]

class BackfillReprocess(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    BACKFILL_REPROCESS_UNSPECIFIED: _ClassVar[BackfillReprocess]
    BACKFILL_REPROCESS_ALL: _ClassVar[BackfillReprocess]
    BACKFILL_REPROCESS_FAILED: _ClassVar[BackfillReprocess]
    BACKFILL_REPROCESS_MISSING: _ClassVar[BackfillReprocess]

class BackfillFailure(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    BACKFILL_FAILURE_UNSPECIFIED: _ClassVar[BackfillFailure]
    BACKFILL_FAILURE_CONTINUE: _ClassVar[BackfillFailure]
    BACKFILL_FAILURE_STOP: _ClassVar[BackfillFailure]
BACKFILL_STATE_UNSPECIFIED: BackfillState
BACKFILL_STATE_RUNNING: BackfillState
BACKFILL_STATE_PAUSED: BackfillState
BACKFILL_STATE_SUCCEEDED: BackfillState
BACKFILL_STATE_FAILED: BackfillState
BACKFILL_STATE_CANCELLED: BackfillState
BACKFILL_ORDER_UNSPECIFIED: BackfillOrder
BACKFILL_ORDER_ASCENDING: BackfillOrder
BACKFILL_ORDER_DESCENDING: BackfillOrder
BACKFILL_REPROCESS_UNSPECIFIED: BackfillReprocess
BACKFILL_REPROCESS_ALL: BackfillReprocess
BACKFILL_REPROCESS_FAILED: BackfillReprocess
BACKFILL_REPROCESS_MISSING: BackfillReprocess
BACKFILL_FAILURE_UNSPECIFIED: BackfillFailure
BACKFILL_FAILURE_CONTINUE: BackfillFailure
BACKFILL_FAILURE_STOP: BackfillFailure

class BackfillProgress(_message.Message):
    __slots__ = ("succeeded", "running", "failed", "pending", "skipped", "eta")
    SUCCEEDED_FIELD_NUMBER: _ClassVar[int]
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    ETA_FIELD_NUMBER: _ClassVar[int]
    succeeded: int
    running: int
    failed: int
    pending: int
    skipped: int
    eta: _duration_pb2.Duration
    def __init__(self, succeeded: _Optional[int] = ..., running: _Optional[int] = ..., failed: _Optional[int] = ..., pending: _Optional[int] = ..., skipped: _Optional[int] = ..., eta: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class Backfill(_message.Message):
    __slots__ = ("id", "project", "workflow", "state", "dates", "time_zone", "order", "parallelism", "reprocess", "on_failure", "failure_strategy", "priority", "worker_group", "params", "progress", "create_time", "end_time", "cron")
    class ParamsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    DATES_FIELD_NUMBER: _ClassVar[int]
    TIME_ZONE_FIELD_NUMBER: _ClassVar[int]
    ORDER_FIELD_NUMBER: _ClassVar[int]
    PARALLELISM_FIELD_NUMBER: _ClassVar[int]
    REPROCESS_FIELD_NUMBER: _ClassVar[int]
    ON_FAILURE_FIELD_NUMBER: _ClassVar[int]
    FAILURE_STRATEGY_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    WORKER_GROUP_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    CRON_FIELD_NUMBER: _ClassVar[int]
    id: int
    project: str
    workflow: str
    state: BackfillState
    dates: _containers.RepeatedCompositeFieldContainer[_timestamp_pb2.Timestamp]
    time_zone: str
    order: BackfillOrder
    parallelism: int
    reprocess: BackfillReprocess
    on_failure: BackfillFailure
    failure_strategy: _enums_pb2.FailureStrategy
    priority: _enums_pb2.Priority
    worker_group: str
    params: _containers.ScalarMap[str, str]
    progress: BackfillProgress
    create_time: _timestamp_pb2.Timestamp
    end_time: _timestamp_pb2.Timestamp
    cron: str
    def __init__(self, id: _Optional[int] = ..., project: _Optional[str] = ..., workflow: _Optional[str] = ..., state: _Optional[_Union[BackfillState, str]] = ..., dates: _Optional[_Iterable[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]]] = ..., time_zone: _Optional[str] = ..., order: _Optional[_Union[BackfillOrder, str]] = ..., parallelism: _Optional[int] = ..., reprocess: _Optional[_Union[BackfillReprocess, str]] = ..., on_failure: _Optional[_Union[BackfillFailure, str]] = ..., failure_strategy: _Optional[_Union[_enums_pb2.FailureStrategy, str]] = ..., priority: _Optional[_Union[_enums_pb2.Priority, str]] = ..., worker_group: _Optional[str] = ..., params: _Optional[_Mapping[str, str]] = ..., progress: _Optional[_Union[BackfillProgress, _Mapping]] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., cron: _Optional[str] = ...) -> None: ...

class CreateBackfillRequest(_message.Message):
    __slots__ = ("project", "workflow", "start_time", "end_time", "cron", "time_zone", "dates", "order", "parallelism", "reprocess", "on_failure", "failure_strategy", "priority", "worker_group", "params", "request_id")
    class ParamsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    CRON_FIELD_NUMBER: _ClassVar[int]
    TIME_ZONE_FIELD_NUMBER: _ClassVar[int]
    DATES_FIELD_NUMBER: _ClassVar[int]
    ORDER_FIELD_NUMBER: _ClassVar[int]
    PARALLELISM_FIELD_NUMBER: _ClassVar[int]
    REPROCESS_FIELD_NUMBER: _ClassVar[int]
    ON_FAILURE_FIELD_NUMBER: _ClassVar[int]
    FAILURE_STRATEGY_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    WORKER_GROUP_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    project: str
    workflow: str
    start_time: _timestamp_pb2.Timestamp
    end_time: _timestamp_pb2.Timestamp
    cron: str
    time_zone: str
    dates: _containers.RepeatedCompositeFieldContainer[_timestamp_pb2.Timestamp]
    order: BackfillOrder
    parallelism: int
    reprocess: BackfillReprocess
    on_failure: BackfillFailure
    failure_strategy: _enums_pb2.FailureStrategy
    priority: _enums_pb2.Priority
    worker_group: str
    params: _containers.ScalarMap[str, str]
    request_id: str
    def __init__(self, project: _Optional[str] = ..., workflow: _Optional[str] = ..., start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., cron: _Optional[str] = ..., time_zone: _Optional[str] = ..., dates: _Optional[_Iterable[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]]] = ..., order: _Optional[_Union[BackfillOrder, str]] = ..., parallelism: _Optional[int] = ..., reprocess: _Optional[_Union[BackfillReprocess, str]] = ..., on_failure: _Optional[_Union[BackfillFailure, str]] = ..., failure_strategy: _Optional[_Union[_enums_pb2.FailureStrategy, str]] = ..., priority: _Optional[_Union[_enums_pb2.Priority, str]] = ..., worker_group: _Optional[str] = ..., params: _Optional[_Mapping[str, str]] = ..., request_id: _Optional[str] = ...) -> None: ...

class CreateBackfillResponse(_message.Message):
    __slots__ = ("backfill",)
    BACKFILL_FIELD_NUMBER: _ClassVar[int]
    backfill: Backfill
    def __init__(self, backfill: _Optional[_Union[Backfill, _Mapping]] = ...) -> None: ...

class GetBackfillRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: int
    def __init__(self, id: _Optional[int] = ...) -> None: ...

class GetBackfillResponse(_message.Message):
    __slots__ = ("backfill",)
    BACKFILL_FIELD_NUMBER: _ClassVar[int]
    backfill: Backfill
    def __init__(self, backfill: _Optional[_Union[Backfill, _Mapping]] = ...) -> None: ...

class ListBackfillsRequest(_message.Message):
    __slots__ = ("project", "workflow", "states", "page_size", "page_token")
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    STATES_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    project: str
    workflow: str
    states: _containers.RepeatedScalarFieldContainer[BackfillState]
    page_size: int
    page_token: str
    def __init__(self, project: _Optional[str] = ..., workflow: _Optional[str] = ..., states: _Optional[_Iterable[_Union[BackfillState, str]]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListBackfillsResponse(_message.Message):
    __slots__ = ("backfills", "next_page_token")
    BACKFILLS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    backfills: _containers.RepeatedCompositeFieldContainer[Backfill]
    next_page_token: str
    def __init__(self, backfills: _Optional[_Iterable[_Union[Backfill, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class PauseBackfillRequest(_message.Message):
    __slots__ = ("id", "request_id")
    ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    id: int
    request_id: str
    def __init__(self, id: _Optional[int] = ..., request_id: _Optional[str] = ...) -> None: ...

class PauseBackfillResponse(_message.Message):
    __slots__ = ("backfill",)
    BACKFILL_FIELD_NUMBER: _ClassVar[int]
    backfill: Backfill
    def __init__(self, backfill: _Optional[_Union[Backfill, _Mapping]] = ...) -> None: ...

class ResumeBackfillRequest(_message.Message):
    __slots__ = ("id", "request_id")
    ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    id: int
    request_id: str
    def __init__(self, id: _Optional[int] = ..., request_id: _Optional[str] = ...) -> None: ...

class ResumeBackfillResponse(_message.Message):
    __slots__ = ("backfill",)
    BACKFILL_FIELD_NUMBER: _ClassVar[int]
    backfill: Backfill
    def __init__(self, backfill: _Optional[_Union[Backfill, _Mapping]] = ...) -> None: ...

class CancelBackfillRequest(_message.Message):
    __slots__ = ("id", "request_id")
    ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    id: int
    request_id: str
    def __init__(self, id: _Optional[int] = ..., request_id: _Optional[str] = ...) -> None: ...

class CancelBackfillResponse(_message.Message):
    __slots__ = ("backfill",)
    BACKFILL_FIELD_NUMBER: _ClassVar[int]
    backfill: Backfill
    def __init__(self, backfill: _Optional[_Union[Backfill, _Mapping]] = ...) -> None: ...
