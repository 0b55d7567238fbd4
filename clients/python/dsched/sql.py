"""SQL and PROCEDURE tasks as plain values, and their validation (README "SQL tasks").

Both run on a worker against a datasource the master resolves at dispatch (its password never
appears in a definition). Parameters reach the database as bound values
(:mod:`dsched.sql_text`), never as SQL text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from dsched.errors import FieldViolation
from dsched.names import name_violation, param_name_problem, param_name_violation
from dsched.sql_text import SqlTextError, check_refs, split

MAX_SQL_BYTES = 256 * 1024
MAX_EXTRA_STATEMENTS = 100  # pre- or post-statements
MAX_ROW_LIMIT = 100_000
DEFAULT_ROW_LIMIT = 1000
MAX_COLUMN_NAME = 128
MAX_PROCEDURE_PARAMS = 100
MAX_PROCEDURE_NAME = 128
_PROCEDURE_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?\Z")


class SqlType(StrEnum):
    QUERY = "QUERY"  # returns rows
    NON_QUERY = "NON_QUERY"  # changes rows; the log says how many


class ParamDirection(StrEnum):
    IN = "IN"
    OUT = "OUT"
    INOUT = "INOUT"


class ParamType(StrEnum):
    """The SQL type a procedure argument is cast to."""

    VARCHAR = "VARCHAR"
    INTEGER = "INTEGER"
    BIGINT = "BIGINT"
    DOUBLE = "DOUBLE"
    DECIMAL = "DECIMAL"
    BOOLEAN = "BOOLEAN"
    DATE = "DATE"
    TIMESTAMP = "TIMESTAMP"


@dataclass(frozen=True, slots=True, kw_only=True)
class SqlSpec:
    """A SQL task (see ``SqlTask`` in the proto). ``out_params``: OUT parameter -> column (""
    means the same name); ``rows_param``: an OUT parameter for every row as a JSON list."""

    datasource: str
    sql: str
    type: SqlType = SqlType.QUERY
    pre_statements: tuple[str, ...] = ()
    post_statements: tuple[str, ...] = ()
    allow_multiple_statements: bool = False
    row_limit: int = 0  # 0: DEFAULT_ROW_LIMIT
    out_params: Mapping[str, str] = field(default_factory=dict)
    rows_param: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ProcedureParamSpec:
    name: str
    direction: ParamDirection = ParamDirection.IN
    type: ParamType = ParamType.VARCHAR
    value: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ProcedureSpec:
    """A PROCEDURE task: ``procedure`` called with ``params`` in order."""

    datasource: str
    procedure: str
    params: tuple[ProcedureParamSpec, ...] = ()


def _text_problem(text: str, limit: int) -> str | None:
    if not text.strip():
        return "must not be empty"
    if len(text.encode("utf-8", "surrogatepass")) > limit:
        return f"is larger than {limit // 1024} KiB"
    if "\x00" in text:
        return "contains a NUL character"
    return None


def _statement_violations(path: str, text: str, single: bool) -> list[FieldViolation]:
    problem = _text_problem(text, MAX_SQL_BYTES)
    if problem is not None:
        return [FieldViolation(path, problem)]
    try:
        statements = split(text)
    except SqlTextError as exc:
        return [FieldViolation(path, str(exc))]
    if single and len(statements) > 1:
        return [
            FieldViolation(
                path,
                f"holds {len(statements)} statements; one is allowed "
                "(set allow_multiple_statements to run several)",
            )
        ]
    return []


def sql_violations(path: str, spec: SqlSpec) -> list[FieldViolation]:
    out: list[FieldViolation] = []
    found = name_violation(f"{path}.datasource", spec.datasource, "datasource name")
    if found is not None:
        out.append(found)
    out.extend(_statement_violations(f"{path}.sql", spec.sql, not spec.allow_multiple_statements))
    for name, statements in (
        ("pre_statements", spec.pre_statements),
        ("post_statements", spec.post_statements),
    ):
        if len(statements) > MAX_EXTRA_STATEMENTS:
            out.append(FieldViolation(f"{path}.{name}", f"more than {MAX_EXTRA_STATEMENTS}"))
            continue
        for i, text in enumerate(statements):
            out.extend(_statement_violations(f"{path}.{name}[{i}]", text, True))
    if not 0 <= spec.row_limit <= MAX_ROW_LIMIT:
        out.append(FieldViolation(f"{path}.row_limit", f"must be 0 to {MAX_ROW_LIMIT}"))
    if spec.type is SqlType.NON_QUERY and (spec.out_params or spec.rows_param):
        out.append(FieldViolation(f"{path}.out_params", "a NON_QUERY statement returns no rows"))
    for name, column in spec.out_params.items():
        bad = param_name_violation(f"{path}.out_params", name)
        if bad is not None:
            out.append(bad)
        if len(column) > MAX_COLUMN_NAME or "\x00" in column:
            out.append(FieldViolation(f"{path}.out_params[{name[:64]!r}]", "not a column name"))
    if spec.rows_param:
        bad = param_name_violation(f"{path}.rows_param", spec.rows_param)
        if bad is not None:
            out.append(bad)
    return out


def procedure_violations(path: str, spec: ProcedureSpec) -> list[FieldViolation]:
    out: list[FieldViolation] = []
    found = name_violation(f"{path}.datasource", spec.datasource, "datasource name")
    if found is not None:
        out.append(found)
    if len(spec.procedure) > MAX_PROCEDURE_NAME or not _PROCEDURE_RE.match(spec.procedure):
        out.append(
            FieldViolation(f"{path}.procedure", "must be an identifier, or schema.identifier")
        )
    if len(spec.params) > MAX_PROCEDURE_PARAMS:
        out.append(FieldViolation(f"{path}.params", f"more than {MAX_PROCEDURE_PARAMS}"))
        return out
    seen: set[str] = set()
    for i, param in enumerate(spec.params):
        where = f"{path}.params[{i}]"
        problem = param_name_problem(param.name)
        if problem is not None:  # the name becomes an OUT parameter's (OUT, INOUT)
            out.append(FieldViolation(f"{where}.name", problem[1], problem[0]))
        elif param.name in seen:
            out.append(FieldViolation(f"{where}.name", f"{param.name!r} listed twice"))
        seen.add(param.name)
        if param.direction is ParamDirection.OUT and param.value:
            out.append(FieldViolation(f"{where}.value", "an OUT parameter takes no value"))
        if len(param.value.encode("utf-8", "surrogatepass")) > 64 * 1024 or "\x00" in param.value:
            out.append(FieldViolation(f"{where}.value", "at most 64 KiB, no NUL"))
            continue
        try:
            check_refs(param.value, "the value")
        except SqlTextError as exc:
            out.append(FieldViolation(f"{where}.value", str(exc)))
    return out
