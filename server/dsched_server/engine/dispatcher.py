"""Sends queued attempts to workers, highest priority first.

One loop pops jobs in priority order, picks a worker of each job's group and hands the jobs, batched
per worker, to a bounded set of concurrent senders, which call the worker through the engine's
:class:`~dsched_server.engine.worker_client.WorkerClient`. A group with no usable worker parks its
jobs until the worker directory changes: nothing spins. A send whose outcome is unknown
(:class:`~dsched_server.engine.worker_client.WorkerCallError`: a timeout, a connection lost, an
answer lost) is retried against the *same* worker while that incarnation lives, because
dispatch is idempotent on (task instance, attempt) there; sending it to a second worker could run
it twice. Only a rejection (nothing was accepted) or the worker's disappearance lets the job go
elsewhere. For the same reason a job *pinned* to a worker (an attempt that a reloaded runner's
predecessor had sent, see :mod:`dsched_server.engine.reloads`) goes only to that worker while it is
registered. While the master's registry connection is suspended nothing is sent (``pause``).
"""

from __future__ import annotations

import asyncio
import heapq
import logging
from collections import defaultdict

from dsched.backoff import Backoff
from dsched.python_spec import PythonSpec
from dsched.spark import SparkSpec
from dsched.spec import ShellSpec, params_bytes, spark_bytes
from dsched.sql import ProcedureSpec, SqlSpec
from dsched_server.engine.jobs import DispatchJob
from dsched_server.engine.messages import Dispatched, Waiting
from dsched_server.engine.worker_client import RequestRefused, WorkerCallError, WorkerClient
from dsched_server.engine.workers import WorkerDirectory, WorkerRef
from dsched_server.protocol.execution import WorkerKind

log = logging.getLogger(__name__)

DISPATCH_TIMEOUT_S = 10.0
# Attempts per DispatchTasks call: wide fan-outs cost one RPC per batch, not one per task. A batch
# also stays under MAX_BATCH_BYTES (estimated by job_bytes) so that it never nears the 16 MiB a
# worker accepts: one attempt carries at most a 256 KiB script and 3 * 256 KiB of parameters.
MAX_BATCH = 64
MAX_BATCH_BYTES = 4 * 1024 * 1024
_RETRY = Backoff(initial=0.05, maximum=2.0)


class Dispatcher:
    """Owns the dispatch queue. ``submit`` may be called from any coroutine on the loop."""

    def __init__(
        self, workers: WorkerDirectory, client: WorkerClient, *, max_in_flight: int = 16
    ) -> None:
        self._workers = workers
        self._client = client
        self._heap: list[DispatchJob] = []
        self._parked: dict[str, list[DispatchJob]] = defaultdict(list)
        self._wake = asyncio.Event()
        self._running = asyncio.Event()
        self._running.set()
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

    def pause(self) -> None:
        """Stops sending (calls already under way finish) until :meth:`resume`."""
        self._running.clear()

    def resume(self) -> None:
        self._running.set()

    def submit(self, job: DispatchJob) -> None:
        if self._parked.get(job.worker_group):
            # Every worker of its group was busy a moment ago: it waits with the jobs parked
            # there and goes in rank order with them when a worker frees up. Sent now, a job that
            # arrived later could take the slot a better-ranked parked one waits for (a backfill
            # run's task ahead of a scheduled run's).
            self._park(job)
            return
        heapq.heappush(self._heap, job)
        self._wake.set()

    @property
    def waiting(self) -> int:
        return len(self._heap) + sum(len(v) for v in self._parked.values())

    async def _run(self) -> None:
        while True:
            await self._running.wait()
            if not self._heap:
                self._wake.clear()
                await self._wake.wait()
                continue
            for worker, jobs in self._take_batches():
                await self._slots.acquire()
                jobs = [j for j in jobs if not _cancelled(j)]  # a runner may cancel meanwhile
                if not jobs:
                    self._slots.release()
                    continue
                for job in jobs:
                    job.sent, job.target, job.target_epoch = True, worker.address, worker.epoch
                task = asyncio.create_task(self._send(jobs, worker))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

    def _take_batches(self) -> list[tuple[WorkerRef, list[DispatchJob]]]:
        """Pops up to MAX_BATCH jobs in priority order and groups them by the chosen worker, in
        batches of at most MAX_BATCH_BYTES."""
        batches: dict[str, tuple[WorkerRef, list[DispatchJob]]] = {}
        sizes: dict[str, int] = {}
        full: list[tuple[WorkerRef, list[DispatchJob]]] = []
        taken = 0
        while self._heap and taken < MAX_BATCH:
            job = heapq.heappop(self._heap)
            if job.cancelled:
                continue
            worker = self._target(job)
            if worker is None:
                self._park(job)
                continue
            size = job_bytes(job)
            if worker.address in batches and sizes[worker.address] + size > MAX_BATCH_BYTES:
                full.append(batches.pop(worker.address))
                sizes[worker.address] = 0
            batches.setdefault(worker.address, (worker, []))[1].append(job)
            sizes[worker.address] = sizes.get(worker.address, 0) + size
            taken += 1
        return [*full, *batches.values()]

    def _park(self, job: DispatchJob) -> None:
        """Holds ``job`` until a worker of its group frees up, saying why it waits."""
        self._parked[job.worker_group].append(job)
        job.waiting_reason = self._workers.why_unavailable(job.worker_group)
        if job.waiting_reason != job.told_reason and (
            job.told_reason or not self._workers.has_group(job.worker_group)
        ):
            # The runner records it as the task's state reason with a WAITING event, once per
            # attempt and reason: none registered, all left, or (after one of those) all BUSY.
            # Only BUSY from the start is ordinary queueing (every slot taken), not worth a write
            # per task; a dispatch timeout still names it.
            job.told_reason = job.waiting_reason
            job.on_dispatched(Waiting(job.spec.task_instance_id, job.waiting_reason))

    def _target(self, job: DispatchJob) -> WorkerRef | None:
        """The pinned worker while it is registered (busy or not: it has the attempt already),
        else one of the group's picked by the selector. A pinned worker that left the registry
        fences its attempts, so the pin lapses and any worker may run it."""
        if job.pinned:
            pinned = self._workers.get(job.pinned)
            if pinned is not None:
                return pinned
            job.pinned = ""
        return self._workers.pick(job.worker_group)

    async def _unpark_on_change(self) -> None:
        while True:
            await self._workers.changed()
            parked, self._parked = self._parked, defaultdict(list)
            for jobs in parked.values():
                for job in jobs:
                    heapq.heappush(self._heap, job)
            self._wake.set()

    async def _send(self, jobs: list[DispatchJob], worker: WorkerRef) -> None:
        try:
            await self._send_until_known(jobs, worker)
        finally:
            self._slots.release()

    async def _send_until_known(self, jobs: list[DispatchJob], worker: WorkerRef) -> None:
        specs = [job.spec for job in jobs]
        for delay in _RETRY.delays():
            for job in jobs:
                job.attempts += 1
            try:
                reply = await self._client.dispatch(
                    worker.address, specs, timeout=DISPATCH_TIMEOUT_S
                )
            except RequestRefused as err:
                # Never expected from our own requests; log it and drop the batch.
                log.error("worker %s refused a dispatch batch: %s", worker.address, err.details)
                return
            except WorkerCallError:
                live = self._workers.get(worker.address)
                if live is None or live.epoch != worker.epoch:
                    # The worker is gone: it cannot report these attempts any more (its epoch
                    # is fenced), so another worker may take them.
                    for job in jobs:
                        self._requeue(job)
                    return
                await asyncio.sleep(delay)
                continue
            rejected = []
            for job, result in zip(jobs, reply.results, strict=True):
                if result.accepted:
                    job.on_dispatched(
                        Dispatched(
                            job.spec.task_instance_id,
                            worker.address,
                            reply.worker_epoch,
                            result.log_path,
                        )
                    )
                else:
                    rejected.append(job)
            if rejected:
                # Rejected means not accepted: after a pause they may go to any worker. They are
                # not under way meanwhile, so a dispatch timeout that passes now fails them.
                for job in rejected:
                    _release(job)
                await asyncio.sleep(delay)
                for job in rejected:
                    self._requeue(job)
            return

    def _requeue(self, job: DispatchJob) -> None:
        _release(job)
        if not job.cancelled:
            self.submit(job)


def _release(job: DispatchJob) -> None:
    # Rejected or its worker gone: it does not run there, so it may go anywhere now.
    job.sent, job.target, job.target_epoch, job.pinned = False, "", 0, ""


def job_bytes(job: DispatchJob) -> int:
    """An upper estimate of the job's TaskExecution on the wire: its script and parameters plus
    the framing of each parameter and a kilobyte for the other fields."""
    return (
        _kind_bytes(job.spec.kind)
        + params_bytes(job.spec.params)
        + 16 * len(job.spec.params)
        + 1024
    )


def _kind_bytes(kind: WorkerKind) -> int:
    """The texts of a task kind, with the framing of each header."""
    if isinstance(kind, ShellSpec):
        return len(kind.script.encode())
    if isinstance(kind, PythonSpec):
        return len(kind.script.encode()) + len(kind.interpreter.encode())
    if isinstance(kind, SparkSpec):
        return spark_bytes(kind)
    if isinstance(kind, SqlSpec):
        return sum(len(s.encode()) for s in (kind.sql, *kind.pre_statements, *kind.post_statements))
    if isinstance(kind, ProcedureSpec):
        return sum(len(p.value.encode()) + 64 for p in kind.params)
    texts = (kind.url, kind.body, kind.body_contains, kind.response_param)
    return sum(len(t.encode()) for t in texts) + params_bytes(kind.headers) + 16 * len(kind.headers)


def _cancelled(job: DispatchJob) -> bool:
    # A function call, so type checkers do not narrow the flag across the await before it.
    return job.cancelled
