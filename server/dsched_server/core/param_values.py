"""Templates in parameter values: ``$[...]`` time expressions and ``${system....}`` built-ins.

Global, local and startup parameter values may contain them; they are expanded when a task is
dispatched, against the run's schedule time in the workflow's time zone, before the levels are
merged (:func:`dsched_server.core.params.resolve_params`: global < upstream OUT < local <
startup). Upstream OUT values are data a task produced and are never expanded.

- ``$[body]``: a time expression (:mod:`dsched_server.core.time_expr`). The body ends at the first
  ``]`` outside single quotes; ``[`` inside it is refused (expressions do not nest).
- ``${system.name}``: a built-in (:mod:`dsched_server.core.builtin_params`); an unknown name after
  ``system.`` is refused (a typo must not become an empty value). ``${anything.else}`` is left as
  it is: parameters reach a task as environment variables, so a shell reference in a value is
  text for the task, not for dsched.
- ``$$[`` and ``$${`` are a literal ``$[`` and ``${``.

:func:`value_error` is the definition-time check (the API calls it when a workflow is submitted
and a run started); :func:`expand_value` cannot meet a syntax error in a value that passed it, only
a result outside the calendar (:class:`~dsched_server.core.time_expr.TimeExprError` either way).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

from dsched_server.core.builtin_params import NAMES, PREFIX, RunIdentity, builtin_params
from dsched_server.core.params import resolve_params
from dsched_server.core.records import InstanceRecord
from dsched_server.core.time_expr import TimeExpr, TimeExprError, compile_expr

_UTC = ZoneInfo("UTC")
_REFERENCE = re.compile(r"\$\{([A-Za-z0-9_.]+)\}")


@dataclass(frozen=True, slots=True)
class _Builtin:
    name: str


_Part = str | TimeExpr | _Builtin


def _parts(value: str) -> tuple[_Part, ...]:
    """``value`` cut into literal text, expressions and built-in references. Not cached: a value
    may be 64 KiB and the scan is linear; the expressions themselves (at most 256 characters) are
    (:func:`~dsched_server.core.time_expr.compile_expr`)."""
    parts: list[_Part] = []
    literal: list[str] = []
    i = 0
    while (j := value.find("$", i)) >= 0:
        literal.append(value[i:j])
        if value.startswith(("$$[", "$${"), j):
            literal.append(value[j + 1 : j + 3])
            i = j + 3
            continue
        part: _Part | None = None
        if value.startswith("$[", j):
            end = _closing_bracket(value, j)
            try:
                part = compile_expr(value[j + 2 : end])
            except TimeExprError as exc:
                raise exc.within(value, j + 2) from None
            i = end + 1
        elif (ref := _REFERENCE.match(value, j)) and ref.group(1).startswith(PREFIX):
            if ref.group(1) not in NAMES:
                known = ", ".join(sorted(NAMES))
                raise TimeExprError(
                    value, j + 2, f"unknown built-in {ref.group(1)!r} (known: {known})"
                )
            part = _Builtin(ref.group(1))
            i = ref.end()
        else:
            literal.append("$")
            i = j + 1
            continue
        if literal:
            parts.append("".join(literal))
            literal.clear()
        parts.append(part)
    literal.append(value[i:])
    if any(literal):
        parts.append("".join(literal))
    return tuple(parts)


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
        _parts(value)
    except TimeExprError as exc:
        return exc
    return None


def params_errors(params: Mapping[str, str]) -> dict[str, TimeExprError]:
    """The parameters of ``params`` whose values :func:`value_error` refuses, by name."""
    found = {name: value_error(value) for name, value in params.items() if "$" in value}
    return {name: error for name, error in found.items() if error is not None}


def expand_value(
    value: str, *, schedule_time: datetime, zone: ZoneInfo, builtins: Mapping[str, str]
) -> str:
    """``value`` with its templates replaced; ``builtins`` holds every name of
    :data:`~dsched_server.core.builtin_params.NAMES`."""
    if "$" not in value:
        return value
    out: list[str] = []
    for part in _parts(value):
        if isinstance(part, str):
            out.append(part)
        elif isinstance(part, _Builtin):
            out.append(builtins[part.name])
        else:
            try:
                out.append(part.evaluate(schedule_time, zone))
            except TimeExprError as exc:
                at = value.find(f"$[{part.text}]") + 2
                raise TimeExprError(value, at, exc.reason) from None
    return "".join(out)


def expand_params(
    params: Mapping[str, str],
    *,
    schedule_time: datetime,
    zone: ZoneInfo,
    builtins: Mapping[str, str],
) -> dict[str, str]:
    """Every value of ``params`` expanded (:func:`expand_value`)."""
    return {
        name: expand_value(value, schedule_time=schedule_time, zone=zone, builtins=builtins)
        for name, value in params.items()
    }


def time_basis(instance: InstanceRecord) -> tuple[datetime, ZoneInfo]:
    """The schedule time and time zone a run's templates (and its DEPENDENT windows) count from:
    the instance's own (a schedule's fire time, a backfill's date, or when a manual run was
    started unless the client gave one), kept by a rerun or a recovery so every attempt of a run
    sees the same business date. A run stored before instances had one counts from its submit
    time, in UTC."""
    if instance.schedule_time is None:
        return instance.submit_time, _UTC
    return instance.schedule_time, ZoneInfo(instance.time_zone)


def task_params(
    *,
    instance: InstanceRecord,
    identity: RunIdentity,
    global_params: Mapping[str, str],
    var_pool: Mapping[str, str],
    local_params: Mapping[str, str],
    startup_params: Mapping[str, str],
) -> dict[str, str]:
    """An attempt's parameters: the templates of the global, local and startup levels expanded
    against the run's :func:`time_basis`, then the levels merged (:func:`resolve_params`).
    Raises :class:`TimeExprError` for a value that cannot be expanded."""
    schedule_time, zone = time_basis(instance)
    builtins = builtin_params(schedule_time, zone, identity)

    def expand(params: Mapping[str, str]) -> dict[str, str]:
        return expand_params(params, schedule_time=schedule_time, zone=zone, builtins=builtins)

    return resolve_params(
        global_params=expand(global_params),
        var_pool=var_pool,
        local_params=expand(local_params),
        startup_params=expand(startup_params),
    )
