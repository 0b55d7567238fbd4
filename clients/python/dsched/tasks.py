"""Task classes for workflows as code, and the dependency operators between them.

A task attaches to the :class:`~dsched.workflow.Workflow` whose ``with`` block is open when it is
created (or to ``workflow=`` if given). Edges are drawn with ``>>`` and ``<<``, between tasks and
lists of tasks, and each expression returns its right operand so that chains read left to right::

    with Workflow("etl", project="demo") as wf:
        extract = Shell("extract", "./extract.sh", retries=2, retry_interval=30)
        a, b = Shell("clean_a", "..."), Shell("clean_b", "...")
        load = Shell("load", "./load.sh")
        extract >> [a, b] >> load          # extract before a and b; both before load

Building a workflow sends nothing to a server; mistakes that need the whole DAG (unknown names,
cycles) are reported by :meth:`~dsched.workflow.Workflow.to_spec` validation before any RPC.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol, Self, TypedDict, TypeVar, Unpack

from dsched import coerce
from dsched.coerce import Seconds
from dsched.dependency import (
    DEFAULT_CHECK_INTERVAL,
    Cycle,
    DependencyFailure,
    DependencyGroup,
    DependencyItem,
    DependentSpec,
    Relation,
)
from dsched.options import Priority, TimeoutStrategy
from dsched.spec import ShellSpec, TaskKind, TaskSpec


class TaskOwner(Protocol):
    """What a task needs of the workflow it belongs to (:class:`dsched.workflow.Workflow`, which
    imports this module: a protocol keeps the two out of an import cycle)."""

    @property
    def name(self) -> str: ...

    def add(self, task: Task) -> None: ...


# What ``>>`` and ``<<`` accept on their right and give back: a task or a sequence of tasks.
Operand = TypeVar("Operand", bound="Task | Sequence[Task]")


class _Active(threading.local):
    """The workflows whose ``with`` block is open, innermost last (per thread)."""

    def __init__(self) -> None:
        self.stack: list[TaskOwner] = []


_active = _Active()


def push_workflow(workflow: TaskOwner) -> None:
    """Makes ``workflow`` the one new tasks attach to (called by ``Workflow.__enter__``)."""
    _active.stack.append(workflow)


def pop_workflow(workflow: TaskOwner) -> None:
    """Undoes :func:`push_workflow` (called by ``Workflow.__exit__``)."""
    if _active.stack and _active.stack[-1] is workflow:
        _active.stack.pop()
    elif workflow in _active.stack:  # exited out of order (e.g. an exception); drop it anyway
        _active.stack.remove(workflow)


def current_workflow() -> TaskOwner | None:
    """The workflow of the innermost open ``with`` block of this thread, if any."""
    return _active.stack[-1] if _active.stack else None


class TaskOptions(TypedDict, total=False):
    """The keyword options of :class:`Task`, for subclasses that pass them through."""

    description: str
    retries: int
    retry_interval: Seconds | None
    timeout: Seconds | None
    timeout_strategy: TimeoutStrategy | str
    priority: Priority | str
    worker_group: str
    params: Mapping[str, object] | None
    delay: Seconds | None
    disabled: bool
    workflow: TaskOwner | None


def _as_tasks(value: object) -> list[Task] | None:
    if isinstance(value, Task):
        return [value]
    if isinstance(value, Sequence | set | frozenset) and not isinstance(value, str):
        items = list(value)
        if all(isinstance(t, Task) for t in items):
            return items
    return None


class Task:
    """Options every task type shares. Subclasses supply :meth:`kind` (what the task runs).

    Args:
        name: unique within the workflow: letters, digits, ``.``, ``_``, ``-``.
        description: free text.
        retries: how often a failed attempt is retried (0-100).
        retry_interval: wait before a retry (timedelta or seconds).
        timeout: longest run time of one attempt (timedelta or seconds; 0: none).
        timeout_strategy: WARN, FAIL or WARN_FAIL when ``timeout`` is exceeded.
        priority: dispatch priority among ready tasks (HIGHEST .. LOWEST).
        worker_group: where to run; empty means the run's worker group.
        params: local parameters, passed to the task as environment variables.
        delay: wait between becoming ready and dispatch (timedelta or seconds).
        disabled: a disabled task is skipped without blocking its downstream tasks.
        workflow: the workflow to join; default: the one of the open ``with`` block.

    Raises:
        RuntimeError: no workflow was given and no ``with Workflow(...)`` block is open.
        InvalidWorkflow: the workflow already has a task of this name.
        InvalidArgument: an option has a bad type or an unknown enum name.
    """

    def __init__(
        self,
        name: str,
        *,
        description: str = "",
        retries: int = 0,
        retry_interval: Seconds | None = None,
        timeout: Seconds | None = None,
        timeout_strategy: TimeoutStrategy | str = TimeoutStrategy.FAIL,
        priority: Priority | str = Priority.MEDIUM,
        worker_group: str = "",
        params: Mapping[str, object] | None = None,
        delay: Seconds | None = None,
        disabled: bool = False,
        workflow: TaskOwner | None = None,
    ) -> None:
        owner = workflow or current_workflow()
        if owner is None:
            raise RuntimeError(
                f"{type(self).__name__}({name!r}) was created outside a workflow: create tasks "
                "inside a `with Workflow(...):` block or pass workflow=..."
            )
        self.name = name
        self.description = description
        self.retries = retries
        self.retry_interval = coerce.duration(retry_interval, "retry_interval")
        self.timeout = coerce.duration(timeout, "timeout")
        self.timeout_strategy = coerce.enum_value(
            TimeoutStrategy, timeout_strategy, "timeout_strategy"
        )
        self.priority = coerce.enum_value(Priority, priority, "priority")
        self.worker_group = worker_group
        self.params = coerce.params(params)
        self.delay = coerce.duration(delay, "delay")
        self.disabled = disabled
        self._upstream: dict[str, Task] = {}  # insertion-ordered; keys make repeats no-ops
        self.workflow = owner
        owner.add(self)

    def kind(self) -> TaskKind:
        """What the task runs (e.g. a :class:`~dsched.spec.ShellSpec`)."""
        raise NotImplementedError

    @property
    def upstream(self) -> tuple[Task, ...]:
        """The tasks that must finish before this one, in the order they were added."""
        return tuple(self._upstream.values())

    def set_upstream(self, *others: Task | Iterable[Task]) -> None:
        """Makes this task run after each of ``others``."""
        for other in _flatten(others):
            if other.workflow is not self.workflow:
                raise ValueError(
                    f"task {other.name!r} belongs to workflow {other.workflow.name!r}, "
                    f"not {self.workflow.name!r}: edges cannot cross workflows"
                )
            self._upstream.setdefault(other.name, other)

    def set_downstream(self, *others: Task | Iterable[Task]) -> None:
        """Makes each of ``others`` run after this task."""
        for other in _flatten(others):
            other.set_upstream(self)

    # ``a >> b``: b after a. ``a << b``: a after b. Each returns its right operand.
    def __rshift__(self, other: Operand) -> Operand:
        targets = _as_tasks(other)
        if targets is None:
            return NotImplemented
        self.set_downstream(targets)
        return other

    def __lshift__(self, other: Operand) -> Operand:
        sources = _as_tasks(other)
        if sources is None:
            return NotImplemented
        self.set_upstream(sources)
        return other

    # ``[a, b] >> c`` and ``[a, b] << c``: Python asks the task on the right.
    def __rrshift__(self, other: Sequence[Task]) -> Self:
        sources = _as_tasks(other)
        if sources is None:
            return NotImplemented
        self.set_upstream(sources)
        return self

    def __rlshift__(self, other: Sequence[Task]) -> Self:
        targets = _as_tasks(other)
        if targets is None:
            return NotImplemented
        self.set_downstream(targets)
        return self

    def to_spec(self) -> TaskSpec:
        """The task as a plain value, with its upstream names."""
        return TaskSpec(
            name=self.name,
            kind=self.kind(),
            description=self.description,
            upstream=tuple(self._upstream),
            priority=self.priority,
            worker_group=self.worker_group,
            retries=self.retries,
            retry_interval=self.retry_interval,
            timeout=self.timeout,
            timeout_strategy=self.timeout_strategy,
            delay=self.delay,
            params=dict(self.params),
            disabled=self.disabled,
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


def _flatten(items: Iterable[Task | Iterable[Task]]) -> list[Task]:
    out: list[Task] = []
    for item in items:
        if isinstance(item, Task):
            out.append(item)
        else:
            out.extend(item)
    return out


class Shell(Task):
    """Runs ``script`` with bash on a worker, in its own process group and working directory.

    Parameters reach the script as environment variables (``$dt``); a line
    ``${setValue(key=value)}`` on stdout sets an OUT parameter for downstream tasks. Other
    keyword options are those of :class:`Task`.
    """

    def __init__(self, name: str, script: str, **options: Unpack[TaskOptions]) -> None:
        self.script = script
        super().__init__(name, **options)

    def kind(self) -> ShellSpec:
        return ShellSpec(script=self.script)


def Dependency(
    project: str, workflow: str, cycle: Cycle | str, date_value: str, *, task: str = ""
) -> DependencyItem:
    """One thing a :class:`Dependent` waits for: a successful run of ``workflow`` (or of its
    ``task``) for every period of ``date_value`` in ``cycle`` (HOUR, DAY, WEEK, MONTH; the
    values are DolphinScheduler's: ``today``, ``last1Days``, ``lastWeek``, ``lastMonthEnd``...)."""
    return DependencyItem(
        project=project,
        workflow=workflow,
        task=task,
        cycle=coerce.enum_value(Cycle, cycle, "cycle"),
        date_value=date_value,
    )


def AllOf(*items: DependencyItem) -> DependencyGroup:
    """A group that holds when every item holds."""
    return DependencyGroup(items=items, relation=Relation.AND)


def AnyOf(*items: DependencyItem) -> DependencyGroup:
    """A group that holds when one item holds."""
    return DependencyGroup(items=items, relation=Relation.OR)


class Dependent(Task):
    """Waits, on the master and without a worker slot, until other runs have succeeded.

    ``waits_for``: :func:`Dependency` items (together one group, all required) or groups made
    with :func:`AllOf` / :func:`AnyOf`, combined by ``relation``. A failed dependency fails the
    task at once, or with ``on_failure="WAIT"`` after ``failure_wait`` (a rerun of the upstream
    may still succeed); it is looked at again every ``check_interval`` and whenever a run it
    waits for changes on its master. Other keyword options are those of :class:`Task` (its
    ``timeout`` bounds the whole wait).
    """

    def __init__(
        self,
        name: str,
        *waits_for: DependencyItem | DependencyGroup,
        relation: Relation | str = Relation.AND,
        on_failure: DependencyFailure | str = DependencyFailure.FAIL,
        failure_wait: Seconds | None = None,
        check_interval: Seconds | None = None,
        **options: Unpack[TaskOptions],
    ) -> None:
        items = tuple(w for w in waits_for if isinstance(w, DependencyItem))
        groups = tuple(w for w in waits_for if isinstance(w, DependencyGroup))
        self.groups = (AllOf(*items), *groups) if items else groups
        self.relation = coerce.enum_value(Relation, relation, "relation")
        self.on_failure = coerce.enum_value(DependencyFailure, on_failure, "on_failure")
        self.failure_wait = coerce.duration(failure_wait, "failure_wait")
        self.check_interval = (
            DEFAULT_CHECK_INTERVAL
            if check_interval is None
            else coerce.duration(check_interval, "check_interval")
        )
        super().__init__(name, **options)

    def kind(self) -> DependentSpec:
        return DependentSpec(
            groups=self.groups,
            relation=self.relation,
            on_failure=self.on_failure,
            failure_wait=self.failure_wait,
            check_interval=self.check_interval,
        )
