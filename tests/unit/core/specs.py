"""Small builders for workflow specs used by the core tests."""

from __future__ import annotations

from datetime import timedelta

from dsched.spec import ShellSpec, TaskSpec, WorkflowSpec, check_workflow


def task(
    name: str,
    *upstream: str,
    retries: int = 0,
    retry_interval: timedelta = timedelta(0),
    delay: timedelta = timedelta(0),
    disabled: bool = False,
) -> TaskSpec:
    return TaskSpec(
        name=name,
        kind=ShellSpec(script=f"echo {name}"),
        upstream=upstream,
        retries=retries,
        retry_interval=retry_interval,
        delay=delay,
        disabled=disabled,
    )


def workflow(*tasks: TaskSpec, validate: bool = True) -> WorkflowSpec:
    spec = WorkflowSpec(project="proj", name="wf", tasks=tasks)
    if validate:
        check_workflow(spec)  # the engine only ever builds a Dag from a validated spec
    return spec


def chain(n: int) -> list[TaskSpec]:
    """``t0 -> t1 -> ... -> t{n-1}``."""
    return [task(f"t{i}", *([f"t{i - 1}"] if i else [])) for i in range(n)]
