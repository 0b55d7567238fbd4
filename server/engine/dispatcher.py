"""Sends queued attempts to workers, highest priority first.

One loop pops jobs in priority order, picks a worker of the job's group and hands the RPC to a
bounded set of concurrent senders. A group with no usable worker parks its jobs until the worker
directory changes: nothing spins. A send whose outcome is unknown (timeout, connection error) is
retried against the *same* worker while it is alive, because dispatch is idempotent on (task
instance, attempt) there; sending it to a second worker could run it twice. Only a rejection
(nothing was accepted) or the worker's disappearance lets the job go elsewhere.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
from collections import defaultdict

import grpc
from grpc import aio

from dsched.server.core.backoff import Backoff
from dsched.server.engine.jobs import DispatchJob
from dsched.server.engine.messages import Dispatched
from dsched.server.engine.wire import task_execution
from dsched.server.engine.workers import WorkerDirectory, WorkerRef
from dsched.v1 import enums_pb2, worker_service_pb2

log = logging.getLogger(__name__)

DISPATCH_TIMEOUT_S = 10.0
_RETRY = Backoff(initial=0.05, maximum=2.0)


class Dispatcher:
    """Owns the dispatch queue. ``submit`` may be called from any coroutine on the loop."""

    def __init__(self, workers: WorkerDirectory, *, max_in_flight: int = 64) -> None:
        self._workers = workers
        self._heap: list[DispatchJob] = []
        self._parked: dict[str, list[DispatchJob]] = defaultdict(list)
        self._wake = asyncio.Event()
        self._slots = asyncio.Semaphore(max_in_flight)
        self._tasks: set[asyncio.Task[None]] = set()
        self._loop_task: asyncio.Task[None] | None = None
        self._watch_task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._loop_task = asyncio.create_task(self._run(), name="dispatcher")
        self._watch_task = asyncio.create_task(self._unpark_on_change(), name="dispatcher-watch")

    async def stop(self) -> None:
        for task in [self._loop_task, self._watch_task, *self._tasks]:
            if task is not None:
                task.cancel()
        await asyncio.gather(
            *[t for t in [self._loop_task, self._watch_task, *self._tasks] if t is not None],
            return_exceptions=True,
        )

    def submit(self, job: DispatchJob) -> None:
        heapq.heappush(self._heap, job)
        self._wake.set()

    @property
    def waiting(self) -> int:
        return len(self._heap) + sum(len(v) for v in self._parked.values())

    async def _run(self) -> None:
        while True:
            if not self._heap:
                self._wake.clear()
                await self._wake.wait()
                continue
            job = heapq.heappop(self._heap)
            if job.cancelled:
                continue
            worker = self._workers.pick(job.worker_group)
            if worker is None:
                self._parked[job.worker_group].append(job)
                continue
            await self._slots.acquire()
            if _cancelled(job):  # a runner may have cancelled it while we waited
                self._slots.release()
                continue
            job.sent, job.target = True, worker.address
            task = asyncio.create_task(self._send(job, worker))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _unpark_on_change(self) -> None:
        while True:
            await self._workers.changed()
            parked, self._parked = self._parked, defaultdict(list)
            for jobs in parked.values():
                for job in jobs:
                    self.submit(job)

    async def _send(self, job: DispatchJob, worker: WorkerRef) -> None:
        try:
            await self._send_until_known(job, worker)
        finally:
            self._slots.release()

    async def _send_until_known(self, job: DispatchJob, worker: WorkerRef) -> None:
        request = worker_service_pb2.DispatchTaskRequest(task=task_execution(job.spec))
        stub = self._workers.worker_stub(worker.address)
        for delay in _RETRY.delays():
            job.attempts += 1
            try:
                reply = await stub.DispatchTask(request, timeout=DISPATCH_TIMEOUT_S)
            except aio.AioRpcError as err:
                if err.code() == grpc.StatusCode.INVALID_ARGUMENT:
                    log.error("worker refused task instance %s: %s", job.spec.task_instance_id, err)
                    return
                live = self._workers.get(worker.address)
                if live is None or live.epoch != worker.epoch:
                    # The worker is gone: it cannot report this attempt any more (its epoch is
                    # fenced), so another worker may take it.
                    self._requeue(job)
                    return
                await asyncio.sleep(delay)
                continue
            if reply.outcome in (
                enums_pb2.DISPATCH_OUTCOME_ACCEPTED,
                enums_pb2.DISPATCH_OUTCOME_ALREADY_ACCEPTED,
            ):
                job.on_dispatched(
                    Dispatched(
                        job.spec.task_instance_id,
                        worker.address,
                        reply.worker_epoch,
                        reply.log_path,
                    )
                )
                return
            # Rejected: nothing was accepted, so it may go to any worker after a pause.
            await asyncio.sleep(delay)
            self._requeue(job)
            return

    def _requeue(self, job: DispatchJob) -> None:
        job.sent, job.target = False, ""
        if not job.cancelled:
            self.submit(job)


def _cancelled(job: DispatchJob) -> bool:
    # A function call, so type checkers do not narrow the flag across the await before it.
    return job.cancelled
