from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SqlStatementType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SQL_STATEMENT_TYPE_UNSPECIFIED: _ClassVar[SqlStatementType]
    SQL_STATEMENT_TYPE_QUERY: _ClassVar[SqlStatementType]
    SQL_STATEMENT_TYPE_NON_QUERY: _ClassVar[SqlStatementType]

class ProcedureParamDirection(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PROCEDURE_PARAM_DIRECTION_UNSPECIFIED: _ClassVar[ProcedureParamDirection]
    PROCEDURE_PARAM_DIRECTION_IN: _ClassVar[ProcedureParamDirection]
    PROCEDURE_PARAM_DIRECTION_OUT: _ClassVar[ProcedureParamDirection]
    PROCEDURE_PARAM_DIRECTION_INOUT: _ClassVar[ProcedureParamDirection]

class ProcedureParamType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PROCEDURE_PARAM_TYPE_UNSPECIFIED: _ClassVar[ProcedureParamType]
    PROCEDURE_PARAM_TYPE_VARCHAR: _ClassVar[ProcedureParamType]
    PROCEDURE_PARAM_TYPE_INTEGER: _ClassVar[ProcedureParamType]
    PROCEDURE_PARAM_TYPE_BIGINT: _ClassVar[ProcedureParamType]
    PROCEDURE_PARAM_TYPE_DOUBLE: _ClassVar[ProcedureParamType]
    PROCEDURE_PARAM_TYPE_DECIMAL: _ClassVar[ProcedureParamType]
    PROCEDURE_PARAM_TYPE_BOOLEAN: _ClassVar[ProcedureParamType]
    PROCEDURE_PARAM_TYPE_DATE: _ClassVar[ProcedureParamType]
    PROCEDURE_PARAM_TYPE_TIMESTAMP: _ClassVar[ProcedureParamType]
SQL_STATEMENT_TYPE_UNSPECIFIED: SqlStatementType
SQL_STATEMENT_TYPE_QUERY: SqlStatementType
SQL_STATEMENT_TYPE_NON_QUERY: SqlStatementType
PROCEDURE_PARAM_DIRECTION_UNSPECIFIED: ProcedureParamDirection
PROCEDURE_PARAM_DIRECTION_IN: ProcedureParamDirection
PROCEDURE_PARAM_DIRECTION_OUT: ProcedureParamDirection
PROCEDURE_PARAM_DIRECTION_INOUT: ProcedureParamDirection
PROCEDURE_PARAM_TYPE_UNSPECIFIED: ProcedureParamType
PROCEDURE_PARAM_TYPE_VARCHAR: ProcedureParamType
PROCEDURE_PARAM_TYPE_INTEGER: ProcedureParamType
PROCEDURE_PARAM_TYPE_BIGINT: ProcedureParamType
PROCEDURE_PARAM_TYPE_DOUBLE: ProcedureParamType
PROCEDURE_PARAM_TYPE_DECIMAL: ProcedureParamType
PROCEDURE_PARAM_TYPE_BOOLEAN: ProcedureParamType
PROCEDURE_PARAM_TYPE_DATE: ProcedureParamType
PROCEDURE_PARAM_TYPE_TIMESTAMP: ProcedureParamType

class SqlTask(_message.Message):
    __slots__ = ("datasource", "sql", "type", "pre_statements", "post_statements", "allow_multiple_statements", "row_limit", "out_params", "rows_param")
    class OutParamsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    DATASOURCE_FIELD_NUMBER: _ClassVar[int]
    SQL_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    PRE_STATEMENTS_FIELD_NUMBER: _ClassVar[int]
    POST_STATEMENTS_FIELD_NUMBER: _ClassVar[int]
    ALLOW_MULTIPLE_STATEMENTS_FIELD_NUMBER: _ClassVar[int]
    ROW_LIMIT_FIELD_NUMBER: _ClassVar[int]
    OUT_PARAMS_FIELD_NUMBER: _ClassVar[int]
    ROWS_PARAM_FIELD_NUMBER: _ClassVar[int]
    datasource: str
    sql: str
    type: SqlStatementType
    pre_statements: _containers.RepeatedScalarFieldContainer[str]
    post_statements: _containers.RepeatedScalarFieldContainer[str]
    allow_multiple_statements: bool
    row_limit: int
    out_params: _containers.ScalarMap[str, str]
    rows_param: str
    def __init__(self, datasource: _Optional[str] = ..., sql: _Optional[str] = ..., type: _Optional[_Union[SqlStatementType, str]] = ..., pre_statements: _Optional[_Iterable[str]] = ..., post_statements: _Optional[_Iterable[str]] = ..., allow_multiple_statements: _Optional[bool] = ..., row_limit: _Optional[int] = ..., out_params: _Optional[_Mapping[str, str]] = ..., rows_param: _Optional[str] = ...) -> None: ...

class ProcedureParam(_message.Message):
    __slots__ = ("name", "direction", "type", "value")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DIRECTION_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    name: str
    direction: ProcedureParamDirection
    type: ProcedureParamType
    value: str
    def __init__(self, name: _Optional[str] = ..., direction: _Optional[_Union[ProcedureParamDirection, str]] = ..., type: _Optional[_Union[ProcedureParamType, str]] = ..., value: _Optional[str] = ...) -> None: ...

class ProcedureTask(_message.Message):
    __slots__ = ("datasource", "procedure", "params")
    DATASOURCE_FIELD_NUMBER: _ClassVar[int]
    PROCEDURE_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    datasource: str
    procedure: str
    params: _containers.RepeatedCompositeFieldContainer[ProcedureParam]
    def __init__(self, datasource: _Optional[str] = ..., procedure: _Optional[str] = ..., params: _Optional[_Iterable[_Union[ProcedureParam, _Mapping]]] = ...) -> None: ...
