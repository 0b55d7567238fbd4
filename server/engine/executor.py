"""Runs a committed batch's effects (ARCHITECTURE.md §3 step 3): the one object that does.

A runner calls :meth:`EffectExecutor.run` once per batch, right after the commit and never
before: a worker must never see an acknowledgement, a dispatch or a kill for a change that could
still roll back. Calls to workers (through the
:class:`~dsched.server.engine.worker_client.WorkerClient`) and the read that answers a control run
as background tasks; what they learn comes back to the runner as messages.
"""

from __future__ import annotations

import asyncio
import logging

from dsched.server.constants import KILL_GRACE_S
from dsched.server.core.records import InstanceRecord
from dsched.server.engine.effects import Effects, Mailbox
from dsched.server.engine.messages import KillUnanswered, TakeOverResult
from dsched.server.engine.services import EngineServices
from dsched.server.engine.worker_client import WorkerCallError
from dsched.server.engine.workers import WorkerRef
from dsched.server.protocol.attempt import AttemptKey
from dsched.server.protocol.orders import Kill, TakeOver
from dsched.server.rpc.probe import PROBE_TIMEOUT_S
from dsched.server.store import instances as instance_repo

log = logging.getLogger(__name__)

WORKER_CALL_TIMEOUT_S = 10.0


class EffectExecutor:
    """Carries out :class:`~dsched.server.engine.effects.Effects` for the runners of a master."""

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
            if not job.cancelled:
                s.dispatcher.submit(job)
        for ti_id, attempt, target in effects.kills:
            s.spawn(self._kill(runner, ti_id, attempt, target))
        for ti_id, attempt, host, epoch in effects.adopts:
            s.spawn(self._take_over(runner, ti_id, attempt, host, epoch))
        for delay, message in effects.timers:
            runner.schedule(delay, message)
        for future in effects.replies:
            s.spawn(self._reply_with_instance(runner.id, future))
        _answer(effects)

    async def _kill(self, runner: Mailbox, ti_id: int, attempt: int, target: str) -> None:
        """Asks the worker to kill an attempt; if it has none, ends it KILLED after a grace."""
        found = False
        if target:
            try:
                order = Kill(AttemptKey(ti_id, attempt), "stopped by the master")
                found = await self.s.worker_client.kill(
                    target, order, timeout=WORKER_CALL_TIMEOUT_S
                )
            except WorkerCallError as err:
                log.warning("kill of task instance %s on %s failed: %s", ti_id, target, err.code)
                if self.s.workers.get(target) is not None:
                    return  # alive but unreachable now: its result (or a failover) settles it
        if not found:
            runner.schedule(KILL_GRACE_S, KillUnanswered(ti_id))

    async def _take_over(
        self, runner: Mailbox, ti_id: int, attempt: int, host: str, worker_epoch: int
    ) -> None:
        """Tells the worker holding an adopted attempt that this master owns it now. The attempt is
        lost at once if another incarnation serves its worker's address or nothing listens there
        any more; a worker that is only missing from the registry gets the failover delay to come
        back (or to fence itself, if it is only cut off) before its attempt is declared lost."""
        found = False
        live = await self._incarnation(host, worker_epoch) if host else None
        if live is not None:
            try:
                order = TakeOver(
                    AttemptKey(ti_id, attempt), self.s.cluster_address, runner.instance.epoch
                )
                found = await self.s.worker_client.take_over(
                    host, order, timeout=WORKER_CALL_TIMEOUT_S
                )
            except WorkerCallError as err:
                log.warning("take-over of task instance %s on %s failed: %s", ti_id, host, err.code)
        runner.post(TakeOverResult(ti_id, found))

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


def _answer(effects: Effects) -> None:
    """Completes the futures of controls and nudges: done, or failed with their refusal."""
    for answer, error in effects.answers:
        if answer.done():
            continue
        if error is None:
            answer.set_result(None)
        else:
            answer.set_exception(error)
