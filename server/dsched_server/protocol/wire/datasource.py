"""The SQL and PROCEDURE kinds of a :class:`TaskExecution` on the wire, and the datasource those
attempts carry (``TaskExecution.datasource``).

A decoded datasource is checked again here (the type, the allow-list of its options), so that a
worker never hands a driver an option the master would not have stored, whatever reached it.
"""

from __future__ import annotations

from dsched.errors import FieldViolation
from dsched.sql import ProcedureSpec, SqlSpec, procedure_violations, sql_violations
from dsched.sql_convert import (
    procedure_from_proto,
    procedure_to_proto,
    sql_from_proto,
    sql_to_proto,
)
from dsched.v1 import datasource_pb2, worker_service_pb2
from dsched_server.core.datasource import Connection, DatasourceType, Secret, option_violations
from dsched_server.protocol.execution import DATASOURCE_KINDS, TaskExecution
from dsched_server.protocol.wire import checks

_WORKER_TYPES = (DatasourceType.POSTGRESQL, DatasourceType.MYSQL, DatasourceType.SQLITE)


def put_sql_kind(msg: worker_service_pb2.TaskExecution, execution: TaskExecution) -> bool:
    """Sets a SQL or PROCEDURE kind and its datasource; False for any other kind."""
    kind = execution.kind
    if isinstance(kind, SqlSpec):
        msg.sql.CopyFrom(sql_to_proto(kind))
    elif isinstance(kind, ProcedureSpec):
        msg.procedure.CopyFrom(procedure_to_proto(kind))
    else:
        return False
    if execution.datasource is not None:
        msg.datasource.CopyFrom(_datasource_to_proto(execution.datasource))
    return True


def _datasource_to_proto(conn: Connection) -> worker_service_pb2.TaskDatasource:
    if conn.error:
        return worker_service_pb2.TaskDatasource(name=conn.name, error=conn.error)
    return worker_service_pb2.TaskDatasource(
        name=conn.name,
        type=f"DATASOURCE_TYPE_{conn.type.value}",
        host=conn.host,
        port=conn.port,
        database=conn.database,
        user=conn.user,
        password=conn.password.reveal(),
        options=dict(conn.options),
    )


def sql_kind_from(
    msg: worker_service_pb2.TaskExecution, which: str | None, path: str, out: list[FieldViolation]
) -> SqlSpec | ProcedureSpec | None:
    """The SQL or PROCEDURE kind of ``msg`` (checked), or None for another kind."""
    if which == "sql":
        sql = sql_from_proto(msg.sql, f"{path}.sql", out)
        out.extend(sql_violations(f"{path}.sql", sql))
        return sql
    if which == "procedure":
        procedure = procedure_from_proto(msg.procedure, f"{path}.procedure", out)
        out.extend(procedure_violations(f"{path}.procedure", procedure))
        return procedure
    return None


def datasource_from(
    msg: worker_service_pb2.TaskExecution, kind: object, path: str, out: list[FieldViolation]
) -> Connection | None:
    """The datasource a SQL or PROCEDURE ``kind`` needs (a violation if missing); None for
    other kinds."""
    if not isinstance(kind, DATASOURCE_KINDS):
        return None
    if not msg.HasField("datasource"):
        out.append(FieldViolation(f"{path}.datasource", "is required for SQL and PROCEDURE"))
        return None
    found = msg.datasource
    if found.error:
        return Connection(name=found.name, error=found.error[:1024])
    where = f"{path}.datasource"
    kind_of = checks.enum_member(
        DatasourceType, datasource_pb2.DatasourceType, "DATASOURCE_TYPE_", found.type
    )
    if kind_of is None or kind_of not in _WORKER_TYPES:
        out.append(FieldViolation(f"{where}.type", f"must be one of {', '.join(_WORKER_TYPES)}"))
        return None
    problems = option_violations(f"{where}.options", kind_of, found.options)
    if not 0 <= found.port <= 65535:
        problems.append(FieldViolation(f"{where}.port", "must be 0 to 65535"))
    if problems:
        out.extend(problems)
        return None
    return Connection(
        name=found.name,
        type=kind_of,
        host=found.host,
        port=found.port,
        database=found.database,
        user=found.user,
        password=Secret(found.password),
        options=dict(found.options),
    )
