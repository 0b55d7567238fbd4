import datetime

from dsched.v1 import enums_pb2 as _enums_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TaskEvent(_message.Message):
    __slots__ = ("event_id", "task_instance_id", "attempt", "workflow_instance_id", "type", "event_time", "exit_code", "out_params", "pid", "log_path", "message", "application_id")
    class OutParamsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    EVENT_TIME_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    OUT_PARAMS_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    LOG_PATH_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    APPLICATION_ID_FIELD_NUMBER: _ClassVar[int]
    event_id: str
    task_instance_id: int
    attempt: int
    workflow_instance_id: int
    type: _enums_pb2.TaskEventType
    event_time: _timestamp_pb2.Timestamp
    exit_code: int
    out_params: _containers.ScalarMap[str, str]
    pid: int
    log_path: str
    message: str
    application_id: str
    def __init__(self, event_id: _Optional[str] = ..., task_instance_id: _Optional[int] = ..., attempt: _Optional[int] = ..., workflow_instance_id: _Optional[int] = ..., type: _Optional[_Union[_enums_pb2.TaskEventType, str]] = ..., event_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., exit_code: _Optional[int] = ..., out_params: _Optional[_Mapping[str, str]] = ..., pid: _Optional[int] = ..., log_path: _Optional[str] = ..., message: _Optional[str] = ..., application_id: _Optional[str] = ...) -> None: ...

class ReportTaskEventsRequest(_message.Message):
    __slots__ = ("worker_address", "worker_epoch", "events")
    WORKER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    WORKER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    worker_address: str
    worker_epoch: int
    events: _containers.RepeatedCompositeFieldContainer[TaskEvent]
    def __init__(self, worker_address: _Optional[str] = ..., worker_epoch: _Optional[int] = ..., events: _Optional[_Iterable[_Union[TaskEvent, _Mapping]]] = ...) -> None: ...

class TaskEventAck(_message.Message):
    __slots__ = ("event_id", "decision", "owner_address", "reason")
    EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    DECISION_FIELD_NUMBER: _ClassVar[int]
    OWNER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    event_id: str
    decision: _enums_pb2.TaskEventDecision
    owner_address: str
    reason: str
    def __init__(self, event_id: _Optional[str] = ..., decision: _Optional[_Union[_enums_pb2.TaskEventDecision, str]] = ..., owner_address: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class ReportTaskEventsResponse(_message.Message):
    __slots__ = ("acks",)
    ACKS_FIELD_NUMBER: _ClassVar[int]
    acks: _containers.RepeatedCompositeFieldContainer[TaskEventAck]
    def __init__(self, acks: _Optional[_Iterable[_Union[TaskEventAck, _Mapping]]] = ...) -> None: ...
