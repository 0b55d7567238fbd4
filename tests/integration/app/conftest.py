"""The application layer on a real store, without gRPC or protobuf.

``app`` is an :class:`AppContext` over a fresh, migrated database of each kind (the root
``migrated_db_url`` fixture), with the master's real notifier, an empty set of runners (nothing
drives an instance: the paths here are the ones a caller takes while no runner owns it) and real
peers. The builders write through the application layer or the repositories, each in its own
transaction.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

import pytest
from sqlalchemy import func, select

from dsched.options import ReleaseState
from dsched.spec import ShellSpec, TaskSpec, WorkflowSpec, check_workflow
from dsched.states import TaskState, WorkflowState
from dsched_server.app.context import AppContext
from dsched_server.app.runs import StartRun, start
from dsched_server.app.transaction import Transaction, transact
from dsched_server.clock import SystemClock
from dsched_server.core.records import CommandRecord, InstanceRecord
from dsched_server.engine.notifier import Notifier
from dsched_server.engine.peers import Peers
from dsched_server.engine.runners import Runners
from dsched_server.store import definitions, events, instances, models
from dsched_server.store import task_instances as ti_repo
from dsched_server.store.database import Conn, Database
from dsched_server.store.models import table
from dsched_server.store.task_instances import NewAttempt

T = TypeVar("T")
OWNER = "127.0.0.1:7001"
# The states a runner passes through on its way from RUNNING to these.
_VIA = {
    WorkflowState.STOPPED: (WorkflowState.READY_STOP,),
    WorkflowState.PAUSED: (WorkflowState.READY_PAUSE,),
}
EPOCH = 7


@pytest.fixture
async def app(migrated_db_url: str) -> AsyncIterator[AppContext]:
    db = Database(migrated_db_url)
    await db.start()
    peers = Peers()
    try:
        yield AppContext(
            db=db,
            clock=SystemClock(),
            notifier=Notifier(),
            runners=Runners(),
            peers=peers,
            address="127.0.0.1:7000",
            owner_cluster_address=lambda _address: "",
            epoch=lambda: 1,
        )
    finally:
        await peers.close()
        await db.stop()


async def read(app: AppContext, fn: Callable[[Conn], Awaitable[T]]) -> T:
    async with app.db.read() as conn:
        return await fn(conn)


def chain_spec() -> WorkflowSpec:
    """``extract -> load`` in project ``proj``."""
    spec = WorkflowSpec(
        project="proj",
        name="etl",
        tasks=(
            TaskSpec(name="extract", kind=ShellSpec(script="true")),
            TaskSpec(name="load", kind=ShellSpec(script="true"), upstream=("extract",)),
        ),
    )
    check_workflow(spec)
    return spec


async def make_workflow(app: AppContext, *, online: bool = True) -> None:
    async def work(tx: Transaction) -> None:
        await definitions.create_project(tx.conn, "proj", "", tx.now)
        await definitions.create_workflow(tx.conn, chain_spec(), tx.now)
        if online:
            await definitions.set_release_state(tx.conn, "proj", "etl", ReleaseState.ONLINE, tx.now)

    await transact(app, work)


async def started(app: AppContext) -> InstanceRecord:
    """A SUBMITTED instance of ``proj/etl``, started through the application layer."""
    return await transact(app, lambda tx: start(tx, StartRun("proj", "etl")))


async def ran(
    app: AppContext, end: WorkflowState, tasks: dict[str, TaskState]
) -> tuple[InstanceRecord, dict[str, int]]:
    """An instance a master claimed and ran (attempts in the states ``tasks`` gives), then left
    in ``end``, written as its runner would; the task instance ids by name."""
    instance = await started(app)

    async def run(conn: Conn) -> dict[str, int]:
        (command,) = [
            c
            for c in await instances.pending_commands(conn, 100)
            if c.workflow_instance_id == instance.id
        ]
        assert await instances.claim(
            conn, command, host=OWNER, epoch=EPOCH, state=WorkflowState.RUNNING, values={}
        )
        now = app.clock.now()
        attempts = [
            NewAttempt(
                task_name=name,
                attempt=1,
                retry_times=0,
                state=TaskState.SUBMITTED,
                priority=instance.options.priority,
                worker_group="default",
            )
            for name in tasks
        ]
        ids = await ti_repo.create_attempts(conn, instance.id, attempts, now)
        for ti_id, state in zip(ids, tasks.values(), strict=True):
            if state is not TaskState.SUBMITTED:
                assert await ti_repo.transition(
                    conn, ti_id, expected={TaskState.SUBMITTED}, state=state
                )
        assert await instances.set_state(
            conn,
            instance.id,
            epoch=EPOCH,
            expected={WorkflowState.RUNNING},
            state=end,
            values={"end_time": now},
            via=_VIA.get(end, ()),
        )
        await events.append(
            conn,
            [events.NewEvent(workflow_instance_id=instance.id, workflow_state=end, message="end")],
            now,
        )
        return dict(zip(tasks, ids, strict=True))

    async with app.db.transaction() as conn:
        ids = await run(conn)
    return await read(app, lambda c: instances.get_instance(c, instance.id)), ids


async def count_instances(app: AppContext) -> int:
    query = select(func.count()).select_from(table(models.WorkflowInstance))
    return int(await read(app, lambda c: c.scalar(query)))


async def commands_of(app: AppContext, instance_id: int) -> list[CommandRecord]:
    return [
        c
        for c in await read(app, lambda c: instances.pending_commands(c, 1000))
        if c.workflow_instance_id == instance_id
    ]
