"""The PROCEDURE task's program (README "SQL tasks"): calls a stored procedure with IN, OUT and
INOUT arguments and returns the OUT and INOUT values as OUT parameters.

- PostgreSQL (11+; OUT arguments 14+): ``CALL "schema"."proc"(%s::integer, NULL::varchar, ...)``;
  the call returns one row holding the OUT and INOUT arguments.
- MySQL/MariaDB: ``SET @dsched_2 = CAST(%s AS ...)`` for each INOUT argument,
  ``CALL `proc`(%s, @dsched_1, @dsched_2)``, then ``SELECT @dsched_1, @dsched_2``.

The procedure's name was checked as an identifier (``schema.name`` at most) and is quoted here;
every argument is a bound value cast to its declared type, never SQL text. The call is committed;
a kill cancels it on the server (:func:`dsched_server.dbapi.canceller`), as for a SQL task.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from dsched.sql_text import SqlTextError, expand
from dsched_server.core.datasource import DatasourceType
from dsched_worker.programs.runtime import Params, ProgramError, Spec, log, main
from dsched_worker.programs.session import datasource, in_transaction
from dsched_worker.programs.table import format_table, text_of

_DOUBLE_QUOTE, _BACKTICK = '"', "`"
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
PG_TYPES = {
    "VARCHAR": "varchar",
    "INTEGER": "integer",
    "BIGINT": "bigint",
    "DOUBLE": "double precision",
    "DECIMAL": "numeric",
    "BOOLEAN": "boolean",
    "DATE": "date",
    "TIMESTAMP": "timestamp",
}
MYSQL_TYPES = {
    "VARCHAR": "CHAR",
    "INTEGER": "SIGNED",
    "BIGINT": "SIGNED",
    "DOUBLE": "DOUBLE",
    "DECIMAL": "DECIMAL(65,30)",
    "BOOLEAN": "SIGNED",
    "DATE": "DATE",
    "TIMESTAMP": "DATETIME(6)",
}


def quoted_name(name: str, quote: str) -> str:
    """``name`` (``proc`` or ``schema.proc``) with each part quoted; ProgramError otherwise."""
    parts = name.split(".")
    if not 1 <= len(parts) <= 2 or not all(_IDENT.match(p) for p in parts):
        raise ProgramError(f"{name!r} is not a procedure name (identifier or schema.identifier)")
    return ".".join(f"{quote}{p}{quote}" for p in parts)


def _arguments(task: Mapping[str, Any], params: Params) -> list[tuple[str, str, str, str]]:
    """``(name, direction, type, value)`` of each argument, values expanded (not SQL)."""
    found = []
    for arg in task.get("params", []):
        direction = str(arg.get("direction", "IN"))
        try:
            value = expand(str(arg.get("value", "")), params) if direction != "OUT" else ""
        except SqlTextError as exc:
            raise ProgramError(f"argument {arg.get('name')}: {exc}") from None
        kind = str(arg.get("type", "VARCHAR"))
        if kind not in PG_TYPES:
            raise ProgramError(f"argument {arg.get('name')}: unknown type {kind}")
        found.append((str(arg["name"]), direction, kind, value))
    return found


def _postgresql(cursor: Any, name: str, args: Sequence[tuple[str, str, str, str]]) -> list[Any]:
    pieces: list[str] = []
    values: list[str] = []
    for _, direction, kind, value in args:
        if direction == "OUT":
            pieces.append(f"NULL::{PG_TYPES[kind]}")
        else:
            pieces.append(f"%s::{PG_TYPES[kind]}")
            values.append(value)
    text = f"CALL {quoted_name(name, _DOUBLE_QUOTE)}({', '.join(pieces)})"
    log(f"call: {text}")
    cursor.execute(text, values)
    outs = [a for a in args if a[1] != "IN"]
    if not outs:
        return []
    row = cursor.fetchone()
    return list(row) if row is not None else [None] * len(outs)


def _mysql(cursor: Any, name: str, args: Sequence[tuple[str, str, str, str]]) -> list[Any]:
    pieces: list[str] = []
    values: list[str] = []
    variables: list[str] = []
    for i, (_, direction, kind, value) in enumerate(args, start=1):
        if direction == "IN":
            pieces.append(f"CAST(%s AS {MYSQL_TYPES[kind]})")
            values.append(value)
            continue
        variable = f"@dsched_{i}"
        variables.append(variable)
        pieces.append(variable)
        if direction == "INOUT":
            cursor.execute(f"SET {variable} = CAST(%s AS {MYSQL_TYPES[kind]})", (value,))
        else:
            cursor.execute(f"SET {variable} = NULL")
    text = f"CALL {quoted_name(name, _BACKTICK)}({', '.join(pieces)})"
    log(f"call: {text}")
    cursor.execute(text, values)
    while cursor.nextset():  # a procedure's own result sets: read past them
        pass
    if not variables:
        return []
    cursor.execute(f"SELECT {', '.join(variables)}")
    row = cursor.fetchone()
    return list(row) if row is not None else [None] * len(variables)


def run(spec: Spec, params: Params) -> Mapping[str, str]:
    conn = datasource(spec)
    task = spec.get("task", {})
    if conn.type not in (DatasourceType.POSTGRESQL, DatasourceType.MYSQL):
        raise ProgramError(
            f"PROCEDURE needs a PostgreSQL or MySQL datasource, not {conn.type.value}"
        )
    args = _arguments(task, params)
    call = _postgresql if conn.type is DatasourceType.POSTGRESQL else _mysql
    name = str(task.get("procedure", ""))
    found = in_transaction(conn, lambda cursor: call(cursor, name, args))
    names = [a[0] for a in args if a[1] != "IN"]
    out = {name: text_of(value) for name, value in zip(names, found, strict=False)}
    if out:
        log(format_table(list(out), [tuple(out.values())]))
    return out


if __name__ == "__main__":
    main(run)
