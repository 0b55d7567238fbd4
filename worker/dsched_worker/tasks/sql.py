"""The SQL and PROCEDURE task types: dsched child programs (:mod:`dsched_worker.tasks.child`)
:mod:`dsched_worker.programs.sql` and :mod:`dsched_worker.programs.procedure`, each started with
the task's spec and its datasource (password included) on its stdin, a pipe: never in its
arguments or environment, which other users of the host can read in ``/proc``, and never in a
file. The worker keeps the :class:`~dsched_server.protocol.execution.TaskExecution` in memory
only; its outbox and group records hold events and process groups, not executions.

An attempt whose datasource the master could not resolve (deleted, its password not decryptable)
fails here, before any process starts, with the master's reason.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from dsched.sql import ProcedureSpec, SqlSpec
from dsched_server import dbapi
from dsched_server.protocol.execution import TaskExecution
from dsched_worker.tasks.base import OutputSink, RunningTask, SpawnError
from dsched_worker.tasks.child import ChildPrograms

SQL_PROGRAM = "dsched_worker.programs.sql"
PROCEDURE_PROGRAM = "dsched_worker.programs.procedure"


def _datasource(execution: TaskExecution) -> dict[str, Any]:
    conn = execution.datasource
    if conn is None:
        raise SpawnError("no datasource came with the attempt")
    if conn.error:
        raise SpawnError(conn.error)
    return dbapi.connection_to_json(conn)


class _DatasourceTaskType:
    """Starts :attr:`program` for a ``kind`` attempt with the task's spec as JSON (its fields by
    name; enums by value) and its datasource."""

    program = ""
    kind: type[SqlSpec | ProcedureSpec] = SqlSpec

    def __init__(self, children: ChildPrograms) -> None:
        self._children = children

    async def start(self, execution: TaskExecution, output: OutputSink) -> RunningTask:
        if not isinstance(execution.kind, self.kind):
            raise SpawnError(f"{self.program} cannot run {type(execution.kind).__name__}")
        spec = {"datasource": _datasource(execution), "task": asdict(execution.kind)}
        return await self._children.start(self.program, spec, execution, output)


class SqlTaskType(_DatasourceTaskType):
    program = SQL_PROGRAM
    kind = SqlSpec


class ProcedureTaskType(_DatasourceTaskType):
    program = PROCEDURE_PROGRAM
    kind = ProcedureSpec
