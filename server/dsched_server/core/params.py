"""Parameter resolution for a task attempt.

Precedence, lowest first (DolphinScheduler's order): global workflow parameters < OUT parameters
of finished tasks (the instance's var pool) < the task's local parameters < startup parameters of
the run. Merging does no templating: the ``$[...]`` time expressions and ``${system....}``
built-ins in the global, local and startup levels are expanded before, one level at a time
(:func:`dsched_server.core.param_values.task_params`), and OUT values never are. The result reaches
the task as environment variables; nothing is spliced into script text, so a parameter value can
never become shell code.
"""

from __future__ import annotations

from collections.abc import Mapping


def resolve_params(
    *,
    global_params: Mapping[str, str],
    var_pool: Mapping[str, str],
    local_params: Mapping[str, str],
    startup_params: Mapping[str, str],
) -> dict[str, str]:
    """Merges the four parameter levels; later levels win."""
    merged: dict[str, str] = {}
    for level in (global_params, var_pool, local_params, startup_params):
        merged.update(level)
    return merged


def idempotency_key(workflow_instance_id: int, task_name: str, attempt: int) -> str:
    """The stable key a task may use to make its side effects idempotent (ARCHITECTURE.md §4)."""
    return f"{workflow_instance_id}-{task_name}-{attempt}"
