"""An in-memory ``WorkerClient`` (:mod:`dsched_server.engine.worker_client`): workers, no network.

:class:`FakeWorkers` answers the master's calls for any number of :class:`FakeWorker` (one per
address), records every call, and lets a test decide what each worker does: accept attempts, be
full, refuse the request, fail to answer, answer only when released, disappear. A worker is
announced in a real (in-process) registry, as a real one is, so the engine's worker directory and
failover see it come and go. Attempts end when the test says so (:meth:`FakeWorker.succeed`,
:meth:`FakeWorker.fail`, ...), through the same path as a worker's events: a ``WorkerEvent``
posted to the runner of the instance, whose acknowledgement the call returns.

Nothing here sleeps: a test awaits what it expects (:meth:`FakeWorkers.wait_for`) under a bound.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum

from dsched.options import TimeoutStrategy
from dsched.spec import ShellSpec
from dsched_server.coord.embedded import EmbeddedEnsemble, EmbeddedRegistry
from dsched_server.engine.messages import WorkerEvent
from dsched_server.engine.runners import Runners
from dsched_server.engine.worker_client import RequestRefused, WorkerCallError
from dsched_server.heartbeat import HeartbeatInfo, ServerStatus, encode_heartbeat
from dsched_server.protocol.ack import Ack, AckDecision
from dsched_server.protocol.dispatch import Dispatch, DispatchOutcome, DispatchReply
from dsched_server.protocol.event import TaskEvent, TaskEventType
from dsched_server.protocol.execution import TaskExecution
from dsched_server.protocol.orders import Kill, TakeOver
from dsched_worker.agent import worker_node

WAIT_S = 10.0  # a bound on every wait, never a measurement


def dispatch_spec(
    task_instance_id: int, *, script: str = "true", owner: str = "127.0.0.1:7002", instance: int = 1
) -> TaskExecution:
    """An attempt as a runner would hand it to the dispatcher (attempt 1, shell ``script``)."""
    return TaskExecution(
        task_instance_id=task_instance_id,
        attempt=1,
        workflow_instance_id=instance,
        workflow_code=4242,
        workflow_version=1,
        task_name=f"task-{task_instance_id}",
        idempotency_key=f"{instance}-task-{task_instance_id}-1",
        kind=ShellSpec(script=script),
        params={},
        timeout=timedelta(0),
        timeout_strategy=TimeoutStrategy.FAIL,
        dry_run=False,
        owner_address=owner,
        owner_epoch=9,
        submit_time=datetime.now(UTC),
    )


class Mode(StrEnum):
    """How a worker answers dispatches."""

    ACCEPT = "ACCEPT"
    FULL = "FULL"  # answers, accepting nothing (REJECTED_FULL)
    FULL_HELD = "FULL_HELD"  # as FULL, but answers only when the test calls release()
    REFUSE = "REFUSE"  # refuses the request itself (INVALID_ARGUMENT)
    UNREACHABLE = "UNREACHABLE"  # no answer: the outcome is unknown to the master
    HOLD = "HOLD"  # accepts, but answers only when the test calls release()
    LOSE_ANSWER = "LOSE_ANSWER"  # accepts, but the answer is lost: the outcome is unknown


@dataclass(frozen=True, slots=True)
class Call:
    """One call the master made."""

    method: str  # dispatch, kill, take_over, refused
    address: str
    task_instance_ids: tuple[int, ...] = ()
    detail: str = ""


@dataclass(slots=True)
class FakeAttempt:
    spec: TaskExecution
    owner_address: str
    owner_epoch: int
    ended: TaskEventType | None = None


@dataclass(eq=False)
class FakeWorker:
    """One worker incarnation at ``address``."""

    workers: FakeWorkers
    address: str
    group: str
    epoch: int
    slots: int = 8
    mode: Mode = Mode.ACCEPT
    listening: bool = True  # False: nothing listens at the address (probe says refused)
    attempts: dict[tuple[int, int], FakeAttempt] = field(default_factory=dict)
    # Kills of attempts it did not have: a dispatch overtaken by a stop never starts (as a real
    # worker remembers them).
    killed_unknown: set[tuple[int, int]] = field(default_factory=set)
    # Calls (by method: kill, take_over) to leave unanswered next, as a network blip would.
    unanswered: Counter[str] = field(default_factory=Counter)
    registry: EmbeddedRegistry | None = None
    _held: asyncio.Event = field(default_factory=asyncio.Event)
    _event_ids: itertools.count[int] = field(default_factory=itertools.count)

    # -- membership ---------------------------------------------------------------------------

    async def register(self, status: ServerStatus = ServerStatus.NORMAL) -> None:
        if self.registry is None:
            self.registry = EmbeddedRegistry(self.workers.ensemble)
            await self.registry.start()
            await self.registry.register(self.node, self._heartbeat(status))
        else:
            await self.registry.update(self.node, self._heartbeat(status))

    async def leave(self, *, listening: bool = False) -> None:
        """Leaves the registry (its session ends); ``listening`` False: its port is closed, and
        calls it holds fail (the connection is gone)."""
        self.listening = listening
        if not listening:
            self._held.set()
        if self.registry is not None:
            await self.registry.stop()
            self.registry = None

    @property
    def node(self) -> str:
        return worker_node(self.group, self.address)

    def _heartbeat(self, status: ServerStatus) -> bytes:
        now = datetime.now(UTC)
        return encode_heartbeat(
            HeartbeatInfo(
                cpu_usage=0.0,
                memory_usage=0.0,
                load_average=0.0,
                disk_usage=0.0,
                slots_total=self.slots,
                slots_in_use=0,
                start_time=now,
                report_time=now,
                status=status,
                epoch=self.epoch,
                pid=1,
            )
        )

    # -- what a test does ---------------------------------------------------------------------

    async def holding(self, count: int) -> None:
        """Waits (bounded) until this worker has accepted ``count`` attempts in all."""
        await self.workers.wait_for(lambda: len(self.attempts) == count)

    def release(self) -> None:
        """Lets the dispatches held in :attr:`Mode.HOLD` and :attr:`Mode.FULL_HELD` answer."""
        self._held.set()

    def attempt(self, task_name: str) -> FakeAttempt:
        """The (only) unfinished attempt of ``task_name`` this worker holds."""
        found = [a for a in self.attempts.values() if a.spec.task_name == task_name and not a.ended]
        assert len(found) == 1, f"{task_name}: {len(found)} unfinished attempts on {self.address}"
        return found[0]

    def ended(self, task_name: str) -> list[TaskEventType | None]:
        """How each attempt of ``task_name`` this worker had ended (None: not yet)."""
        return [a.ended for a in self.attempts.values() if a.spec.task_name == task_name]

    async def running(self, task_name: str, application_id: str = "") -> Ack:
        attempt = self.attempt(task_name)
        return await self.report(attempt, TaskEventType.RUNNING, application_id=application_id)

    async def succeed(self, task_name: str, out_params: dict[str, str] | None = None) -> Ack:
        return await self.report(self.attempt(task_name), TaskEventType.SUCCEEDED, out=out_params)

    async def fail(self, task_name: str, exit_code: int = 1) -> Ack:
        return await self.report(self.attempt(task_name), TaskEventType.FAILED, exit_code=exit_code)

    async def report(
        self,
        attempt: FakeAttempt,
        kind: TaskEventType,
        *,
        exit_code: int = 0,
        out: dict[str, str] | None = None,
        application_id: str = "",
    ) -> Ack:
        """Reports an event of ``attempt`` to its owner, as the worker's event stream does, and
        returns the master's acknowledgement."""
        spec = attempt.spec
        if kind is not TaskEventType.RUNNING:
            attempt.ended = kind
        data = TaskEvent(
            event_id=f"{self.address}-{self.epoch}-{next(self._event_ids)}",
            task_instance_id=spec.task_instance_id,
            attempt=spec.attempt,
            workflow_instance_id=spec.workflow_instance_id,
            type=kind,
            event_time=datetime.now(UTC),
            exit_code=exit_code,
            out_params=out or {},
            log_path=f"/fake/{spec.task_instance_id}.log",
            application_id=application_id,
        )
        ack = await self.workers.deliver(data, self, attempt.owner_address)
        self.workers.changed()
        return ack

    # -- the calls ----------------------------------------------------------------------------

    async def dispatch(self, specs: Sequence[TaskExecution]) -> DispatchReply:
        if self.mode is Mode.UNREACHABLE or not self.listening:
            raise WorkerCallError(self.address, "UNAVAILABLE", "fake: no answer")
        if self.mode is Mode.REFUSE or any(
            s.task_instance_id <= 0 or s.attempt <= 0 for s in specs
        ):
            raise RequestRefused(self.address, "INVALID_ARGUMENT", "fake: refused")
        if self.mode in (Mode.FULL, Mode.FULL_HELD):
            if self.mode is Mode.FULL_HELD:
                await self._held.wait()
            return DispatchReply(
                self.epoch,
                [Dispatch(outcome=DispatchOutcome.REJECTED_FULL, reason="full")] * len(specs),
            )
        results = []
        for spec in specs:
            key = (spec.task_instance_id, spec.attempt)
            if key in self.killed_unknown and key not in self.attempts:
                results.append(
                    Dispatch(
                        outcome=DispatchOutcome.REJECTED_UNAVAILABLE,
                        reason="killed before it arrived",
                    )
                )
                continue
            if key not in self.attempts:
                self.attempts[key] = FakeAttempt(spec, spec.owner_address, spec.owner_epoch)
            results.append(
                Dispatch(
                    outcome=DispatchOutcome.ACCEPTED, log_path=f"/fake/{spec.task_instance_id}.log"
                )
            )
        self.workers.changed()
        if self.mode is Mode.HOLD:
            await self._held.wait()
        if self.mode is Mode.LOSE_ANSWER or not self.listening:
            raise WorkerCallError(self.address, "DEADLINE_EXCEEDED", "fake: answer lost")
        return DispatchReply(self.epoch, results)

    def find(self, task_instance_id: int, attempt: int) -> FakeAttempt | None:
        found = self.attempts.get((task_instance_id, attempt))
        return found if found is not None and found.ended is None else None


class FakeWorkers:
    """The fake network of workers; implements ``WorkerClient`` (one instance may serve several
    masters). ``owners`` routes what the workers report: a master's cluster address -> its
    runners; an attempt reports to the owner it was dispatched by or taken over for."""

    def __init__(self, ensemble: EmbeddedEnsemble) -> None:
        self.ensemble = ensemble
        self.owners: dict[str, Runners] = {}
        self.by_address: dict[str, FakeWorker] = {}
        self.calls: list[Call] = []
        self.forgotten: list[str] = []
        self.closed = False
        self._epochs = itertools.count(1)
        self._ports = itertools.count(40001)
        self._changed = asyncio.Event()
        self._tasks: set[asyncio.Task[Ack]] = set()

    async def add(
        self, group: str = "default", *, slots: int = 8, address: str = "", mode: Mode = Mode.ACCEPT
    ) -> FakeWorker:
        """Starts a worker incarnation (a new epoch; at ``address`` if given) and registers it."""
        worker = FakeWorker(
            self,
            address or f"127.0.0.1:{next(self._ports)}",
            group,
            next(self._epochs),
            slots=slots,
            mode=mode,
        )
        self.by_address[worker.address] = worker
        await worker.register()
        return worker

    # -- observation --------------------------------------------------------------------------

    def changed(self) -> None:
        """Wakes every waiter (after a call or an event), then arms a fresh signal."""
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait_for(self, predicate: Callable[[], bool]) -> None:
        """Returns once ``predicate()`` holds, checked after every change (bounded)."""
        async with asyncio.timeout(WAIT_S):
            while not predicate():
                await self._changed.wait()

    def dispatched(self, method: str = "dispatch") -> list[int]:
        """Task instance ids in the order the master sent them (every call, retries included)."""
        return [ti for c in self.calls if c.method == method for ti in c.task_instance_ids]

    # -- routing of events --------------------------------------------------------------------

    async def deliver(self, data: TaskEvent, worker: FakeWorker, owner: str) -> Ack:
        runners = self.owners.get(owner)
        runner = None if runners is None else runners.get(data.workflow_instance_id)
        if runner is None or runner.done:
            return Ack(AckDecision.NOT_OWNER, "no runner drives the instance")
        reply: asyncio.Future[Ack] = asyncio.get_running_loop().create_future()
        runner.post(WorkerEvent(data, worker.address, worker.epoch, reply))
        async with asyncio.timeout(WAIT_S):
            return await reply

    # -- WorkerClient ---------------------------------------------------------------------------

    def _worker(self, address: str) -> FakeWorker | None:
        return self.by_address.get(address)

    def _held(self, call: Call, attempt: int) -> tuple[FakeWorker, FakeAttempt | None]:
        """Records ``call`` (about one attempt); the worker that answers it and the attempt if
        that worker holds it unfinished. Nobody listening: the outcome is unknown."""
        self.calls.append(call)
        self.changed()
        worker = self._worker(call.address)
        if worker is None or not worker.listening:
            raise WorkerCallError(call.address, "UNAVAILABLE", "fake: nobody at this address")
        if worker.unanswered[call.method] > 0:
            worker.unanswered[call.method] -= 1
            raise WorkerCallError(call.address, "DEADLINE_EXCEEDED", "fake: no answer")
        return worker, worker.find(call.task_instance_ids[0], attempt)

    async def dispatch(
        self, address: str, specs: Sequence[TaskExecution], *, timeout: float
    ) -> DispatchReply:
        self.calls.append(Call("dispatch", address, tuple(s.task_instance_id for s in specs)))
        self.changed()
        worker = self._worker(address)
        if worker is None:
            raise WorkerCallError(address, "UNAVAILABLE", "fake: nobody at this address")
        return await worker.dispatch(specs)

    async def kill(self, address: str, order: Kill, *, timeout: float) -> bool:
        key = order.key
        call = Call("kill", address, (key.task_instance_id,), order.reason)
        worker, found = self._held(call, key.attempt)
        if found is None:
            if (key.task_instance_id, key.attempt) not in worker.attempts:
                worker.killed_unknown.add((key.task_instance_id, key.attempt))
            return False
        # A real worker answers first and reports KILLED once the process group is gone.
        task = asyncio.get_running_loop().create_task(worker.report(found, TaskEventType.KILLED))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return True

    async def take_over(self, address: str, order: TakeOver, *, timeout: float) -> bool:
        call = Call("take_over", address, (order.key.task_instance_id,), order.owner_address)
        _, found = self._held(call, order.key.attempt)
        if found is None:
            return False
        found.owner_address, found.owner_epoch = order.owner_address, order.owner_epoch
        return True

    async def refused(self, address: str, *, timeout: float) -> bool:
        self.calls.append(Call("refused", address))
        worker = self._worker(address)
        return worker is None or not worker.listening

    def forget(self, address: str) -> None:
        self.forgotten.append(address)

    async def close(self) -> None:
        self.closed = True
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for worker in self.by_address.values():
            await worker.leave(listening=worker.listening)
