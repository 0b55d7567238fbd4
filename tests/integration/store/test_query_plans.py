"""Every listing of a List RPC, and the watch's event read, is served by the index meant for it.

The store's own statements are captured as the driver receives them (SQL and parameters) while the
repository function runs, then explained on the same connection: ``EXPLAIN QUERY PLAN`` on SQLite,
``EXPLAIN (FORMAT JSON)`` on PostgreSQL and ``EXPLAIN`` on MariaDB. The tables hold enough rows, in
the skewed shape of a long-lived server (one workflow with almost every instance, a workflow with
one), for a cost-based planner to prefer a full scan when the index does not serve the query. The
planners are not nudged: PostgreSQL and MariaDB get their statistics from ANALYZE, as autovacuum
and InnoDB's persistent statistics would give them; SQLite gets none, as in production (dsched never
runs ANALYZE on it).
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import pytest
from sqlalchemy import Connection, event, insert, text

from dsched.states import WorkflowState
from dsched_server.core.backfill import BackfillState
from dsched_server.store import (
    backfills,
    definitions,
    dependencies,
    events,
    instances,
    schedules,
    task_instances,
)
from dsched_server.store.codec import task_to_json, task_type
from dsched_server.store.database import Conn, Database
from dsched_server.store.models import (
    Backfill,
    BackfillDate,
    InstanceEvent,
    Project,
    Schedule,
    TaskDefinition,
    TaskEdge,
    TaskInstance,
    Workflow,
    WorkflowInstance,
    WorkflowVersion,
    table,
)
from tests.integration.store.conftest import NOW, at, shell

pytestmark = pytest.mark.timeout(240)

BULK = 20_000  # instances of the busy workflow (and as many task instances, twice as many events)
NAMES = 2_000  # projects, workflows of the busy project
VERSIONS = 60  # versions of the busy workflow
BACKFILLS = 2_000  # backfills of the busy workflow
DATES = 5  # dates of each backfill
PK = "primary-key"  # a search of the primary key (a range, or one row)
WALK = "primary-key-walk"  # the primary key read in order until the LIMIT is reached


@dataclass(frozen=True)
class Ids:
    busy_project: int
    busy_workflow: int
    rare_instance: int  # the one instance of the rare workflow, with five attempts of its task
    busy_instance: int


async def _load(db: Database) -> Ids:
    """Projects p0000.. (p0000 holds workflows w0000.., w0000 holds BULK instances and VERSIONS
    versions), project ``rare`` with workflow ``lone`` and its single instance."""
    row_time = {"create_time": NOW, "update_time": NOW}
    async with db.transaction() as conn:
        await conn.execute(
            insert(table(Project)),
            [{"name": f"p{i:04}", "description": "", **row_time} for i in range(NAMES)]
            + [{"name": "rare", "description": "", **row_time}],
        )
        rare_project = NAMES + 1
        workflow = {"current_version": 1, "release_state": "OFFLINE", **row_time}
        await conn.execute(
            insert(table(Workflow)),
            [{"project_id": 1, "name": f"w{i:04}", **workflow} for i in range(NAMES)]
            + [{"project_id": rare_project, "name": "lone", **workflow}],
        )
        lone = NAMES + 1
        versions = [(1, v) for v in range(1, VERSIONS + 1)] + [
            (code, 1) for code in range(2, NAMES + 2)
        ]
        await conn.execute(
            insert(table(WorkflowVersion)),
            [
                {
                    "workflow_id": c,
                    "version": v,
                    "description": "",
                    "params": {},
                    "create_time": NOW,
                }
                for c, v in versions
            ],
        )
        await conn.execute(
            insert(table(TaskDefinition)),
            [
                {
                    "workflow_id": c,
                    "version": v,
                    "position": p,
                    "name": name,
                    "task_type": task_type(shell(name)),
                    "spec": task_to_json(shell(name)),
                }
                for c, v in versions
                for p, name in enumerate(("a", "b"))
            ],
        )
        await conn.execute(
            insert(table(TaskEdge)),
            [
                {"workflow_id": c, "version": v, "upstream": "a", "downstream": "b"}
                for c, v in versions
            ],
        )

        def instance(i: int, code: int, project: int, state: str) -> dict[str, Any]:
            return {
                "project_id": project,
                "workflow_id": code,
                "workflow_version": 1,
                "state": state,
                "command_type": "START",
                "options": {},
                "run_scope": {},
                "host": "",
                "epoch": 0,
                "run_times": 1,
                "submit_time": at(i),
                "state_reason": "",
                "var_pool": {},
            }

        states = {BULK - 3: "RUNNING", BULK - 30: "PAUSED"}
        rows = [
            instance(i, 1, 1, states.get(i, "FAILED" if i % 100 == 0 else "SUCCEEDED"))
            for i in range(1, BULK + 1)
        ]
        rows.insert(BULK - 100, instance(BULK - 100, lone, rare_project, "SUCCEEDED"))
        await conn.execute(insert(table(WorkflowInstance)), rows)
        rare_instance = BULK - 99  # ids follow insertion order
        attempt = {
            "task_name": "a",
            "retry_times": 0,
            "state": "FAILED",
            "host": "",
            "worker_epoch": 0,
            "pid": 0,
            "log_path": "",
            "submit_time": NOW,
            "out_params": {},
            "priority": "MEDIUM",
            "worker_group": "default",
            "state_reason": "",
        }
        await conn.execute(
            insert(table(TaskInstance)),
            [
                {**attempt, "workflow_instance_id": i, "attempt": 1, "valid": True}
                for i in range(1, BULK + 2)
                if i != rare_instance
            ]
            + [
                {**attempt, "workflow_instance_id": rare_instance, "attempt": n, "valid": n == 5}
                for n in range(1, 6)
            ],
        )
        await conn.execute(
            insert(table(InstanceEvent)),
            [
                {"workflow_instance_id": i, "kind": kind, "task_name": "", "create_time": NOW}
                for i in range(1, BULK + 2)
                for kind in ("STATE", "STATE")
            ],
        )
        # Backfills in the same skew: BACKFILLS of the busy workflow (one RUNNING), one of the
        # rare one; each with DATES dates.
        backfill = {
            "cron": "0 0 * * *",
            "time_zone": "UTC",
            "run_order": "ASCENDING",
            "parallelism": 1,
            "reprocess": "ALL",
            "on_failure": "CONTINUE",
            "options": {},
            "succeeded": DATES,
            "running": 0,
            "failed": 0,
            "pending": 0,
            "skipped": 0,
            **row_time,
        }
        await conn.execute(
            insert(table(Backfill)),
            [
                {
                    "project_id": 1,
                    "workflow_id": 1,
                    "state": "RUNNING" if i == BACKFILLS // 2 else "SUCCEEDED",
                    **backfill,
                }
                for i in range(BACKFILLS)
            ]
            + [{"project_id": rare_project, "workflow_id": lone, "state": "FAILED", **backfill}],
        )
        await conn.execute(
            insert(table(BackfillDate)),
            [
                {
                    "backfill_id": b,
                    "position": d,
                    "schedule_time": at(d),
                    "state": "SUCCEEDED",
                }
                for b in range(1, BACKFILLS + 2)
                for d in range(DATES)
            ],
        )
        schedule = {
            "cron": "0 2 * * *",
            "time_zone": "UTC",
            "online": False,
            "catch_up": "LATEST",
            "catch_up_cap": 100,
            "overlap": "RUN",
            "options": {},
            **row_time,
        }
        await conn.execute(
            insert(table(Schedule)),
            [{"project_id": 1, "workflow_id": 1, **schedule} for _ in range(BACKFILLS)]
            + [{"project_id": rare_project, "workflow_id": lone, **schedule}],
        )
    if db.dialect == "postgresql":
        async with db.transaction() as conn:
            await conn.execute(text("ANALYZE"))
    elif db.dialect == "mysql":
        async with db.transaction() as conn:
            for name in _TABLES:
                await conn.execute(text(f"ANALYZE TABLE {name}"))
    return Ids(busy_project=1, busy_workflow=1, rare_instance=rare_instance, busy_instance=BULK)


_TABLES = [
    table(m).name
    for m in (
        Project,
        Workflow,
        WorkflowVersion,
        TaskDefinition,
        TaskEdge,
        WorkflowInstance,
        TaskInstance,
        InstanceEvent,
        Backfill,
        BackfillDate,
        Schedule,
    )
]


@dataclass(frozen=True)
class Access:
    table: str
    index: str | None  # None: the rows are read without any index


async def _accesses(db: Database, call: Callable[[Conn], Awaitable[object]]) -> list[Access]:
    """How the statements ``call`` runs read their tables, per the database's planner."""
    async with db.read() as conn:
        seen: list[tuple[str, Any]] = []

        def record(*args: Any) -> None:
            statement, parameters = args[2], args[3]
            if statement.lstrip().upper().startswith("SELECT"):
                seen.append((statement, parameters))

        await conn.run_sync(lambda c: event.listen(c, "before_cursor_execute", record))
        try:
            await call(conn)
        finally:
            await conn.run_sync(lambda c: event.remove(c, "before_cursor_execute", record))
        assert seen, "the call ran no SELECT"
        found: list[Access] = []
        explain = _EXPLAIN[db.dialect]
        for statement, parameters in seen:
            found += await conn.run_sync(
                partial(explain, statement=statement, parameters=parameters)
            )
        return found


_SQLITE = re.compile(
    r"(SCAN|SEARCH) (\w+)(?: AS \w+)?"
    r"(?: USING (?:COVERING )?INDEX (\w+)| USING (INTEGER PRIMARY KEY))?"
)


def _sqlite(c: Connection, statement: str, parameters: Any) -> list[Access]:
    found = []
    for row in c.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, parameters):
        match = _SQLITE.match(row[3])
        if match is None or match[2].startswith("anon_"):
            continue  # a step that reads no table, or a materialised subquery's few rows
        kind, name, index, rowid = match.groups()
        if rowid:
            index = PK
        elif index is None:
            index = WALK if kind == "SCAN" else None
        found.append(Access(name, index))
    return found


def _postgresql(c: Connection, statement: str, parameters: Any) -> list[Access]:
    (doc,) = c.exec_driver_sql("EXPLAIN (FORMAT JSON) " + statement, parameters).one()
    plans = json.loads(doc) if isinstance(doc, str) else doc
    found = []
    stack = [plans[0]["Plan"]]
    while stack:
        node = stack.pop()
        stack += node.get("Plans", [])
        if node["Node Type"] == "Bitmap Heap Scan":
            continue  # its Bitmap Index Scan children name the index
        if "Relation Name" in node or node["Node Type"] == "Bitmap Index Scan":
            index = node.get("Index Name")
            if index is not None and index.startswith("pk_"):
                index = PK if "Index Cond" in node else WALK
            name = node.get("Relation Name") or _pg_index_table(c, node["Index Name"])
            found.append(Access(name, index))
    return found


def _mariadb(c: Connection, statement: str, parameters: Any) -> list[Access]:
    found = []
    for row in c.exec_driver_sql("EXPLAIN " + statement, parameters).mappings():
        name, kind, key = row["table"], row["type"], row["key"]
        if name is None or name.startswith("<"):
            continue  # a derived table or a union's result: the few rows of a subquery
        if key == "PRIMARY":
            key = WALK if kind == "index" else PK
        found.append(Access(name, None if kind == "ALL" else key))
    return found


_EXPLAIN = {"sqlite": _sqlite, "postgresql": _postgresql, "mysql": _mariadb}


def _pg_index_table(c: Connection, index: str | None) -> str:
    return str(
        c.exec_driver_sql(
            "SELECT tablename FROM pg_indexes WHERE indexname = $1", (index,)
        ).scalar()
    )


def _name(dialect: str, index: str) -> str:
    """The index's name on ``dialect``: SQLite names the indexes of inline UNIQUE constraints
    itself (each table here has one)."""
    if dialect == "sqlite" and index.startswith("uq_"):
        tables = ("projects", "workflows", "workflow_versions", "task_definitions", "task_edges")
        owner = next(t for t in sorted(tables, key=len, reverse=True) if index[3:].startswith(t))
        return f"sqlite_autoindex_{owner}_1"
    return index


@dataclass(frozen=True)
class Case:
    name: str
    call: Callable[[Conn, Ids], Awaitable[object]]
    expected: dict[str, frozenset[str]]  # table -> the indexes it may be read by


def _case(name: str, call: Callable[[Conn, Ids], Awaitable[object]], **expected: str) -> Case:
    return Case(name, call, {t: frozenset(i.split()) for t, i in expected.items()})


def _instances(**filters: Any) -> Callable[[Conn, Ids], Awaitable[object]]:
    query: dict[str, Any] = {
        "project": "",
        "workflow": "",
        "states": [],
        "submitted_after": None,
        "after": None,
        "limit": 51,
        **filters,
    }
    return lambda conn, ids: instances.list_instances(conn, **query)


def _schedules(**filters: Any) -> Callable[[Conn, Ids], Awaitable[object]]:
    query: dict[str, Any] = {"project": "", "workflow": "", "after": None, "limit": 51, **filters}
    return lambda conn, ids: schedules.list_schedules(conn, **query)


def _backfills(**filters: Any) -> Callable[[Conn, Ids], Awaitable[object]]:
    query: dict[str, Any] = {
        "project": "",
        "workflow": "",
        "states": [],
        "after": None,
        "limit": 51,
        **filters,
    }
    return lambda conn, ids: backfills.list_backfills(conn, **query)


WI = "ix_workflow_instances_"
TI = "ix_task_instances_"
RECENT = at(BULK - 10)
CASES = [
    # An unfiltered page reads the newest rows of the primary key: the LIMIT ends the walk.
    _case("instances", _instances(), workflow_instances=f"{WALK}"),
    _case("instances, next page", _instances(after=BULK - 500), workflow_instances=PK),
    _case("instances by project", _instances(project="rare"), workflow_instances=f"{WI}project"),
    _case(
        "instances by project, next page",
        _instances(project="rare", after=BULK),
        workflow_instances=f"{WI}project",
    ),
    _case(
        "instances by workflow",
        _instances(project="rare", workflow="lone"),
        workflow_instances=f"{WI}workflow",
    ),
    _case(
        "instances by workflow name in any project",
        _instances(workflow="lone", after=BULK),
        workflow_instances=f"{WI}workflow",
    ),
    _case(
        "instances by workflow, state and time",
        _instances(
            project="rare",
            workflow="lone",
            states=[WorkflowState.SUCCEEDED],
            submitted_after=NOW,
            after=BULK,
        ),
        workflow_instances=f"{WI}workflow",
    ),
    _case(
        "instances by project and states",
        _instances(project="rare", states=[WorkflowState.FAILED, WorkflowState.SUCCEEDED]),
        workflow_instances=f"{WI}project",
    ),
    _case(
        "instances by state",
        _instances(states=[WorkflowState.RUNNING]),
        workflow_instances=f"{WI}state",
    ),
    _case(
        "instances by states, next page",
        _instances(states=[WorkflowState.RUNNING, WorkflowState.FAILED], after=BULK - 500),
        workflow_instances=f"{WI}state {PK}",
    ),
    _case(
        "instances submitted after",
        _instances(submitted_after=RECENT),
        workflow_instances=f"{WI}submit_time {PK}",
    ),
    _case(
        "instances submitted after, in states",
        _instances(states=[WorkflowState.RUNNING, WorkflowState.FAILED], submitted_after=RECENT),
        workflow_instances=f"{WI}submit_time {WI}state {PK}",
    ),
    _case("backfills", _backfills(), backfills=f"{WALK}"),
    _case(
        "backfills by project",
        _backfills(project="rare"),
        backfills="ix_backfills_project",
    ),
    _case(
        "backfills by workflow",
        _backfills(project="rare", workflow="lone"),
        backfills="ix_backfills_workflow",
    ),
    _case(
        "backfills by state",
        _backfills(states=[BackfillState.RUNNING]),
        backfills="ix_backfills_state",
    ),
    _case(
        "backfills by states, next page",
        _backfills(states=[BackfillState.RUNNING, BackfillState.FAILED], after=BACKFILLS),
        backfills=f"ix_backfills_state {PK}",
    ),
    _case(
        # What an advance reads of a backfill's dates: the running ones, the next pending ones.
        "a backfill's open dates",
        lambda conn, ids: backfills.open_dates(conn, BACKFILLS // 2 + 1, pending=8),
        backfill_dates="ix_backfill_dates_state",
    ),
    _case("schedules", _schedules(), schedules=f"{WALK}"),
    _case("schedules by project", _schedules(project="rare"), schedules="ix_schedules_project"),
    _case(
        "schedules by workflow",
        _schedules(project="rare", workflow="lone"),
        schedules="ix_schedules_workflow",
    ),
    _case(
        "online schedules",
        lambda conn, ids: schedules.online(conn),
        schedules="ix_schedules_online",
    ),
    _case(
        "a DEPENDENT's runs of a day",
        lambda conn, ids: dependencies.runs_between(conn, ids.busy_workflow, "", at(5), at(6)),
        workflow_instances=f"{WI}schedule_time",
    ),
    _case(
        "task instances",
        lambda conn, ids: task_instances.list_for_instance(
            conn, ids.rare_instance, include_superseded=True, after=None, limit=51
        ),
        task_instances=f"{TI}instance",
    ),
    _case(
        "valid task instances, next page",
        lambda conn, ids: task_instances.list_for_instance(
            conn, ids.rare_instance, include_superseded=False, after=1, limit=51
        ),
        task_instances=f"{TI}instance_valid {TI}instance",
    ),
    _case(
        "events (watch)",
        lambda conn, ids: events.after(conn, ids.busy_instance, 5, 500),
        instance_events="ix_instance_events_instance",
    ),
    _case(
        "projects, next page",
        lambda conn, ids: definitions.list_projects(conn, "p1000", 51),
        projects="uq_projects_name",
    ),
    _case(
        "workflows of a project, next page",
        lambda conn, ids: definitions.workflow_codes(conn, ids.busy_project, "w1000", 33),
        workflows="uq_workflows_project_id",
    ),
    _case(
        "a listed workflow's definition",
        lambda conn, ids: definitions.get_workflow_by_code(conn, ids.busy_workflow, 7),
        workflows=PK,
        workflow_versions="uq_workflow_versions_workflow_id",
        task_definitions="uq_task_definitions_workflow_id",
        task_edges="uq_task_edges_workflow_id",
    ),
    _case(
        "versions, next page",
        lambda conn, ids: definitions.list_versions(conn, ids.busy_workflow, 40, 10),
        workflow_versions="uq_workflow_versions_workflow_id",
        task_definitions="uq_task_definitions_workflow_id",
    ),
]


def _check(dialect: str, case: Case, found: Sequence[Access]) -> list[str]:
    """What is wrong with the plan of ``case`` (empty when each listed table is read by one of its
    indexes, and never without one)."""
    problems = []
    for name, allowed in case.expected.items():
        names = {_name(dialect, i) for i in allowed}
        reads = [a.index for a in found if a.table == name]
        if not reads:
            problems.append(f"{case.name}: {name} is not read: {found}")
        bad = [r for r in reads if r not in names]
        if bad:
            problems.append(f"{case.name}: {name} read by {bad}, expected one of {sorted(names)}")
    return problems


async def test_every_listing_is_served_by_its_index(db: Database) -> None:
    # One load per database serves both checks (the load is most of this file's time).
    ids = await _load(db)
    await _a_full_scan_is_reported(db)
    problems: list[str] = []
    for case in CASES:
        found = await _accesses(db, lambda conn, case=case: case.call(conn, ids))  # type: ignore[misc]
        problems += _check(db.dialect, case, found)
    assert not problems, "\n".join(problems)


async def _a_full_scan_is_reported(db: Database) -> None:
    """The plan reading is not vacuous: on the same tables, a filter no index serves is reported."""

    async def unindexed(conn: Conn) -> object:
        return (
            await conn.execute(
                text("SELECT id FROM workflow_instances WHERE run_times = 7 ORDER BY id LIMIT 5")
            )
        ).all()

    found = await _accesses(db, unindexed)
    case = _case("unindexed", lambda conn, ids: unindexed(conn), workflow_instances=PK)
    assert _check(db.dialect, case, found)
