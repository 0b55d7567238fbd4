"""LogService on the master: forwards each call to the worker that ran the task instance.

A follower (``TailTaskLog`` with ``follow``) of a task that has not reached a worker yet waits for
it, through an outage of the metadata database too (progress frames meanwhile); once it streams
from the worker it no longer needs the database.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import grpc
from grpc import aio

from dsched.errors import DschedError, Internal, NotFound, OutOfRange, Unavailable
from dsched.v1 import log_service_pb2 as pb
from dsched.v1 import log_service_pb2_grpc
from dsched_server.api.context import MasterContext
from dsched_server.api.validation import Checks
from dsched_server.constants import PROGRESS_FRAME_INTERVAL_S
from dsched_server.core.records import TaskInstanceRecord
from dsched_server.store import task_instances as ti_repo


def _translate(err: aio.AioRpcError, ti: TaskInstanceRecord) -> DschedError:
    meta = {"task_instance": str(ti.id), "worker": ti.host}
    if err.code() == grpc.StatusCode.NOT_FOUND:
        return NotFound(f"log of task instance {ti.id} not found on {ti.host}", metadata=meta)
    if err.code() == grpc.StatusCode.OUT_OF_RANGE:
        return OutOfRange(err.details() or "offset out of range", metadata=meta)
    if err.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
        return Unavailable(
            f"worker {ti.host} holding the log is unreachable",
            metadata=meta,
            reason="WORKER_UNAVAILABLE",
        )
    return Internal(f"worker {ti.host} failed to serve the log: {err.code().name}", metadata=meta)


class LogProxy(log_service_pb2_grpc.LogServiceServicer):
    def __init__(self, ctx: MasterContext) -> None:
        self.ctx = ctx

    async def _task_instance(self, task_instance_id: int) -> TaskInstanceRecord:
        async with self.ctx.db.read() as conn:
            return await ti_repo.get(conn, task_instance_id)

    async def ReadTaskLog(self, request: pb.ReadTaskLogRequest, context: Any) -> Any:
        checks = Checks()
        checks.positive_id("task_instance_id", request.task_instance_id)
        if request.offset < 0:
            checks.add("offset", "must not be negative")
        if request.length < 0:
            checks.add("length", "must not be negative")
        checks.raise_if_any()
        ti = await self._task_instance(request.task_instance_id)
        if not ti.host:
            raise NotFound(
                f"task instance {ti.id} has not started; it has no log yet",
                reason="LOG_NOT_STARTED",
                metadata={"task_instance": str(ti.id)},
            )
        try:
            return await self.ctx.worker_logs.log_stub(ti.host).ReadTaskLog(request, timeout=30)
        except aio.AioRpcError as err:
            raise _translate(err, ti) from err

    async def TailTaskLog(
        self, request: pb.TailTaskLogRequest, context: Any
    ) -> AsyncIterator[pb.TailTaskLogResponse]:
        checks = Checks()
        checks.positive_id("task_instance_id", request.task_instance_id)
        if request.offset < 0:
            checks.add("offset", "must not be negative")
        checks.raise_if_any()
        found: list[TaskInstanceRecord] = []
        async for frame in self._until_on_worker(request, found):
            yield frame
        if not found:
            return
        ti = found[0]
        try:
            async for frame in self.ctx.worker_logs.log_stub(ti.host).TailTaskLog(request):
                yield frame
        except aio.AioRpcError as err:
            raise _translate(err, ti) from err

    async def _until_on_worker(
        self, request: pb.TailTaskLogRequest, found: list[TaskInstanceRecord]
    ) -> AsyncIterator[pb.TailTaskLogResponse]:
        """Waits (following) until the task instance has a worker, then appends it to ``found``;
        yields progress frames meanwhile, or the final frame of one that never reached one."""
        progress = pb.TailTaskLogResponse(offset=request.offset, next_offset=request.offset)
        signal: asyncio.Event | None = None
        while not self.ctx.notifier.closed:  # closed: the server stops, the client resumes
            try:
                ti = await self._task_instance(request.task_instance_id)
            except Unavailable:
                if not request.follow:
                    raise
                # The metadata database is away: keep the stream until it is back.
                if not await self.ctx.db.availability.wait(PROGRESS_FRAME_INTERVAL_S):
                    yield progress
                continue
            if ti.host:
                found.append(ti)
                return
            if ti.state.terminal or not request.follow:
                # Never reached a worker (cancelled, or not started and not following).
                yield pb.TailTaskLogResponse(
                    offset=request.offset, next_offset=request.offset, end_of_log=ti.state.terminal
                )
                return
            if signal is None:
                # Take the wake-up signal, then read again: a change in between still wakes us.
                signal = self.ctx.notifier.signal(ti.workflow_instance_id)
                continue
            if not await self.ctx.notifier.wait(signal, PROGRESS_FRAME_INTERVAL_S):
                yield progress
            signal = None
