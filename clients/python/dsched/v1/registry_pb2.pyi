import datetime

from dsched.v1 import enums_pb2 as _enums_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RegistryNode(_message.Message):
    __slots__ = ("cpu_usage", "memory_usage", "load_average", "disk_usage", "slots_total", "slots_in_use", "start_time", "report_time", "status", "epoch", "pid", "queued", "cluster_address")
    CPU_USAGE_FIELD_NUMBER: _ClassVar[int]
    MEMORY_USAGE_FIELD_NUMBER: _ClassVar[int]
    LOAD_AVERAGE_FIELD_NUMBER: _ClassVar[int]
    DISK_USAGE_FIELD_NUMBER: _ClassVar[int]
    SLOTS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    SLOTS_IN_USE_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    REPORT_TIME_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    QUEUED_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    cpu_usage: float
    memory_usage: float
    load_average: float
    disk_usage: float
    slots_total: int
    slots_in_use: int
    start_time: _timestamp_pb2.Timestamp
    report_time: _timestamp_pb2.Timestamp
    status: _enums_pb2.ServerStatus
    epoch: int
    pid: int
    queued: int
    cluster_address: str
    def __init__(self, cpu_usage: _Optional[float] = ..., memory_usage: _Optional[float] = ..., load_average: _Optional[float] = ..., disk_usage: _Optional[float] = ..., slots_total: _Optional[int] = ..., slots_in_use: _Optional[int] = ..., start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., report_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., status: _Optional[_Union[_enums_pb2.ServerStatus, str]] = ..., epoch: _Optional[int] = ..., pid: _Optional[int] = ..., queued: _Optional[int] = ..., cluster_address: _Optional[str] = ...) -> None: ...
