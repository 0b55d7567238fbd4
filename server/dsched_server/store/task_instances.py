"""Repository of task instances (attempts).

Creating an attempt supersedes (``valid = false``) the earlier attempts of the same task in the same
transaction, so an instance never has two valid attempts of a task. State writes are conditional on
the state the writer believes the row is in, and on the worker epoch for worker reports, and the
transition table is enforced on them (:mod:`dsched_server.store.guard`): an illegal one is refused.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypedDict

from sqlalchemy import Row, Update, and_, bindparam, func, insert, or_, select, update

from dsched.errors import Aborted, NotFound
from dsched.options import Priority
from dsched.states import TaskState
from dsched_server.core.records import TaskInstanceRecord
from dsched_server.store import guard
from dsched_server.store.database import Conn
from dsched_server.store.models import TaskInstance, table

TI = table(TaskInstance)


@dataclass(frozen=True, slots=True, kw_only=True)
class NewAttempt:
    task_name: str
    attempt: int
    retry_times: int
    state: TaskState
    priority: Priority
    worker_group: str


class TaskValues(TypedDict, total=False):
    """The plain columns a transition of an attempt may set with its state (the state itself
    moves only through the transition functions, which check the table)."""

    host: str
    worker_epoch: int
    pid: int
    log_path: str
    exit_code: int | None
    start_time: datetime
    end_time: datetime
    out_params: Mapping[str, str]
    state_reason: str
    valid: bool
    application_id: str  # a field update while RUNNING, or with the attempt's result


@dataclass(slots=True, kw_only=True)
class TaskWrite:
    """One row's transition: applied only if the row is valid, in one of ``expected`` states and
    (when ``worker_epoch`` is set) not owned by another worker incarnation. ``via``: the states
    it passed through on the way to ``state`` (a batch coalesces a row's changes), each step
    checked against the transition table."""

    task_instance_id: int
    expected: frozenset[TaskState]
    state: TaskState
    worker_epoch: int | None
    values: TaskValues
    via: tuple[TaskState, ...] = ()

    @property
    def path(self) -> tuple[TaskState, ...]:
        return (*self.via, self.state)


def record(row: Row[Any]) -> TaskInstanceRecord:
    m = row._mapping
    return TaskInstanceRecord(
        id=m["id"],
        workflow_instance_id=m["workflow_instance_id"],
        task_name=m["task_name"],
        attempt=m["attempt"],
        retry_times=m["retry_times"],
        state=TaskState(m["state"]),
        valid=bool(m["valid"]),
        host=m["host"],
        worker_epoch=m["worker_epoch"],
        pid=m["pid"],
        log_path=m["log_path"],
        exit_code=m["exit_code"],
        submit_time=m["submit_time"],
        start_time=m["start_time"],
        end_time=m["end_time"],
        out_params=dict(m["out_params"]),
        priority=Priority(m["priority"]),
        worker_group=m["worker_group"],
        state_reason=m["state_reason"],
        application_id=m["application_id"],
    )


async def create_attempts(
    conn: Conn, instance_id: int, attempts: Sequence[NewAttempt], now: datetime
) -> list[int]:
    """Inserts the attempts (superseding earlier ones of the same tasks); returns their ids in
    order."""
    if not attempts:
        return []
    for a in attempts:
        guard.check_initial(f"{instance_id}/{a.task_name}#{a.attempt}", a.state)
    # A first attempt has no earlier one to supersede: attempt numbers go up from 1 without a gap
    # (the unique key on the number would refuse a second attempt 1 anyway).
    names = [a.task_name for a in attempts if a.attempt > 1]
    if names:
        await conn.execute(
            update(TI)
            .where(
                TI.c.workflow_instance_id == instance_id,
                TI.c.task_name.in_(names),
                TI.c.valid.is_(True),
            )
            .values(valid=False)
        )
    rows: list[dict[str, Any]] = [
        {
            "workflow_instance_id": instance_id,
            "task_name": a.task_name,
            "attempt": a.attempt,
            "retry_times": a.retry_times,
            "state": a.state.value,
            "valid": True,
            "host": "",
            "worker_epoch": 0,
            "pid": 0,
            "log_path": "",
            "exit_code": None,
            "submit_time": now,
            "out_params": {},
            "priority": a.priority.value,
            "worker_group": a.worker_group,
            "state_reason": "",
            "application_id": "",
        }
        for a in attempts
    ]
    result = await conn.execute(_CREATE, rows)
    return [int(r[0]) for r in result]


async def transition(
    conn: Conn,
    task_instance_id: int,
    *,
    expected: Iterable[TaskState],
    state: TaskState,
    worker_epoch: int | None = None,
    values: TaskValues | None = None,
    via: Sequence[TaskState] = (),
) -> bool:
    """Moves an attempt to ``state`` (through ``via``) if it is valid and in one of ``expected``
    (and, when ``worker_epoch`` is given, not owned by another worker incarnation). False if the
    row did not match; IllegalTransition if it is in an expected state the table forbids leaving
    that way."""
    path = (*via, state)
    legal, illegal = guard.task_sources(expected, path)
    if legal:
        query = update(TI).where(
            TI.c.id == task_instance_id,
            TI.c.valid.is_(True),
            TI.c.state.in_([s.value for s in legal]),
        )
        if worker_epoch is not None:
            query = query.where(TI.c.worker_epoch.in_([0, worker_epoch]))
        result = await conn.execute(query.values(state=state.value, **(values or {})))
        if result.rowcount == 1:
            return True
    await _refuse_if_illegal(conn, task_instance_id, illegal, path)
    return False


async def _refuse_if_illegal(
    conn: Conn, task_instance_id: int, illegal: frozenset[TaskState], path: Sequence[TaskState]
) -> None:
    """Refuses the write if the row is in one of the ``illegal`` sources of ``path``."""
    if not illegal:
        return
    current = await conn.scalar(
        select(TI.c.state).where(TI.c.id == task_instance_id, TI.c.valid.is_(True))
    )
    if current is not None and TaskState(current) in illegal:
        guard.refuse_task(task_instance_id, TaskState(current), path)


@functools.lru_cache(maxsize=256)
def _transition(
    expected: tuple[TaskState, ...], state: TaskState, fenced: bool, keys: tuple[str, ...]
) -> Update:
    """The UPDATE of one kind of transition, built once: the shapes are few (states x the
    columns a transition sets), and a statement that is built again for every batch is also
    walked again for its cache key (SQLAlchemy memoizes the key on the statement object)."""
    # Plain equalities, not IN (...): expanding parameters cannot be used with executemany.
    query = update(TI).where(
        TI.c.id == bindparam("_id"),
        TI.c.valid.is_(True),
        or_(*(TI.c.state == s.value for s in expected)),
    )
    if fenced:
        query = query.where(
            or_(TI.c.worker_epoch == 0, TI.c.worker_epoch == bindparam("_worker_epoch"))
        )
    return query.values(state=state.value, **{k: bindparam(f"v_{k}") for k in keys})


async def apply_writes(conn: Conn, writes: Sequence[TaskWrite]) -> None:
    """Applies transitions in bulk: one executemany per kind of change. Raises Aborted (and the
    caller's transaction rolls back) if any row did not match its precondition, IllegalTransition
    if a row is in an expected state the table forbids leaving by the write's path."""
    groups: dict[tuple[Any, ...], list[TaskWrite]] = {}
    for w in writes:
        legal, illegal = guard.task_sources(w.expected, w.path)
        if not legal:  # nothing it expects may lead there: refused, or not matching anyway
            await _refuse_if_illegal(conn, w.task_instance_id, illegal, w.path)
            raise _changed_behind(1)
        shape = (tuple(sorted(legal)), w.state, w.worker_epoch is not None, tuple(sorted(w.values)))
        groups.setdefault(shape, []).append(w)
    for (expected, state, fenced, keys), rows in groups.items():
        query = _transition(expected, state, fenced, keys)
        params = [
            {
                "_id": w.task_instance_id,
                **({"_worker_epoch": w.worker_epoch} if fenced else {}),
                **{f"v_{k}": v for k, v in w.values.items()},
            }
            for w in rows
        ]
        if conn.multi_rowcount or len(params) == 1:
            changed = (await conn.execute(query, params)).rowcount
        else:  # the driver cannot count rows of an executemany: count them one by one
            changed = sum([(await conn.execute(query, p)).rowcount for p in params])
        if changed != len(params):
            for w in rows:  # an illegal source explains it better than a concurrent change
                _, illegal = guard.task_sources(w.expected, w.path)
                await _refuse_if_illegal(conn, w.task_instance_id, illegal, w.path)
            raise _changed_behind(len(params) - changed)


def _changed_behind(count: int) -> Aborted:
    return Aborted(
        f"{count} task instance(s) changed behind the owner's back",
        reason="CONCURRENT_MODIFICATION",
    )


async def supersede(conn: Conn, task_instance_ids: Iterable[int]) -> None:
    """Marks attempts invalid (a rerun, recovery or resume replaces them)."""
    ids = list(task_instance_ids)
    if ids:
        await conn.execute(update(TI).where(TI.c.id.in_(ids)).values(valid=False))


async def get(conn: Conn, task_instance_id: int) -> TaskInstanceRecord:
    row = (await conn.execute(select(TI).where(TI.c.id == task_instance_id))).first()
    if row is None:
        raise NotFound(
            f"task instance {task_instance_id} not found",
            metadata={"task_instance": str(task_instance_id)},
        )
    return record(row)


# Built once (see instances._GET): every claim restores an instance's attempts.
_VALID = (
    select(TI)
    .where(TI.c.workflow_instance_id == bindparam("_instance"), TI.c.valid.is_(True))
    .order_by(TI.c.id)
)
_LAST = (
    select(TI.c.task_name, func.max(TI.c.attempt).label("top"))
    .where(TI.c.workflow_instance_id == bindparam("_instance"))
    .group_by(TI.c.task_name)
)
_CREATE = insert(TI).returning(TI.c.id, sort_by_parameter_order=True)
_LOST_APPLICATIONS = (
    select(TI.c.task_name, TI.c.application_id)
    .where(
        TI.c.workflow_instance_id == bindparam("_instance"),
        TI.c.state == TaskState.NEED_FAULT_TOLERANCE.value,
        TI.c.application_id != "",
    )
    .order_by(TI.c.id)
)
MAX_LOST_APPLICATIONS = 16  # per task: what a TaskExecution may carry


async def lost_applications(conn: Conn, instance_id: int) -> dict[str, tuple[str, ...]]:
    """The Spark application ids of each task's attempts lost with their worker, oldest first
    (the last :data:`MAX_LOST_APPLICATIONS`): a runner restored from the store hands them to the
    task's next attempt as its earlier applications (ARCHITECTURE.md §15)."""
    found: dict[str, tuple[str, ...]] = {}
    for row in await conn.execute(_LOST_APPLICATIONS, {"_instance": instance_id}):
        name, app = row.task_name, row.application_id
        found[name] = (*found.get(name, ()), app)[-MAX_LOST_APPLICATIONS:]
    return found


async def valid_attempts(conn: Conn, instance_id: int) -> list[TaskInstanceRecord]:
    rows = await conn.execute(_VALID, {"_instance": instance_id})
    return [record(r) for r in rows]


async def last_attempts(conn: Conn, instance_id: int) -> dict[str, int]:
    """Highest attempt number per task, superseded attempts included."""
    rows = await conn.execute(_LAST, {"_instance": instance_id})
    return {r.task_name: int(r.top) for r in rows}


async def list_for_instance(
    conn: Conn, instance_id: int, *, include_superseded: bool, after: int | None, limit: int
) -> list[TaskInstanceRecord]:
    """Up to ``limit`` task instances of an instance in creation order, after the id ``after``."""
    query = select(TI).where(TI.c.workflow_instance_id == instance_id)
    if not include_superseded:
        query = query.where(TI.c.valid.is_(True))
    if after is not None:
        query = query.where(TI.c.id > after)
    return [record(r) for r in await conn.execute(query.order_by(TI.c.id).limit(limit))]


async def count_unfinished_failures(conn: Conn, instance_id: int) -> int:
    """Valid attempts that are FAILED or KILLED (for force-success)."""
    return int(
        await conn.scalar(
            select(func.count()).where(
                and_(
                    TI.c.workflow_instance_id == instance_id,
                    TI.c.valid.is_(True),
                    TI.c.state.in_([TaskState.FAILED.value, TaskState.KILLED.value]),
                )
            )
        )
        or 0
    )
