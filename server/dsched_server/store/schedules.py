"""Repository of schedules and their fire rows (``core/schedule.py`` decides; this stores).

A fire row is unique on (schedule, fire time) and is written in the transaction that writes the
run it starts: a second master firing the same time hits the key and its transaction (run and
all) rolls back, so each fire time starts at most one run.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import BindParameter, ColumnElement, Row, bindparam, delete, insert, select, update

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
    values: dict[str, Any] = {"next_fire_time": next_fire}
    if last is not None:
        values["last_fire_time"] = last
    await _update(conn, schedule_id, **values)


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


async def add_fire(
    conn: Conn,
    schedule_id: int,
    fire_time: datetime,
    state: str,
    instance_id: int | None,
    now: datetime,
) -> None:
    """Raises IntegrityError if this fire time was recorded already (by another master)."""
    await conn.execute(
        insert(F).values(
            schedule_id=schedule_id,
            fire_time=fire_time,
            state=state,
            workflow_instance_id=instance_id,
            create_time=now,
        )
    )


async def run_going_on(conn: Conn, schedule_id: int) -> bool:
    """Whether the schedule's newest run has not ended."""
    query = (
        select(WI.c.state)
        .join(F, F.c.workflow_instance_id == WI.c.id)
        .where(F.c.schedule_id == schedule_id, F.c.state == FIRED)
        .order_by(F.c.fire_time.desc())
        .limit(1)
    )
    state = await conn.scalar(query)
    return state is not None and not WorkflowState(state).terminal


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
