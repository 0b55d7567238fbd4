"""What a DEPENDENT task reads: the runs of a workflow (or of one of its tasks) in a time window.

One read per dependency item, over the whole window the item's periods span, served by the
(workflow, schedule time) index; which run speaks for which period is decided in the pure core
(``core/dependent.py``). A run is placed in time by its schedule time.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import and_, select

from dsched.states import TaskState, WorkflowState
from dsched_server.core.dependent import Candidate, Result
from dsched_server.store.database import Conn
from dsched_server.store.models import Project, TaskInstance, Workflow, WorkflowInstance, table

WI = table(WorkflowInstance)
TI = table(TaskInstance)
P = table(Project)
W = table(Workflow)

# The newest runs of a window that are read: a window holds at most 31 days of runs, and a
# workflow that ran more often than this in one window has its newest runs judged.
MAX_RUNS = 1000

_UNFINISHED = frozenset(
    {
        WorkflowState.SUBMITTED,
        WorkflowState.RUNNING,
        WorkflowState.READY_PAUSE,
        WorkflowState.READY_STOP,
        WorkflowState.FAILOVER,
    }
)
_TASK_SUCCESS = frozenset({TaskState.SUCCEEDED, TaskState.FORCED_SUCCESS})


def instance_result(state: WorkflowState) -> Result:
    """A whole run: unfinished ones may still succeed; a paused, stopped or failed one has not."""
    if state is WorkflowState.SUCCEEDED:
        return Result.SUCCESS
    return Result.WAITING if state in _UNFINISHED else Result.FAILED


def task_result(run: WorkflowState, task: TaskState | None) -> Result:
    """One task of a run: while the run goes on, a failed attempt may be retried or the task not
    reached yet (waiting); once the run is over, anything but success is a failure."""
    if task in _TASK_SUCCESS:
        return Result.SUCCESS
    return Result.WAITING if run in _UNFINISHED else Result.FAILED


async def workflow_id(conn: Conn, project: str, workflow: str) -> int | None:
    query = (
        select(W.c.id)
        .join(P, P.c.id == W.c.project_id)
        .where(P.c.name == project, W.c.name == workflow)
    )
    found = await conn.scalar(query)
    return None if found is None else int(found)


async def runs_between(
    conn: Conn, code: int, task: str, start: datetime, end: datetime
) -> list[Candidate]:
    """The runs of workflow ``code`` whose schedule time is in ``[start, end)``, newest first,
    each judged as a whole (``task`` empty) or by its latest valid attempt of ``task``."""
    query = (
        select(WI.c.id, WI.c.state, WI.c.schedule_time)
        .where(
            # ``+ 0``: the (workflow, id) index would walk every run of a busy workflow newer than
            # the window (SQLite, which has no statistics, picks it for the ORDER BY); the window
            # on (schedule time, workflow) reads only the window's runs.
            WI.c.workflow_id + 0 == code,
            WI.c.schedule_time >= start,
            WI.c.schedule_time < end,
        )
        .order_by(WI.c.id.desc())
        .limit(MAX_RUNS)
    )
    if task:
        query = query.add_columns(TI.c.state.label("task_state")).outerjoin(
            TI,
            and_(TI.c.workflow_instance_id == WI.c.id, TI.c.task_name == task, TI.c.valid),
        )
    found: dict[int, Candidate] = {}
    for row in await conn.execute(query):
        run = WorkflowState(row.state)
        if task:
            attempt = TaskState(row.task_state) if row.task_state is not None else None
            result = task_result(run, attempt)
        else:
            result = instance_result(run)
        found.setdefault(
            int(row.id),
            Candidate(
                instance_id=int(row.id),
                schedule_time=row.schedule_time,
                start_time=row.schedule_time,
                result=result,
            ),
        )
    return list(found.values())
