"""MasterService: datasources (README "Datasources"). Parse and check (``core/datasource.py``),
encrypt the password (``datasource_key.py``), store (``store/datasources.py``), render without it.

A password never leaves this module in clear except to the driver of TestDatasource: answers
carry ``password_set`` only, and the request log stores the rendered answer (no password), not
the request.
"""

from __future__ import annotations

import asyncio
from typing import Any

from grpc import aio

from dsched.v1 import datasource_pb2 as pb
from dsched_server import dbapi
from dsched_server.api import convert
from dsched_server.api.context import MasterContext
from dsched_server.api.idempotency import once
from dsched_server.api.pages import page_by_name
from dsched_server.api.validation import Checks, check_name_request
from dsched_server.app.transaction import Transaction
from dsched_server.core.datasource import (
    DatasourceRecord,
    DatasourceSpec,
    DatasourceType,
    Secret,
    connection,
)
from dsched_server.core.datasource import check as check_datasource
from dsched_server.datasource_key import DatasourceKey
from dsched_server.store import datasources as store

Ctx = aio.ServicerContext[Any, Any]
TEST_TIMEOUT_S = 5


def _parse(msg: pb.Datasource, checks: Checks) -> tuple[DatasourceSpec, str]:
    """The spec to store and the password to encrypt (a GENERIC url's, taken out of it)."""
    kind = checks.by_name(
        DatasourceType,
        pb.DatasourceType,
        "DATASOURCE_TYPE_",
        "datasource.type",
        msg.type,
        DatasourceType.GENERIC,
    )
    spec = DatasourceSpec(
        name=msg.name,
        type=kind,
        description=msg.description,
        host=msg.host,
        port=msg.port,
        database=msg.database,
        user=msg.user,
        options=dict(msg.options),
        url=msg.url,
    )
    if msg.type == pb.DATASOURCE_TYPE_UNSPECIFIED:
        checks.add("datasource.type", "is required (POSTGRESQL, MYSQL, SQLITE or GENERIC)")
        return spec, ""
    violations, parsed = check_datasource(spec, msg.password)
    checks.violations.extend(violations)
    password = msg.password
    if parsed is not None:
        spec = DatasourceSpec(**{**_fields(spec), "url": parsed.without_password()})
        password = password or parsed.password.reveal()
    return spec, password


def _fields(spec: DatasourceSpec) -> dict[str, Any]:
    return {name: getattr(spec, name) for name in DatasourceSpec.__slots__}


def render(record: DatasourceRecord) -> pb.Datasource:
    spec = record.spec
    return pb.Datasource(
        name=spec.name,
        type=f"DATASOURCE_TYPE_{spec.type.value}",
        description=spec.description,
        host=spec.host,
        port=spec.port,
        database=spec.database,
        user=spec.user,
        password_set=record.password_set,
        options=dict(spec.options),
        url=spec.url,
        create_time=convert.timestamp(record.create_time),
        update_time=convert.timestamp(record.update_time),
    )


class DatasourcesApi:
    ctx: MasterContext

    @property
    def _key(self) -> DatasourceKey:
        return self.ctx.datasource_key

    async def _token(self, password: str) -> str | None:
        # In a thread: the first use reads (or creates) the key file.
        return await asyncio.to_thread(self._key.encrypt, password) if password else None

    async def _keyed(self, request: Any, spec: DatasourceSpec, password: str) -> Any:
        """``request`` as the request log fingerprints it: the password replaced by its keyed
        digest (a plain hash of a request holding a password could be tested against guesses
        by whoever reads the database) and a GENERIC url without it."""
        copy = type(request)()
        copy.CopyFrom(request)
        copy.datasource.url = spec.url
        copy.datasource.password = (
            await asyncio.to_thread(self._key.digest, password) if password else ""
        )
        return copy

    async def CreateDatasource(self, request: pb.CreateDatasourceRequest, context: Ctx) -> Any:
        checks = Checks()
        checks.request_id(request.request_id)
        spec, password = _parse(request.datasource, checks)
        checks.raise_if_any()
        token = await self._token(password)
        keyed = await self._keyed(request, spec, password)

        async def work(tx: Transaction) -> pb.CreateDatasourceResponse:
            record = await store.create(tx.conn, spec, token, tx.now)
            return pb.CreateDatasourceResponse(datasource=render(record))

        return await once(self.ctx, keyed, "CreateDatasource", pb.CreateDatasourceResponse, work)

    async def UpdateDatasource(self, request: pb.UpdateDatasourceRequest, context: Ctx) -> Any:
        checks = Checks()
        checks.request_id(request.request_id)
        spec, password = _parse(request.datasource, checks)
        if password and not request.replace_password:
            checks.add("replace_password", "must be true to change the password")
        checks.raise_if_any()
        token = await self._token(password)
        keyed = await self._keyed(request, spec, password)

        async def work(tx: Transaction) -> pb.UpdateDatasourceResponse:
            record = await store.update_spec(tx.conn, spec, token, request.replace_password, tx.now)
            return pb.UpdateDatasourceResponse(datasource=render(record))

        return await once(self.ctx, keyed, "UpdateDatasource", pb.UpdateDatasourceResponse, work)

    async def GetDatasource(self, request: pb.GetDatasourceRequest, context: Ctx) -> Any:
        checks = Checks()
        checks.name("name", request.name, "datasource name")
        checks.raise_if_any()
        async with self.ctx.db.read() as conn:
            record = await store.get(conn, request.name)
        return pb.GetDatasourceResponse(datasource=render(record))

    async def ListDatasources(self, request: pb.ListDatasourcesRequest, context: Ctx) -> Any:
        items, token = await page_by_name(
            self.ctx.db,
            "datasources",
            request,
            store.list_datasources,
            lambda r: r.spec.name,
            render,
        )
        return pb.ListDatasourcesResponse(datasources=items, next_page_token=token)

    async def DeleteDatasource(self, request: pb.DeleteDatasourceRequest, context: Ctx) -> Any:
        check_name_request(request.name, "datasource name", request.request_id)

        async def work(tx: Transaction) -> pb.DeleteDatasourceResponse:
            await store.delete_datasource(tx.conn, request.name)
            return pb.DeleteDatasourceResponse()

        return await once(self.ctx, request, "DeleteDatasource", pb.DeleteDatasourceResponse, work)

    async def TestDatasource(self, request: pb.TestDatasourceRequest, context: Ctx) -> Any:
        checks = Checks()
        checks.name("name", request.name, "datasource name")
        checks.raise_if_any()
        async with self.ctx.db.read() as conn:
            record = await store.get(conn, request.name)
        password = Secret("")
        if record.token is not None:
            password = Secret(await asyncio.to_thread(self._key.decrypt, record.token))
        target = connection(record.spec, password)
        if target.error:
            return pb.TestDatasourceResponse(ok=False, message=target.error)
        ok, message = await asyncio.to_thread(dbapi.probe, target, TEST_TIMEOUT_S)
        return pb.TestDatasourceResponse(ok=ok, message=message)
