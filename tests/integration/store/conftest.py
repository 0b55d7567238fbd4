"""Fixtures and builders for the store's integration tests.

``db`` is a started :class:`Database` on a fresh, migrated database of each kind (the root
``migrated_db_url`` fixture runs every test on SQLite, PostgreSQL and MariaDB). The builders write
through the repositories, each in its own committed transaction, and return what the repositories
return. Times come from :data:`NOW` (microseconds included, so precision losses show up).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import pytest
from sqlalchemy import text, update

from dsched.errors import NotFound
from dsched.options import Priority, TimeoutStrategy
from dsched.spec import ShellSpec, TaskSpec, WorkflowSpec, check_workflow
from dsched.states import TaskState, WorkflowState
from dsched_server.core.records import ProjectRecord, RunOptions, WorkflowRecord
from dsched_server.core.transitions import workflow_path_allowed
from dsched_server.store import definitions, instances
from dsched_server.store.database import Conn, Database
from dsched_server.store.models import TaskInstance, WorkflowInstance, table
from dsched_server.store.task_instances import NewAttempt

NOW = datetime(2026, 3, 14, 15, 9, 26, 535897, tzinfo=UTC)
T = TypeVar("T")


def at(seconds: float) -> datetime:
    """``NOW`` shifted by ``seconds``."""
    return NOW + timedelta(seconds=seconds)


@pytest.fixture
async def db(migrated_db_url: str) -> AsyncIterator[Database]:
    database = Database(migrated_db_url)
    await database.start()
    try:
        yield database
    finally:
        await database.stop()


async def write(db: Database, fn: Callable[[Conn], Awaitable[T]]) -> T:
    """Runs ``fn`` in its own committed transaction."""
    async with db.transaction() as conn:
        return await fn(conn)


async def read(db: Database, fn: Callable[[Conn], Awaitable[T]]) -> T:
    async with db.read() as conn:
        return await fn(conn)


def shell(name: str, *upstream: str, **settings: Any) -> TaskSpec:
    return TaskSpec(name=name, kind=ShellSpec(script=f"echo {name}"), upstream=upstream, **settings)


def diamond_tasks() -> tuple[TaskSpec, ...]:
    """``extract -> (clean, enrich) -> load``, each task with its own non-default settings."""
    return (
        shell(
            "extract",
            description="pull the raw files",
            priority=Priority.HIGH,
            retries=3,
            retry_interval=timedelta(seconds=30),
            params={"SOURCE": "s3://bucket/raw"},
        ),
        shell("clean", "extract", timeout=timedelta(minutes=5), worker_group="cpu"),
        shell(
            "enrich",
            "extract",
            delay=timedelta(milliseconds=1500),
            timeout=timedelta(hours=1),
            timeout_strategy=TimeoutStrategy.WARN_FAIL,
            priority=Priority.LOWEST,
        ),
        shell("load", "clean", "enrich", disabled=True),
    )


def workflow_spec(
    project: str = "proj",
    name: str = "wf",
    *,
    tasks: tuple[TaskSpec, ...] | None = None,
    description: str = "nightly load",
    params: dict[str, str] | None = None,
) -> WorkflowSpec:
    spec = WorkflowSpec(
        project=project,
        name=name,
        tasks=diamond_tasks() if tasks is None else tasks,
        description=description,
        params={"DAY": "2026-03-14"} if params is None else params,
    )
    check_workflow(spec)  # the store is only ever given validated specs
    return spec


async def make_project(db: Database, name: str = "proj", now: datetime = NOW) -> ProjectRecord:
    return await write(db, lambda c: definitions.create_project(c, name, f"{name} project", now))


async def make_workflow(
    db: Database, spec: WorkflowSpec | None = None, now: datetime = NOW
) -> WorkflowRecord:
    """Creates the workflow (and its project, if missing)."""
    spec = spec or workflow_spec()
    try:
        await read(db, lambda c: definitions.get_project(c, spec.project))
    except NotFound:
        await make_project(db, spec.project, now)
    return await write(db, lambda c: definitions.create_workflow(c, spec, now))


def first_attempt(name: str, priority: Priority = Priority.MEDIUM) -> NewAttempt:
    """Attempt 1 of task ``name``, SUBMITTED, as a runner creates it."""
    return NewAttempt(
        task_name=name,
        attempt=1,
        retry_times=0,
        state=TaskState.SUBMITTED,
        priority=priority,
        worker_group="",
    )


async def make_instance(
    db: Database,
    workflow: WorkflowRecord,
    *,
    options: RunOptions | None = None,
    now: datetime = NOW,
) -> int:
    """A SUBMITTED instance with its START command."""
    return await write(
        db, lambda c: instances.create_instance(c, workflow, options or RunOptions(), now)
    )


async def claim_instance(
    db: Database,
    instance_id: int,
    *,
    host: str = "master-1:5678",
    epoch: int = 7,
    state: WorkflowState = WorkflowState.RUNNING,
) -> None:
    """Claims the pending command of ``instance_id`` as (host, epoch). A ``state`` no claim
    leads to (a finished one) is put in place after a claim into RUNNING."""
    claimed = state if workflow_path_allowed(WorkflowState.SUBMITTED, [state]) else None

    async def run(conn: Conn) -> None:
        commands = await instances.pending_commands(conn, 1000)
        (command,) = [c for c in commands if c.workflow_instance_id == instance_id]
        assert await instances.claim(
            conn,
            command,
            host=host,
            epoch=epoch,
            state=claimed or WorkflowState.RUNNING,
            values={"start_time": NOW},
        )
        if claimed is None:
            await put_state(conn, instance_id, state)

    await write(db, run)


async def put_state(conn: Conn, instance_id: int, state: WorkflowState) -> None:
    """Puts an instance in ``state`` behind the repositories' back: a test's starting point (the
    store refuses transitions the table forbids, and a fixture is not one)."""
    WI = table(WorkflowInstance)
    await conn.execute(update(WI).where(WI.c.id == instance_id).values(state=state.value))


async def put_task_state(conn: Conn, task_instance_id: int, state: TaskState) -> None:
    """Puts a task instance in ``state`` behind the repositories' back (see :func:`put_state`)."""
    TI = table(TaskInstance)
    await conn.execute(update(TI).where(TI.c.id == task_instance_id).values(state=state.value))


async def overlap(db: Database, barrier: asyncio.Barrier | None) -> None:
    """Where transactions of two connections can be open at once (PostgreSQL, MariaDB), waits
    until both are; on SQLite the write lock serialises them, so there is nothing to wait for."""
    if barrier is not None and not db.is_sqlite:
        await barrier.wait()


_LOCK_WAITERS = {
    "postgresql": "SELECT count(*) FROM pg_stat_activity "
    "WHERE datname = current_database() AND wait_event_type = 'Lock'",
    "mysql": "SELECT count(*) FROM information_schema.INNODB_TRX t "
    "JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id "
    "WHERE t.trx_state = 'LOCK WAIT' AND p.DB = DATABASE()",
}


async def until_a_transaction_waits_for_a_lock(db: Database) -> None:
    """Waits (bounded) until some transaction on the test's database waits for a row lock
    (PostgreSQL and MariaDB only)."""
    query = text(_LOCK_WAITERS[db.dialect])
    # InnoDB refreshes INNODB_TRX only when it was not read for 0.1 s: poll slower than that.
    pause = 0.15 if db.dialect == "mysql" else 0.01
    for _ in range(int(10 / pause)):
        async with db.read() as conn:
            if await conn.scalar(query):
                return
        await asyncio.sleep(pause)
    raise AssertionError("no transaction ever waited for a row lock")
