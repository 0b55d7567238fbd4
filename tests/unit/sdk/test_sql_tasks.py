"""The SDK's Sql and Procedure tasks: what a workflow file writes becomes the spec and the proto
the server reads back, and bad ones are refused locally with the proto's field paths."""

from __future__ import annotations

import pytest

from dsched import InvalidArgument, InvalidWorkflow, Param, Procedure, Sql, Workflow
from dsched.convert import workflow_spec_from_proto, workflow_spec_to_proto
from dsched.spec import check_workflow
from dsched.sql import ParamDirection, ParamType, SqlType


def test_a_workflow_with_sql_and_procedure_round_trips() -> None:
    with Workflow("w", project="p") as wf:
        load = Sql(
            "load",
            "dw",
            "INSERT INTO t VALUES (${x})",
            type="non_query",
            pre_statements=["DELETE FROM t"],
            row_limit=5,
        )
        call = Procedure(
            "call",
            "dw",
            "s.p",
            Param("a", "${x}", type="integer"),
            Param("b", direction="inout", value=1),
            Param("c", direction="out"),
        )
        load >> call
    spec = wf.to_spec()
    check_workflow(spec)
    decoded, violations = workflow_spec_from_proto(workflow_spec_to_proto(spec))
    assert violations == [] and decoded == spec
    kinds = {t.name: t.kind for t in spec.tasks}
    assert kinds["load"].type is SqlType.NON_QUERY  # type: ignore[union-attr]
    params = kinds["call"].params  # type: ignore[union-attr]
    assert [(p.direction, p.type, p.value) for p in params] == [
        (ParamDirection.IN, ParamType.INTEGER, "${x}"),
        (ParamDirection.INOUT, ParamType.VARCHAR, "1"),
        (ParamDirection.OUT, ParamType.VARCHAR, ""),
    ]


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: Sql("q", "dw", "SELECT 1; SELECT 2"), "workflow.tasks[0].sql.sql"),
        (lambda: Sql("q", "dw", 'SELECT "${x}"'), "workflow.tasks[0].sql.sql"),
        (lambda: Sql("q", "", "SELECT 1"), "workflow.tasks[0].sql.datasource"),
        (lambda: Sql("q", "dw", "SELECT 1", row_limit=10**6), "workflow.tasks[0].sql.row_limit"),
        (
            lambda: Sql("q", "dw", "SELECT 1", pre_statements=["A; B"]),
            "workflow.tasks[0].sql.pre_statements[0]",
        ),
        (lambda: Procedure("c", "dw", "p; DROP TABLE t"), "workflow.tasks[0].procedure.procedure"),
        (
            lambda: Procedure("c", "dw", "p", Param("PATH", "x")),
            "workflow.tasks[0].procedure.params[0].name",
        ),
    ],
)
def test_refused_locally(build: object, field: str) -> None:
    with Workflow("w", project="p") as wf:
        build()  # type: ignore[operator]
    with pytest.raises((InvalidWorkflow, InvalidArgument)) as caught:
        check_workflow(wf.to_spec())
    assert field in [v.field for v in caught.value.violations]
