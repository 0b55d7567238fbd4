"""Runs a committed batch's effects (ARCHITECTURE.md §3 step 3): the one object that does.

A runner calls :meth:`EffectExecutor.run` once per batch, right after the commit and never
before: a worker must never see an acknowledgement, a dispatch or a kill for a change that could
still roll back. Calls to workers (through the
:class:`~dsched_server.engine.worker_client.WorkerClient`) and the read that answers a control run
as background tasks; what they learn comes back to the runner as messages.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable

from dsched.backoff import Backoff
from dsched_server.constants import KILL_GRACE_S
from dsched_server.core.dependent import judge
from dsched_server.core.records import InstanceRecord
from dsched_server.engine import datasources, dependency_check
from dsched_server.engine.effects import DependencyQuery, Effects, Mailbox
from dsched_server.engine.jobs import DispatchJob
from dsched_server.engine.messages import AttemptCheck, Check, DependencyChecked
from dsched_server.engine.services import EngineServices
from dsched_server.engine.worker_client import WorkerCallError
from dsched_server.engine.workers import WorkerRef
from dsched_server.protocol.attempt import AttemptKey
from dsched_server.protocol.execution import datasource_of
from dsched_server.protocol.orders import Kill, TakeOver
from dsched_server.rpc.probe import PROBE_TIMEOUT_S
from dsched_server.store import instances as instance_repo

log = logging.getLogger(__name__)

WORKER_CALL_TIMEOUT_S = 10.0
_RETRY = Backoff(initial=0.05, maximum=2.0)  # calls left unanswered by a live worker


class EffectExecutor:
    """Carries out :class:`~dsched_server.engine.effects.Effects` for the runners of a master."""

    def __init__(self, services: EngineServices) -> None:
        self.s = services

    def run(self, runner: Mailbox, effects: Effects) -> None:
        s = self.s
        for name, count in effects.counters.items():
            setattr(s.metrics, name, getattr(s.metrics, name) + count)
        for event, ack in effects.acks:
            if not event.reply.done():
                event.reply.set_result(ack)
        for job in effects.dispatches:
            if job.cancelled:
                continue
            if datasource_of(job.spec.kind):
                s.spawn(self._resolve_and_submit(job))
            else:
                s.dispatcher.submit(job)
        for ti_id, attempt, target in effects.kills:
            s.spawn(self._kill(runner, ti_id, attempt, target))
        for ti_id, attempt, host, epoch in effects.adopts:
            s.spawn(self._take_over(runner, ti_id, attempt, host, epoch))
        for delay, message in effects.timers:
            runner.schedule(delay, message)
        for future in effects.replies:
            s.spawn(self._reply_with_instance(runner.id, future))
        for query in effects.dependency_checks:
            s.spawn(self._check_dependency(runner, query))
        _answer(effects)

    async def _resolve_and_submit(self, job: DispatchJob) -> None:
        """A SQL or PROCEDURE attempt goes to the dispatcher with its datasource resolved."""
        if await datasources.resolve(self.s.db, self.s.datasource_key, job):
            self.s.dispatcher.submit(job)

    async def _check_dependency(self, runner: Mailbox, query: DependencyQuery) -> None:
        """Reads what a DEPENDENT attempt waits for and tells its runner. It is registered for
        wake-ups first, so a run that ends while the store is read wakes it again rather than
        going unseen; a failed read is tried again after the check interval."""
        spec = query.spec
        targets = {(i.project, i.workflow) for g in spec.groups for i in g.items}
        self.s.dependency_waits.watch(targets, runner, query.task_instance_id)
        try:
            async with self.s.db.read() as conn:
                found = await dependency_check.read(conn, query)
        except Exception as exc:  # the database went away: look again later
            log.info("task instance %s: dependencies not read: %s", query.task_instance_id, exc)
            runner.schedule(
                query.check_interval, AttemptCheck(Check.DEPENDENCY, query.task_instance_id)
            )
            return
        verdict = judge(spec, found, query.schedule_time, query.zone)
        runner.post(DependencyChecked(query.task_instance_id, verdict.result, verdict.detail))

    async def _kill(self, runner: Mailbox, ti_id: int, attempt: int, target: str) -> None:
        """Asks the worker to kill an attempt; if it has none, ends it KILLED after a grace. A kill
        left unanswered is sent again while that worker incarnation lives; once it is gone, its
        failover settles the attempt."""
        found: bool | None = False
        if target:
            known = self.s.workers.get(target)
            epoch = known.epoch if known is not None else None

            async def alive() -> bool:
                live = self.s.workers.get(target)
                return live is not None and live.epoch == epoch

            order = Kill(AttemptKey(ti_id, attempt), "stopped by the master")
            kill = functools.partial(
                self.s.worker_client.kill, target, order, timeout=WORKER_CALL_TIMEOUT_S
            )
            found = await _until_answered(runner, "kill", ti_id, target, alive, kill)
        if not found:
            runner.schedule(KILL_GRACE_S, AttemptCheck(Check.KILL_UNANSWERED, ti_id))

    async def _take_over(
        self, runner: Mailbox, ti_id: int, attempt: int, host: str, worker_epoch: int
    ) -> None:
        """Tells the worker holding an adopted attempt that this master owns it now. The attempt is
        lost at once if another incarnation serves its worker's address or nothing listens there
        any more; a worker that is only missing from the registry gets the failover delay to come
        back (or to fence itself, if it is only cut off) before its attempt is declared lost. A
        call left unanswered is made again while the incarnation lives: it may still run the
        attempt, and calling it lost would run it twice."""

        async def alive() -> bool:
            return await self._incarnation(host, worker_epoch) is not None

        found: bool | None = False
        if host and await alive():
            order = TakeOver(
                AttemptKey(ti_id, attempt), self.s.cluster_address, runner.instance.epoch
            )
            take_over = functools.partial(
                self.s.worker_client.take_over, host, order, timeout=WORKER_CALL_TIMEOUT_S
            )
            found = await _until_answered(runner, "take-over", ti_id, host, alive, take_over)
        if not found:
            runner.post(AttemptCheck(Check.NOT_ON_WORKER, ti_id))

    async def _incarnation(self, host: str, epoch: int) -> WorkerRef | None:
        """The worker incarnation ``(host, epoch)`` if it is registered (after the failover delay
        if it is missing but not known dead), else None."""
        live = self.s.workers.get(host)
        if live is None:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + self.s.failover_delay
            probe_timeout = min(self.s.failover_delay, PROBE_TIMEOUT_S)
            if await self.s.worker_client.refused(host, timeout=probe_timeout):
                return None
            await asyncio.sleep(max(0.0, deadline - loop.time()))
            live = self.s.workers.get(host)
        return live if live is not None and live.epoch == epoch else None

    async def _reply_with_instance(
        self, instance_id: int, future: asyncio.Future[InstanceRecord]
    ) -> None:
        try:
            async with self.s.db.read() as conn:
                record = await instance_repo.get_instance(conn, instance_id)
        except Exception as exc:  # the database went away after the commit: the caller retries
            if not future.done():
                future.set_exception(exc)
            return
        if not future.done():
            future.set_result(record)


async def _until_answered(
    runner: Mailbox,
    what: str,
    ti_id: int,
    host: str,
    alive: Callable[[], Awaitable[bool]],
    call: Callable[[], Awaitable[bool]],
) -> bool | None:
    """``call()``'s answer about an attempt on the worker at ``host``. A call left unanswered (its
    outcome unknown, as for a dispatch) is made again while ``alive()`` says that the worker
    incarnation it went to lives and ``runner`` still drives the instance; None once not."""
    for tries, delay in enumerate(_RETRY.delays()):
        try:
            return await call()
        except WorkerCallError as err:
            level = logging.WARNING if tries == 0 else logging.DEBUG
            log.log(level, "%s of task instance %s on %s: %s", what, ti_id, host, err.code)
        if runner.done or not await alive():
            return None
        await asyncio.sleep(delay)
    return None  # not reached: the back-off has no limit


def _answer(effects: Effects) -> None:
    """Completes the futures of controls and nudges: done, or failed with their refusal."""
    for answer, error in effects.answers:
        if answer.done():
            continue
        if error is None:
            answer.set_result(None)
        else:
            answer.set_exception(error)
