"""The SQL task's program (README "SQL tasks"): runs a task's statements against its datasource,
writes the rows to the log as a table and returns OUT parameters.

Started by :class:`dsched_worker.tasks.sql.SqlTaskType` with ``{"datasource": ..., "task": ...}``
on stdin (:mod:`dsched_worker.programs.runtime`). The pre-statements, the statement(s) and the
post-statements run in one transaction, committed at the end and rolled back on any error. Every
``${name}`` becomes a bound parameter of the driver (:mod:`dsched.sql_text`); a value never
becomes SQL. A statement text that holds more than one statement is refused unless the task
allows several (and then each runs on its own: drivers run one statement per call).

A kill or a timeout (SIGTERM to the process group) cancels the statement on the server before
the process exits, so a long query does not outlive its attempt.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from dsched.sql_text import Dialect, SqlTextError, Statement, split
from dsched_server import dbapi
from dsched_server.core.datasource import Connection, DatasourceType
from dsched_worker.programs.runtime import Params, ProgramError, Spec, log, main
from dsched_worker.programs.session import datasource, in_transaction
from dsched_worker.programs.table import format_table, text_of

DEFAULT_ROW_LIMIT = 1000


def run(spec: Spec, params: Params) -> Mapping[str, str]:
    conn = datasource(spec)
    task = spec.get("task", {})
    dialect: Dialect = "mysql" if conn.type is DatasourceType.MYSQL else "standard"
    try:
        pre = [_one(text, dialect, "a pre-statement") for text in task.get("pre_statements", [])]
        main_statements = split(str(task["sql"]), dialect)
        post = [_one(text, dialect, "a post-statement") for text in task.get("post_statements", [])]
    except SqlTextError as exc:
        raise ProgramError(str(exc)) from None
    if len(main_statements) > 1 and not task.get("allow_multiple_statements", False):
        raise ProgramError(
            f"the statement holds {len(main_statements)} statements; one is allowed "
            "(set allow_multiple_statements to run several)"
        )
    if not main_statements:
        raise ProgramError("the statement is empty")
    query = task.get("type", "QUERY") == "QUERY"
    limit = int(task.get("row_limit", 0)) or DEFAULT_ROW_LIMIT
    log(f"datasource {conn.name!r}: {_where(conn)}")
    columns, rows, more = _run_all(conn, pre, main_statements, post, params, query, limit)
    if not query:
        return {}
    log(format_table(columns, rows))
    log(f"{len(rows)} row(s)" + (f"; more not read (row limit {limit})" if more else ""))
    return out_params(columns, rows, task.get("out_params", {}), str(task.get("rows_param", "")))


def _one(text: str, dialect: Dialect, what: str) -> Statement:
    found = split(str(text), dialect)
    if len(found) != 1:
        raise SqlTextError(f"{what} must be exactly one statement, not {len(found)}")
    return found[0]


def _where(conn: Connection) -> str:
    if conn.type is DatasourceType.SQLITE:
        return f"SQLite {conn.database}"
    return f"{conn.type.value} {conn.user}@{conn.host}:{conn.port or 'default'}/{conn.database}"


def _run_all(
    conn: Connection,
    pre: Sequence[Statement],
    statements: Sequence[Statement],
    post: Sequence[Statement],
    params: Params,
    query: bool,
    limit: int,
) -> tuple[list[str], list[tuple[Any, ...]], bool]:
    style = dbapi.paramstyle(conn.type)

    def work(cursor: Any) -> tuple[list[str], list[tuple[Any, ...]], bool]:
        columns: list[str] = []
        rows: list[tuple[Any, ...]] = []
        more = False
        for statement in pre:
            _execute(cursor, statement, style, params, "pre-statement")
        for i, statement in enumerate(statements):
            _execute(cursor, statement, style, params, "statement")
            if query and i == len(statements) - 1:
                if cursor.description is None:
                    raise ProgramError("the statement returned no rows (is it a NON_QUERY?)")
                columns = [str(d[0]) for d in cursor.description]
                rows = [tuple(r) for r in cursor.fetchmany(limit + 1)]
                more = len(rows) > limit
                rows = rows[:limit]
            elif not query:
                log(f"{max(cursor.rowcount, 0)} row(s) changed")
        for statement in post:
            _execute(cursor, statement, style, params, "post-statement")
        return columns, rows, more

    return in_transaction(conn, work)


def _execute(cursor: Any, statement: Statement, style: Any, params: Params, what: str) -> None:
    try:
        text, values = statement.render(style, params)
    except SqlTextError as exc:
        raise ProgramError(str(exc)) from None
    names = ", ".join(statement.names)
    log(f"{what}: {text.strip()}" + (f"  -- bound: {names}" if names else ""))
    cursor.execute(text, values)


def out_params(
    columns: Sequence[str], rows: Sequence[tuple[Any, ...]], mapping: Any, rows_param: str
) -> dict[str, str]:
    """OUT parameters from the rows: one row -> the column's value, several -> a JSON list of
    the column's values, none -> ""; ``rows_param`` -> every row as a JSON list of objects."""
    out: dict[str, str] = {}
    index = {name: i for i, name in enumerate(columns)}
    lower = {name.lower(): i for i, name in enumerate(columns)}
    for param, column in dict(mapping).items():
        name = str(column) or str(param)
        at = index.get(name, lower.get(name.lower()))
        if at is None:
            raise ProgramError(f"OUT parameter {param}: no column {name!r} in {list(columns)}")
        values = [row[at] for row in rows]
        if len(values) == 1:
            out[param] = text_of(values[0])
        elif values:
            out[param] = json.dumps([_json(v) for v in values])
        else:
            out[param] = ""
    if rows_param:
        out[rows_param] = json.dumps(
            [{c: _json(v) for c, v in zip(columns, row, strict=True)} for row in rows]
        )
    return out


def _json(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return text_of(value)


if __name__ == "__main__":
    main(run)
