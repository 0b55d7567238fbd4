"""The DAG of a workflow version, and the sub-graph a run covers.

Built once per instance from a validated :class:`~dsched.spec.WorkflowSpec`; read-only afterwards.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from dsched.options import TaskDependType
from dsched.spec import TaskSpec, WorkflowSpec


class Dag:
    """Tasks by name with their upstream and downstream neighbours, in a stable topological
    order."""

    def __init__(self, spec: WorkflowSpec) -> None:
        self.tasks: dict[str, TaskSpec] = {t.name: t for t in spec.tasks}
        self.upstream: dict[str, tuple[str, ...]] = {t.name: t.upstream for t in spec.tasks}
        down: dict[str, list[str]] = {t.name: [] for t in spec.tasks}
        for task in spec.tasks:
            for up in task.upstream:
                down[up].append(task.name)
        self.downstream: dict[str, tuple[str, ...]] = {k: tuple(v) for k, v in down.items()}
        self.order: tuple[str, ...] = self._topological(spec)
        self._position = {name: i for i, name in enumerate(self.order)}

    @staticmethod
    def _topological(spec: WorkflowSpec) -> tuple[str, ...]:
        # Kahn's algorithm, ties broken by definition order so the order is deterministic.
        index = {t.name: i for i, t in enumerate(spec.tasks)}
        indegree = {t.name: len(t.upstream) for t in spec.tasks}
        ready = deque(t.name for t in spec.tasks if not t.upstream)
        children: dict[str, list[str]] = {t.name: [] for t in spec.tasks}
        for task in spec.tasks:
            for up in task.upstream:
                children[up].append(task.name)
        out: list[str] = []
        while ready:
            name = ready.popleft()
            out.append(name)
            for child in sorted(children[name], key=index.__getitem__):
                indegree[child] -= 1
                if indegree[child] == 0:
                    ready.append(child)
        if len(out) != len(spec.tasks):
            raise ValueError("workflow has a cycle; validate it before building a Dag")
        return tuple(out)

    def position(self, name: str) -> int:
        """Index of ``name`` in the topological order (a stable tie-breaker)."""
        return self._position[name]

    def ancestors(self, names: Iterable[str]) -> set[str]:
        """Every task upstream of ``names`` (not including them)."""
        return self._walk(names, self.upstream)

    def descendants(self, names: Iterable[str]) -> set[str]:
        """Every task downstream of ``names`` (not including them)."""
        return self._walk(names, self.downstream)

    @staticmethod
    def _walk(names: Iterable[str], edges: dict[str, tuple[str, ...]]) -> set[str]:
        seen: set[str] = set()
        stack = list(names)
        while stack:
            for nxt in edges[stack.pop()]:
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
        return seen

    def scope(self, start: Iterable[str], depend: TaskDependType) -> frozenset[str]:
        """The tasks a run covers: everything when ``start`` is empty, else the start tasks extended
        upstream (TASK_PRE), downstream (TASK_POST) or not at all (TASK_ONLY).

        Raises ValueError if a start task is not in the DAG (whatever the depend type)."""
        start_set = set(start)
        unknown = start_set - self.tasks.keys()
        if unknown:
            raise ValueError(f"unknown start tasks: {', '.join(sorted(unknown))}")
        if not start_set:
            return frozenset(self.tasks)
        if depend is TaskDependType.TASK_PRE:
            return frozenset(start_set | self.ancestors(start_set))
        if depend is TaskDependType.TASK_POST:
            return frozenset(start_set | self.descendants(start_set))
        return frozenset(start_set)
