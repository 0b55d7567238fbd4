"""Datasources in the SDK: named database connections that SQL and PROCEDURE tasks use.

::

    client.create_datasource(
        Datasource("warehouse", DatasourceType.POSTGRESQL, host="db", port=5432,
                   database="dw", user="etl", options={"sslmode": "require"}),
        password=getpass.getpass(),
    )

A password goes to the master once and is never returned: a :class:`Datasource` read back says
only whether one is set (:attr:`Datasource.password_set`). It is not a field of the value, so
it cannot end up in a ``repr`` or a log line by accident.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum

from dsched.results import Page
from dsched.rpc import RpcBase, iter_pages
from dsched.rpc import request_id as _rid
from dsched.v1 import datasource_pb2 as pb


class DatasourceType(StrEnum):
    """The kind of database (README "Datasources")."""

    POSTGRESQL = "POSTGRESQL"
    MYSQL = "MYSQL"  # MySQL or MariaDB
    SQLITE = "SQLITE"  # ``database`` is the file's path on the worker
    GENERIC = "GENERIC"  # ``url``: a SQLAlchemy URL of one of the above


@dataclass(frozen=True, slots=True, kw_only=True)
class Datasource:
    """A datasource as stored (``password_set`` and the times are the server's) or as given to
    :meth:`DatasourceCalls.create_datasource` (where they are ignored)."""

    name: str
    type: DatasourceType
    description: str = ""
    host: str = ""
    port: int = 0
    database: str = ""
    user: str = ""
    options: Mapping[str, str] = field(default_factory=dict)
    url: str = ""
    password_set: bool = False
    create_time: datetime | None = None
    update_time: datetime | None = None

    def to_proto(self, password: str = "") -> pb.Datasource:
        return pb.Datasource(
            name=self.name,
            type=f"DATASOURCE_TYPE_{DatasourceType(self.type).value}",
            description=self.description,
            host=self.host,
            port=self.port,
            database=self.database,
            user=self.user,
            password=password,
            options=dict(self.options),
            url=self.url,
        )


def datasource_from_proto(msg: pb.Datasource) -> Datasource:
    name = pb.DatasourceType.Name(msg.type).removeprefix("DATASOURCE_TYPE_")
    return Datasource(
        name=msg.name,
        type=DatasourceType(name) if name in DatasourceType.__members__ else DatasourceType.GENERIC,
        description=msg.description,
        host=msg.host,
        port=msg.port,
        database=msg.database,
        user=msg.user,
        options=dict(msg.options),
        url=msg.url,
        password_set=msg.password_set,
        create_time=msg.create_time.ToDatetime(tzinfo=UTC) if msg.HasField("create_time") else None,
        update_time=msg.update_time.ToDatetime(tzinfo=UTC) if msg.HasField("update_time") else None,
    )


@dataclass(frozen=True, slots=True)
class DatasourceTest:
    """What :meth:`DatasourceCalls.test_datasource` found: ``ok``, and the server's version or
    what went wrong."""

    ok: bool
    message: str


class DatasourceCalls(RpcBase):
    """Datasources; part of :class:`dsched.Client`."""

    def create_datasource(
        self, datasource: Datasource, *, password: str = "", request_id: str | None = None
    ) -> Datasource:
        """Stores a datasource; ``password`` is encrypted by the master and never returned."""
        req = pb.CreateDatasourceRequest(
            datasource=datasource.to_proto(password), request_id=_rid(request_id)
        )
        return datasource_from_proto(self._call(self._master.CreateDatasource, req).datasource)

    def update_datasource(
        self,
        datasource: Datasource,
        *,
        password: str | None = None,
        request_id: str | None = None,
    ) -> Datasource:
        """Replaces the datasource's fields; ``password=None`` keeps the stored password, a
        string (empty: none) replaces it."""
        req = pb.UpdateDatasourceRequest(
            datasource=datasource.to_proto(password or ""),
            replace_password=password is not None,
            request_id=_rid(request_id),
        )
        return datasource_from_proto(self._call(self._master.UpdateDatasource, req).datasource)

    def get_datasource(self, name: str) -> Datasource:
        req = pb.GetDatasourceRequest(name=name)
        return datasource_from_proto(self._call(self._master.GetDatasource, req).datasource)

    def list_datasources(self) -> Iterator[Datasource]:
        """Datasources by name, fetched page by page."""

        def page(token: str) -> Page[Datasource]:
            req = pb.ListDatasourcesRequest(page_size=200, page_token=token)
            resp = self._call(self._master.ListDatasources, req)
            return Page(
                tuple(datasource_from_proto(d) for d in resp.datasources), resp.next_page_token
            )

        return iter_pages(page)

    def delete_datasource(self, name: str, *, request_id: str | None = None) -> None:
        req = pb.DeleteDatasourceRequest(name=name, request_id=_rid(request_id))
        self._call(self._master.DeleteDatasource, req)

    def test_datasource(self, name: str) -> DatasourceTest:
        """Asks the master to connect to the datasource (a short timeout)."""
        resp = self._call(self._master.TestDatasource, pb.TestDatasourceRequest(name=name))
        return DatasourceTest(resp.ok, resp.message)
