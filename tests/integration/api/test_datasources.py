"""Datasources over the wire: create, get, list, update, delete, test, with raw dsched.v1 stubs.

The password goes in once and never comes back: not in an answer, not in the database (only a
Fernet token under the master's key file), not in a log line; options outside the allow-list,
hostile URLs and bad fields are refused with the field named and nothing stored.
"""

from __future__ import annotations

import logging
import stat
from typing import Any

import grpc
import pytest
from sqlalchemy import select

from dsched.v1 import datasource_pb2 as dpb
from dsched_server.store import models
from tests.integration.api.conftest import (
    Cluster,
    assert_invalid,
    assert_status,
    failure,
    pb,
    start_cluster,
)

SECRET = "s3cr3t-Pa55word-x9"  # distinctive, so a grep finds any copy of it


def pg(name: str = "warehouse", **fields: Any) -> dpb.Datasource:
    values: dict[str, Any] = {
        "name": name,
        "type": dpb.DATASOURCE_TYPE_POSTGRESQL,
        "host": "127.0.0.1",
        "port": 5432,
        "database": "postgres",
        "user": "postgres",
        **fields,
    }
    return dpb.Datasource(**values)


async def create(c: Cluster, ds: dpb.Datasource, **fields: Any) -> dpb.Datasource:
    reply = await c.stub.CreateDatasource(dpb.CreateDatasourceRequest(datasource=ds, **fields))
    return reply.datasource


async def stored_rows(c: Cluster) -> list[dict[str, Any]]:
    async with c.master.db.read() as conn:
        rows = await conn.execute(select(models.table(models.DatasourceRow)))
        return [dict(r._mapping) for r in rows]


async def test_create_get_list_update_delete(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    c = cluster
    made = await create(c, pg(password=SECRET, options={"sslmode": "disable"}), request_id="r1")
    assert made.password_set and made.password == ""
    assert SECRET not in str(made)
    again = await create(c, pg(password=SECRET, options={"sslmode": "disable"}), request_id="r1")
    assert again == made  # the request log answers the repeat
    got = (await c.stub.GetDatasource(dpb.GetDatasourceRequest(name="warehouse"))).datasource
    assert got == made
    rows = await stored_rows(c)
    assert len(rows) == 1 and rows[0]["password"] and SECRET not in str(rows[0])
    key = c.tmp / "master" / "datasource.key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    # The request log holds a fingerprint keyed by the datasource key, not a plain hash.
    async with c.master.db.read() as conn:
        logged = [
            dict(r._mapping) for r in await conn.execute(select(models.table(models.RequestLog)))
        ]
    assert logged and all(SECRET not in str(r) for r in logged)

    await create(
        c,
        dpb.Datasource(name="local", type=dpb.DATASOURCE_TYPE_SQLITE, database=str(c.tmp / "x.db")),
    )
    listed = await c.stub.ListDatasources(dpb.ListDatasourcesRequest(page_size=1))
    assert [d.name for d in listed.datasources] == ["local"] and listed.next_page_token
    rest = await c.stub.ListDatasources(
        dpb.ListDatasourcesRequest(page_size=1, page_token=listed.next_page_token)
    )
    assert [d.name for d in rest.datasources] == ["warehouse"] and not rest.next_page_token

    kept = await c.stub.UpdateDatasource(
        dpb.UpdateDatasourceRequest(datasource=pg(description="the DW"))
    )
    assert kept.datasource.password_set and kept.datasource.description == "the DW"
    cleared = await c.stub.UpdateDatasource(
        dpb.UpdateDatasourceRequest(datasource=pg(), replace_password=True)
    )
    assert not cleared.datasource.password_set
    got_err = await failure(
        c.stub.UpdateDatasource(dpb.UpdateDatasourceRequest(datasource=pg(password="new")))
    )
    assert_invalid(got_err, "replace_password")

    await c.stub.DeleteDatasource(dpb.DeleteDatasourceRequest(name="warehouse"))
    missing = await failure(c.stub.GetDatasource(dpb.GetDatasourceRequest(name="warehouse")))
    assert_status(missing, grpc.StatusCode.NOT_FOUND, "NOT_FOUND")
    assert SECRET not in caplog.text


async def test_already_exists(cluster: Cluster) -> None:
    await create(cluster, pg())
    got = await failure(create(cluster, pg(host="other")))
    assert_status(got, grpc.StatusCode.ALREADY_EXISTS, "ALREADY_EXISTS")


@pytest.mark.parametrize(
    ("ds", "field"),
    [
        (pg(options={"options": "-c search_path=evil"}), "datasource.options['options']"),
        (pg(options={"sslmode": "bogus"}), "datasource.options['sslmode']"),
        (pg(options={"passfile": "/etc/shadow"}), "datasource.options['passfile']"),
        (
            dpb.Datasource(
                name="m", type=dpb.DATASOURCE_TYPE_MYSQL, host="h", options={"init_command": "DROP"}
            ),
            "datasource.options['init_command']",
        ),
        (
            dpb.Datasource(
                name="m", type=dpb.DATASOURCE_TYPE_MYSQL, host="h", options={"local_infile": "1"}
            ),
            "datasource.options['local_infile']",
        ),
        (
            dpb.Datasource(
                name="g",
                type=dpb.DATASOURCE_TYPE_GENERIC,
                url="postgresql://u:p@h/db?options=-csearch_path%3Devil",
            ),
            "datasource.url.options['options']",
        ),
        (
            dpb.Datasource(
                name="g",
                type=dpb.DATASOURCE_TYPE_GENERIC,
                url="mysql+pymysql://u@h/db?init_command=DROP+TABLE+t",
            ),
            "datasource.url.options['init_command']",
        ),
        (
            dpb.Datasource(name="g", type=dpb.DATASOURCE_TYPE_GENERIC, url="oracle://u@h/db"),
            "datasource.url",
        ),
        (pg(host="evil host;"), "datasource.host"),
        (pg(port=70000), "datasource.port"),
        (pg(name=""), "datasource.name"),
        (dpb.Datasource(name="x"), "datasource.type"),
        (dpb.Datasource(name="s", type=dpb.DATASOURCE_TYPE_SQLITE), "datasource.database"),
        (
            dpb.Datasource(
                name="s",
                type=dpb.DATASOURCE_TYPE_SQLITE,
                database="/tmp/a.db",
                options={"vfs": "unix-dotfile"},
            ),
            "datasource.options['vfs']",
        ),
    ],
)
async def test_refused_with_the_field_and_nothing_stored(
    cluster: Cluster, ds: dpb.Datasource, field: str
) -> None:
    got = await failure(create(cluster, ds))
    assert_invalid(got, field)
    assert await stored_rows(cluster) == []


async def test_generic_url_password_is_taken_out(cluster: Cluster) -> None:
    url = f"postgresql+psycopg://postgres:{SECRET}@127.0.0.1:5432/postgres?sslmode=disable"
    made = await create(
        cluster, dpb.Datasource(name="g", type=dpb.DATASOURCE_TYPE_GENERIC, url=url)
    )
    assert made.password_set
    assert made.url == "postgresql+psycopg://postgres@127.0.0.1:5432/postgres?sslmode=disable"
    assert SECRET not in str(await stored_rows(cluster))
    tested = await cluster.stub.TestDatasource(dpb.TestDatasourceRequest(name="g"))
    assert tested.ok, tested.message


async def test_test_datasource(cluster: Cluster, pg_url: str) -> None:
    c = cluster
    await create(c, pg(options={"sslmode": "disable", "application_name": "dsched-test"}))
    ok = await c.stub.TestDatasource(dpb.TestDatasourceRequest(name="warehouse"))
    assert ok.ok and "PostgreSQL" in ok.message
    await create(
        c,
        dpb.Datasource(
            name="maria", type=dpb.DATASOURCE_TYPE_MYSQL, host="127.0.0.1", port=3306, user="root"
        ),
    )
    maria = await c.stub.TestDatasource(dpb.TestDatasourceRequest(name="maria"))
    assert maria.ok and "MariaDB" in maria.message
    await create(c, pg("closed", port=1, password=SECRET, options={"connect_timeout": "2"}))
    bad = await c.stub.TestDatasource(dpb.TestDatasourceRequest(name="closed"))
    assert not bad.ok and bad.message and SECRET not in bad.message
    await create(c, pg("wrongpw", user="no_such_user", password=SECRET))
    refused = await c.stub.TestDatasource(dpb.TestDatasourceRequest(name="wrongpw"))
    assert not refused.ok and SECRET not in refused.message


async def test_cluster_master_without_key_refuses_a_password(tmp_path: Any) -> None:
    async with start_cluster(
        f"sqlite+aiosqlite:///{tmp_path / 'm.db'}", tmp_path, create_datasource_key=False
    ) as c:
        got = await failure(create(c, pg(password=SECRET)))
        assert_status(got, grpc.StatusCode.FAILED_PRECONDITION, "FAILED_PRECONDITION")
        assert await stored_rows(c) == []
        assert (await create(c, pg())).password_set is False  # without a password it works
        info = await c.stub.GetServerInfo(pb.GetServerInfoRequest())
        assert info.address
