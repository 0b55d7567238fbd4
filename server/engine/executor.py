"""Runs a committed batch's effects (ARCHITECTURE.md §3 step 3): the one object that does.

A runner calls :meth:`EffectExecutor.run` once per batch, right after the commit and never
before: a worker must never see an acknowledgement, a dispatch or a kill for a change that could
still roll back. Worker calls and reads run as background tasks of the services, whose results
come back to the runner as messages.
"""

from __future__ import annotations

from dsched.server.engine.effects import Effects, Mailbox
from dsched.server.engine.services import EngineServices


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
            s.spawn(s.kill_task(runner, ti_id, attempt, target))
        for ti_id, attempt, host, epoch in effects.adopts:
            s.spawn(s.take_over(runner, ti_id, attempt, host, epoch))
        for delay, message in effects.timers:
            runner.schedule(delay, message)
        for future in effects.replies:
            s.spawn(s.reply_with_instance(runner.id, future))
        _answer(effects)


def _answer(effects: Effects) -> None:
    """Completes the futures of controls and nudges: done, or failed with their refusal."""
    for answer, error in effects.answers:
        if answer.done():
            continue
        if error is None:
            answer.set_result(None)
        else:
            answer.set_exception(error)
