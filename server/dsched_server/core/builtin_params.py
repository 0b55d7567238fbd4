"""The built-in parameters a value can refer to as ``${system....}``: DolphinScheduler's names, so
that its users' parameters mean the same here.

Dates come from the run's schedule time in the workflow's time zone, through the same evaluator
as ``$[...]`` (:mod:`dsched.time_expr`), so ``${system.biz.date}`` and ``$[yyyyMMdd-1]`` can
never disagree (the names themselves are :mod:`dsched.templates`', which checks references):

- ``system.biz.date``: the calendar day before the schedule time, ``yyyyMMdd``;
- ``system.biz.curdate``: the schedule time's day, ``yyyyMMdd``;
- ``system.datetime``: the schedule time, ``yyyyMMddHHmmss``.

Identities, as far as dsched has them (a workflow's code is its id, a project's code its id; task
definitions have no code of their own): ``system.workflow.instance.id``,
``system.task.instance.id``, ``system.task.definition.name``, ``system.workflow.definition.name``,
``system.workflow.definition.code``, ``system.project.name``, ``system.project.code``.
DolphinScheduler's ``system.task.execute.path`` is the worker's business and is not offered.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

from dsched.templates import BIZ_CURDATE, BIZ_DATE, DATETIME, IDENTITY_NAMES
from dsched.time_expr import compile_expr

_DATES = {BIZ_DATE: "yyyyMMdd-1", BIZ_CURDATE: "yyyyMMdd", DATETIME: "yyyyMMddHHmmss"}


@dataclass(frozen=True, slots=True, kw_only=True)
class RunIdentity:
    """Who is asking: the attempt's instance, task and definitions."""

    workflow_instance_id: int
    task_instance_id: int
    task_name: str
    workflow_name: str
    workflow_code: int
    project_name: str
    project_code: int

    def params(self) -> dict[str, str]:
        values = (
            self.workflow_instance_id,
            self.task_instance_id,
            self.task_name,
            self.workflow_name,
            self.workflow_code,
            self.project_name,
            self.project_code,
        )
        return {name: str(value) for name, value in zip(IDENTITY_NAMES, values, strict=True)}


def date_params(schedule_time: datetime, zone: ZoneInfo) -> dict[str, str]:
    """The three date built-ins for ``schedule_time`` (aware) in ``zone``."""
    return {name: compile_expr(expr).evaluate(schedule_time, zone) for name, expr in _DATES.items()}


def builtin_params(
    schedule_time: datetime, zone: ZoneInfo, identity: RunIdentity
) -> dict[str, str]:
    """Every built-in of one attempt."""
    return {**date_params(schedule_time, zone), **identity.params()}
