"""Repository of schedules and their fire rows (``core/schedule.py`` decides; this stores).

A fire row is unique on (schedule, fire time) and is written in the transaction that writes the
run it starts: a second master firing the same time hits the key and its transaction (run and
all) rolls back, so each fire time starts at most one run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    BindParameter,
    ColumnElement,
    Row,
    bindparam,
    delete,
    func,
    insert,
    select,
    update,
)

from dsched.errors import NotFound
from dsched.states import WorkflowState
from dsched_server.core.records import WorkflowRecord
from dsched_server.core.schedule import CatchUp, Overlap, ScheduleRecord, ScheduleSpec, Window
from dsched_server.store.codec import options_from_json, options_to_json
from dsched_server.store.database import Conn
from dsched_server.store.models import (
    Project,
    Schedule,
    ScheduleFire,
    Workflow,
    WorkflowInstance,
    table,
)

S = table(Schedule)
F = table(ScheduleFire)
WI = table(WorkflowInstance)
P = table(Project)
W = table(Workflow)

FIRED, SKIPPED, QUEUED = "FIRED", "SKIPPED", "QUEUED"

_SELECT = (
    select(S, P.c.name.label("project_name"), W.c.name.label("workflow_name"))
    .join(P, P.c.id == S.c.project_id)
    .join(W, W.c.id == S.c.workflow_id)
)


_IDS: BindParameter[list[int]] = bindparam("_ids", expanding=True)
# Built once (see instances._GET): a cron storm runs them for every batch.
_GET_MANY = _SELECT.where(S.c.id.in_(_IDS))
_LOCK_MANY = update(S).where(S.c.id.in_(_IDS)).values(id=S.c.id)
_SET_FIRED = (
    update(S)
    .where(S.c.id == bindparam("_id"))
    .values(next_fire_time=bindparam("_next"), last_fire_time=bindparam("_last"))
)
_SET_NEXT = update(S).where(S.c.id == bindparam("_id")).values(next_fire_time=bindparam("_next"))
_ADD_FIRE = insert(F)
_NEWEST = (
    select(F.c.schedule_id, func.max(F.c.fire_time).label("fire_time"))
    .where(F.c.schedule_id.in_(_IDS), F.c.state == FIRED)
    .group_by(F.c.schedule_id)
    .subquery()
)
# The state of each schedule's newest FIRED run: its newest FIRED fire time by the (schedule,
# state, fire time) index, then that row's run.
_NEWEST_RUNS = (
    select(F.c.schedule_id, WI.c.state)
    .join(
        _NEWEST, (_NEWEST.c.schedule_id == F.c.schedule_id) & (_NEWEST.c.fire_time == F.c.fire_time)
    )
    .join(WI, WI.c.id == F.c.workflow_instance_id)
)


def _values(spec: ScheduleSpec) -> dict[str, Any]:
    return {
        "cron": spec.cron,
        "time_zone": spec.time_zone,
        "start_time": spec.window.start,
        "end_time": spec.window.end,
        "catch_up": spec.catch_up.name,
        "catch_up_cap": spec.catch_up_cap,
        "overlap": spec.overlap.name,
        "options": options_to_json(spec.run_options),
    }


async def create(conn: Conn, workflow: WorkflowRecord, spec: ScheduleSpec, now: datetime) -> int:
    result = await conn.execute(
        insert(S).values(
            project_id=workflow.project_id,
            workflow_id=workflow.id,
            online=False,
            create_time=now,
            update_time=now,
            **_values(spec),
        )
    )
    return int(result.inserted_primary_key[0])  # type: ignore[index]


async def update_spec(
    conn: Conn,
    schedule_id: int,
    spec: ScheduleSpec,
    next_fire: datetime | None,
    now: datetime,
    counts_from: datetime | None = None,
) -> None:
    """``counts_from``: fire times before it are not missed ones (the last fire time is set)."""
    values: dict[str, Any] = {**_values(spec), "next_fire_time": next_fire, "update_time": now}
    if counts_from is not None:
        values["last_fire_time"] = counts_from
    await _update(conn, schedule_id, **values)


async def set_online(
    conn: Conn, schedule_id: int, online: bool, next_fire: datetime | None, now: datetime
) -> None:
    """Going online, the schedule counts its fire times from now: none before it fires."""
    values: dict[str, Any] = {"online": online, "next_fire_time": next_fire, "update_time": now}
    if online:
        values["last_fire_time"] = now
    await _update(conn, schedule_id, **values)


async def set_fired(
    conn: Conn, schedule_id: int, last: datetime | None, next_fire: datetime | None
) -> None:
    """Records what was fired up to and what fires next. ``update_time`` is left alone: other
    masters reload a schedule when a client changed it, not at every fire."""
    await set_fired_many(conn, [Fired(schedule_id, last, next_fire)])


@dataclass(frozen=True, slots=True)
class Fired:
    """Where a schedule's firing got to: ``last``, its newest fire time up to now (None: none
    yet, the column is left alone), and ``next_fire``, its next one."""

    schedule_id: int
    last: datetime | None
    next_fire: datetime | None


async def set_fired_many(conn: Conn, fired: Sequence[Fired]) -> None:
    """:func:`set_fired` for each of ``fired``, a statement for each kind (with a last fire time
    or without). A schedule deleted meanwhile is no row to update (its fire rows, if any, failed
    on their foreign key already)."""
    with_last = [
        {"_id": f.schedule_id, "_last": f.last, "_next": f.next_fire}
        for f in fired
        if f.last is not None
    ]
    without = [{"_id": f.schedule_id, "_next": f.next_fire} for f in fired if f.last is None]
    if with_last:
        await conn.execute(_SET_FIRED, with_last)
    if without:
        await conn.execute(_SET_NEXT, without)


async def _update(conn: Conn, schedule_id: int, **values: Any) -> None:
    result = await conn.execute(update(S).where(S.c.id == schedule_id).values(**values))
    if result.rowcount != 1:
        raise _not_found(schedule_id)


async def delete_schedule(conn: Conn, schedule_id: int) -> None:
    await conn.execute(delete(F).where(F.c.schedule_id == schedule_id))
    result = await conn.execute(delete(S).where(S.c.id == schedule_id))
    if result.rowcount != 1:
        raise _not_found(schedule_id)


async def lock(conn: Conn, schedule_id: int) -> None:
    """Locks the schedule's row for this transaction (a no-op update); NotFound if none."""
    await _update(conn, schedule_id, id=S.c.id)


async def get(conn: Conn, schedule_id: int) -> ScheduleRecord:
    row = (await conn.execute(_SELECT.where(S.c.id == schedule_id))).first()
    if row is None:
        raise _not_found(schedule_id)
    return _record(row)


async def get_many(conn: Conn, ids: Sequence[int]) -> list[ScheduleRecord]:
    """The schedules of ``ids`` that exist, in one statement (a batch of due schedules)."""
    if not ids:
        return []
    return [_record(r) for r in await conn.execute(_GET_MANY, {"_ids": list(ids)})]


async def lock_many(conn: Conn, ids: Sequence[int]) -> None:
    """Locks the rows of ``ids`` (those that exist) for this transaction, in id order."""
    if ids:
        await conn.execute(_LOCK_MANY, {"_ids": sorted(ids)})


async def online(conn: Conn) -> list[ScheduleRecord]:
    """Every online schedule (a master keeps those of its share), by the (online, id) index."""
    rows = await conn.execute(_SELECT.where(S.c.online == _inline_bool(True)))
    return [_record(r) for r in rows]


async def changed_since(conn: Conn, since: datetime) -> list[ScheduleRecord]:
    """Schedules a client changed at or after ``since`` (online or not), by update time."""
    rows = await conn.execute(_SELECT.where(S.c.update_time >= since).order_by(S.c.id))
    return [_record(r) for r in rows]


async def ids_of_workflow(conn: Conn, workflow_id: int) -> list[int]:
    query = select(S.c.id).where(S.c.workflow_id == workflow_id).order_by(S.c.id)
    return [int(r.id) for r in await conn.execute(query)]


async def list_schedules(
    conn: Conn, *, project: str, workflow: str, after: int | None, limit: int
) -> list[ScheduleRecord]:
    """Newest first, older than the id ``after``; a workflow or project filter is resolved to its
    id first and walks its (workflow, id) or (project, id) index."""
    where: list[ColumnElement[bool]] = []
    if workflow or project:
        scope = await _scope(conn, project, workflow)
        if scope is None:
            return []
        where.append(scope)
    if after is not None:
        where.append(S.c.id < after)
    page = select(S).where(*where).order_by(S.c.id.desc()).limit(limit).subquery()
    query = (
        select(page, P.c.name.label("project_name"), W.c.name.label("workflow_name"))
        .join(P, P.c.id == page.c.project_id)
        .join(W, W.c.id == page.c.workflow_id)
        .order_by(page.c.id.desc())
    )
    return [_record(r) for r in await conn.execute(query)]


async def _scope(conn: Conn, project: str, workflow: str) -> ColumnElement[bool] | None:
    if workflow:
        query = (
            select(W.c.id)
            .join(P, P.c.id == W.c.project_id)
            .where(P.c.name == project, W.c.name == workflow)
        )
        code = await conn.scalar(query)
        return None if code is None else S.c.workflow_id == _inline(int(code))
    project_id = await conn.scalar(select(P.c.id).where(P.c.name == project))
    return None if project_id is None else S.c.project_id == _inline(int(project_id))


def _inline(value: int) -> BindParameter[Any]:
    return bindparam(None, value, literal_execute=True)


# ------------------------------------------------------------------------------ fires


@dataclass(frozen=True, slots=True)
class NewFire:
    """A fire row: a fire time of a schedule, FIRED (with its run), SKIPPED or QUEUED."""

    schedule_id: int
    fire_time: datetime
    state: str
    instance_id: int | None


async def add_fire(
    conn: Conn,
    schedule_id: int,
    fire_time: datetime,
    state: str,
    instance_id: int | None,
    now: datetime,
) -> None:
    """Raises IntegrityError if this fire time was recorded already (by another master)."""
    await add_fires(conn, [NewFire(schedule_id, fire_time, state, instance_id)], now)


async def add_fires(conn: Conn, fires: Sequence[NewFire], now: datetime) -> None:
    """Inserts the fire rows in one statement; IntegrityError if one of them was recorded
    already (by another master), and then none is."""
    if not fires:
        return
    rows = [
        {
            "schedule_id": f.schedule_id,
            "fire_time": f.fire_time,
            "state": f.state,
            "workflow_instance_id": f.instance_id,
            "create_time": now,
        }
        for f in fires
    ]
    await conn.execute(_ADD_FIRE, rows[0] if len(rows) == 1 else rows)


async def run_going_on(conn: Conn, schedule_id: int) -> bool:
    """Whether the schedule's newest run has not ended."""
    return schedule_id in await runs_going_on(conn, [schedule_id])


async def runs_going_on(conn: Conn, ids: Sequence[int]) -> set[int]:
    """The schedules of ``ids`` whose newest run has not ended, in one statement."""
    if not ids:
        return set()
    rows = await conn.execute(_NEWEST_RUNS, {"_ids": list(ids)})
    return {int(r.schedule_id) for r in rows if not WorkflowState(r.state).terminal}


async def oldest_queued(conn: Conn, schedule_id: int) -> datetime | None:
    query = (
        select(F.c.fire_time)
        .where(F.c.schedule_id == schedule_id, F.c.state == QUEUED)
        .order_by(F.c.fire_time)
        .limit(1)
    )
    found: datetime | None = await conn.scalar(query)
    return found


async def start_queued(conn: Conn, schedule_id: int, fire_time: datetime, instance_id: int) -> bool:
    """Turns a QUEUED fire into the run ``instance_id``; False if another master did."""
    result = await conn.execute(
        update(F)
        .where(F.c.schedule_id == schedule_id, F.c.fire_time == fire_time, F.c.state == QUEUED)
        .values(state=FIRED, workflow_instance_id=instance_id)
    )
    return result.rowcount == 1


async def fires(conn: Conn, schedule_id: int) -> list[tuple[datetime, str, int | None]]:
    """Every fire row of the schedule, oldest first (tests and tools)."""
    query = (
        select(F.c.fire_time, F.c.state, F.c.workflow_instance_id)
        .where(F.c.schedule_id == schedule_id)
        .order_by(F.c.fire_time)
    )
    return [(r.fire_time, r.state, r.workflow_instance_id) for r in await conn.execute(query)]


def _record(row: Row[Any]) -> ScheduleRecord:
    m = row._mapping
    return ScheduleRecord(
        id=m["id"],
        project=m["project_name"],
        workflow=m["workflow_name"],
        workflow_code=m["workflow_id"],
        spec=ScheduleSpec(
            cron=m["cron"],
            time_zone=m["time_zone"],
            window=Window(start=m["start_time"], end=m["end_time"]),
            catch_up=CatchUp[m["catch_up"]],
            catch_up_cap=m["catch_up_cap"],
            overlap=Overlap[m["overlap"]],
            run_options=options_from_json(m["options"]),
        ),
        online=bool(m["online"]),
        next_fire_time=m["next_fire_time"],
        last_fire_time=m["last_fire_time"],
        create_time=m["create_time"],
        update_time=m["update_time"],
    )


def _not_found(schedule_id: int) -> NotFound:
    return NotFound(f"schedule {schedule_id} not found", metadata={"schedule": str(schedule_id)})


def _inline_bool(value: bool) -> BindParameter[Any]:
    # ``= 1`` written into the statement: MariaDB does not look ``online IS true`` up in the
    # (online, id) index, and a planner that sees the value estimates with its share (few rows).
    return bindparam(None, value, literal_execute=True)
