"""Repository of workflow instances and their commands.

Ownership-bearing writes are conditional on the owner's epoch (ARCHITECTURE.md §4):
:func:`fence` and :func:`set_state` raise :class:`~dsched.errors.OwnershipLost` when the row moved
to another epoch. State writes (:func:`set_state`, :func:`claim`, :func:`fail_over_epoch`) enforce
the transition table (:mod:`dsched_server.store.guard`); no other function writes the state.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypedDict

from sqlalchemy import (
    BindParameter,
    ColumnElement,
    Insert,
    Row,
    ScalarSelect,
    Select,
    Update,
    bindparam,
    delete,
    func,
    insert,
    or_,
    select,
    union_all,
    update,
)
from sqlalchemy.exc import IntegrityError
from sqlalchemy.sql.dml import ReturningInsert

from dsched.errors import Aborted, NotFound, OwnershipLost
from dsched.options import CommandType, Priority, RunTrigger
from dsched.states import WorkflowState
from dsched_server.core.records import (
    BACKFILL_LANE,
    CommandRecord,
    InstanceRecord,
    RunOptions,
    RunScope,
    WorkflowRecord,
    queue_rank,
)
from dsched_server.store import guard
from dsched_server.store.codec import (
    options_from_json,
    options_to_json,
    scope_from_json,
    scope_to_json,
)
from dsched_server.store.database import Conn
from dsched_server.store.models import Command, Project, Workflow, WorkflowInstance, table

WI = table(WorkflowInstance)
C = table(Command)
P = table(Project)
W = table(Workflow)


class InstanceValues(TypedDict, total=False):
    """The plain columns an instance write may set (the state moves only through the functions
    that check the transition table; the owner's host and epoch only through a claim)."""

    command_type: str
    start_time: datetime
    end_time: datetime | None
    state_reason: str
    run_times: int
    run_scope: dict[str, Any]  # codec.scope_to_json's document
    var_pool: Mapping[str, str]


_SELECT = (
    select(WI, P.c.name.label("project_name"), W.c.name.label("workflow_name"))
    .join(P, P.c.id == WI.c.project_id)
    .join(W, W.c.id == WI.c.workflow_id)
)
# The statements every run executes are built once: a statement built again for each call is also
# walked again for its cache key (SQLAlchemy memoizes the key on the statement object), which
# cost about 60 us of the 80 us a one-row SELECT took on SQLite.
_GET = _SELECT.where(WI.c.id == bindparam("_id"))
_STATE = select(WI.c.state).where(WI.c.id == bindparam("_id"))
_INSERT = insert(WI)
_INSERT_RETURNING = insert(WI).returning(WI.c.id, sort_by_parameter_order=True)
_INSERT_COMMAND = insert(C)
_INSERT_COMMAND_RETURNING = insert(C).returning(C.c.id, sort_by_parameter_order=True)
_TAKE_COMMAND = delete(C).where(
    C.c.id == bindparam("_id"),
    C.c.workflow_instance_id == bindparam("_instance"),
    C.c.type == bindparam("_type"),
    C.c.create_time == bindparam("_created"),
)


def _by_id(query: Update) -> Update:
    """Makes MariaDB find an instance row by its primary key before anything else.

    With ``state IN (...)`` in the WHERE clause InnoDB may pick ix_workflow_instances_state and
    lock that index entry before the row. A writer doing so while the owner's fence() holds the
    row deadlocks with the owner's own state change (which needs the index entry), and InnoDB
    rolls back one of them: the fence promised that a takeover waits instead.
    """
    for dialect in ("mysql", "mariadb"):
        query = query.with_hint("FORCE INDEX (PRIMARY)", dialect_name=dialect)
    return query


def _record(row: Row[Any]) -> InstanceRecord:
    return _instance(row._mapping)


def _instance(m: Mapping[Any, Any]) -> InstanceRecord:
    """The record of an instance row (joined with its project's and workflow's names)."""
    return InstanceRecord(
        id=m["id"],
        project=m["project_name"],
        workflow=m["workflow_name"],
        workflow_code=m["workflow_id"],
        workflow_version=m["workflow_version"],
        state=WorkflowState(m["state"]),
        command_type=CommandType(m["command_type"]),
        options=options_from_json(m["options"]),
        run_scope=scope_from_json(m["run_scope"]),
        host=m["host"],
        epoch=m["epoch"],
        run_times=m["run_times"],
        submit_time=m["submit_time"],
        start_time=m["start_time"],
        end_time=m["end_time"],
        state_reason=m["state_reason"],
        var_pool=dict(m["var_pool"]),
        schedule_time=m["schedule_time"],
        time_zone=m["time_zone"],
        trigger=RunTrigger(m["trigger"]),
        backfill_id=m["backfill_id"],
        schedule_id=m["schedule_id"],
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class RunTime:
    """When a new run counts from and what started it (see InstanceRecord)."""

    schedule_time: datetime
    time_zone: str = "UTC"
    trigger: RunTrigger = RunTrigger.MANUAL
    backfill_id: int | None = None
    schedule_id: int | None = None


@dataclass(frozen=True, slots=True)
class NewRun:
    """A run to write: a SUBMITTED instance of ``workflow``'s version and its START command."""

    workflow: WorkflowRecord
    options: RunOptions
    when: RunTime


async def create_instance(
    conn: Conn,
    workflow: WorkflowRecord,
    options: RunOptions,
    now: datetime,
    when: RunTime | None = None,
) -> int:
    """Inserts a SUBMITTED instance and its START command (same transaction as the caller's).
    ``when``: its schedule time and trigger; None: a manual run counting from ``now`` in UTC."""
    run = NewRun(workflow, options, when or RunTime(schedule_time=now))
    return (await create_instances(conn, [run], now))[0]


async def create_instances(conn: Conn, runs: Sequence[NewRun], now: datetime) -> list[int]:
    """:func:`create_runs`, returning the instance ids in the order of ``runs``."""
    return [c.instance.id for c in await create_runs(conn, runs, now)]


@dataclass(frozen=True, slots=True)
class Created:
    """A run as :func:`create_runs` wrote it: what reading its rows back would return."""

    instance: InstanceRecord
    command: CommandRecord


async def create_runs(conn: Conn, runs: Sequence[NewRun], now: datetime) -> list[Created]:
    """Inserts the runs' instances and START commands, a statement for each table whatever their
    number (a cron storm fires 200 schedules a transaction); returns them in the order of
    ``runs``, built from the rows written (the caller need not read them back). Several rows take
    their ids from RETURNING, which SQLite (3.35+), PostgreSQL and MariaDB (10.5+) have;
    SQLAlchemy keeps them in the order of the rows."""
    if not runs:
        return []
    rows = [_instance_row(r, now) for r in runs]
    ids = await _insert(conn, _INSERT, _INSERT_RETURNING, rows)
    commands = [
        _command_row(
            i, CommandType.START, queue_rank(r.options.priority, r.when.trigger), None, now
        )
        for i, r in zip(ids, runs, strict=True)
    ]
    command_ids = await _insert(conn, _INSERT_COMMAND, _INSERT_COMMAND_RETURNING, commands)
    return [
        Created(
            _instance(
                _as_read(row)
                | {
                    "id": instance_id,
                    "project_name": run.workflow.project,
                    "workflow_name": run.workflow.spec.name,
                    "start_time": None,
                    "end_time": None,
                }
            ),
            _command(_as_read(command) | {"id": command_id}),
        )
        for run, row, instance_id, command, command_id in zip(
            runs, rows, ids, commands, command_ids, strict=True
        )
    ]


async def _insert(
    conn: Conn, one: Insert, many: ReturningInsert[Any], rows: list[dict[str, Any]]
) -> list[int]:
    """Inserts ``rows``; returns their ids in order."""
    if len(rows) == 1:
        result = await conn.execute(one, rows[0])
        return [int(result.inserted_primary_key[0])]  # type: ignore[index]
    return [int(row[0]) for row in await conn.execute(many, rows)]


def _as_read(row: Mapping[str, Any]) -> dict[str, Any]:
    """A row as written, with its values as reading them back returns them (times in UTC: the
    columns keep the instant, not the zone, see types.UtcDateTime)."""
    return {k: v.astimezone(UTC) if isinstance(v, datetime) else v for k, v in row.items()}


def _instance_row(run: NewRun, now: datetime) -> dict[str, Any]:
    workflow, options, when = run.workflow, run.options, run.when
    return {
        "project_id": workflow.project_id,
        "workflow_id": workflow.id,
        "workflow_version": workflow.version,
        "state": WorkflowState.SUBMITTED.value,
        "command_type": CommandType.START.value,
        "options": options_to_json(options),
        "run_scope": scope_to_json(options.scope),
        "host": "",
        "epoch": 0,
        "run_times": 1,
        "submit_time": now,
        "state_reason": "",
        "var_pool": {},
        "schedule_time": when.schedule_time,
        "time_zone": when.time_zone,
        "trigger": when.trigger.value,
        "backfill_id": when.backfill_id,
        "schedule_id": when.schedule_id,
    }


def _command_row(
    instance_id: int,
    kind: CommandType,
    priority_rank: int,
    doc: dict[str, Any] | None,
    now: datetime,
) -> dict[str, Any]:
    return {
        "type": kind.value,
        "workflow_instance_id": instance_id,
        "priority_rank": priority_rank,
        "scope": doc,
        "create_time": now,
    }


async def add_command(
    conn: Conn,
    instance_id: int,
    kind: CommandType,
    priority_rank: int,
    scope: RunScope | None,
    now: datetime,
    *,
    restore_state: WorkflowState | None = None,
) -> int:
    """Queues a command. ABORTED if the instance already has a pending command."""
    doc: dict[str, Any] | None = scope_to_json(scope) if scope is not None else None
    if restore_state is not None:
        doc = {**(doc or {}), "restore_state": restore_state.value}
    try:
        result = await conn.execute(
            _INSERT_COMMAND, _command_row(instance_id, kind, priority_rank, doc, now)
        )
    except IntegrityError as exc:
        raise Aborted(
            f"workflow instance {instance_id} already has a pending command",
            reason="COMMAND_PENDING",
            metadata={"instance": str(instance_id)},
        ) from exc
    return int(result.inserted_primary_key[0])  # type: ignore[index]


async def get_instance(conn: Conn, instance_id: int) -> InstanceRecord:
    row = (await conn.execute(_GET, {"_id": instance_id})).first()
    if row is None:
        raise NotFound(
            f"workflow instance {instance_id} not found", metadata={"instance": str(instance_id)}
        )
    return _record(row)


async def list_instances(
    conn: Conn,
    *,
    project: str,
    workflow: str,
    states: Iterable[WorkflowState],
    submitted_after: datetime | None,
    after: int | None,
    limit: int,
) -> list[InstanceRecord]:
    """Up to ``limit`` instances matching the filters, newest first, older than the id ``after``.

    Every filter is served by an index that also gives the id order, so a page reads about
    ``limit`` index entries whatever the table holds (``test_query_plans`` checks the plans): a
    workflow by (workflow_id, id), a project by (project_id, id), states by (state, id), the
    submit time by (submit_time, id) and no filter by the primary key. With a workflow or project,
    states and time are checked on that index's rows. Several states, or a workflow name without
    a project (one workflow per project may have it), are merged from one walk each.

    The names are resolved to ids first and the ids and states are written into the statement:
    filtering on the joined names made the planners walk the whole table in id order, and a
    planner that sees only a parameter estimates an average workflow's share of the table, not the
    share of the one asked for. The page is chosen from workflow_instances alone and the names
    joined to it afterwards: MariaDB otherwise starts from the projects and sorts every instance.
    """
    wanted = sorted({s.value for s in states})
    walks: list[ColumnElement[bool]] = []  # one index walk each, merged newest first
    where: list[ColumnElement[bool]] = []  # checked on the rows of every walk
    if workflow or project:
        walks = await _scope(conn, project, workflow)
        if not walks:
            return []
        if wanted:
            # Checked on the scope index's rows, in a form no planner can look up in (state, id):
            # SQLite has no statistics and would as soon walk a state most instances are in.
            where.append(WI.c.state.concat("").in_(wanted))
    else:
        walks = [WI.c.state == _inline(s) for s in wanted]
    if submitted_after is not None:
        where.append(WI.c.submit_time >= submitted_after)
        if not walks:
            where.append(WI.c.id >= _first_submitted_after(submitted_after))
    if after is not None:
        where.append(WI.c.id < after)
    if len(walks) > 1:
        # One branch per walk, each a short backward walk of its index; the planners cannot
        # merge the sorted runs of an IN list themselves and would sort every matching row.
        branches = [
            select(WI.c.id).where(w, *where).order_by(WI.c.id.desc()).limit(limit) for w in walks
        ]
        ids = union_all(*(select(b.subquery().c.id) for b in branches)).subquery()
        page = select(WI).join(ids, ids.c.id == WI.c.id)
    else:
        page = select(WI).where(*walks, *where)
    rows = page.order_by(WI.c.id.desc()).limit(limit).subquery()
    query = (
        select(rows, P.c.name.label("project_name"), W.c.name.label("workflow_name"))
        .join(P, P.c.id == rows.c.project_id)
        .join(W, W.c.id == rows.c.workflow_id)
        .order_by(rows.c.id.desc())
    )
    return [_record(r) for r in await conn.execute(query)]


async def _scope(conn: Conn, project: str, workflow: str) -> list[ColumnElement[bool]]:
    """The index lookups of a workflow or project filter: one per workflow of that name (in any
    project when ``project`` is empty), or the project's; empty when nothing has that name."""
    if workflow:
        query = select(W.c.id).where(W.c.name == workflow).order_by(W.c.id)
        if project:
            query = query.join(P, P.c.id == W.c.project_id).where(P.c.name == project)
        codes = [int(r.id) for r in await conn.execute(query)]
        return [WI.c.workflow_id == _inline(code) for code in codes]
    project_id = await conn.scalar(select(P.c.id).where(P.c.name == project))
    return [] if project_id is None else [WI.c.project_id == _inline(int(project_id))]


def _inline(value: int | str) -> BindParameter[Any]:
    """A value written into the statement's text when it runs (ids read from the database, state
    names), so the planner estimates with that value's share of the table (see
    :func:`list_instances`)."""
    return bindparam(None, value, literal_execute=True)


def _first_submitted_after(time: datetime) -> ScalarSelect[int]:
    """The lowest id of the instances submitted at or after ``time``, read from the
    (submit_time, id) index.

    Ids grow in submit order, so this bounds the primary key walk to the instances in the window
    instead of reading down to the first instance when the window holds fewer than a page. It is
    exact even when clocks step back: every matching id is at least the lowest matching id.
    ``id + 0``: over a bare id, SQLite and PostgreSQL compute min() by walking the primary key from
    the oldest row until one matches, which reads every row before the window.
    """
    return select(func.min(WI.c.id + 0)).where(WI.c.submit_time >= time).scalar_subquery()


async def pending_commands(conn: Conn, limit: int) -> list[CommandRecord]:
    """The oldest commands of the highest priority first."""
    return [_command(r._mapping) for r in await conn.execute(_pending(limit))]


def _command(m: Mapping[Any, Any]) -> CommandRecord:
    scope = m["scope"]
    return CommandRecord(
        id=m["id"],
        type=CommandType(m["type"]),
        workflow_instance_id=m["workflow_instance_id"],
        priority=_priority(m["priority_rank"]),
        scope=scope_from_json(scope) if scope and "start_tasks" in scope else None,
        restore_state=(
            WorkflowState(scope["restore_state"]) if scope and "restore_state" in scope else None
        ),
        create_time=m["create_time"],
    )


@functools.lru_cache(maxsize=8)
def _pending(limit: int) -> Select[Any]:
    return select(C).order_by(C.c.priority_rank, C.c.id).limit(limit)


def _priority(rank: int) -> Priority:
    return list(Priority)[max(0, min(rank % BACKFILL_LANE, len(Priority) - 1))]


async def claim(
    conn: Conn,
    command: CommandRecord,
    *,
    host: str,
    epoch: int,
    state: WorkflowState,
    values: InstanceValues,
) -> bool:
    """Takes a command: deletes it (0 rows = another master has it) and stamps the instance with
    this master's host and epoch and ``state``, in the caller's transaction. IllegalTransition if
    the instance is in a state the table forbids leaving for ``state`` (the command stays)."""
    _no_state(values)
    # Not by id alone: SQLite reuses the id of a deleted row (max + 1), so a stale record could
    # otherwise delete a newer command and stamp an instance another master already drives.
    gone = await conn.execute(
        _TAKE_COMMAND,
        {
            "_id": command.id,
            "_instance": command.workflow_instance_id,
            "_type": command.type.value,
            "_created": command.create_time,
        },
    )
    if gone.rowcount != 1:
        return False
    stamped = await conn.execute(
        _set_state(_claimable(state), state, False, ("host", "epoch", *sorted(values))),
        {"_id": command.workflow_instance_id, "v_host": host, "v_epoch": epoch}
        | {f"v_{k}": v for k, v in values.items()},
    )
    if stamped.rowcount != 1:
        current = await current_state(conn, command.workflow_instance_id)
        if current is None:
            raise NotFound(
                f"workflow instance {command.workflow_instance_id} not found",
                metadata={"instance": str(command.workflow_instance_id)},
            )
        guard.refuse_workflow(command.workflow_instance_id, current, [state])
    return True


@functools.cache
def _claimable(state: WorkflowState) -> tuple[WorkflowState, ...]:
    """The states a claim may move to ``state`` from (the transition table is constant)."""
    return tuple(s for s in WorkflowState if guard.workflow_sources([s], [state])[0])


# Built once: every fenced batch of every runner executes it (see task_instances._transition).
_FENCE = (
    update(WI)
    .where(WI.c.id == bindparam("_id"), WI.c.epoch == bindparam("_epoch"))
    .values(epoch=bindparam("_epoch"))
)


async def fence(conn: Conn, instance_id: int, epoch: int) -> None:
    """Asserts that ``epoch`` still owns the instance and locks its row for this transaction.

    A no-op update rather than a SELECT: it takes the row lock on every database, so a concurrent
    takeover (which changes ``epoch``) waits for this transaction or makes it fail here.
    """
    result = await conn.execute(_FENCE, {"_id": instance_id, "_epoch": epoch})
    if result.rowcount != 1:
        raise OwnershipLost(
            f"epoch {epoch} no longer owns workflow instance {instance_id}",
            metadata={"instance": str(instance_id), "epoch": str(epoch)},
        )


async def lock(conn: Conn, instance_id: int) -> None:
    """Locks the instance row for this transaction whoever owns it (a writer that is not the owner
    and must not interleave with the owner's fenced transactions); NotFound if there is none."""
    result = await conn.execute(update(WI).where(WI.c.id == instance_id).values(epoch=WI.c.epoch))
    if result.rowcount != 1:
        raise NotFound(
            f"workflow instance {instance_id} not found", metadata={"instance": str(instance_id)}
        )


async def restore_state(conn: Conn, instance_id: int) -> WorkflowState | None:
    """The state a FAILOVER instance gets back when its recovery command is claimed (None if it
    has no such command)."""
    doc = await conn.scalar(
        select(C.c.scope).where(
            C.c.workflow_instance_id == instance_id, C.c.type == CommandType.FAILOVER.value
        )
    )
    if not doc or "restore_state" not in doc:
        return None
    return WorkflowState(doc["restore_state"])


async def set_state(
    conn: Conn,
    instance_id: int,
    *,
    epoch: int | None,
    expected: Iterable[WorkflowState],
    state: WorkflowState,
    values: InstanceValues | None = None,
    via: Sequence[WorkflowState] = (),
) -> bool:
    """Moves the instance to ``state`` (through ``via``, see :class:`~dsched_server.store.
    task_instances.TaskWrite`) if it is in one of ``expected`` (and, for an owner write, still
    owned by ``epoch``). Returns False when the row did not match; raises OwnershipLost if the
    epoch no longer owns it, IllegalTransition if the row is in an expected state the table
    forbids leaving that way."""
    _no_state(values or {})
    path = (*via, state)
    legal, illegal = guard.workflow_sources(expected, path)
    if legal:
        given = values or {}
        query = _set_state(tuple(sorted(legal)), state, epoch is not None, tuple(sorted(given)))
        params = {"_id": instance_id, **{f"v_{k}": v for k, v in given.items()}}
        if epoch is not None:
            params["_epoch"] = epoch
        result = await conn.execute(query, params)
        if result.rowcount == 1:
            return True
    row = (await conn.execute(select(WI.c.epoch, WI.c.state).where(WI.c.id == instance_id))).first()
    if epoch is not None and (row is None or row.epoch != epoch):
        raise OwnershipLost(
            f"epoch {epoch} no longer owns workflow instance {instance_id}",
            metadata={"instance": str(instance_id), "epoch": str(epoch)},
        )
    if row is not None and WorkflowState(row.state) in illegal:
        guard.refuse_workflow(instance_id, WorkflowState(row.state), path)
    return False


@functools.lru_cache(maxsize=256)
def _set_state(
    sources: tuple[WorkflowState, ...], state: WorkflowState, fenced: bool, keys: tuple[str, ...]
) -> Update:
    """The UPDATE of one kind of state write, built once (see _GET): the shapes are few (states x
    the columns the write sets). Plain equalities, not IN (...): an IN list is an expanding
    parameter, which SQLAlchemy renders into the statement again at every execution (15 -> 24
    us on SQLite; each claim and each state change of a run; as task_instances._transition)."""
    query = _by_id(update(WI)).where(
        WI.c.id == bindparam("_id"), or_(*(WI.c.state == s.value for s in sources))
    )
    if fenced:
        query = query.where(WI.c.epoch == bindparam("_epoch"))
    return query.values(state=state.value, **{k: bindparam(f"v_{k}") for k in keys})


def _no_state(values: InstanceValues) -> None:
    # The state moves only through the functions that check the transition table.
    if "state" in values:
        raise ValueError("the state is not a plain field: write it with set_state")


async def update_fields(conn: Conn, instance_id: int, epoch: int, values: InstanceValues) -> None:
    """Owner write of plain fields (var pool, reason); raises OwnershipLost on a stale epoch."""
    _no_state(values)
    result = await conn.execute(
        update(WI).where(WI.c.id == instance_id, WI.c.epoch == epoch).values(**values)
    )
    if result.rowcount != 1:
        raise OwnershipLost(f"epoch {epoch} no longer owns workflow instance {instance_id}")


async def dead_owner_epochs(
    conn: Conn, live_epochs: Iterable[int], states: Iterable[WorkflowState]
) -> list[int]:
    """The distinct owner epochs, not in ``live_epochs``, of instances in ``states``."""
    rows = await conn.execute(
        select(WI.c.epoch)
        .where(WI.c.state.in_([s.value for s in states]), WI.c.epoch.not_in(list(live_epochs)))
        .distinct()
    )
    return sorted(int(r.epoch) for r in rows)


async def owned_by(
    conn: Conn, host: str, epoch: int, states: Iterable[WorkflowState], limit: int
) -> list[int]:
    """Ids of up to ``limit`` instances stamped with master ``(host, epoch)`` in ``states``,
    oldest first."""
    rows = await conn.execute(
        select(WI.c.id)
        .where(WI.c.host == host, WI.c.epoch == epoch, WI.c.state.in_([s.value for s in states]))
        .order_by(WI.c.id)
        .limit(limit)
    )
    return [int(r.id) for r in rows]


async def fail_over_epoch(
    conn: Conn, dead_epoch: int, states: Iterable[WorkflowState], now: datetime
) -> list[tuple[int, WorkflowState]]:
    """Moves every instance of ``dead_epoch`` in ``states`` to FAILOVER and queues a recovery
    command for each (carrying the state to restore), in the caller's transaction. Returns the
    (instance id, previous state) pairs; empty when there was nothing (left) to take over.

    The updates are conditional on the dead epoch and each row's state, so running this twice,
    or concurrently on two masters, moves each instance once: a row that changed between the read
    and the update makes this raise :class:`~dsched.errors.Aborted` and the caller retries with a
    fresh read. Instances that already have a pending command are left to that command (claiming
    it stamps them with the claimer's epoch).
    """
    states = list(states)
    wanted = [s.value for s in states]
    for state in states:
        if not guard.workflow_sources([state], [WorkflowState.FAILOVER])[0]:
            # A caller's mistake, refused before anything is read or written.
            guard.refuse_workflow(0, state, [WorkflowState.FAILOVER])
    pending = select(C.c.id).where(C.c.workflow_instance_id == WI.c.id).exists()
    rows = (
        await conn.execute(
            select(WI.c.id, WI.c.state).where(
                WI.c.epoch == dead_epoch, WI.c.state.in_(wanted), ~pending
            )
        )
    ).all()
    taken = [(int(r.id), WorkflowState(r.state)) for r in rows]
    for state in {s for _, s in taken}:
        ids = [i for i, s in taken if s is state]
        result = await conn.execute(
            _by_id(update(WI))
            .where(WI.c.id.in_(ids), WI.c.epoch == dead_epoch, WI.c.state == state.value)
            .values(state=WorkflowState.FAILOVER.value)
        )
        if result.rowcount != len(ids):
            raise Aborted(
                f"instances of epoch {dead_epoch} changed during failover; retry",
                reason="FAILOVER_RACE",
                metadata={"epoch": str(dead_epoch)},
            )
    if taken:
        await conn.execute(
            insert(C),
            [
                {
                    "type": CommandType.FAILOVER.value,
                    "workflow_instance_id": instance_id,
                    "priority_rank": 0,
                    "scope": {"restore_state": state.value},
                    "create_time": now,
                }
                for instance_id, state in taken
            ],
        )
    return taken


async def delete_commands(conn: Conn, instance_id: int) -> None:
    """Drops the pending command of an instance (it was stopped before a master claimed it)."""
    await conn.execute(delete(C).where(C.c.workflow_instance_id == instance_id))


async def current_state(conn: Conn, instance_id: int) -> WorkflowState | None:
    value = await conn.scalar(_STATE, {"_id": instance_id})
    return WorkflowState(value) if value is not None else None
