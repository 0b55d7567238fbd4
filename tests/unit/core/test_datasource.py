"""core/datasource.py: the allow-list of connection options per database, GENERIC URLs held to
it, the password kept out of every repr."""

from __future__ import annotations

import pytest

from dsched_server.core.datasource import (
    Connection,
    DatasourceSpec,
    DatasourceType,
    Secret,
    check,
    connection,
)

PG = DatasourceType.POSTGRESQL


def fields(spec: DatasourceSpec, password: str = "") -> list[str]:
    return [v.field for v in check(spec, password)[0]]


def test_a_valid_postgresql_datasource() -> None:
    spec = DatasourceSpec(
        name="dw",
        type=PG,
        host="db.example",
        port=5432,
        database="dw",
        user="etl",
        options={"sslmode": "verify-full", "connect_timeout": "10", "application_name": "dsched"},
    )
    assert fields(spec, "pw") == []


@pytest.mark.parametrize(
    ("kind", "options", "field"),
    [
        (PG, {"options": "-c search_path=evil"}, "datasource.options['options']"),
        (PG, {"passfile": "/etc/shadow"}, "datasource.options['passfile']"),
        (PG, {"service": "x"}, "datasource.options['service']"),
        (PG, {"sslmode": "off"}, "datasource.options['sslmode']"),
        (PG, {"connect_timeout": "-1"}, "datasource.options['connect_timeout']"),
        (PG, {"application_name": "a\nb"}, "datasource.options['application_name']"),
        (DatasourceType.MYSQL, {"init_command": "SET x=1"}, "datasource.options['init_command']"),
        (DatasourceType.MYSQL, {"local_infile": "1"}, "datasource.options['local_infile']"),
        (
            DatasourceType.MYSQL,
            {"read_default_file": "/x"},
            "datasource.options['read_default_file']",
        ),
        (DatasourceType.MYSQL, {"auth_plugin_map": "x"}, "datasource.options['auth_plugin_map']"),
        (DatasourceType.MYSQL, {"client_flag": "65536"}, "datasource.options['client_flag']"),
        (DatasourceType.MYSQL, {"charset": "utf8; DROP"}, "datasource.options['charset']"),
    ],
)
def test_options_outside_the_allow_list(
    kind: DatasourceType, options: dict[str, str], field: str
) -> None:
    spec = DatasourceSpec(name="d", type=kind, host="h", options=options)
    assert field in fields(spec)


def test_generic_urls() -> None:
    spec = DatasourceSpec(
        name="g",
        type=DatasourceType.GENERIC,
        url="mysql+pymysql://u:p%40ss@h:3307/db?charset=utf8mb4",
    )
    problems, parsed = check(spec, "")
    assert problems == [] and parsed is not None
    assert (parsed.type, parsed.host, parsed.port, parsed.database, parsed.user) == (
        DatasourceType.MYSQL,
        "h",
        3307,
        "db",
        "u",
    )
    assert parsed.password.reveal() == "p@ss"
    assert parsed.without_password() == "mysql+pymysql://u@h:3307/db?charset=utf8mb4"
    resolved = connection(spec, parsed.password)
    assert resolved.type is DatasourceType.MYSQL and resolved.options == {"charset": "utf8mb4"}
    sqlite = DatasourceSpec(name="s", type=DatasourceType.GENERIC, url="sqlite:////var/data/x.db")
    assert connection(sqlite, Secret("")).database == "/var/data/x.db"


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://u@h/db?options=-csearch_path%3Devil",
        "postgresql://u@h/db?sslmode=require&sslmode=disable",
        "mysql://u@h/db?init_command=DROP",
        "oracle://u@h/db",
        "postgresql+evildriver://u@h/db",
        "not a url",
        "postgresql://u@h:99999/db",
    ],
)
def test_generic_urls_refused(url: str) -> None:
    spec = DatasourceSpec(name="g", type=DatasourceType.GENERIC, url=url)
    assert any(f.startswith("datasource.url") for f in fields(spec))


def test_a_url_password_and_a_password_field_together() -> None:
    spec = DatasourceSpec(name="g", type=DatasourceType.GENERIC, url="postgresql://u:a@h/db")
    assert "datasource.password" in fields(spec, "b")


def test_the_password_is_in_no_repr() -> None:
    conn = Connection(name="d", type=PG, host="h", password=Secret("hunter2"))
    assert "hunter2" not in repr(conn) and "hunter2" not in str(conn)
    assert "hunter2" not in f"{conn.password}" and conn.password.reveal() == "hunter2"


def test_an_execution_with_a_datasource_shows_no_password() -> None:
    from datetime import UTC, datetime

    from dsched.sql import SqlSpec
    from dsched_server.protocol.execution import TaskExecution

    execution = TaskExecution(
        task_instance_id=1,
        attempt=1,
        workflow_instance_id=1,
        workflow_code=1,
        workflow_version=1,
        task_name="q",
        idempotency_key="1-q-1",
        kind=SqlSpec(datasource="d", sql="SELECT 1"),
        owner_address="127.0.0.1:1",
        owner_epoch=1,
        submit_time=datetime(2030, 1, 1, tzinfo=UTC),
        datasource=Connection(name="d", type=PG, host="h", password=Secret("hunter2")),
    )
    assert "hunter2" not in repr(execution) and "hunter2" not in f"{execution}"
