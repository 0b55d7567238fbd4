import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class DatasourceType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DATASOURCE_TYPE_UNSPECIFIED: _ClassVar[DatasourceType]
    DATASOURCE_TYPE_POSTGRESQL: _ClassVar[DatasourceType]
    DATASOURCE_TYPE_MYSQL: _ClassVar[DatasourceType]
    DATASOURCE_TYPE_SQLITE: _ClassVar[DatasourceType]
    DATASOURCE_TYPE_GENERIC: _ClassVar[DatasourceType]
DATASOURCE_TYPE_UNSPECIFIED: DatasourceType
DATASOURCE_TYPE_POSTGRESQL: DatasourceType
DATASOURCE_TYPE_MYSQL: DatasourceType
DATASOURCE_TYPE_SQLITE: DatasourceType
DATASOURCE_TYPE_GENERIC: DatasourceType

class Datasource(_message.Message):
    __slots__ = ("name", "type", "description", "host", "port", "database", "user", "password", "password_set", "options", "url", "create_time", "update_time")
    class OptionsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    DATABASE_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    PASSWORD_FIELD_NUMBER: _ClassVar[int]
    PASSWORD_SET_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    name: str
    type: DatasourceType
    description: str
    host: str
    port: int
    database: str
    user: str
    password: str
    password_set: bool
    options: _containers.ScalarMap[str, str]
    url: str
    create_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    def __init__(self, name: _Optional[str] = ..., type: _Optional[_Union[DatasourceType, str]] = ..., description: _Optional[str] = ..., host: _Optional[str] = ..., port: _Optional[int] = ..., database: _Optional[str] = ..., user: _Optional[str] = ..., password: _Optional[str] = ..., password_set: _Optional[bool] = ..., options: _Optional[_Mapping[str, str]] = ..., url: _Optional[str] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class CreateDatasourceRequest(_message.Message):
    __slots__ = ("datasource", "request_id")
    DATASOURCE_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    datasource: Datasource
    request_id: str
    def __init__(self, datasource: _Optional[_Union[Datasource, _Mapping]] = ..., request_id: _Optional[str] = ...) -> None: ...

class CreateDatasourceResponse(_message.Message):
    __slots__ = ("datasource",)
    DATASOURCE_FIELD_NUMBER: _ClassVar[int]
    datasource: Datasource
    def __init__(self, datasource: _Optional[_Union[Datasource, _Mapping]] = ...) -> None: ...

class GetDatasourceRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class GetDatasourceResponse(_message.Message):
    __slots__ = ("datasource",)
    DATASOURCE_FIELD_NUMBER: _ClassVar[int]
    datasource: Datasource
    def __init__(self, datasource: _Optional[_Union[Datasource, _Mapping]] = ...) -> None: ...

class ListDatasourcesRequest(_message.Message):
    __slots__ = ("page_size", "page_token")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListDatasourcesResponse(_message.Message):
    __slots__ = ("datasources", "next_page_token")
    DATASOURCES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    datasources: _containers.RepeatedCompositeFieldContainer[Datasource]
    next_page_token: str
    def __init__(self, datasources: _Optional[_Iterable[_Union[Datasource, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class UpdateDatasourceRequest(_message.Message):
    __slots__ = ("datasource", "replace_password", "request_id")
    DATASOURCE_FIELD_NUMBER: _ClassVar[int]
    REPLACE_PASSWORD_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    datasource: Datasource
    replace_password: bool
    request_id: str
    def __init__(self, datasource: _Optional[_Union[Datasource, _Mapping]] = ..., replace_password: _Optional[bool] = ..., request_id: _Optional[str] = ...) -> None: ...

class UpdateDatasourceResponse(_message.Message):
    __slots__ = ("datasource",)
    DATASOURCE_FIELD_NUMBER: _ClassVar[int]
    datasource: Datasource
    def __init__(self, datasource: _Optional[_Union[Datasource, _Mapping]] = ...) -> None: ...

class DeleteDatasourceRequest(_message.Message):
    __slots__ = ("name", "request_id")
    NAME_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    name: str
    request_id: str
    def __init__(self, name: _Optional[str] = ..., request_id: _Optional[str] = ...) -> None: ...

class DeleteDatasourceResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class TestDatasourceRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class TestDatasourceResponse(_message.Message):
    __slots__ = ("ok", "message")
    OK_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ok: bool
    message: str
    def __init__(self, ok: _Optional[bool] = ..., message: _Optional[str] = ...) -> None: ...
