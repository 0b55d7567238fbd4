"""The environment of a task's process, built from three parts in this order (ARCHITECTURE.md §9):

1. **An allow-list of the worker's own variables**: :data:`DEFAULT_ALLOW` plus the worker's
   ``task_env_allow`` setting (an entry ending in ``*`` is a prefix). Nothing else of the worker's
   environment reaches a task: not its ``DSCHED_*`` settings (a database URL may hold a password),
   nor whatever ``LD_PRELOAD``, ``BASH_ENV`` or ``PYTHONPATH`` the worker itself was started with.
2. **The task's resolved parameters**, each under its own name. A name :mod:`dsched.names`
   refuses is left out and the task's log says so; the API refuses such names, so only a
   definition stored before a name became reserved, or a forged dispatch, can bring one here.
   Parameters therefore never replace a reserved variable of part 1 (``PATH``, ``HOME``,
   ``TMPDIR``, ``JAVA_HOME``, the proxies); they may set ``LANG``, ``LC_*``, ``TZ``, ``USER``.
3. **dsched's identities of the attempt** (``DSCHED_IDEMPOTENCY_KEY``, ``DSCHED_ATTEMPT``, ...),
   which nothing can override.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from dsched.names import param_name_problem
from dsched_server.protocol.execution import TaskExecution

DEFAULT_ALLOW: tuple[str, ...] = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "LC_*",
    "TZ",
    "TMPDIR",
    "JAVA_HOME",
    # Proxies the operator set for the worker's host (programs read both spellings).
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "all_proxy",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "ALL_PROXY",
)


def allowed(name: str, allow: Iterable[str]) -> bool:
    """Whether the worker's variable ``name`` is inherited: it matches an entry of ``allow``
    exactly (case matters, as it does to the programs reading it) or an entry ``PREFIX*``.
    ``DSCHED_*`` variables never are."""
    if name.upper().startswith("DSCHED_"):
        return False
    for entry in allow:
        if name == entry or (entry.endswith("*") and name.startswith(entry[:-1])):
            return True
    return False


def inherited(base: Mapping[str, str], allow: Iterable[str]) -> dict[str, str]:
    """The variables of ``base`` (the worker's environment) a task inherits."""
    entries = tuple(allow)
    return {k: v for k, v in base.items() if allowed(k, entries)}


def identities(execution: TaskExecution) -> dict[str, str]:
    """dsched's variables of one attempt (README: Tasks; fencing in ARCHITECTURE.md §4)."""
    return {
        "DSCHED_IDEMPOTENCY_KEY": execution.idempotency_key,
        "DSCHED_TASK_INSTANCE_ID": str(execution.task_instance_id),
        "DSCHED_WORKFLOW_INSTANCE_ID": str(execution.workflow_instance_id),
        "DSCHED_TASK_NAME": execution.task_name,
        "DSCHED_ATTEMPT": str(execution.attempt),
        # A sink that remembers the highest token per key can refuse a stale incarnation's write.
        "DSCHED_WORKER_ADDRESS": execution.worker_address,
        "DSCHED_WORKER_EPOCH": str(execution.worker_epoch),
        "DSCHED_FENCING_TOKEN": f"{execution.worker_epoch}:{execution.attempt}",
    }


def task_environment(
    base: Mapping[str, str], execution: TaskExecution, allow: Iterable[str] = DEFAULT_ALLOW
) -> tuple[dict[str, str], list[str]]:
    """The attempt's environment (see the module) and a note for each parameter left out."""
    return attempt_environment(inherited(base, allow), execution)


def attempt_environment(
    inherited_env: Mapping[str, str], execution: TaskExecution
) -> tuple[dict[str, str], list[str]]:
    """:func:`task_environment` from the worker's variables already filtered by
    :func:`inherited` (once per worker, not per attempt: matching the worker's whole environment
    against the allow-list took 60-110 us of the event loop per attempt with 35 variables);
    ``inherited_env`` is copied, never changed."""
    env = dict(inherited_env)
    notes = []
    for name, value in execution.params.items():
        problem = param_name_problem(name)
        if problem is None:
            env[name] = value
        else:
            notes.append(f"parameter not set: {problem[1]}")
    env.update(identities(execution))
    return env, notes


def size(env: Mapping[str, str]) -> int:
    """Bytes the environment takes in a new process (``NAME=value`` and a NUL each)."""
    return sum(len(f"{k}={v}".encode(errors="surrogatepass")) + 1 for k, v in env.items())
