"""Side effects of a runner batch, collected during the transaction and run after it committed.

Nothing here may run before the commit: a worker must never see an acknowledgement, a dispatch or a
kill for a change that could still roll back.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dsched.server.core.records import InstanceRecord
from dsched.server.engine.jobs import DispatchJob
from dsched.server.engine.messages import Message, WorkerEvent
from dsched.server.protocol.ack import Ack

if TYPE_CHECKING:
    from dsched.server.engine.runner import InstanceRunner


@dataclass(slots=True)
class Effects:
    acks: list[tuple[WorkerEvent, Ack]] = field(default_factory=list)
    dispatches: list[DispatchJob] = field(default_factory=list)
    kills: list[tuple[int, int, str]] = field(default_factory=list)
    adopts: list[tuple[int, int, str, int]] = field(default_factory=list)
    timers: list[tuple[float, Message]] = field(default_factory=list)
    replies: list[asyncio.Future[InstanceRecord]] = field(default_factory=list)
    # Futures to complete after the commit: with None (done) or with the exception (a refusal).
    answers: list[tuple[asyncio.Future[Any], BaseException | None]] = field(default_factory=list)

    def ack(self, event: WorkerEvent, ack: Ack) -> None:
        self.acks.append((event, ack))

    def dispatch(self, job: DispatchJob) -> None:
        self.dispatches.append(job)

    def kill(self, ti_id: int, attempt: int, target: str) -> None:
        self.kills.append((ti_id, attempt, target))

    def adopt(self, ti_id: int, attempt: int, host: str, worker_epoch: int) -> None:
        self.adopts.append((ti_id, attempt, host, worker_epoch))

    def timer(self, delay: float, message: Message) -> None:
        self.timers.append((delay, message))

    def reply_instance(self, future: asyncio.Future[InstanceRecord]) -> None:
        self.replies.append(future)

    def done(self, future: asyncio.Future[None]) -> None:
        self.answers.append((future, None))

    def refuse(self, future: asyncio.Future[Any], error: BaseException) -> None:
        self.answers.append((future, error))

    def run(self, runner: InstanceRunner) -> None:
        """Carries the effects out (called once, right after the batch committed)."""
        for event, ack in self.acks:
            if not event.reply.done():
                event.reply.set_result(ack)
        for job in self.dispatches:
            if not job.cancelled:
                runner.s.dispatcher.submit(job)
        for ti_id, attempt, target in self.kills:
            runner.s.spawn(runner.s.kill_task(runner, ti_id, attempt, target))
        for ti_id, attempt, host, epoch in self.adopts:
            runner.s.spawn(runner.s.take_over(runner, ti_id, attempt, host, epoch))
        for delay, message in self.timers:
            runner.schedule(delay, message)
        for future in self.replies:
            runner.s.spawn(runner.s.reply_with_instance(runner.id, future))
        for answer, error in self.answers:
            if answer.done():
                continue
            if error is None:
                answer.set_result(None)
            else:
                answer.set_exception(error)
