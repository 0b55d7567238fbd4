"""SQL and PROCEDURE tasks end to end: a real master and worker, datasources on the real
PostgreSQL and MariaDB of the test session and an SQLite file.

Queries and non-queries with pre- and post-statements, OUT parameters that reach a downstream
shell task, the row limit, parameters bound (an injection attempt is stored as text and the table
is still there), several statements refused, a long statement killed and timed out (and gone from
the server), stored procedures with IN, OUT and INOUT arguments, and the datasource's password in
no log line, answer or file of the worker.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import psycopg
import pymysql  # type: ignore[import-untyped]
import pytest
from google.protobuf import duration_pb2
from sqlalchemy.engine import make_url

from dsched.v1 import datasource_pb2 as dpb
from dsched.v1 import sql_pb2
from tests.integration.api.conftest import (
    FAILED,
    SUCCEEDED,
    Cluster,
    assert_invalid,
    enums,
    failure,
    online_workflow,
    pb,
    res,
    run_to_end,
    shell,
    start,
    task_instances,
    task_is,
    watch_until,
    workflow,
)
from tests.integration.api.test_reserved_params import read_log

SECRET = "pw-Zq8-never-shown"
QUERY = sql_pb2.SQL_STATEMENT_TYPE_QUERY
NON_QUERY = sql_pb2.SQL_STATEMENT_TYPE_NON_QUERY


@dataclass
class Target:
    """A database the tests run SQL against: its datasource and a direct connection."""

    kind: str
    datasource: dpb.Datasource
    connect: Callable[[], Any]
    sleep: str  # a statement that runs for a minute
    text: str  # the column type of text


@pytest.fixture(params=["postgresql", "mariadb", "sqlite"])
def target(
    request: pytest.FixtureRequest, pg_url: str, mysql_url: str, tmp_path: Path
) -> Iterator[Target]:
    kind = request.param
    if kind == "postgresql":
        url = make_url(pg_url)
        ds = dpb.Datasource(
            name="db",
            type=dpb.DATASOURCE_TYPE_POSTGRESQL,
            host="127.0.0.1",
            port=5432,
            database=url.database or "",
            user="postgres",
            password=SECRET,  # trust authentication ignores it; it still travels everywhere
            options={"sslmode": "disable", "application_name": "dsched-test"},
        )
        yield Target(
            kind,
            ds,
            lambda: psycopg.connect(
                host="127.0.0.1", user="postgres", dbname=url.database, autocommit=True
            ),
            "SELECT pg_sleep(60)",
            "text",
        )
    elif kind == "mariadb":
        url = make_url(mysql_url)
        ds = dpb.Datasource(
            name="db",
            type=dpb.DATASOURCE_TYPE_MYSQL,
            host="127.0.0.1",
            port=3306,
            database=url.database or "",
            user="root",
            options={"charset": "utf8mb4", "connect_timeout": "5"},
        )
        yield Target(
            kind,
            ds,
            lambda: pymysql.connect(
                host="127.0.0.1", user="root", database=url.database, autocommit=True
            ),
            "SELECT SLEEP(60)",
            "varchar(200)",
        )
    else:
        path = tmp_path / "data.db"
        ds = dpb.Datasource(name="db", type=dpb.DATASOURCE_TYPE_SQLITE, database=str(path))
        yield Target(
            kind,
            ds,
            lambda: sqlite3.connect(path, isolation_level=None),
            "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT max(x) FROM c",
            "text",
        )


def execute(t: Target, *statements: str) -> list[tuple[Any, ...]]:
    db = t.connect()
    try:
        cursor = db.cursor()
        rows: list[tuple[Any, ...]] = []
        for statement in statements:
            cursor.execute(statement)
            rows = list(cursor.fetchall()) if cursor.description else []
        return rows
    finally:
        db.close()


def sql(name: str, text: str, upstream: tuple[str, ...] = (), **fields: Any) -> res.TaskDefinition:
    return res.TaskDefinition(
        name=name,
        upstream_tasks=list(upstream),
        sql=sql_pb2.SqlTask(datasource="db", sql=text, **fields),
    )


async def run(c: Cluster, name: str, tasks: list[res.TaskDefinition], **fields: Any) -> Any:
    await online_workflow(c, "p", name, tasks, **fields)
    started = await start(c, "p", name)
    return started, await run_to_end(c, started.id)


async def logs_of(c: Cluster, instance_id: int) -> dict[str, str]:
    return {ti.task_name: await read_log(c, ti.id) for ti in await task_instances(c, instance_id)}


async def test_query_non_query_out_params_and_injection(
    cluster: Cluster, target: Target, caplog: pytest.LogCaptureFixture
) -> None:
    for logger in ("dsched_server", "dsched_worker", "dsched"):
        caplog.set_level(logging.DEBUG, logger=logger)
    c = cluster
    table = f"t_{secrets.token_hex(4)}"
    execute(target, f"CREATE TABLE {table} (id integer, name {target.text})")
    await c.stub.CreateDatasource(dpb.CreateDatasourceRequest(datasource=target.datasource))
    evil = "x'; DROP TABLE " + table + "; --"
    tasks = [
        sql(
            "load",
            f"INSERT INTO {table} (id, name) VALUES (${{new_id}}, ${{new_name}})",
            type=NON_QUERY,
            pre_statements=[f"INSERT INTO {table} (id, name) VALUES (1, 'one')"],
            post_statements=[f"INSERT INTO {table} (id, name) VALUES (3, 'it''s ${{tag}}')"],
        ),
        sql(
            "count",
            f"SELECT count(*) AS n, max(id) AS top FROM {table} WHERE name <> ${{skip}}",
            ("load",),
            type=QUERY,
            out_params={"n": "", "top_id": "top"},
        ),
        sql(
            "rows",
            f"SELECT id, name FROM {table} WHERE name LIKE '%${{tag}}%' OR id > 0 ORDER BY id",
            ("load",),
            out_params={"ids": "id"},
            rows_param="all_rows",
            row_limit=2,
        ),
        shell("use", 'echo "n=$n top=$top_id ids=$ids"', ["count", "rows"]),
    ]
    params = {"new_id": "2", "new_name": evil, "skip": "nobody", "tag": "T'ag"}
    started, seen = await run(c, "sql1", tasks, params=params)
    logs = await logs_of(c, started.id)
    assert seen.state == SUCCEEDED, logs
    assert execute(target, f"SELECT id, name FROM {table} ORDER BY id") == [
        (1, "one"),
        (2, evil),
        (3, "it's T'ag"),
    ]  # the value stayed a value; the literal holding ${tag} became one bound value
    assert "n=3 top=3 ids=[1, 2]" in logs["use"], logs["use"]
    assert "more not read (row limit 2)" in logs["rows"], logs["rows"]
    assert "id | name" in logs["rows"] and f"2  | {evil}" in logs["rows"], logs["rows"]
    assert "1 row(s) changed" in logs["load"], logs["load"]
    by_name = {ti.task_name: ti for ti in await task_instances(c, started.id)}
    assert by_name["rows"].out_params["all_rows"] == (
        '[{"id": 1, "name": "one"}, {"id": 2, "name": "' + evil + '"}]'
    )
    everything = caplog.text + "".join(logs.values()) + str(await task_instances(c, started.id))
    assert SECRET not in everything
    assert not [
        p
        for p in (c.tmp / "worker").rglob("*")
        if p.is_file() and SECRET.encode() in p.read_bytes()
    ]


async def test_several_statements_refused(cluster: Cluster, target: Target) -> None:
    c = cluster
    await c.stub.CreateDatasource(dpb.CreateDatasourceRequest(datasource=target.datasource))
    await c.stub.CreateProject(pb.CreateProjectRequest(project=res.Project(name="p")))
    two = sql("two", "SELECT 1; SELECT 2")
    got = await failure(
        c.stub.CreateWorkflow(pb.CreateWorkflowRequest(workflow=workflow("p", "w", [two])))
    )
    assert_invalid(
        got, "workflow.tasks[0].sql.sql", reason="INVALID_WORKFLOW", contains="2 statements"
    )
    allowed = sql(
        "two", "SELECT 1 AS a; SELECT 2 AS a", allow_multiple_statements=True, out_params={"a": ""}
    )
    started, seen = await run(c, "multi", [allowed])
    assert seen.state == SUCCEEDED
    (ti,) = await task_instances(c, started.id)
    assert ti.out_params["a"] == "2"


async def test_missing_datasource_fails_the_attempt(cluster: Cluster) -> None:
    started, seen = await run(cluster, "gone", [sql("q", "SELECT 1")])
    assert seen.state == FAILED
    (ti,) = await task_instances(cluster, started.id)
    assert "datasource 'db' does not exist" in ti.state_reason


async def _running_statements(t: Target) -> int:
    if t.kind == "postgresql":
        query = "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'SELECT pg_sleep%'"
    else:
        query = (
            "SELECT count(*) FROM information_schema.processlist WHERE info LIKE 'SELECT SLEEP%'"
        )
    return int(execute(t, query)[0][0])


async def _gone_from_server(t: Target) -> None:
    if t.kind == "sqlite":
        return
    async with asyncio.timeout(20):
        while await _running_statements(t):
            await asyncio.sleep(0.1)  # polling another server's view: no event to wait on


async def test_kill_and_timeout_cancel_the_statement(cluster: Cluster, target: Target) -> None:
    c = cluster
    await c.stub.CreateDatasource(dpb.CreateDatasourceRequest(datasource=target.datasource))
    await online_workflow(c, "p", "long", [sql("sleep", target.sleep)])
    started = await start(c, "p", "long")
    await watch_until(c, started.id, task_is("sleep", enums.TASK_INSTANCE_STATE_RUNNING))
    if target.kind != "sqlite":
        async with asyncio.timeout(20):
            while not await _running_statements(target):
                await asyncio.sleep(0.1)
    if target.datasource.password:
        _no_password_in_proc()
    await c.stub.StopWorkflowInstance(pb.StopWorkflowInstanceRequest(id=started.id))
    seen = await run_to_end(c, started.id)
    assert enums.TASK_INSTANCE_STATE_KILLED in seen.task_states("sleep")
    await _gone_from_server(target)

    timed = res.TaskDefinition(
        name="sleep",
        sql=sql_pb2.SqlTask(datasource="db", sql=target.sleep),
        timeout=duration_pb2.Duration(seconds=2),
        timeout_strategy=enums.TIMEOUT_STRATEGY_FAIL,
    )
    started, seen = await run(c, "timed", [timed])
    assert seen.state == FAILED
    await _gone_from_server(target)


def _no_password_in_proc() -> None:
    """The running SQL program has the password on its stdin only: not in its command line or
    environment, which /proc shows to other users of the host."""
    programs = [
        p
        for p in psutil.process_iter(["cmdline", "environ"])
        if "dsched_worker.programs.sql" in " ".join(p.info["cmdline"] or [])
    ]
    assert programs, "the SQL program is not running"
    for program in programs:
        assert SECRET not in " ".join(program.info["cmdline"] or [])
        assert SECRET not in str(program.info["environ"] or {})


PG_PROCEDURE = """
CREATE OR REPLACE PROCEDURE add_to(IN a integer, INOUT b integer, OUT label text)
LANGUAGE plpgsql AS $$
BEGIN
  b := a + b;
  label := 'sum ' || b;
END $$
"""
MYSQL_PROCEDURE = """
CREATE PROCEDURE add_to(IN a INT, INOUT b INT, OUT label VARCHAR(100))
BEGIN
  SET b = a + b;
  SET label = CONCAT('sum ', b);
END
"""


@pytest.mark.parametrize("target", ["postgresql", "mariadb"], indirect=True)
async def test_procedure_in_out_inout(cluster: Cluster, target: Target) -> None:
    c = cluster
    execute(target, "DROP PROCEDURE IF EXISTS add_to")
    execute(target, PG_PROCEDURE if target.kind == "postgresql" else MYSQL_PROCEDURE)
    await c.stub.CreateDatasource(dpb.CreateDatasourceRequest(datasource=target.datasource))
    integer = sql_pb2.PROCEDURE_PARAM_TYPE_INTEGER
    call = res.TaskDefinition(
        name="call",
        procedure=sql_pb2.ProcedureTask(
            datasource="db",
            procedure="add_to",
            params=[
                sql_pb2.ProcedureParam(name="a", type=integer, value="${x}"),
                sql_pb2.ProcedureParam(
                    name="b",
                    type=integer,
                    direction=sql_pb2.PROCEDURE_PARAM_DIRECTION_INOUT,
                    value="5",
                ),
                sql_pb2.ProcedureParam(
                    name="label", direction=sql_pb2.PROCEDURE_PARAM_DIRECTION_OUT
                ),
            ],
        ),
    )
    tasks = [call, shell("after", 'echo "got $b / $label"', ["call"])]
    started, seen = await run(c, "proc", tasks, params={"x": "37"})
    logs = await logs_of(c, started.id)
    assert seen.state == SUCCEEDED, logs
    assert "got 42 / sum 42" in logs["after"], logs
