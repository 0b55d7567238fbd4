import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class DependencyCycle(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DEPENDENCY_CYCLE_UNSPECIFIED: _ClassVar[DependencyCycle]
    DEPENDENCY_CYCLE_HOUR: _ClassVar[DependencyCycle]
    DEPENDENCY_CYCLE_DAY: _ClassVar[DependencyCycle]
    DEPENDENCY_CYCLE_WEEK: _ClassVar[DependencyCycle]
    DEPENDENCY_CYCLE_MONTH: _ClassVar[DependencyCycle]

class DependencyRelation(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DEPENDENCY_RELATION_UNSPECIFIED: _ClassVar[DependencyRelation]
    DEPENDENCY_RELATION_AND: _ClassVar[DependencyRelation]
    DEPENDENCY_RELATION_OR: _ClassVar[DependencyRelation]

class DependencyFailure(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DEPENDENCY_FAILURE_UNSPECIFIED: _ClassVar[DependencyFailure]
    DEPENDENCY_FAILURE_FAIL: _ClassVar[DependencyFailure]
    DEPENDENCY_FAILURE_WAIT: _ClassVar[DependencyFailure]
DEPENDENCY_CYCLE_UNSPECIFIED: DependencyCycle
DEPENDENCY_CYCLE_HOUR: DependencyCycle
DEPENDENCY_CYCLE_DAY: DependencyCycle
DEPENDENCY_CYCLE_WEEK: DependencyCycle
DEPENDENCY_CYCLE_MONTH: DependencyCycle
DEPENDENCY_RELATION_UNSPECIFIED: DependencyRelation
DEPENDENCY_RELATION_AND: DependencyRelation
DEPENDENCY_RELATION_OR: DependencyRelation
DEPENDENCY_FAILURE_UNSPECIFIED: DependencyFailure
DEPENDENCY_FAILURE_FAIL: DependencyFailure
DEPENDENCY_FAILURE_WAIT: DependencyFailure

class DependencyItem(_message.Message):
    __slots__ = ("project", "workflow", "task", "cycle", "date_value")
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    CYCLE_FIELD_NUMBER: _ClassVar[int]
    DATE_VALUE_FIELD_NUMBER: _ClassVar[int]
    project: str
    workflow: str
    task: str
    cycle: DependencyCycle
    date_value: str
    def __init__(self, project: _Optional[str] = ..., workflow: _Optional[str] = ..., task: _Optional[str] = ..., cycle: _Optional[_Union[DependencyCycle, str]] = ..., date_value: _Optional[str] = ...) -> None: ...

class DependencyGroup(_message.Message):
    __slots__ = ("relation", "items")
    RELATION_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    relation: DependencyRelation
    items: _containers.RepeatedCompositeFieldContainer[DependencyItem]
    def __init__(self, relation: _Optional[_Union[DependencyRelation, str]] = ..., items: _Optional[_Iterable[_Union[DependencyItem, _Mapping]]] = ...) -> None: ...

class DependentTask(_message.Message):
    __slots__ = ("relation", "groups", "on_failure", "failure_wait", "check_interval")
    RELATION_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    ON_FAILURE_FIELD_NUMBER: _ClassVar[int]
    FAILURE_WAIT_FIELD_NUMBER: _ClassVar[int]
    CHECK_INTERVAL_FIELD_NUMBER: _ClassVar[int]
    relation: DependencyRelation
    groups: _containers.RepeatedCompositeFieldContainer[DependencyGroup]
    on_failure: DependencyFailure
    failure_wait: _duration_pb2.Duration
    check_interval: _duration_pb2.Duration
    def __init__(self, relation: _Optional[_Union[DependencyRelation, str]] = ..., groups: _Optional[_Iterable[_Union[DependencyGroup, _Mapping]]] = ..., on_failure: _Optional[_Union[DependencyFailure, str]] = ..., failure_wait: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., check_interval: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...
