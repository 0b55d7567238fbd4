import datetime

from dsched.v1 import enums_pb2 as _enums_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ScheduleCatchUp(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SCHEDULE_CATCH_UP_UNSPECIFIED: _ClassVar[ScheduleCatchUp]
    SCHEDULE_CATCH_UP_NONE: _ClassVar[ScheduleCatchUp]
    SCHEDULE_CATCH_UP_LATEST: _ClassVar[ScheduleCatchUp]
    SCHEDULE_CATCH_UP_ALL: _ClassVar[ScheduleCatchUp]

class ScheduleOverlap(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SCHEDULE_OVERLAP_UNSPECIFIED: _ClassVar[ScheduleOverlap]
    SCHEDULE_OVERLAP_RUN: _ClassVar[ScheduleOverlap]
    SCHEDULE_OVERLAP_SKIP: _ClassVar[ScheduleOverlap]
    SCHEDULE_OVERLAP_QUEUE: _ClassVar[ScheduleOverlap]
SCHEDULE_CATCH_UP_UNSPECIFIED: ScheduleCatchUp
SCHEDULE_CATCH_UP_NONE: ScheduleCatchUp
SCHEDULE_CATCH_UP_LATEST: ScheduleCatchUp
SCHEDULE_CATCH_UP_ALL: ScheduleCatchUp
SCHEDULE_OVERLAP_UNSPECIFIED: ScheduleOverlap
SCHEDULE_OVERLAP_RUN: ScheduleOverlap
SCHEDULE_OVERLAP_SKIP: ScheduleOverlap
SCHEDULE_OVERLAP_QUEUE: ScheduleOverlap

class Schedule(_message.Message):
    __slots__ = ("id", "project", "workflow", "cron", "time_zone", "start_time", "end_time", "online", "catch_up", "catch_up_cap", "overlap", "failure_strategy", "priority", "worker_group", "params", "next_fire_time", "last_fire_time", "create_time", "update_time")
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
    CRON_FIELD_NUMBER: _ClassVar[int]
    TIME_ZONE_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    ONLINE_FIELD_NUMBER: _ClassVar[int]
    CATCH_UP_FIELD_NUMBER: _ClassVar[int]
    CATCH_UP_CAP_FIELD_NUMBER: _ClassVar[int]
    OVERLAP_FIELD_NUMBER: _ClassVar[int]
    FAILURE_STRATEGY_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    WORKER_GROUP_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    NEXT_FIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    LAST_FIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    id: int
    project: str
    workflow: str
    cron: str
    time_zone: str
    start_time: _timestamp_pb2.Timestamp
    end_time: _timestamp_pb2.Timestamp
    online: bool
    catch_up: ScheduleCatchUp
    catch_up_cap: int
    overlap: ScheduleOverlap
    failure_strategy: _enums_pb2.FailureStrategy
    priority: _enums_pb2.Priority
    worker_group: str
    params: _containers.ScalarMap[str, str]
    next_fire_time: _timestamp_pb2.Timestamp
    last_fire_time: _timestamp_pb2.Timestamp
    create_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    def __init__(self, id: _Optional[int] = ..., project: _Optional[str] = ..., workflow: _Optional[str] = ..., cron: _Optional[str] = ..., time_zone: _Optional[str] = ..., start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., online: _Optional[bool] = ..., catch_up: _Optional[_Union[ScheduleCatchUp, str]] = ..., catch_up_cap: _Optional[int] = ..., overlap: _Optional[_Union[ScheduleOverlap, str]] = ..., failure_strategy: _Optional[_Union[_enums_pb2.FailureStrategy, str]] = ..., priority: _Optional[_Union[_enums_pb2.Priority, str]] = ..., worker_group: _Optional[str] = ..., params: _Optional[_Mapping[str, str]] = ..., next_fire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_fire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class CreateScheduleRequest(_message.Message):
    __slots__ = ("schedule", "request_id")
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    schedule: Schedule
    request_id: str
    def __init__(self, schedule: _Optional[_Union[Schedule, _Mapping]] = ..., request_id: _Optional[str] = ...) -> None: ...

class CreateScheduleResponse(_message.Message):
    __slots__ = ("schedule",)
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    schedule: Schedule
    def __init__(self, schedule: _Optional[_Union[Schedule, _Mapping]] = ...) -> None: ...

class UpdateScheduleRequest(_message.Message):
    __slots__ = ("schedule", "request_id")
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    schedule: Schedule
    request_id: str
    def __init__(self, schedule: _Optional[_Union[Schedule, _Mapping]] = ..., request_id: _Optional[str] = ...) -> None: ...

class UpdateScheduleResponse(_message.Message):
    __slots__ = ("schedule",)
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    schedule: Schedule
    def __init__(self, schedule: _Optional[_Union[Schedule, _Mapping]] = ...) -> None: ...

class GetScheduleRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: int
    def __init__(self, id: _Optional[int] = ...) -> None: ...

class GetScheduleResponse(_message.Message):
    __slots__ = ("schedule",)
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    schedule: Schedule
    def __init__(self, schedule: _Optional[_Union[Schedule, _Mapping]] = ...) -> None: ...

class ListSchedulesRequest(_message.Message):
    __slots__ = ("project", "workflow", "page_size", "page_token")
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    project: str
    workflow: str
    page_size: int
    page_token: str
    def __init__(self, project: _Optional[str] = ..., workflow: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListSchedulesResponse(_message.Message):
    __slots__ = ("schedules", "next_page_token")
    SCHEDULES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    schedules: _containers.RepeatedCompositeFieldContainer[Schedule]
    next_page_token: str
    def __init__(self, schedules: _Optional[_Iterable[_Union[Schedule, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class DeleteScheduleRequest(_message.Message):
    __slots__ = ("id", "request_id")
    ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    id: int
    request_id: str
    def __init__(self, id: _Optional[int] = ..., request_id: _Optional[str] = ...) -> None: ...

class DeleteScheduleResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class SetScheduleStateRequest(_message.Message):
    __slots__ = ("id", "online", "request_id")
    ID_FIELD_NUMBER: _ClassVar[int]
    ONLINE_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    id: int
    online: bool
    request_id: str
    def __init__(self, id: _Optional[int] = ..., online: _Optional[bool] = ..., request_id: _Optional[str] = ...) -> None: ...

class SetScheduleStateResponse(_message.Message):
    __slots__ = ("schedule",)
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    schedule: Schedule
    def __init__(self, schedule: _Optional[_Union[Schedule, _Mapping]] = ...) -> None: ...

class PreviewScheduleRequest(_message.Message):
    __slots__ = ("id", "cron", "time_zone", "count")
    ID_FIELD_NUMBER: _ClassVar[int]
    CRON_FIELD_NUMBER: _ClassVar[int]
    TIME_ZONE_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    id: int
    cron: str
    time_zone: str
    count: int
    def __init__(self, id: _Optional[int] = ..., cron: _Optional[str] = ..., time_zone: _Optional[str] = ..., count: _Optional[int] = ...) -> None: ...

class PreviewScheduleResponse(_message.Message):
    __slots__ = ("fire_times",)
    FIRE_TIMES_FIELD_NUMBER: _ClassVar[int]
    fire_times: _containers.RepeatedCompositeFieldContainer[_timestamp_pb2.Timestamp]
    def __init__(self, fire_times: _Optional[_Iterable[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]]] = ...) -> None: ...
