"""What ``dsched show`` says about each task's kind: its type name for the task table, and a line
of detail for the kinds whose definition says more than a script (an HTTP request, a PYTHON
interpreter). Secrets stay out: header values are never shown, the URL's query is cut."""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit

from dsched.dependency import DependentSpec
from dsched.http_spec import HttpSpec
from dsched.python_spec import PythonSpec
from dsched.spark import SparkSpec
from dsched.spec import ShellSpec, TaskKind, TaskSpec
from dsched.sql import ProcedureSpec, SqlSpec


def kind_name(kind: TaskKind | None) -> str:
    """SHELL, PYTHON, SPARK, HTTP, DEPENDENT, SQL or PROCEDURE ("-" for none)."""
    if isinstance(kind, ShellSpec):
        return "SHELL"
    if isinstance(kind, PythonSpec):
        return "PYTHON"
    if isinstance(kind, HttpSpec):
        return "HTTP"
    if isinstance(kind, SparkSpec):
        return "SPARK"
    if isinstance(kind, DependentSpec):
        return "DEPENDENT"
    if isinstance(kind, SqlSpec):
        return "SQL"
    if isinstance(kind, ProcedureSpec):
        return "PROCEDURE"
    return "-"


def kind_detail(kind: TaskKind | None) -> str:
    """One line about ``kind`` ("" when the type name says it all)."""
    if isinstance(kind, PythonSpec):
        lines = len(kind.script.splitlines())
        return f"{kind.interpreter or 'worker default python'}, {lines} lines"
    if isinstance(kind, HttpSpec):
        parts = urlsplit(kind.url)
        url = parts._replace(query="...", fragment="").geturl() if parts.query else kind.url
        expects = ", ".join(map(str, kind.expected_status)) or "2xx"
        detail = f"{kind.method.value} {url}  expects {expects}"
        if kind.body_contains:
            detail += f", body contains {kind.body_contains!r}"
        if kind.response_param:
            detail += f"; response -> {kind.response_param}"
        return detail
    if isinstance(kind, SqlSpec):
        extra = len(kind.pre_statements) + len(kind.post_statements)
        return f"datasource {kind.datasource}, {kind.type.value}" + (
            f", {extra} pre/post statement(s)" if extra else ""
        )
    if isinstance(kind, ProcedureSpec):
        args = ", ".join(f"{p.direction.value} {p.name}" for p in kind.params)
        return f"datasource {kind.datasource}, CALL {kind.procedure}({args})"
    return ""


def detail_lines(tasks: Iterable[TaskSpec]) -> str:
    """``name: detail`` for each task with a detail, one per line ("" if none has one)."""
    return "\n".join(
        f"{t.name}: {kind_name(t.kind)} {kind_detail(t.kind)}" for t in tasks if kind_detail(t.kind)
    )
