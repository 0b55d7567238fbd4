import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RegistryCall(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    REGISTRY_CALL_UNSPECIFIED: _ClassVar[RegistryCall]
    REGISTRY_CALL_OPEN: _ClassVar[RegistryCall]
    REGISTRY_CALL_HEARTBEAT: _ClassVar[RegistryCall]
    REGISTRY_CALL_REGISTER: _ClassVar[RegistryCall]
    REGISTRY_CALL_UPDATE: _ClassVar[RegistryCall]
    REGISTRY_CALL_UNREGISTER: _ClassVar[RegistryCall]
    REGISTRY_CALL_CHILDREN: _ClassVar[RegistryCall]
    REGISTRY_CALL_WATCH: _ClassVar[RegistryCall]
    REGISTRY_CALL_RELEASE: _ClassVar[RegistryCall]
    REGISTRY_CALL_LOCK: _ClassVar[RegistryCall]
    REGISTRY_CALL_LEAD: _ClassVar[RegistryCall]
    REGISTRY_CALL_LEADER: _ClassVar[RegistryCall]
    REGISTRY_CALL_NEXT_EPOCH: _ClassVar[RegistryCall]

class RegistryReply(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    REGISTRY_REPLY_UNSPECIFIED: _ClassVar[RegistryReply]
    REGISTRY_REPLY_OPENED: _ClassVar[RegistryReply]
    REGISTRY_REPLY_HEARTBEAT: _ClassVar[RegistryReply]
    REGISTRY_REPLY_DONE: _ClassVar[RegistryReply]
    REGISTRY_REPLY_FAILED: _ClassVar[RegistryReply]
    REGISTRY_REPLY_SNAPSHOT: _ClassVar[RegistryReply]
REGISTRY_CALL_UNSPECIFIED: RegistryCall
REGISTRY_CALL_OPEN: RegistryCall
REGISTRY_CALL_HEARTBEAT: RegistryCall
REGISTRY_CALL_REGISTER: RegistryCall
REGISTRY_CALL_UPDATE: RegistryCall
REGISTRY_CALL_UNREGISTER: RegistryCall
REGISTRY_CALL_CHILDREN: RegistryCall
REGISTRY_CALL_WATCH: RegistryCall
REGISTRY_CALL_RELEASE: RegistryCall
REGISTRY_CALL_LOCK: RegistryCall
REGISTRY_CALL_LEAD: RegistryCall
REGISTRY_CALL_LEADER: RegistryCall
REGISTRY_CALL_NEXT_EPOCH: RegistryCall
REGISTRY_REPLY_UNSPECIFIED: RegistryReply
REGISTRY_REPLY_OPENED: RegistryReply
REGISTRY_REPLY_HEARTBEAT: RegistryReply
REGISTRY_REPLY_DONE: RegistryReply
REGISTRY_REPLY_FAILED: RegistryReply
REGISTRY_REPLY_SNAPSHOT: RegistryReply

class SessionRequest(_message.Message):
    __slots__ = ("call_id", "call", "path", "data", "identifier", "target", "session_timeout")
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    CALL_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    IDENTIFIER_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    SESSION_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    call_id: int
    call: RegistryCall
    path: str
    data: bytes
    identifier: str
    target: int
    session_timeout: _duration_pb2.Duration
    def __init__(self, call_id: _Optional[int] = ..., call: _Optional[_Union[RegistryCall, str]] = ..., path: _Optional[str] = ..., data: _Optional[bytes] = ..., identifier: _Optional[str] = ..., target: _Optional[int] = ..., session_timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class SessionResponse(_message.Message):
    __slots__ = ("call_id", "reply", "children", "epoch", "leader", "error_code", "error_message", "session_id")
    class ChildrenEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: bytes
        def __init__(self, key: _Optional[str] = ..., value: _Optional[bytes] = ...) -> None: ...
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    REPLY_FIELD_NUMBER: _ClassVar[int]
    CHILDREN_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    call_id: int
    reply: RegistryReply
    children: _containers.ScalarMap[str, bytes]
    epoch: int
    leader: str
    error_code: str
    error_message: str
    session_id: int
    def __init__(self, call_id: _Optional[int] = ..., reply: _Optional[_Union[RegistryReply, str]] = ..., children: _Optional[_Mapping[str, bytes]] = ..., epoch: _Optional[int] = ..., leader: _Optional[str] = ..., error_code: _Optional[str] = ..., error_message: _Optional[str] = ..., session_id: _Optional[int] = ...) -> None: ...
