"""The transition tables enforced where state is written (ARCHITECTURE.md §8.3).

Every repository function that writes the state of a task or workflow instance asks this module
which of the states it expects the row to be in may lead, through the write's path, to the state it
writes (:mod:`dsched_server.core.transitions`). The conditional UPDATE is then restricted to those;
a row found in a state the tables forbid is *refused*: logged, counted in :data:`REFUSALS` and
raised as :class:`~dsched.errors.IllegalTransition`, so the caller's transaction rolls back and
nothing of it is stored. A row that matched none of the expected states is the caller's business
as before (a stale owner, a concurrent change).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import NoReturn, TypeVar

from dsched.errors import IllegalTransition
from dsched.states import TaskState, WorkflowState
from dsched_server.core.transitions import TASK_INITIAL, task_path_allowed, workflow_path_allowed

log = logging.getLogger(__name__)
S = TypeVar("S", TaskState, WorkflowState)


@dataclass(slots=True)
class Refusals:
    """State writes refused since this process started, by table (for operators and tests)."""

    task_instances: int = 0
    workflow_instances: int = 0


REFUSALS = Refusals()


def task_sources(
    expected: Iterable[TaskState], path: Sequence[TaskState]
) -> tuple[frozenset[TaskState], frozenset[TaskState]]:
    """Splits ``expected`` into the states the path may start from and those it may not."""
    return _split(expected, path, task_path_allowed)


def workflow_sources(
    expected: Iterable[WorkflowState], path: Sequence[WorkflowState]
) -> tuple[frozenset[WorkflowState], frozenset[WorkflowState]]:
    """Splits ``expected`` into the states the path may start from and those it may not."""
    return _split(expected, path, workflow_path_allowed)


def _split(
    expected: Iterable[S], path: Sequence[S], allowed: Callable[[S, Sequence[S]], bool]
) -> tuple[frozenset[S], frozenset[S]]:
    wanted = frozenset(expected)
    legal = frozenset(s for s in wanted if allowed(s, path))
    return legal, wanted - legal


def check_initial(task_instance_id: int | str, state: TaskState) -> None:
    """An attempt is created queued (SUBMITTED or DELAY_EXECUTION), never further on."""
    if state not in TASK_INITIAL:
        _refuse("task_instances", "task_instance", task_instance_id, None, [state])


def refuse_task(task_instance_id: int, src: TaskState, path: Sequence[TaskState]) -> NoReturn:
    _refuse("task_instances", "task_instance", task_instance_id, src, path)


def refuse_workflow(
    instance_id: int, src: WorkflowState, path: Sequence[WorkflowState]
) -> NoReturn:
    _refuse("workflow_instances", "instance", instance_id, src, path)


def _refuse(
    table: str,
    key: str,
    row: int | str,
    src: TaskState | WorkflowState | None,
    path: Sequence[TaskState | WorkflowState],
) -> NoReturn:
    setattr(REFUSALS, table, getattr(REFUSALS, table) + 1)
    steps = " -> ".join(s.value for s in path)
    origin = src.value if src is not None else "(new)"
    # An error, not a warning: some code path asked for a change the state machine forbids.
    log.error(
        "illegal_transition table=%s id=%s from=%s path=%s: refused", table, row, origin, steps
    )
    raise IllegalTransition(
        f"{key.replace('_', ' ')} {row} cannot go from {origin} to {steps}",
        metadata={key: str(row), "from": origin, "to": path[-1].value, "path": steps},
    )
