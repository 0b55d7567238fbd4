"""TaskEventService: the stream on which workers report task events to the owning master.

A reader task takes request batches off the stream and hands each event to the runner of its
instance (the runner applies it in order, in a transaction); the response side acknowledges the
events in the order received, each once its outcome is durable. Events for instances this master
does not drive are answered from the store: NOT_OWNER with the owner's cluster listener,
RETRY_LATER while an instance waits to be claimed (or is being reloaded) or while the store is
unreachable, DUPLICATE or REJECTED_STALE otherwise.

It is served on the master's cluster listener only (ARCHITECTURE.md §1): whoever may call it can
report any task's result.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

from grpc import aio

from dsched.errors import InvalidArgument, NotFound, Unavailable
from dsched.states import WorkflowState
from dsched.v1 import task_event_service_pb2 as pb
from dsched.v1 import task_event_service_pb2_grpc
from dsched_server.api.context import MasterContext
from dsched_server.core.transitions import OWNED_STATES
from dsched_server.engine.messages import WorkerEvent
from dsched_server.protocol.ack import Ack, AckDecision
from dsched_server.protocol.event import TaskEvent
from dsched_server.protocol.wire.ack import acks_to_proto
from dsched_server.protocol.wire.event import event_from_proto
from dsched_server.store import instances as instance_repo
from dsched_server.store import task_instances as ti_repo

log = logging.getLogger(__name__)
Entries = list[tuple[str, "asyncio.Future[Ack]"]]
_WAITING = frozenset({WorkflowState.SUBMITTED, WorkflowState.FAILOVER})


class TaskEventServicer(task_event_service_pb2_grpc.TaskEventServiceServicer):
    def __init__(self, ctx: MasterContext) -> None:
        self.ctx = ctx
        self._streams: set[asyncio.Queue[Entries | None]] = set()

    def close(self) -> None:
        """Ends every open stream after what is already queued (called before the server stops,
        so no stream has to be cancelled). Workers resend unacknowledged events elsewhere."""
        for queue in self._streams:
            queue.put_nowait(None)

    async def ReportTaskEvents(
        self, request_iterator: AsyncIterator[pb.ReportTaskEventsRequest], context: Any
    ) -> AsyncIterator[pb.ReportTaskEventsResponse]:
        queue: asyncio.Queue[Entries | None] = asyncio.Queue()
        self._streams.add(queue)
        reader = asyncio.create_task(self._read(request_iterator, queue))
        try:
            while True:
                entries = await queue.get()
                if entries is None:
                    break
                acks = [replace(await future, event_id=event_id) for event_id, future in entries]
                yield acks_to_proto(acks)
        except asyncio.CancelledError:
            # The worker hung up or this server is stopping: that ends the stream, it is not an
            # error. Unacknowledged events stay in the worker's outbox and are sent again.
            return
        finally:
            self._streams.discard(queue)
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)

    async def _read(
        self,
        requests: AsyncIterator[pb.ReportTaskEventsRequest],
        queue: asyncio.Queue[Entries | None],
    ) -> None:
        loop = asyncio.get_running_loop()
        try:
            async for request in requests:
                entries: Entries = []
                for msg in request.events:
                    future: asyncio.Future[Ack] = loop.create_future()
                    try:
                        event = event_from_proto(msg)
                    except InvalidArgument as exc:
                        future.set_result(
                            Ack(AckDecision.REJECTED_STALE, f"malformed event: {exc}")
                        )
                    else:
                        await self._route(
                            event, request.worker_address, request.worker_epoch, future
                        )
                    entries.append((msg.event_id, future))
                await queue.put(entries)
        except aio.AioRpcError:
            pass  # the worker went away; it resends unacknowledged events on its next stream
        finally:
            await queue.put(None)

    async def _route(
        self, data: TaskEvent, address: str, epoch: int, future: asyncio.Future[Ack]
    ) -> None:
        runner = self.ctx.runners.get(data.workflow_instance_id)
        if runner is not None and not runner.done:
            runner.post(WorkerEvent(data, address, epoch, future))
            return
        try:
            ack = await self._answer_unowned(data)
        except Unavailable:
            # The database is away: the worker keeps the event and sends it again later.
            ack = Ack(AckDecision.RETRY_LATER, "metadata database unavailable")
        future.set_result(ack)

    async def _answer_unowned(self, data: TaskEvent) -> Ack:
        try:
            async with self.ctx.db.read() as conn:
                instance = await instance_repo.get_instance(conn, data.workflow_instance_id)
                ti = await ti_repo.get(conn, data.task_instance_id)
        except NotFound:
            return Ack(AckDecision.REJECTED_STALE, "unknown task instance")
        if ti.workflow_instance_id != instance.id:
            return Ack(AckDecision.REJECTED_STALE, "task instance belongs to another instance")
        mine = instance.host == self.ctx.address and instance.epoch == self.ctx.epoch()
        if instance.state in OWNED_STATES and not mine:
            # The worker must send to the owner's cluster listener; "" (owner not live) makes it
            # retry later, by when failover has moved the instance.
            owner = self.ctx.owner_cluster_address(instance.host)
            return Ack(AckDecision.NOT_OWNER, "instance owned by another master", owner)
        if instance.state in _WAITING or (instance.state in OWNED_STATES and mine):
            return Ack(AckDecision.RETRY_LATER, "instance is being (re)claimed")
        if ti.state.value == data.type.value:
            return Ack(AckDecision.DUPLICATE)
        return Ack(AckDecision.REJECTED_STALE, f"task instance is {ti.state}")
