from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class ReadTaskLogRequest(_message.Message):
    __slots__ = ("task_instance_id", "offset", "length")
    TASK_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    LENGTH_FIELD_NUMBER: _ClassVar[int]
    task_instance_id: int
    offset: int
    length: int
    def __init__(self, task_instance_id: _Optional[int] = ..., offset: _Optional[int] = ..., length: _Optional[int] = ...) -> None: ...

class ReadTaskLogResponse(_message.Message):
    __slots__ = ("data", "offset", "next_offset", "size", "end_of_log")
    DATA_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    NEXT_OFFSET_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    END_OF_LOG_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    offset: int
    next_offset: int
    size: int
    end_of_log: bool
    def __init__(self, data: _Optional[bytes] = ..., offset: _Optional[int] = ..., next_offset: _Optional[int] = ..., size: _Optional[int] = ..., end_of_log: _Optional[bool] = ...) -> None: ...

class TailTaskLogRequest(_message.Message):
    __slots__ = ("task_instance_id", "offset", "follow")
    TASK_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    FOLLOW_FIELD_NUMBER: _ClassVar[int]
    task_instance_id: int
    offset: int
    follow: bool
    def __init__(self, task_instance_id: _Optional[int] = ..., offset: _Optional[int] = ..., follow: _Optional[bool] = ...) -> None: ...

class TailTaskLogResponse(_message.Message):
    __slots__ = ("data", "offset", "next_offset", "end_of_log")
    DATA_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    NEXT_OFFSET_FIELD_NUMBER: _ClassVar[int]
    END_OF_LOG_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    offset: int
    next_offset: int
    end_of_log: bool
    def __init__(self, data: _Optional[bytes] = ..., offset: _Optional[int] = ..., next_offset: _Optional[int] = ..., end_of_log: _Optional[bool] = ...) -> None: ...
