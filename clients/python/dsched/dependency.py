"""The DEPENDENT task's definition: what it waits for, as plain values, and their validation.

A DEPENDENT task waits, on the master and without a worker slot, until other workflows (or tasks of
them) have succeeded for a window of dates relative to its run's schedule time. Its items are
grouped; items combine within a group and groups within the task by AND or OR. The date values are
DolphinScheduler's (README "DEPENDENT tasks"), by cycle; the windows themselves are computed on the
server (``dsched_server/core/dependent.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum

from dsched.errors import FieldViolation
from dsched.names import name_violation


class Cycle(StrEnum):
    HOUR = "HOUR"
    DAY = "DAY"
    WEEK = "WEEK"
    MONTH = "MONTH"


class Relation(StrEnum):
    AND = "AND"
    OR = "OR"


class DependencyFailure(StrEnum):
    """What a failed dependency does to the waiting task."""

    FAIL = "FAIL"  # fail at once
    WAIT = "WAIT"  # keep waiting (the upstream may be rerun) up to ``failure_wait``


WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")

DATE_VALUES: dict[Cycle, tuple[str, ...]] = {
    Cycle.HOUR: ("currentHour", "last1Hour", "last2Hours", "last3Hours", "last24Hours"),
    Cycle.DAY: ("today", "last1Days", "last2Days", "last3Days", "last7Days"),
    Cycle.WEEK: ("thisWeek", "lastWeek", *(f"last{day}" for day in WEEKDAYS)),
    Cycle.MONTH: (
        "thisMonth",
        "thisMonthBegin",
        "thisMonthEnd",
        "lastMonth",
        "lastMonthBegin",
        "lastMonthEnd",
    ),
}

# Windows that end before the schedule time's own period begins: the only ones a workflow may
# use to depend on itself (its previous cycle); any other would wait for the run doing the waiting.
PREVIOUS_CYCLE = frozenset(
    {
        "last1Hour",
        "last2Hours",
        "last3Hours",
        "last1Days",
        "last2Days",
        "last3Days",
        "last7Days",
        "lastWeek",
        *(f"last{day}" for day in WEEKDAYS),
        "lastMonth",
        "lastMonthBegin",
        "lastMonthEnd",
    }
)

MAX_GROUPS = 16
MAX_ITEMS = 64  # per group
MAX_FAILURE_WAIT = timedelta(days=7)
MIN_CHECK_INTERVAL = timedelta(seconds=1)
MAX_CHECK_INTERVAL = timedelta(hours=1)
DEFAULT_CHECK_INTERVAL = timedelta(seconds=10)


@dataclass(frozen=True, slots=True, kw_only=True)
class DependencyItem:
    """Succeeds when ``workflow`` of ``project`` (or its task ``task``, if given) has a successful
    run for every period of ``date_value``."""

    project: str
    workflow: str
    cycle: Cycle
    date_value: str
    task: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class DependencyGroup:
    items: tuple[DependencyItem, ...]
    relation: Relation = Relation.AND


@dataclass(frozen=True, slots=True, kw_only=True)
class DependentSpec:
    """A DEPENDENT task's kind: groups combined by ``relation``."""

    groups: tuple[DependencyGroup, ...]
    relation: Relation = Relation.AND
    on_failure: DependencyFailure = DependencyFailure.FAIL
    failure_wait: timedelta = timedelta(0)
    # Besides being woken by completions on its own master, how often to look again (runs that
    # finish on other masters are seen then).
    check_interval: timedelta = DEFAULT_CHECK_INTERVAL


def date_value_violation(path: str, cycle: Cycle, date_value: str) -> FieldViolation | None:
    if date_value in DATE_VALUES[cycle]:
        return None
    allowed = ", ".join(DATE_VALUES[cycle])
    return FieldViolation(path, f"{date_value!r} is not a {cycle} date value: one of {allowed}")


def dependent_violations(
    path: str, spec: DependentSpec, *, project: str, workflow: str
) -> list[FieldViolation]:
    """Checks a DEPENDENT task of ``workflow`` in ``project`` (``path`` names the task's
    ``dependent`` field). That the targets exist is the server's to check."""
    found: list[FieldViolation | None] = []
    if not spec.groups:
        found.append(FieldViolation(f"{path}.groups", "at least one group is required"))
    if len(spec.groups) > MAX_GROUPS:
        found.append(FieldViolation(f"{path}.groups", f"more than {MAX_GROUPS} groups"))
        return [v for v in found if v is not None]
    if spec.failure_wait < timedelta(0) or spec.failure_wait > MAX_FAILURE_WAIT:
        found.append(
            FieldViolation(f"{path}.failure_wait", f"must be between 0 and {MAX_FAILURE_WAIT}")
        )
    if not MIN_CHECK_INTERVAL <= spec.check_interval <= MAX_CHECK_INTERVAL:
        found.append(
            FieldViolation(
                f"{path}.check_interval",
                f"must be between {MIN_CHECK_INTERVAL} and {MAX_CHECK_INTERVAL}",
            )
        )
    for g, group in enumerate(spec.groups):
        where = f"{path}.groups[{g}]"
        if not group.items:
            found.append(FieldViolation(f"{where}.items", "at least one item is required"))
        if len(group.items) > MAX_ITEMS:
            found.append(FieldViolation(f"{where}.items", f"more than {MAX_ITEMS} items"))
            continue
        for i, item in enumerate(group.items):
            found.extend(_item_violations(f"{where}.items[{i}]", item, project, workflow))
    return [v for v in found if v is not None]


def _item_violations(
    path: str, item: DependencyItem, project: str, workflow: str
) -> list[FieldViolation | None]:
    found = [
        name_violation(f"{path}.project", item.project, "project name"),
        name_violation(f"{path}.workflow", item.workflow, "workflow name"),
        date_value_violation(f"{path}.date_value", item.cycle, item.date_value),
    ]
    if item.task:
        found.append(name_violation(f"{path}.task", item.task, "task name"))
    if (
        (item.project, item.workflow) == (project, workflow)
        and item.date_value not in PREVIOUS_CYCLE
        and item.date_value in DATE_VALUES[item.cycle]
    ):
        found.append(
            FieldViolation(
                f"{path}.workflow",
                "a workflow can depend on itself only for a previous cycle "
                f"(e.g. last1Days), not {item.date_value!r}",
            )
        )
    return found
