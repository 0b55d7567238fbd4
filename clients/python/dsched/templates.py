"""Templates in parameter values, as written: ``$[...]`` time expressions and ``${system....}``
built-ins, cut out of a value and checked (README "Time parameters"). The SDK checks a workflow's
values with this before any RPC, and the server checks every definition, run and schedule it
receives with the same code, so both refuse the same value with the same words; the server
expands the templates at dispatch (``dsched_server/core/param_values.py``).

- ``$[body]``: a time expression (:mod:`dsched.time_expr`). The body ends at the first ``]``
  outside single quotes; ``[`` inside it is refused (expressions do not nest).
- ``${system.name}``: a built-in (:data:`BUILTIN_NAMES`); an unknown name after ``system.`` is
  refused (a typo must not become an empty value). ``${anything.else}`` is left as it is:
  parameters reach a task as environment variables, so a shell reference in a value is text for
  the task, not for dsched.
- ``$$[`` and ``$${`` are a literal ``$[`` and ``${``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from dsched.errors import FieldViolation
from dsched.names import param_path
from dsched.time_expr import TimeExpr, TimeExprError, compile_expr

BUILTIN_PREFIX = "system."
BIZ_DATE = "system.biz.date"
BIZ_CURDATE = "system.biz.curdate"
DATETIME = "system.datetime"
DATE_NAMES = (BIZ_DATE, BIZ_CURDATE, DATETIME)
IDENTITY_NAMES = (
    "system.workflow.instance.id",
    "system.task.instance.id",
    "system.task.definition.name",
    "system.workflow.definition.name",
    "system.workflow.definition.code",
    "system.project.name",
    "system.project.code",
)
BUILTIN_NAMES: frozenset[str] = frozenset((*DATE_NAMES, *IDENTITY_NAMES))

_REFERENCE = re.compile(r"\$\{([A-Za-z0-9_.]+)\}")


@dataclass(frozen=True, slots=True)
class Builtin:
    """A ``${system....}`` reference."""

    name: str


Part = str | TimeExpr | Builtin


def parts(value: str) -> tuple[Part, ...]:
    """``value`` cut into literal text, expressions and built-in references; raises
    :class:`~dsched.time_expr.TimeExprError` saying where it is wrong. Not cached: a value may be
    64 KiB and the scan is linear; the expressions themselves (at most 256 characters) are
    (:func:`~dsched.time_expr.compile_expr`)."""
    out: list[Part] = []
    literal: list[str] = []
    i = 0
    while (j := value.find("$", i)) >= 0:
        literal.append(value[i:j])
        if value.startswith(("$$[", "$${"), j):
            literal.append(value[j + 1 : j + 3])
            i = j + 3
            continue
        part: Part | None = None
        if value.startswith("$[", j):
            end = _closing_bracket(value, j)
            try:
                part = compile_expr(value[j + 2 : end])
            except TimeExprError as exc:
                raise exc.within(value, j + 2) from None
            i = end + 1
        elif (ref := _REFERENCE.match(value, j)) and ref.group(1).startswith(BUILTIN_PREFIX):
            if ref.group(1) not in BUILTIN_NAMES:
                known = ", ".join(sorted(BUILTIN_NAMES))
                raise TimeExprError(
                    value, j + 2, f"unknown built-in {ref.group(1)!r} (known: {known})"
                )
            part = Builtin(ref.group(1))
            i = ref.end()
        else:
            literal.append("$")
            i = j + 1
            continue
        if literal:
            out.append("".join(literal))
            literal.clear()
        out.append(part)
    literal.append(value[i:])
    if any(literal):
        out.append("".join(literal))
    return tuple(out)


def _closing_bracket(value: str, start: int) -> int:
    """The index of the ``]`` ending the expression whose ``$[`` is at ``start``."""
    quoted = False
    for i in range(start + 2, len(value)):
        char = value[i]
        if char == "'":
            quoted = not quoted
        elif quoted:
            continue
        elif char == "]":
            return i
        elif char == "[":
            raise TimeExprError(value, i, "'[' inside '$[...]': expressions do not nest")
    reason = "unterminated quote in '$[...]'" if quoted else "'$[' without its ']'"
    raise TimeExprError(value, start, reason)


def value_error(value: str) -> TimeExprError | None:
    """What is wrong with the templates in ``value``, or None (definition time)."""
    try:
        parts(value)
    except TimeExprError as exc:
        return exc
    return None


def params_errors(params: Mapping[str, str]) -> dict[str, TimeExprError]:
    """The parameters of ``params`` whose values :func:`value_error` refuses, by name."""
    found = {name: value_error(value) for name, value in params.items() if "$" in value}
    return {name: error for name, error in found.items() if error is not None}


def template_violations(path: str, params: Mapping[str, str]) -> list[FieldViolation]:
    """A violation for each value of the parameter map at ``path`` whose templates cannot be
    expanded, so that it is refused up front rather than failing a task later."""
    return [
        FieldViolation(
            param_path(path, name),
            f"value: {error.reason} (at character {error.position} of the value)",
        )
        for name, error in params_errors(params).items()
    ]
