"""Drives one workflow instance on its owning master.

The runner owns the instance's :class:`~dsched_server.engine.run_state.RunState` and consumes its
messages (worker events, dispatch results, timers, user pause/stop) strictly in order, in three
steps per batch of whatever is queued:

1. *decide* (``engine/decision.py``, pure): the state and the messages in, a plan out: the
   writes and the effects;
2. *commit* the writes in one store call (``store/batch.py``), one transaction that starts
   with the ownership fence, which the batches of other runners ready at the same time may
   share (``store/group_commit.py``);
3. *run the effects* (dispatching, killing, acknowledging worker events, answering controls) with
   the :class:`~dsched_server.engine.executor.EffectExecutor`, only after the commit.

If the fence fails the instance belongs to another epoch: the runner drops it, having written
nothing. If the batch fails otherwise (the database went away, a write was refused), the runner
stops and asks for a reload (:mod:`dsched_server.engine.reloads`), handing over where it had sent
attempts, so that the rebuilt runner cannot send one to a second worker.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Sequence

from dsched.errors import DschedError, IllegalTransition, OwnershipLost, Unavailable
from dsched_server.core.controls import ControlRecord
from dsched_server.engine import decision
from dsched_server.engine.actions import Plan
from dsched_server.engine.executor import EffectExecutor
from dsched_server.engine.messages import (
    ApplyControls,
    Control,
    Message,
    WorkerEvent,
)
from dsched_server.engine.run_state import RunState
from dsched_server.engine.services import EngineServices
from dsched_server.protocol.ack import Ack, AckDecision
from dsched_server.store import controls as control_repo

log = logging.getLogger(__name__)

_CONTROLS = (Control, ApplyControls)


class InstanceRunner:
    """See the module docstring. Created by the command consumer after a successful claim;
    ``pending``: the controls pending when the instance was read (applied before its first
    actions)."""

    def __init__(
        self,
        services: EngineServices,
        executor: EffectExecutor,
        state: RunState,
        on_exit: Callable[[InstanceRunner], None],
        pending: Sequence[ControlRecord] = (),
    ) -> None:
        self.s = services
        self.executor = executor
        self.state = state
        # The instance as claimed (its state moves in ``state``): the runner's for its whole life.
        self.id = state.id
        self.instance = state.instance
        self._pending = list(pending)
        self._queue: asyncio.Queue[Message] = asyncio.Queue()
        self._backlog: deque[Message] = deque()  # taken off the queue, for the next batch
        self._timers: list[asyncio.TimerHandle] = []
        self._on_exit = on_exit
        self.done = False
        self.task: asyncio.Task[None] | None = None

    def post(self, message: Message) -> None:
        self._queue.put_nowait(message)

    def schedule(self, delay: float, message: Message) -> None:
        """Posts ``message`` to this runner after ``delay`` seconds (timers die with the runner)."""
        loop = asyncio.get_running_loop()
        self._timers.append(loop.call_later(max(delay, 0.0), self.post, message))

    def start(self) -> None:
        self.task = asyncio.create_task(self._run(), name=f"instance-{self.id}")

    async def stop(self) -> None:
        """Stops driving the instance (shutdown); its state stays in the store for a successor."""
        for handle in self._timers:
            handle.cancel()
        self._cancel_jobs(unsent_only=True)  # not sent yet: the successor dispatches them itself
        if self.task is not None and not self.task.done():
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)

    # ------------------------------------------------------------------------- loop

    async def _run(self) -> None:
        try:
            await self._step([], first=True)
            while not self.done:
                await self._step(await self._next_batch())
        except asyncio.CancelledError:
            raise
        finally:
            for handle in self._timers:
                handle.cancel()
            # Nothing may (re)send this runner's jobs now: whoever drives the instance next
            # dispatches its attempts itself.
            self._cancel_jobs(unsent_only=False)
            self._fail_pending(Ack(AckDecision.RETRY_LATER, "instance runner stopped"))
            self.s.dependency_waits.forget(self)
            self._on_exit(self)

    async def _next_batch(self) -> list[Message]:
        """Whatever is queued, up to and including one control message (whose controls are read
        before the decision)."""
        batch = [self._backlog.popleft() if self._backlog else await self._queue.get()]
        # Let whatever else is ready (more events off the stream) land first: one transaction
        # then carries more messages. It costs one loop turn, not a timer.
        await asyncio.sleep(0)
        while not self._queue.empty():
            self._backlog.append(self._queue.get_nowait())
        controls = isinstance(batch[0], _CONTROLS)
        while self._backlog and not (controls and isinstance(self._backlog[0], _CONTROLS)):
            controls = controls or isinstance(self._backlog[0], _CONTROLS)
            batch.append(self._backlog.popleft())
        return batch

    async def _step(self, messages: list[Message], *, first: bool = False) -> None:
        try:
            read, request = await self._read_controls(messages)
            now = self.s.clock.now()
            if first:
                plan = decision.begin(self.state, now, self._pending)
                self._pending = []
            else:
                plan = decision.decide(self.state, now, messages, read)
            if request is not None:
                plan.writes.controls_seen = tuple(r.id for r in read)
                plan.writes.control_request = request
            ids = await self.s.commits.commit(plan.writes)
        except OwnershipLost:
            # The conditional write changed nothing: another epoch owns the instance now.
            log.warning(
                "stale_write table=workflow_instances instance=%s expected_epoch=%s: ownership "
                "lost; dropping the instance",
                self.id,
                self.instance.epoch,
            )
            self.s.metrics.ownership_lost += 1
            self.s.metrics.stale_writes += 1
            self._answer(
                messages,
                Ack(AckDecision.NOT_OWNER, "ownership moved"),
                OwnershipLost("the instance moved to another master"),
            )
            self.done = True
            return
        except Exception as exc:  # a failed batch left the store as it was; resync from it
            if isinstance(exc, Unavailable):  # an outage, logged once by the store
                log.info("instance %s: database unavailable; reloading when it is back", self.id)
            elif isinstance(exc, IllegalTransition):  # logged and counted by the store's guard
                self.s.metrics.illegal_transitions += 1
            else:
                log.exception("instance %s: batch failed; reloading from the store", self.id)
            error = exc if isinstance(exc, DschedError) else Unavailable("the batch failed")
            self._answer(
                messages, Ack(AckDecision.RETRY_LATER, "master could not apply the event"), error
            )
            self.done = True
            self.s.reload(self.id, self.state.sent())
            return
        self.state.bind(ids, plan.writes.path)
        plan.effects.bind({-(i + 1): ti for i, ti in enumerate(ids)})
        self.executor.run(self, plan.effects)
        if self.state.execution.finished is not None:
            self.done = True
            if self.instance.backfill_id is not None:
                self.s.on_backfill_run_ended(self.instance.backfill_id)
            if self.instance.schedule_id is not None:
                self.s.on_schedule_run_ended(self.instance.schedule_id)
        self.s.notifier.notify(self.id)
        target = (self.instance.project, self.instance.workflow)
        if self.s.dependency_waits.watched(target) and (plan.writes.path or _ends_a_task(plan)):
            self.s.dependency_waits.wake(target)

    async def _read_controls(
        self, messages: list[Message]
    ) -> tuple[list[ControlRecord], str | None]:
        """The controls the batch's control message needs (see control_apply), and the request
        id whose recording the commit must check (None: nothing to check)."""
        msg = next((m for m in messages if isinstance(m, _CONTROLS)), None)
        if msg is None:
            return [], None
        request = msg.request_id if isinstance(msg, Control) else ""
        async with self.s.db.read() as conn:
            rows = await control_repo.pending(conn, self.id, or_request=request)
        # Only a control of this master's own client must come after every one recorded before
        # it; one recorded after this read gets its own nudge.
        return rows, request if isinstance(msg, Control) else None

    @staticmethod
    def _answer(messages: list[Message], ack: Ack, error: DschedError) -> None:
        """Answers what a batch could not apply: worker events with ``ack``, controls with
        ``error``."""
        for msg in messages:
            if isinstance(msg, WorkerEvent) and not msg.reply.done():
                msg.reply.set_result(ack)
            elif isinstance(msg, _CONTROLS) and msg.reply and not msg.reply.done():
                msg.reply.set_exception(error)

    def _fail_pending(self, ack: Ack) -> None:
        error = Unavailable("the instance runner stopped; retry")
        self._answer(list(self._backlog), ack, error)
        self._backlog.clear()
        while not self._queue.empty():
            self._answer([self._queue.get_nowait()], ack, error)

    def _cancel_jobs(self, *, unsent_only: bool) -> None:
        for track in self.state.tracks.values():
            if track.job is not None and not (unsent_only and track.job.sent):
                track.job.cancelled = True


def _ends_a_task(plan: Plan) -> bool:
    return any(w.state.terminal for w in plan.writes.task_writes.values())
