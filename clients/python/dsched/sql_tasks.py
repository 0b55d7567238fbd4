"""SQL and PROCEDURE tasks in a workflow file (README "SQL tasks")::

    with Workflow("daily", project="analytics") as wf:
        load = Sql("load", "warehouse",
                   "INSERT INTO sales SELECT * FROM staging WHERE day = ${dt}",
                   type="NON_QUERY", pre_statements=["DELETE FROM sales WHERE day = ${dt}"])
        check = Sql("check", "warehouse", "SELECT count(*) AS n FROM sales WHERE day = ${dt}",
                    out_params={"n": ""})
        load >> check

``${name}`` references are bound by the driver as values, never spliced into the SQL text.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Unpack

from dsched import coerce
from dsched.sql import (
    ParamDirection,
    ParamType,
    ProcedureParamSpec,
    ProcedureSpec,
    SqlSpec,
    SqlType,
)
from dsched.tasks import Task, TaskOptions


class Sql(Task):
    """Runs ``sql`` against the datasource named ``datasource`` on a worker.

    Args:
        type: QUERY (rows to the log and OUT parameters) or NON_QUERY.
        pre_statements, post_statements: statements run before and after ``sql`` in the same
            transaction.
        allow_multiple_statements: let ``sql`` hold several statements separated by ``;``.
        row_limit: most rows read (0: 1000).
        out_params: OUT parameter -> column ("" for the same name): one row gives the value,
            several a JSON list of the column's values.
        rows_param: an OUT parameter that gets every row as a JSON list of objects.

    Other keyword options are those of :class:`~dsched.tasks.Task`.
    """

    def __init__(
        self,
        name: str,
        datasource: str,
        sql: str,
        *,
        type: SqlType | str = SqlType.QUERY,
        pre_statements: Iterable[str] = (),
        post_statements: Iterable[str] = (),
        allow_multiple_statements: bool = False,
        row_limit: int = 0,
        out_params: Mapping[str, str] | None = None,
        rows_param: str = "",
        **options: Unpack[TaskOptions],
    ) -> None:
        self.spec = SqlSpec(
            datasource=datasource,
            sql=sql,
            type=coerce.enum_value(SqlType, type, "type"),
            pre_statements=tuple(pre_statements),
            post_statements=tuple(post_statements),
            allow_multiple_statements=allow_multiple_statements,
            row_limit=row_limit,
            out_params=dict(out_params or {}),
            rows_param=rows_param,
        )
        super().__init__(name, **options)

    def kind(self) -> SqlSpec:
        return self.spec


def Param(
    name: str,
    value: object = "",
    *,
    direction: ParamDirection | str = ParamDirection.IN,
    type: ParamType | str = ParamType.VARCHAR,
) -> ProcedureParamSpec:
    """One argument of a :class:`Procedure`, in call order. OUT and INOUT values come back as
    OUT parameters named ``name``; ``value`` (IN, INOUT) may hold ``${name}`` references."""
    return ProcedureParamSpec(
        name=name,
        direction=coerce.enum_value(ParamDirection, direction, "direction"),
        type=coerce.enum_value(ParamType, type, "type"),
        value=coerce.params({"v": value})["v"],
    )


class Procedure(Task):
    """Calls the stored procedure ``procedure`` (``name`` or ``schema.name``) of a PostgreSQL or
    MySQL/MariaDB datasource with ``arguments`` (:func:`Param`), in order. ``params`` is the
    task's local parameters, as for every task."""

    def __init__(
        self,
        name: str,
        datasource: str,
        procedure: str,
        *arguments: ProcedureParamSpec,
        **options: Unpack[TaskOptions],
    ) -> None:
        self.spec = ProcedureSpec(datasource=datasource, procedure=procedure, params=arguments)
        super().__init__(name, **options)

    def kind(self) -> ProcedureSpec:
        return self.spec
