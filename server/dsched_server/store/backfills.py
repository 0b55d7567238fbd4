"""Repository of backfills and their dates (``core/backfill.py`` decides; this stores).

A backfill's row is locked (a no-op update, which every backend serialises) by whoever advances
it, so two masters advancing one backfill at the same moment take turns: neither can start a date
the other started, nor more runs than its parallelism allows. (backfill, schedule time) is unique.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import (
    BindParameter,
    ColumnElement,
    Row,
    Select,
    bindparam,
    insert,
    select,
    union_all,
    update,
)

from dsched.errors import NotFound
from dsched.states import WorkflowState
from dsched_server.core.backfill import (
    BackfillRecord,
    BackfillState,
    DateRun,
    DateState,
    OnFailure,
    Options,
    Order,
    PastOutcome,
    Progress,
    Reprocess,
)
from dsched_server.core.records import RunOptions, WorkflowRecord
from dsched_server.store.codec import options_from_json, options_to_json
from dsched_server.store.database import Conn
from dsched_server.store.models import (
    Backfill,
    BackfillDate,
    Project,
    Workflow,
    WorkflowInstance,
    table,
)

B = table(Backfill)
BD = table(BackfillDate)
WI = table(WorkflowInstance)
P = table(Project)
W = table(Workflow)

_SELECT = (
    select(B, P.c.name.label("project_name"), W.c.name.label("workflow_name"))
    .join(P, P.c.id == B.c.project_id)
    .join(W, W.c.id == B.c.workflow_id)
)


async def create(
    conn: Conn,
    workflow: WorkflowRecord,
    *,
    dates: Sequence[datetime],
    cron: str,
    time_zone: str,
    options: Options,
    run_options: RunOptions,
    now: datetime,
) -> int:
    """Stores a RUNNING backfill and its dates (PENDING, in run order); returns its id."""
    result = await conn.execute(
        insert(B).values(
            project_id=workflow.project_id,
            workflow_id=workflow.id,
            state=BackfillState.RUNNING.name,
            cron=cron,
            time_zone=time_zone,
            run_order=options.order.name,
            parallelism=options.parallelism,
            reprocess=options.reprocess.name,
            on_failure=options.on_failure.name,
            options=options_to_json(run_options),
            succeeded=0,
            running=0,
            failed=0,
            pending=len(dates),
            skipped=0,
            create_time=now,
            update_time=now,
        )
    )
    backfill_id = int(result.inserted_primary_key[0])  # type: ignore[index]
    if dates:
        await conn.execute(
            insert(BD),
            [
                {
                    "backfill_id": backfill_id,
                    "position": i,
                    "schedule_time": when,
                    "state": DateState.PENDING.name,
                }
                for i, when in enumerate(dates)
            ],
        )
    return backfill_id


async def lock(conn: Conn, backfill_id: int) -> None:
    """Locks the backfill's row for this transaction; NotFound if there is none."""
    result = await conn.execute(
        update(B).where(B.c.id == backfill_id).values(update_time=B.c.update_time)
    )
    if result.rowcount != 1:
        raise _not_found(backfill_id)


async def get(conn: Conn, backfill_id: int, *, with_dates: bool = True) -> BackfillRecord:
    row = (await conn.execute(_SELECT.where(B.c.id == backfill_id))).first()
    if row is None:
        raise _not_found(backfill_id)
    dates = await _dates(conn, backfill_id) if with_dates else ()
    return _record(row, tuple(dates))


async def list_backfills(
    conn: Conn,
    *,
    project: str,
    workflow: str,
    states: Iterable[BackfillState],
    after: int | None,
    limit: int,
) -> list[BackfillRecord]:
    """Newest first, older than the id ``after``. The names are resolved to ids first, so that
    each filter is a short backward walk of an index ending in the id: (workflow, id),
    (project, id), or (state, id) once per state, merged (as ``instances.list_instances``)."""
    wanted = sorted(s.name for s in states)
    where: list[ColumnElement[bool]] = []
    walks: list[ColumnElement[bool]] = []
    if workflow or project:
        scope = await _scope(conn, project, workflow)
        if scope is None:
            return []
        walks = [scope]
        if wanted:
            where.append(B.c.state.concat("").in_(wanted))  # checked on the scope's rows
    else:
        walks = [B.c.state == _inline(s) for s in wanted]
    if after is not None:
        where.append(B.c.id < after)
    if len(walks) > 1:
        branches = [
            select(B.c.id).where(w, *where).order_by(B.c.id.desc()).limit(limit) for w in walks
        ]
        ids = union_all(*(select(b.subquery().c.id) for b in branches)).subquery()
        page = select(B).join(ids, ids.c.id == B.c.id)
    else:
        page = select(B).where(*walks, *where)
    rows_q = page.order_by(B.c.id.desc()).limit(limit).subquery()
    query = (
        select(rows_q, P.c.name.label("project_name"), W.c.name.label("workflow_name"))
        .join(P, P.c.id == rows_q.c.project_id)
        .join(W, W.c.id == rows_q.c.workflow_id)
        .order_by(rows_q.c.id.desc())
    )
    return [_record(r, ()) for r in await conn.execute(query)]


async def _scope(conn: Conn, project: str, workflow: str) -> ColumnElement[bool] | None:
    """The index lookup of a workflow (in its project) or project filter; None if none exists."""
    if workflow:
        query = (
            select(W.c.id)
            .join(P, P.c.id == W.c.project_id)
            .where(P.c.name == project, W.c.name == workflow)
        )
        code = await conn.scalar(query)
        return (
            None
            if code is None
            else B.c.workflow_id == bindparam(None, int(code), literal_execute=True)
        )
    project_id = await conn.scalar(select(P.c.id).where(P.c.name == project))
    if project_id is None:
        return None
    return B.c.project_id == _inline(int(project_id))


def _inline(value: int | str) -> BindParameter[Any]:
    """A value written into the statement (an id read from the store, a state name), so the
    planner estimates with that value's share of the table."""
    return bindparam(None, value, literal_execute=True)


async def running_ids(conn: Conn) -> list[int]:
    """The backfills that may have a date to start or a run to settle."""
    query = select(B.c.id).where(B.c.state == BackfillState.RUNNING.name).order_by(B.c.id)
    return [int(r.id) for r in await conn.execute(query)]


async def run_states(
    conn: Conn, instance_ids: Sequence[int]
) -> dict[int, tuple[WorkflowState, datetime | None]]:
    """The state and end time of each of the backfill's runs."""
    if not instance_ids:
        return {}
    query = select(WI.c.id, WI.c.state, WI.c.end_time).where(WI.c.id.in_(instance_ids))
    return {int(r.id): (WorkflowState(r.state), r.end_time) for r in await conn.execute(query)}


async def past_outcomes(
    conn: Conn, workflow_id: int, dates: Sequence[datetime]
) -> dict[datetime, PastOutcome]:
    """What the workflow's existing runs say about each date: the newest run of that schedule
    time decides (served by the (workflow, schedule time) index)."""
    if not dates:
        return {}
    query = (
        select(WI.c.id, WI.c.schedule_time, WI.c.state)
        .where(WI.c.workflow_id == workflow_id, WI.c.schedule_time.in_(list(dates)))
        .order_by(WI.c.id)
    )
    found: dict[datetime, PastOutcome] = {}
    for row in await conn.execute(query):
        state = WorkflowState(row.state)
        if state is WorkflowState.SUCCEEDED:
            found[row.schedule_time] = PastOutcome.SUCCEEDED
        elif state.terminal:
            found[row.schedule_time] = PastOutcome.UNSUCCESSFUL
        else:
            found[row.schedule_time] = PastOutcome.RUNNING
    return found


_SET_DATE = (
    update(BD)
    .where(BD.c.id == bindparam("_id"))
    .values(
        state=bindparam("state"),
        workflow_instance_id=bindparam("instance"),
        start_time=bindparam("started"),
        end_time=bindparam("ended"),
    )
)


async def set_dates(conn: Conn, backfill_id: int, dates: Sequence[DateRun]) -> None:
    """Writes the state, run and times of ``dates`` (matched by position)."""
    if not dates:
        return
    ids = {
        int(r.position): int(r.id)
        for r in await conn.execute(
            select(BD.c.id, BD.c.position).where(
                BD.c.backfill_id == backfill_id,
                BD.c.position.in_([d.position for d in dates]),
            )
        )
    }
    await conn.execute(
        _SET_DATE,
        [
            {
                "_id": ids[d.position],
                "state": d.state.name,
                "instance": d.instance_id,
                "started": d.started,
                "ended": d.ended,
            }
            for d in dates
        ],
    )


async def set_counts(conn: Conn, backfill_id: int, n: Mapping[DateState, int]) -> None:
    """Stores the number of the backfill's dates in each state on its row."""
    await conn.execute(
        update(B)
        .where(B.c.id == backfill_id)
        .values(
            succeeded=n.get(DateState.SUCCEEDED, 0),
            running=n.get(DateState.RUNNING, 0),
            failed=n.get(DateState.FAILED, 0),
            pending=n.get(DateState.PENDING, 0),
            skipped=n.get(DateState.SKIPPED, 0),
        )
    )


async def set_state(conn: Conn, backfill_id: int, state: BackfillState, now: datetime) -> None:
    values: dict[str, Any] = {"state": state.name, "update_time": now}
    if state in (BackfillState.SUCCEEDED, BackfillState.FAILED, BackfillState.CANCELLED):
        values["end_time"] = now
    await conn.execute(update(B).where(B.c.id == backfill_id).values(**values))


async def open_dates(conn: Conn, backfill_id: int, *, pending: int | None) -> list[DateRun]:
    """The dates of the backfill that an advance may change, in run order: the running ones and
    the first ``pending`` pending ones (all of them if None). Each is a walk of the (backfill,
    state, position) index, so an advance costs the same on the first date as on the 1,000th."""
    running = select(BD).where(
        BD.c.backfill_id == backfill_id, BD.c.state == DateState.RUNNING.name
    )
    waiting = (
        select(BD)
        .where(BD.c.backfill_id == backfill_id, BD.c.state == DateState.PENDING.name)
        .order_by(BD.c.position)
    )
    if pending is not None:
        waiting = waiting.limit(pending)
    dates = [*await _date_runs(conn, running), *await _date_runs(conn, waiting)]
    return sorted(dates, key=lambda d: d.position)


async def _dates(conn: Conn, backfill_id: int) -> list[DateRun]:
    query = select(BD).where(BD.c.backfill_id == backfill_id).order_by(BD.c.position)
    return await _date_runs(conn, query)


async def _date_runs(conn: Conn, query: Select[Any]) -> list[DateRun]:
    return [
        DateRun(
            position=r.position,
            when=r.schedule_time,
            state=DateState[r.state],
            instance_id=r.workflow_instance_id,
            started=r.start_time,
            ended=r.end_time,
        )
        for r in await conn.execute(query)
    ]


def _record(row: Row[Any], dates: tuple[DateRun, ...]) -> BackfillRecord:
    m = row._mapping
    return BackfillRecord(
        id=m["id"],
        project=m["project_name"],
        workflow=m["workflow_name"],
        workflow_code=m["workflow_id"],
        state=BackfillState[m["state"]],
        cron=m["cron"],
        time_zone=m["time_zone"],
        options=Options(
            order=Order[m["run_order"]],
            parallelism=m["parallelism"],
            reprocess=Reprocess[m["reprocess"]],
            on_failure=OnFailure[m["on_failure"]],
        ),
        run_options=options_from_json(m["options"]),
        create_time=m["create_time"],
        end_time=m["end_time"],
        dates=dates,
        progress=Progress(
            done=m["succeeded"],
            running=m["running"],
            failed=m["failed"],
            pending=m["pending"],
            skipped=m["skipped"],
            eta=None,
        ),
    )


def _not_found(backfill_id: int) -> NotFound:
    return NotFound(f"backfill {backfill_id} not found", metadata={"backfill": str(backfill_id)})
