"""The life cycle of task attempts: admission, slots, running, kill, timeout, fencing.

``submit`` is idempotent on (task_instance_id, attempt): an attempt known to this incarnation
(queued, running, or finished lately: :mod:`dsched_worker.finished`) is answered
ALREADY_ACCEPTED with its log path and never started twice. At most ``slots`` attempts run at once;
the rest wait in a FIFO and start when a running one ends (no polling). REJECTED_FULL only when that
FIFO is full.

Every started attempt reports RUNNING (pid, log path), then exactly one of SUCCEEDED (exit code 0,
OUT parameters), FAILED (non-zero exit, timeout "timed out after <N>s", or could not start) or
KILLED (KillTask; exit code 128+signal). A queued attempt that is killed reports only KILLED. A dry
run reports RUNNING then SUCCEEDED without starting anything.

Attempts ended by :meth:`Runner.fence` (registry session LOST) or by shutdown report nothing:
another worker may already own them, and the master's worker failover decides their fate.
"""

from __future__ import annotations

import asyncio
import bisect
import collections
import logging
from collections.abc import Callable, Coroutine
from typing import Protocol

from dsched.errors import FailedPrecondition
from dsched_server.protocol.attempt import AttemptKey
from dsched_server.protocol.dispatch import Dispatch, DispatchOutcome
from dsched_server.protocol.event import AttemptReport, TaskEvent, TaskEventType
from dsched_server.protocol.execution import TaskExecution
from dsched_worker.attempt import NO_PROCESS_EXIT_CODE, Attempt, Phase, StopCause
from dsched_worker.clock import Clock
from dsched_worker.finished import FinishedAttempts
from dsched_worker.logs import LogStore
from dsched_worker.tasks import RunningTask, SpawnError, TaskTypes
from dsched_worker.workdirs import WorkDirs

log = logging.getLogger(__name__)


class EventSink(Protocol):
    """Where attempts report their events (the :class:`~dsched_worker.reporter.Reporter`)."""

    async def report(
        self, execution: TaskExecution, outcome: AttemptReport, *, happened: float | None = None
    ) -> TaskEvent: ...

    def retarget(self, key: AttemptKey, owner_address: str) -> bool: ...

    def release(self, key: AttemptKey) -> None: ...


class Runner:
    """Runs attempts; see the module docstring. ``on_load_change`` is called whenever the number of
    busy slots crosses between full and not full."""

    def __init__(
        self,
        *,
        logs: LogStore,
        events: EventSink,
        task_types: TaskTypes,
        clock: Clock,
        slots: int,
        max_queued: int,
        kill_grace: float,
        identity: Callable[[], str],
        stamp: Callable[[TaskExecution], TaskExecution] = lambda e: e,
        remember_finished: int = 100_000,
        workdirs: WorkDirs | None = None,
    ) -> None:
        self._logs = logs
        self._events = events
        self._types = task_types
        self._clock = clock
        self.slots = slots
        self._max_queued = max_queued
        self._kill_grace = kill_grace
        self._identity = identity
        self._stamp = stamp
        self._remember = remember_finished
        self._workdirs = workdirs
        self._attempts: dict[AttemptKey, Attempt] = {}
        self._finished = FinishedAttempts(limit=remember_finished)
        self._killed_unknown: collections.OrderedDict[AttemptKey, str] = collections.OrderedDict()
        # Waiting for a slot, by queue rank, in arrival order within a rank (a backfill's runs
        # behind the others: the master's order, kept here when every slot is busy).
        self._queue: list[Attempt] = []
        self._running = 0
        self._tasks: set[asyncio.Task[None]] = set()
        self._stopping = False
        self.on_load_change: Callable[[], None] = lambda: None

    @property
    def slots_in_use(self) -> int:
        return self._running

    @property
    def queued(self) -> int:
        return len(self._queue)

    def live_task_instances(self) -> set[int]:
        """The task instance ids of the attempts queued, running or ending here."""
        return {key.task_instance_id for key in self._attempts}

    @property
    def full(self) -> bool:
        return self._running >= self.slots

    def submit(self, execution: TaskExecution, *, unavailable: str | None = None) -> Dispatch:
        """Accepts an attempt (see the module docstring for idempotency and admission). With
        ``unavailable`` set, a new attempt is rejected for that reason; a known one is still
        answered ALREADY_ACCEPTED."""
        key = execution.key
        seen = self._seen(execution)
        if seen is not None:
            return seen
        if self._logs.live(execution.task_instance_id) is not None:
            # A task instance *is* one attempt; two attempt numbers for it would share one log.
            raise FailedPrecondition(
                f"task instance {execution.task_instance_id} is here with another attempt number",
                reason="ATTEMPT_CONFLICT",
                metadata={"task_instance_id": str(execution.task_instance_id)},
            )
        if self._stopping or unavailable is not None:
            reason = unavailable or "worker is stopping"
            return Dispatch(outcome=DispatchOutcome.REJECTED_UNAVAILABLE, reason=reason)
        if self.full and len(self._queue) >= self._max_queued:
            return Dispatch(
                outcome=DispatchOutcome.REJECTED_FULL,
                reason=f"{len(self._queue)} attempts are already waiting for a slot",
            )
        header = [
            f"task {execution.task_name!r} instance {execution.task_instance_id} attempt "
            f"{execution.attempt} (workflow instance {execution.workflow_instance_id})",
            f"accepted by worker {self._identity()} at {self._clock().isoformat()}",
        ]
        queued = self.full
        if queued:  # said in the header's write, not by opening the file again for a note
            header.append(f"waiting for a free slot ({self.slots} in use)")
        if self._logs.failure is None:
            # The file is made when the attempt starts (right before its spawn), not now.
            task_log = self._logs.defer(execution, header)
        else:
            # The last log file could not be made (a full or read-only disk): until one can, each
            # is made here, and an attempt whose log cannot be is refused (its master sends it to
            # another worker) instead of failing where it would have started.
            try:
                task_log = self._logs.create(execution, header)
            except OSError as exc:
                log.error("cannot create the log of %s: %s", key, exc)
                return Dispatch(
                    outcome=DispatchOutcome.REJECTED_UNAVAILABLE,
                    reason=f"cannot create log: {exc}",
                )
        attempt = Attempt(self._stamp(execution), task_log)
        self._attempts[key] = attempt
        if queued:
            bisect.insort(self._queue, attempt, key=_rank)
        else:
            self._start(attempt)
            if self.full:  # this one took the last free slot
                self.on_load_change()
        return Dispatch(outcome=DispatchOutcome.ACCEPTED, log_path=str(task_log.path))

    def _seen(self, execution: TaskExecution) -> Dispatch | None:
        """The answer to a dispatch of an attempt this incarnation knows (queued, running,
        finished lately, or killed before it arrived), or None for a new one."""
        key = execution.key
        known = self._attempts.get(key)
        if known is not None:
            if execution.owner_epoch > known.execution.owner_epoch:
                # Re-sent by a master that took the instance over: its events go there now.
                self.take_over(key, execution.owner_address, execution.owner_epoch)
            return Dispatch(outcome=DispatchOutcome.ALREADY_ACCEPTED, log_path=str(known.log.path))
        if key in self._finished:
            self._events.retarget(key, execution.owner_address)
            path = str(self._logs.path_for(execution))
            return Dispatch(outcome=DispatchOutcome.ALREADY_ACCEPTED, log_path=path)
        if key in self._killed_unknown:
            # Killed before it arrived (a dispatch overtaken by a stop): never start it.
            return Dispatch(
                outcome=DispatchOutcome.REJECTED_UNAVAILABLE,
                reason=f"killed before it arrived: {self._killed_unknown[key]}",
            )
        return None

    def kill(self, key: AttemptKey, reason: str) -> bool:
        """Starts killing an unfinished attempt; False if it is unknown or already ending."""
        attempt = self._attempts.get(key)
        if attempt is None and key not in self._finished:
            # Remember it: the dispatch of this attempt may still be on its way (see submit).
            self._killed_unknown[key] = reason or "killed on request"
            while len(self._killed_unknown) > self._remember:
                self._killed_unknown.popitem(last=False)
            return False
        if attempt is None or attempt.phase is Phase.ENDING:
            return False
        if attempt.stop is not None:
            return True  # already being stopped
        attempt.stop = StopCause.KILL
        attempt.kill_reason = reason or "killed on request"
        attempt.log.note(f"kill requested: {attempt.kill_reason}")
        if attempt.phase is Phase.QUEUED:
            self._queue.remove(attempt)
            attempt.phase = Phase.ENDING
            outcome = AttemptReport(
                type=TaskEventType.KILLED,
                exit_code=NO_PROCESS_EXIT_CODE,
                message=f"killed before it started: {attempt.kill_reason}",
            )
            self._spawn(self._end(attempt, outcome))
        elif attempt.phase is Phase.RUNNING:
            self._begin_kill(attempt, self._kill_grace)
        return True  # STARTING: the kill happens as soon as the process exists

    def take_over(self, key: AttemptKey, owner_address: str, owner_epoch: int) -> bool:
        """Makes ``owner_address`` the attempt's owner; returns whether the worker still has the
        attempt (unfinished, or with unsettled events)."""
        attempt = self._attempts.get(key)
        if attempt is not None:
            attempt.execution = attempt.execution.with_owner(owner_address, owner_epoch)
        had_events = self._events.retarget(key, owner_address)
        return attempt is not None or had_events

    def fence(self) -> None:
        """The registry session was lost: drop queued attempts and SIGKILL running ones, reporting
        nothing for either. They are forgotten, so a new dispatch of the same attempt runs again."""
        self._silence_all(grace=0.0, reason="fenced: registry session lost")

    async def stop(self, grace: float, *, kill_grace: float | None = None) -> list[str]:
        """Refuses new attempts, drops queued ones, lets running ones finish for up to ``grace``
        seconds, then kills the rest (SIGTERM, SIGKILL after ``kill_grace``, default the
        runner's), reporting nothing for either. Returns when all have ended, with a description
        of each attempt it dropped or killed (the work the stop abandoned)."""
        self._stopping = True
        ended = [f"{a.execution.key} dropped before it started" for a in self._queue]
        for attempt in list(self._queue):
            self._drop_queued(attempt, "worker is stopping")
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=grace)
        ended += [
            f"{a.execution.key} killed"
            for a in self._attempts.values()
            if a.phase is not Phase.ENDING
        ]
        self._silence_all(
            grace=self._kill_grace if kill_grace is None else kill_grace,
            reason="worker stopped before the task finished",
        )
        while self._tasks:
            await asyncio.gather(*set(self._tasks), return_exceptions=True)
        return ended

    def _silence_all(self, *, grace: float, reason: str) -> None:
        for attempt in list(self._attempts.values()):
            if attempt.phase is Phase.QUEUED:
                self._drop_queued(attempt, reason)
            elif attempt.phase is not Phase.ENDING:
                attempt.silent = True
                attempt.stop = attempt.stop or StopCause.FENCE
                attempt.log.note(reason)
                if attempt.phase is Phase.RUNNING:
                    self._begin_kill(attempt, grace, force=True)

    def _drop_queued(self, attempt: Attempt, reason: str) -> None:
        self._queue.remove(attempt)
        attempt.log.note(f"dropped before it started: {reason}")
        self._close(attempt, remember=False)

    def _start(self, attempt: Attempt) -> None:
        """Starts a queued or new attempt in a free slot (the callers say when the load changed)."""
        self._running += 1
        attempt.phase = Phase.STARTING
        attempt.task = self._spawn(self._run(attempt))

    def _spawn(self, coro: Coroutine[object, object, None]) -> asyncio.Task[None]:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _run(self, attempt: Attempt) -> None:
        try:
            outcome = await self._execute(attempt)
        except Exception as exc:  # a task type's bug must still end the attempt and free the slot
            log.exception("attempt %s failed inside the worker", attempt.execution.key)
            outcome = AttemptReport(
                type=TaskEventType.FAILED,
                exit_code=NO_PROCESS_EXIT_CODE,
                message=f"worker error: {exc}",
            )
        attempt.phase = Phase.ENDING
        try:
            await self._end(attempt, outcome)
        finally:
            # One change of load when a slot frees and stays free; none when a queued attempt
            # takes it at once (the worker is as full as before: a heartbeat per attempt ended
            # would tell the masters nothing new).
            self._running -= 1
            freed = self._running + 1 >= self.slots  # full until this one ended
            self._start_next()
            if freed and not self.full:
                self.on_load_change()

    async def _execute(self, attempt: Attempt) -> AttemptReport:
        execution = attempt.execution
        attempt.log.open()
        path = str(attempt.log.path)
        if execution.dry_run:
            attempt.log.note("dry run: the task was not started")
            await self._report(attempt, AttemptReport(type=TaskEventType.RUNNING, log_path=path))
            if attempt.stop is StopCause.KILL:
                return AttemptReport(type=TaskEventType.KILLED, message=attempt.kill_reason)
            return AttemptReport(type=TaskEventType.SUCCEEDED, message="dry run")
        try:
            run = await self._types.for_kind(execution.kind).start(execution, attempt.log)
        except SpawnError as exc:
            attempt.log.note(f"could not start: {exc}")
            return AttemptReport(
                type=TaskEventType.FAILED,
                exit_code=NO_PROCESS_EXIT_CODE,
                message=f"could not start: {exc}",
            )
        attempt.run = run
        attempt.phase = Phase.RUNNING
        attempt.log.note(f"started at {self._clock().isoformat()}, pid {run.pid}")
        if attempt.stop is not None:  # killed or fenced while starting
            self._begin_kill(attempt, 0.0 if attempt.silent else self._kill_grace)
        timer = self._arm_timeout(attempt)
        try:
            await self._report(
                attempt,
                AttemptReport(type=TaskEventType.RUNNING, pid=run.pid, log_path=path),
                happened=run.started,
            )
            reports = self._watch_applications(attempt, run, path)
            result = await run.wait()
            attempt.ended = result.ended
            if reports:  # the RUNNING events naming an application go before the result
                await asyncio.gather(*reports)
        finally:
            if timer is not None:
                timer.cancel()
        return attempt.outcome(result)

    def _watch_applications(
        self, attempt: Attempt, run: RunningTask, path: str
    ) -> list[asyncio.Task[None]]:
        """Reports RUNNING again, with the id, each time the task names an application it runs
        (a Spark job: the id is on record while the job runs). Returns the reports' tasks."""
        reports: list[asyncio.Task[None]] = []
        # The method looked up, as isinstance(run, ReportsApplications) would: that check of a
        # runtime-checkable Protocol took 20-30 us per attempt (Python 3.11).
        watch = getattr(run, "watch_applications", None)
        if watch is None:
            return reports

        def found(app: str) -> None:
            running = AttemptReport(
                type=TaskEventType.RUNNING, pid=run.pid, log_path=path, application_id=app
            )
            reports.append(self._spawn(self._report(attempt, running)))

        watch(found)
        return reports

    async def _end(self, attempt: Attempt, outcome: AttemptReport) -> None:
        if attempt.silent:
            attempt.log.note("ended; result not reported")
        else:
            attempt.log.note(
                f"finished at {self._clock().isoformat()}: {outcome.type} exit code "
                f"{outcome.exit_code}" + (f" ({outcome.message})" if outcome.message else "")
            )
        attempt.log.finish()
        if not attempt.silent:
            await self._report(attempt, outcome, happened=attempt.ended)
        self._close(attempt, remember=not attempt.silent)
        if self._workdirs is not None:
            succeeded = outcome.type is TaskEventType.SUCCEEDED and not attempt.silent
            self._workdirs.ended(attempt.execution, succeeded=succeeded)

    def _close(self, attempt: Attempt, *, remember: bool) -> None:
        key = attempt.execution.key
        attempt.log.finish()
        self._logs.release(attempt.execution.task_instance_id)
        self._attempts.pop(key, None)
        self._events.release(key)
        if remember:
            self._finished.add(key)

    async def _report(
        self, attempt: Attempt, outcome: AttemptReport, *, happened: float | None = None
    ) -> None:
        if not attempt.silent:
            await self._events.report(attempt.execution, outcome, happened=happened)

    def _start_next(self) -> None:
        while self._queue and not self.full and not self._stopping:
            self._start(self._queue.pop(0))

    def _arm_timeout(self, attempt: Attempt) -> asyncio.TimerHandle | None:
        if not attempt.execution.kills_at_timeout:
            return None
        loop = asyncio.get_running_loop()
        return loop.call_later(attempt.execution.timeout.total_seconds(), self._timed_out, attempt)

    def _timed_out(self, attempt: Attempt) -> None:
        if attempt.stop is None and attempt.phase is Phase.RUNNING:
            attempt.stop = StopCause.TIMEOUT
            attempt.log.note(f"{attempt.timeout_text}: killing the process group")
            self._begin_kill(attempt, self._kill_grace)

    def _begin_kill(self, attempt: Attempt, grace: float, *, force: bool = False) -> None:
        if attempt.run is None or (attempt.kill_task is not None and not force):
            return
        attempt.kill_task = self._spawn(attempt.run.kill(grace))


def _rank(attempt: Attempt) -> int:
    return attempt.execution.queue_rank
