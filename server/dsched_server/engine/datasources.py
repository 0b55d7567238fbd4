"""Resolves the datasource of a SQL or PROCEDURE attempt just before its dispatch (ARCHITECTURE.md
§16): the stored datasource, its password decrypted with the master's key, attached to the
attempt's :class:`~dsched_server.protocol.execution.TaskExecution` as a
:class:`~dsched_server.core.datasource.Connection`.

At dispatch, not when the run starts: a datasource changed (a new password) between two runs, or
between two attempts of one run, is used as it is now. A datasource that is gone or a password no
key of this master decrypts does not stop the run here: the attempt goes to a worker with the
reason instead of a connection, fails there with it in its log, and retries like any failure.
The store away is not such a reason: the read is retried while the attempt still waits.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace

from dsched.backoff import Backoff
from dsched.errors import NotFound
from dsched_server.core.datasource import Connection, Secret, connection
from dsched_server.datasource_key import DatasourceKey, KeyUnavailable
from dsched_server.engine.jobs import DispatchJob
from dsched_server.protocol.execution import datasource_of
from dsched_server.store import datasources as store
from dsched_server.store.database import Database

log = logging.getLogger(__name__)
_RETRY = Backoff(initial=0.2, maximum=5.0)


async def resolve(db: Database, key: DatasourceKey, job: DispatchJob) -> bool:
    """Attaches the datasource to ``job``; False if the job was cancelled meanwhile."""
    name = datasource_of(job.spec.kind)
    for delay in _RETRY.delays():
        if job.cancelled:
            return False
        try:
            found = await _connection(db, key, name)
        except Exception as exc:  # the store away: wait, the attempt is not failed for it
            log.info(
                "task instance %s: datasource %r not read (%s); retrying",
                job.spec.task_instance_id,
                name,
                type(exc).__name__,
            )
            await asyncio.sleep(delay)
            continue
        job.spec = replace(job.spec, datasource=found)
        return not job.cancelled
    return False  # not reached: the back-off has no limit


async def _connection(db: Database, key: DatasourceKey, name: str) -> Connection:
    try:
        async with db.read() as conn:
            record = await store.get(conn, name)
    except NotFound:
        return Connection(name=name, error=f"datasource {name!r} does not exist")
    password = Secret("")
    if record.token is not None:
        try:
            password = Secret(await asyncio.to_thread(key.decrypt, record.token))
        except KeyUnavailable as exc:
            return Connection(name=name, error=str(exc))
    return connection(record.spec, password)
