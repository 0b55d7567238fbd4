"""SQL and PROCEDURE task specs <-> their protos (part of the SDK's one seam, :mod:`dsched.convert`,
which calls these for the ``sql`` and ``procedure`` kinds of a task)."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, TypeVar

from google.protobuf.internal.enum_type_wrapper import EnumTypeWrapper

from dsched.errors import FieldViolation
from dsched.sql import (
    ParamDirection,
    ParamType,
    ProcedureParamSpec,
    ProcedureSpec,
    SqlSpec,
    SqlType,
)
from dsched.v1 import sql_pb2

E = TypeVar("E", bound=StrEnum)

_ENUMS: dict[type[StrEnum], tuple[EnumTypeWrapper, str]] = {
    SqlType: (sql_pb2.SqlStatementType, "SQL_STATEMENT_TYPE_"),
    ParamDirection: (sql_pb2.ProcedureParamDirection, "PROCEDURE_PARAM_DIRECTION_"),
    ParamType: (sql_pb2.ProcedureParamType, "PROCEDURE_PARAM_TYPE_"),
}


def _number(member: StrEnum) -> Any:
    wrapper, prefix = _ENUMS[type(member)]
    return wrapper.Value(prefix + member.value)


def _decode(kind: type[E], number: int, default: E, path: str, out: list[FieldViolation]) -> E:
    """0 -> ``default``; a number the proto or ``kind`` does not know is a violation."""
    if number == 0:
        return default
    wrapper, prefix = _ENUMS[kind]
    try:
        return kind(wrapper.Name(number).removeprefix(prefix))
    except ValueError:
        out.append(FieldViolation(path, f"unknown value {number}"))
        return default


def sql_to_proto(spec: SqlSpec) -> sql_pb2.SqlTask:
    return sql_pb2.SqlTask(
        datasource=spec.datasource,
        sql=spec.sql,
        type=_number(spec.type),
        pre_statements=list(spec.pre_statements),
        post_statements=list(spec.post_statements),
        allow_multiple_statements=spec.allow_multiple_statements,
        row_limit=spec.row_limit,
        out_params=dict(spec.out_params),
        rows_param=spec.rows_param,
    )


def sql_from_proto(msg: sql_pb2.SqlTask, path: str, out: list[FieldViolation]) -> SqlSpec:
    return SqlSpec(
        datasource=msg.datasource,
        sql=msg.sql,
        type=_decode(SqlType, msg.type, SqlType.QUERY, f"{path}.type", out),
        pre_statements=tuple(msg.pre_statements),
        post_statements=tuple(msg.post_statements),
        allow_multiple_statements=msg.allow_multiple_statements,
        row_limit=msg.row_limit,
        out_params=dict(msg.out_params),
        rows_param=msg.rows_param,
    )


def procedure_to_proto(spec: ProcedureSpec) -> sql_pb2.ProcedureTask:
    return sql_pb2.ProcedureTask(
        datasource=spec.datasource,
        procedure=spec.procedure,
        params=[
            sql_pb2.ProcedureParam(
                name=p.name, direction=_number(p.direction), type=_number(p.type), value=p.value
            )
            for p in spec.params
        ],
    )


def procedure_from_proto(
    msg: sql_pb2.ProcedureTask, path: str, out: list[FieldViolation]
) -> ProcedureSpec:
    params = tuple(
        ProcedureParamSpec(
            name=p.name,
            direction=_decode(
                ParamDirection, p.direction, ParamDirection.IN, f"{path}.params[{i}].direction", out
            ),
            type=_decode(ParamType, p.type, ParamType.VARCHAR, f"{path}.params[{i}].type", out),
            value=p.value,
        )
        for i, p in enumerate(msg.params)
    )
    return ProcedureSpec(datasource=msg.datasource, procedure=msg.procedure, params=params)
