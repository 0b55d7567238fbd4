"""SQL tasks and datasources on a real standalone (its worker a child process): datasources made
with the CLI (the password from stdin, never a flag), listed and tested; a workflow file's
``Sql`` and ``Procedure`` tasks loading and checking an SQLite file and calling a PostgreSQL
procedure; ``dsched show`` with the OUT parameters; and the password in no output, log or file of
the standalone's data directory."""

from __future__ import annotations

import stat
import subprocess

from sqlalchemy.engine import make_url

from dsched import Client, Param, Procedure, Shell, Sql, Workflow, WorkflowState
from tests.e2e.conftest import DSCHED, REPO, Standalone, clean_env, cli, parse_table, wait_done

SECRET = "e2e-Pw-7f3c-never-shown"


def create_with_stdin(
    server: Standalone, *args: str, password: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            str(DSCHED),
            "--server",
            server.address,
            "datasource",
            "create",
            *args,
            "--password-stdin",
        ],
        input=password + "\n",
        capture_output=True,
        text=True,
        timeout=60,
        env=clean_env(),
        cwd=REPO,
    )


def test_datasources_and_sql_tasks_through_the_cli(
    server: Standalone, client: Client, project: str, pg_url: str
) -> None:
    database = make_url(pg_url).database or ""
    made = create_with_stdin(
        server,
        f"{project}-pg",
        "--type",
        "postgresql",
        "--host",
        "127.0.0.1",
        "--port",
        "5432",
        "--database",
        database,
        "--user",
        "postgres",
        "--option",
        "sslmode=disable",
        password=SECRET,
    )
    assert made.returncode == 0, made.stderr
    assert "with a password" in made.stdout and SECRET not in made.stdout + made.stderr
    sqlite_file = server.data_dir / f"{project}.db"
    lite = cli(
        server,
        "datasource",
        "create",
        f"{project}-lite",
        "--type",
        "sqlite",
        "--database",
        str(sqlite_file),
    )
    assert lite.returncode == 0, lite.stderr
    refused = cli(
        server,
        "datasource",
        "create",
        f"{project}-bad",
        "--type",
        "postgresql",
        "--host",
        "h",
        "--option",
        "options=-c search_path=evil",
    )
    assert refused.returncode != 0 and "options" in refused.stderr

    listed = {r["NAME"]: r for r in parse_table(cli(server, "datasources").stdout)}
    assert listed[f"{project}-pg"]["PASSWORD"] == "yes"
    assert listed[f"{project}-lite"]["PASSWORD"] == "no"
    tested = cli(server, "datasource", "test", f"{project}-pg")
    assert tested.returncode == 0 and tested.stdout.startswith("ok: PostgreSQL"), tested.stdout

    _procedure(pg_url)
    with Workflow("daily", project=project, params={"dt": "2026-11-28"}) as wf:
        create = Sql(
            "create",
            f"{project}-lite",
            "CREATE TABLE IF NOT EXISTS sales (day text, amount integer)",
            type="NON_QUERY",
        )
        load = Sql(
            "load",
            f"{project}-lite",
            "INSERT INTO sales VALUES (${dt}, 40), (${dt}, 2)",
            type="NON_QUERY",
            pre_statements=["DELETE FROM sales WHERE day = ${dt}"],
        )
        check = Sql(
            "check",
            f"{project}-lite",
            "SELECT count(*) AS n, sum(amount) AS total FROM sales WHERE day = ${dt}",
            out_params={"n": "", "total": ""},
        )
        double = Procedure(
            "double",
            f"{project}-pg",
            "e2e_double",
            Param("x", "${total}", type="integer"),
            Param("y", direction="out", type="integer"),
        )
        report = Shell("report", 'echo "rows=$n total=$total doubled=$y"')
        create >> load >> check >> double >> report
    wf.submit(client)
    run = client.start_workflow(project, "daily")
    done = wait_done(client, run.id)
    assert done.state is WorkflowState.SUCCEEDED, cli(server, "show", str(run.id)).stdout
    assert done.var_pool["y"] == "84"
    shown = cli(server, "show", str(run.id)).stdout
    assert "check: n=2, total=42" in shown and "double: y=84" in shown, shown
    again = wait_done(client, client.start_workflow(project, "daily").id)  # replaces the day
    assert again.state is WorkflowState.SUCCEEDED and again.var_pool["n"] == "2"

    key = server.data_dir / "datasource.key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert SECRET not in server.output()
    leaks = [
        p
        for p in server.data_dir.rglob("*")
        if p.is_file() and p != key and SECRET.encode() in p.read_bytes()
    ]
    assert leaks == []
    deleted = cli(server, "datasource", "delete", f"{project}-lite")
    assert deleted.returncode == 0


def _procedure(pg_url: str) -> None:
    import psycopg

    url = make_url(pg_url)
    with psycopg.connect(
        host="127.0.0.1", user="postgres", dbname=url.database, autocommit=True
    ) as db:
        db.execute(
            "CREATE OR REPLACE PROCEDURE e2e_double(IN x integer, OUT y integer) "
            "LANGUAGE plpgsql AS $$ BEGIN y := 2 * x; END $$"
        )
