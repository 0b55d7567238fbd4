"""The side effects of a runner batch, as a value (ARCHITECTURE.md §3 step 3).

A decision (``dsched_server/engine/decision.py``) describes its effects here; the
:class:`~dsched_server.engine.executor.EffectExecutor` carries them out after the batch committed.
Nothing here may run before the commit: a worker must never see an acknowledgement, a dispatch or a
kill for a change that could still roll back.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Protocol
from zoneinfo import ZoneInfo

from dsched.dependency import DependentSpec
from dsched_server.core.records import InstanceRecord
from dsched_server.engine.jobs import DispatchJob
from dsched_server.engine.messages import AttemptCheck, Message, WorkerEvent
from dsched_server.protocol.ack import Ack


class Mailbox(Protocol):
    """What effects need of the runner they belong to: its instance and its message queue."""

    @property
    def id(self) -> int: ...

    @property
    def instance(self) -> InstanceRecord: ...

    @property
    def done(self) -> bool:
        """Whether the runner stopped driving its instance (then nothing waits for answers)."""
        ...

    def post(self, message: Message) -> None: ...

    def schedule(self, delay: float, message: Message) -> None: ...


@dataclass(frozen=True, slots=True)
class DependencyQuery:
    """What reading one DEPENDENT attempt's dependencies needs."""

    task_instance_id: int
    spec: DependentSpec
    schedule_time: datetime
    zone: ZoneInfo
    check_interval: float  # seconds until the next look if the read fails


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
    counters: Counter[str] = field(default_factory=Counter)  # engine metrics to add
    # DEPENDENT attempts whose dependencies to read (engine/dependent_apply.py)
    dependency_checks: list[DependencyQuery] = field(default_factory=list)

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

    def check_dependency(self, query: DependencyQuery) -> None:
        self.dependency_checks.append(query)

    def count(self, metric: str, by: int = 1) -> None:
        self.counters[metric] += by

    def bind(self, ids: Mapping[int, int]) -> None:
        """Replaces the provisional ids of attempts created by the batch (``dsched_server/store/
        batch.py``) with the ids the commit gave them."""
        if not ids:
            return
        for job in self.dispatches:
            real = ids.get(job.spec.task_instance_id)
            if real is not None:
                job.spec = replace(job.spec, task_instance_id=real)
                job.order = (job.order[0], job.order[1], real)
        self.timers = [(delay, _bound(message, ids)) for delay, message in self.timers]


def _bound(message: Message, ids: Mapping[int, int]) -> Message:
    if isinstance(message, AttemptCheck) and message.task_instance_id in ids:
        return replace(message, task_instance_id=ids[message.task_instance_id])
    return message
