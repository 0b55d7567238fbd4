"""The worker's ``LogService``: reads and follows task logs by task instance id and byte offset.

A request names only a task instance id; the file is found through the worker's own log index
(:class:`~dsched_worker.logs.LogStore`), never from a client-supplied path. A log is *complete* once
its attempt is terminal: either its live :class:`~dsched_worker.logs.TaskLog` says so, or no attempt
of this incarnation writes it (an earlier incarnation's log, or a finished one). The terminal flag
is read before the file size, so "complete and read to the end" is never claimed too early.

Reads are ``pread`` calls on the event loop: local files, at most 1 MiB per call.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import Any

from grpc import aio

from dsched.errors import NotFound, OutOfRange
from dsched.v1 import log_service_pb2, log_service_pb2_grpc
from dsched_server.protocol.wire.log_read import (
    log_read_from_request,
    read_log_response,
    tail_frame,
)
from dsched_worker.logs import LogStore, TaskLog

Context = aio.ServicerContext[Any, Any]

TAIL_CHUNK = 64 * 1024


class LogServicer(log_service_pb2_grpc.LogServiceServicer):
    """Serves the logs in ``logs``. Idle follow streams get a progress frame every
    ``progress_interval`` seconds."""

    def __init__(self, logs: LogStore, *, progress_interval: float) -> None:
        self._logs = logs
        self._progress_interval = progress_interval

    async def ReadTaskLog(
        self, request: log_service_pb2.ReadTaskLogRequest, context: Context
    ) -> log_service_pb2.ReadTaskLogResponse:
        read = log_read_from_request(request)
        task_instance_id, offset, length = read.task_instance_id, read.offset, read.length
        live, fd = self._open(task_instance_id)
        try:
            complete = live is None or live.finished
            size = _size(fd, task_instance_id, offset)
            data = os.pread(fd, min(length, size - offset), offset)
        finally:
            os.close(fd)
        end = offset + len(data)
        return read_log_response(
            data, offset=offset, size=size, end_of_log=complete and end >= size
        )

    async def TailTaskLog(
        self, request: log_service_pb2.TailTaskLogRequest, context: Context
    ) -> AsyncIterator[log_service_pb2.TailTaskLogResponse]:
        read = log_read_from_request(request)
        task_instance_id, offset = read.task_instance_id, read.offset
        live, fd = self._open(task_instance_id)
        try:
            while True:
                complete = live is None or live.finished
                size = _size(fd, task_instance_id, offset)
                while offset < size:
                    data = os.pread(fd, min(TAIL_CHUNK, size - offset), offset)
                    if not data:
                        break  # the file shrank (truncated by hand): nothing more to send now
                    yield tail_frame(data, offset=offset)
                    offset += len(data)
                if complete:
                    yield tail_frame(b"", offset=offset, end_of_log=True)
                    return
                if not request.follow or live is None:
                    return
                if not await live.wait_beyond(offset, self._progress_interval):
                    yield tail_frame(b"", offset=offset)  # progress: the stream is alive
        finally:
            os.close(fd)

    def _open(self, task_instance_id: int) -> tuple[TaskLog | None, int]:
        # The live log first: an attempt that finishes between the two calls is then seen as live
        # and finished, rather than as live-but-unknown.
        live = self._logs.live(task_instance_id)
        fd = self._logs.open_for_read(task_instance_id)
        if fd is None:
            raise NotFound(
                f"no log for task instance {task_instance_id} on this worker",
                reason="TASK_LOG_NOT_FOUND",
                metadata={"task_instance_id": str(task_instance_id)},
            )
        return live, fd


def _size(fd: int, task_instance_id: int, offset: int) -> int:
    size = os.fstat(fd).st_size
    if offset > size:
        raise OutOfRange(
            f"offset {offset} is beyond the end of the log ({size} bytes)",
            reason="LOG_OFFSET_OUT_OF_RANGE",
            metadata={"task_instance_id": str(task_instance_id), "size": str(size)},
        )
    return size
