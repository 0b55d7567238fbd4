"""Templates in parameter values (``$[...]`` time expressions and ``${system....}`` built-ins,
:mod:`dsched.templates`), expanded.

Global, local and startup parameter values may contain them; they are expanded when a task is
dispatched, against the run's schedule time in the workflow's time zone, before the levels are
merged (:func:`dsched_server.core.params.resolve_params`: global < upstream OUT < local <
startup). Upstream OUT values are data a task produced and are never expanded.

:func:`dsched.templates.value_error` is the definition-time check (the SDK and the API call it
when a workflow is submitted and a run started); :func:`expand_value` cannot meet a syntax error
in a value that passed it, only a result outside the calendar
(:class:`~dsched.time_expr.TimeExprError` either way).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from zoneinfo import ZoneInfo

from dsched.spec import MAX_PARAM_VALUE_BYTES, MAX_PARAMS_BYTES, params_bytes
from dsched.templates import Builtin, parts
from dsched.time_expr import TimeExprError
from dsched_server.core.builtin_params import RunIdentity, builtin_params
from dsched_server.core.params import resolve_params
from dsched_server.core.records import InstanceRecord

_UTC = ZoneInfo("UTC")


def expand_value(
    value: str, *, schedule_time: datetime, zone: ZoneInfo, builtins: Mapping[str, str]
) -> str:
    """``value`` with its templates replaced; ``builtins`` holds every name of
    :data:`~dsched.templates.BUILTIN_NAMES`."""
    if "$" not in value:
        return value
    out: list[str] = []
    for part in parts(value):
        if isinstance(part, str):
            out.append(part)
        elif isinstance(part, Builtin):
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


class ExpandedTooLarge(ValueError):
    """Expanded parameter values over a size limit of README "Limits" (checked on the values as
    written): ``level`` and ``name`` say which value (``name`` empty: the merged parameters as a
    whole)."""

    def __init__(self, level: str, name: str, reason: str) -> None:
        super().__init__(f"{level} parameter {name!r} {reason}" if name else reason)
        self.level = level
        self.name = name
        self.reason = reason


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
    Raises :class:`TimeExprError` for a value that cannot be expanded, :class:`ExpandedTooLarge`
    for values that grew beyond the limits."""
    schedule_time, zone = time_basis(instance)
    return expanded_params(
        schedule_time=schedule_time,
        zone=zone,
        identity=identity,
        levels={"global": global_params, "local": local_params, "startup": startup_params},
        var_pool=var_pool,
    )


def expanded_params(
    *,
    schedule_time: datetime,
    zone: ZoneInfo,
    identity: RunIdentity,
    levels: Mapping[str, Mapping[str, str]],
    var_pool: Mapping[str, str],
) -> dict[str, str]:
    """:func:`task_params` from the time basis: ``levels`` holds the global, local and startup
    parameters as written. A template can make a value longer than it was written (``$[MMMM]``,
    ``${system.project.name}``), so the limits the values were checked against as written are
    checked again after the expansion: each value against
    :data:`~dsched.spec.MAX_PARAM_VALUE_BYTES`, each level against
    :data:`~dsched.spec.MAX_PARAMS_BYTES` (the OUT values of the var pool have limits of their
    own)."""
    # Only a value with a template reads them (see expand_value), and most runs have none: the
    # date built-ins cost a time expression each, at every start and every dispatch.
    templated = any("$" in v for params in levels.values() for v in params.values())
    builtins = builtin_params(schedule_time, zone, identity) if templated else {}
    expanded: dict[str, dict[str, str]] = {}
    for level, params in levels.items():
        values = expand_params(params, schedule_time=schedule_time, zone=zone, builtins=builtins)
        for name, value in values.items():
            size = len(value.encode("utf-8", "surrogatepass"))
            if size > MAX_PARAM_VALUE_BYTES:
                raise ExpandedTooLarge(
                    level, name, f"is {size} bytes expanded; at most {MAX_PARAM_VALUE_BYTES}"
                )
        total = params_bytes(values)
        if total > MAX_PARAMS_BYTES:
            raise ExpandedTooLarge(
                level,
                "",
                f"the {level} parameters total {total} bytes expanded (names and values); "
                f"at most {MAX_PARAMS_BYTES}",
            )
        expanded[level] = values
    return resolve_params(
        global_params=expanded["global"],
        var_pool=var_pool,
        local_params=expanded["local"],
        startup_params=expanded["startup"],
    )
