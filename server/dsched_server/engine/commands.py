"""Command consumption (ARCHITECTURE.md §3 step 2).

The consumer sleeps until a command is inserted (an in-process notification; a slow periodic scan is
only the fallback for commands written by other processes) and claims each command in one
transaction: it deletes the command (0 rows deleted means another master took it) and stamps the
instance with this master's address and epoch. Only after that commit does it build the instance's
execution and start a runner, so an instance is driven by at most one master epoch at a time.

With several masters the commands are sharded: a master claims the commands whose id falls in its
slot (``id % live masters == its index`` in the sorted list of live master addresses), the commands
it wrote itself (a client asked this master, which is awake: no other master needs waking), and any
command it has seen pending for longer than :data:`STEAL_AFTER_S` (masters that disagree about the
membership for a moment must not leave a command unclaimed). Slots only spread the load; the
claim's transaction is what makes each command start exactly one run.

A START this master wrote comes with a :class:`~dsched_server.engine.notifier.Handover` (the rows
its transaction wrote): the consumer claims it without reading the queue, the instance or the
workflow (three statements and a read transaction of the ~28 a one-task run cost). The queue is
read when a command came without one (a restart, a failover, a storm past the handovers' bound),
at the periodic fallback, and after a claim that failed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime

from dsched.errors import Unavailable
from dsched.options import CommandType
from dsched.states import InstanceEventKind, TaskState, WorkflowState
from dsched_server.background import Background
from dsched_server.core.dag import Dag
from dsched_server.core.execution import Execution
from dsched_server.core.records import (
    CommandRecord,
    InstanceRecord,
    RunScope,
    TaskInstanceRecord,
    WorkflowRecord,
)
from dsched_server.engine.executor import EffectExecutor
from dsched_server.engine.notifier import COMMANDS, Handover
from dsched_server.engine.run_state import RunState, Settings
from dsched_server.engine.runner import InstanceRunner
from dsched_server.engine.runners import Runners
from dsched_server.engine.services import EngineServices
from dsched_server.store import controls as control_repo
from dsched_server.store import definitions, events
from dsched_server.store import instances as instance_repo
from dsched_server.store import task_instances as ti_repo
from dsched_server.store.codec import scope_to_json
from dsched_server.store.database import Conn
from dsched_server.store.events import NewEvent
from dsched_server.store.instances import InstanceValues

log = logging.getLogger(__name__)

FETCH_LIMIT = 50
FALLBACK_SCAN_S = 5.0
STEAL_AFTER_S = 2 * FALLBACK_SCAN_S
# A wake-up this long after the last read of the queue reads it again, even when the wake-up only
# brought handovers: a master busy with its own starts still sees within this delay the commands
# other masters wrote for its slot (a failover's), as it did when every wake-up read the queue.
WAKE_SCAN_S = 0.5


class CommandConsumer(Background):
    """Claims commands and starts runners. ``paused`` (registry disconnected) and ``busy``
    (overloaded) stop claiming. ``slot`` returns (this master's index, number of live masters)."""

    def __init__(
        self,
        services: EngineServices,
        runners: Runners,
        *,
        slot: Callable[[], tuple[int, int]] = lambda: (0, 1),
        busy: Callable[[], bool] = lambda: False,
    ) -> None:
        super().__init__("command-consumer")
        self.s = services
        self.runners = runners
        self._slot = slot
        self._busy = busy
        self.paused = False
        self._first_seen: dict[int, float] = {}  # command id -> loop time it was first seen
        self._scan_at = 0.0  # loop time the next read of the queue is due at the latest
        self.executor = EffectExecutor(services)  # runs the effects of every runner it builds

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        notifier = self.s.notifier
        scan = True
        while True:
            signal = notifier.signal(COMMANDS)
            claimed = 0
            consumed = not self.paused and not self._busy()
            if not consumed:
                notifier.close_handovers()
            else:
                notifier.handovers_open = True
                try:
                    claimed = await self.consume_once(scan=scan)
                except Unavailable:
                    pass  # the database is away (logged once, by the store); the next scan retries
                except Exception:
                    log.exception("command scan failed")
            if claimed < FETCH_LIMIT:
                # Until the next scan is due, or at once if something was written meanwhile.
                due = self._scan_at - loop.time() if consumed else FALLBACK_SCAN_S
                await notifier.wait(signal, max(0.0, due))
            else:
                # More to claim: the loop serves the rest first (on SQLite a claim awaits nothing,
                # and claiming a storm's 10,000 commands in one go held the loop long enough for
                # the worker's registry session to expire). A scan that found a full page reads
                # the queue again.
                await asyncio.sleep(0)
            # Commands this master handed over need no read of the queue; any other wake-up (a
            # command written without a handover: a restart, a failover, a storm past the bound
            # of handovers) and the periodic fallback read it.
            scan = (
                notifier.take_scan_wanted()
                or loop.time() >= self._scan_at - FALLBACK_SCAN_S + WAKE_SCAN_S
                or (scan and claimed >= FETCH_LIMIT)
            )

    async def consume_once(self, *, scan: bool = True) -> int:
        """Claims what is pending now (``scan``), then the commands handed over since; returns
        how many claims were tried (FETCH_LIMIT: there may be more to claim right away)."""
        tried = await self._scan() if scan else 0
        return tried + await self._claim_handovers(FETCH_LIMIT - tried)

    async def _claim_handovers(self, limit: int) -> int:
        """Claims up to ``limit`` handed-over commands, in queue order (priority, then age)."""
        handovers = self.s.notifier.handovers
        if not handovers or limit <= 0:
            return 0
        turn = sorted(handovers.values(), key=lambda h: (h.instance.queue_rank, h.command.id))
        tried = 0
        for handover in turn[:limit]:
            if self.paused:
                break
            del handovers[handover.instance.id]
            if self.runners.get(handover.instance.id) is None:
                tried += 1
                await self._claim(handover.command, handover)
        return tried

    async def _scan(self) -> int:
        """Reads the queue and claims what is this master's: its commands (handed over or
        hinted), its slot's, and those pending too long; returns how many claims were tried."""
        loop = asyncio.get_running_loop()
        self._scan_at = loop.time() + FALLBACK_SCAN_S
        hinted = list(self.s.notifier.local_commands)
        handed = list(self.s.notifier.handovers)
        async with self.s.db.read() as conn:
            pending = await instance_repo.pending_commands(conn, FETCH_LIMIT)
        if len(pending) < FETCH_LIMIT:  # the whole queue: hints it lacks were claimed elsewhere
            found = [c.workflow_instance_id for c in pending]
            self.s.notifier.forget_hints(hinted, found, handed)
        now = loop.time()
        seen = {c.id: self._first_seen.get(c.id, now) for c in pending}
        self._first_seen = seen  # forget commands that are gone
        index, count = self._slot()
        handovers = self.s.notifier.handovers
        tried = 0
        for command in pending:
            if self.paused:
                break
            # Claimed in the page's order, with the rows handed over if it was.
            handover = handovers.pop(command.workflow_instance_id, None)
            if handover is not None and handover.command != command:
                handover = None  # an older command of the instance, gone: the claim reads this one
            local = (
                handover is not None
                or command.workflow_instance_id in self.s.notifier.local_commands
            )
            mine = count <= 1 or command.id % count == index
            stale = now - seen[command.id] >= STEAL_AFTER_S
            if not (local or mine or stale):
                continue
            self.s.notifier.local_commands.discard(command.workflow_instance_id)
            if self.runners.get(command.workflow_instance_id) is None:
                tried += 1
                await self._claim(command, handover)
        return tried

    async def _claim(self, command: CommandRecord, handover: Handover | None = None) -> None:
        try:
            async with self.s.db.transaction() as conn:
                started = await self._claim_in(conn, command, handover)
        except Unavailable:
            # The database is away. If the claim committed before the connection broke, the
            # instance is this epoch's with no runner: the reload finds out once it is back.
            self.s.reload(command.workflow_instance_id, {})
            self._rescan(handover)
            return
        except Exception:  # this command's data is broken; log and go on
            log.exception("could not claim command %s", command.id)
            self._rescan(handover)
            return
        if started is None:
            self.s.metrics.commands_lost_race += 1
            return
        self.s.metrics.commands_claimed += 1
        if self.runners.get(command.workflow_instance_id) is None:  # the sweep may have been first
            self.runners.add(started)

    def _rescan(self, handover: Handover | None) -> None:
        """A handed-over command whose claim failed is left to the reads of the queue, as a
        command of this master (without a wake-up: the next round retries it, not this one)."""
        if handover is not None:
            self.s.notifier.hint(handover.instance.id)

    async def _claim_in(
        self, conn: Conn, command: CommandRecord, handover: Handover | None
    ) -> InstanceRunner | None:
        now = self.s.clock.now()
        if handover is not None:  # the rows as written, unchanged while the command is pending
            instance, workflow = handover.instance, handover.workflow
        else:
            instance = await instance_repo.get_instance(conn, command.workflow_instance_id)
            workflow = await definitions.get_workflow_by_code(
                conn, instance.workflow_code, instance.workflow_version
            )
        dag = Dag(workflow.spec)
        state, values, scope = _plan(command, instance, now)
        if not await instance_repo.claim(
            conn, command, host=self.s.address, epoch=self.s.epoch, state=state, values=values
        ):
            return None
        first = _first_start(command, instance, state, values, self.s.address, self.s.epoch)
        if first is not None:
            attempts: list[TaskInstanceRecord] = []
            superseded: list[TaskInstanceRecord] = []
        else:
            attempts = await ti_repo.valid_attempts(conn, instance.id)
            superseded = _superseded(command, attempts, dag, scope)
            await ti_repo.supersede(conn, [a.id for a in superseded])
        await events.append(
            conn,
            [
                NewEvent(
                    workflow_instance_id=instance.id,
                    workflow_state=state,
                    kind=InstanceEventKind.CLAIMED,
                    # No epoch: clients read this, and epochs are fencing tokens.
                    message=f"{command.type.value} claimed by {self.s.address}",
                )
            ],
            now,
        )
        # Superseding nothing (a first start, most failovers) leaves the valid attempts as read.
        return await self.build_runner(
            conn, instance.id, workflow, None if superseded else attempts, first
        )

    async def build_runner(
        self,
        conn: Conn,
        instance_id: int,
        workflow: WorkflowRecord | None = None,
        attempts: list[TaskInstanceRecord] | None = None,
        first: InstanceRecord | None = None,
    ) -> InstanceRunner:
        """A runner for an instance this epoch owns, restored from the store (``workflow`` and
        ``attempts``, its valid ones: read in the same transaction by the caller). ``first``: the
        instance as its first start's claim wrote it (no attempt of it exists: nothing to read)."""
        instance = first or await instance_repo.get_instance(conn, instance_id)
        if workflow is None:
            workflow = await definitions.get_workflow_by_code(
                conn, instance.workflow_code, instance.workflow_version
            )
        dag = Dag(workflow.spec)
        scope = instance.run_scope
        if attempts is None:
            attempts = await ti_repo.valid_attempts(conn, instance.id)
        last = {} if first else await ti_repo.last_attempts(conn, instance.id)
        execution = Execution.restore(
            dag,
            dag.scope(scope.start_tasks, scope.depend_type),
            instance.options.failure_strategy,
            attempts,
            last,
            phase=instance.state,
        )
        settings = Settings(
            address=self.s.address,
            cluster_address=self.s.cluster_address,
            default_group=self.s.default_group,
            dispatch_timeout=self.s.dispatch_timeout,
        )
        runner = InstanceRunner(
            self.s,
            self.executor,
            RunState.restore(instance, workflow, execution, attempts, settings, lambda m: None),
            self.runners.on_exit,
            await control_repo.pending(conn, instance.id),
        )
        runner.state.on_dispatched = runner.post
        # An attempt that reported an application of its own has killed the lost ones already.
        submitted = {a.task_name for a in attempts if a.application_id}
        lost = {} if first else await ti_repo.lost_applications(conn, instance.id)
        runner.state.lost_applications = {k: v for k, v in lost.items() if k not in submitted}
        return runner


def _plan(
    command: CommandRecord, instance: InstanceRecord, now: datetime
) -> tuple[WorkflowState, InstanceValues, RunScope]:
    """The state, column values and run scope an instance gets when this command is claimed."""
    scope = instance.run_scope
    values: InstanceValues = {"command_type": command.type.value}
    if command.type is CommandType.FAILOVER:
        return command.restore_state or WorkflowState.RUNNING, values, scope
    values.update({"end_time": None, "state_reason": ""})
    if command.type is CommandType.START:
        values["start_time"] = now
    elif command.type is CommandType.RERUN:
        scope = instance.options.scope
        values.update(
            {
                "start_time": now,
                "run_times": instance.run_times + 1,
                "var_pool": {},
                "run_scope": scope_to_json(scope),
            }
        )
    elif command.type is CommandType.EXECUTE_FROM_TASK and command.scope is not None:
        scope = command.scope
        values.update({"run_times": instance.run_times + 1, "run_scope": scope_to_json(scope)})
    return WorkflowState.RUNNING, values, scope


def _first_start(
    command: CommandRecord,
    instance: InstanceRecord,
    state: WorkflowState,
    values: InstanceValues,
    host: str,
    epoch: int,
) -> InstanceRecord | None:
    """The instance as the claim of its START command left it, or None for any other command.

    A START command is written with its instance and no task instance, and claiming it (which
    deletes it) is the instance's first write after that: no attempt, superseded one or lost
    application exists yet, so the claim need not read them, nor the instance again (four
    statements of the ~40 a one-task run costs). Every later run of it comes from another command.
    The record is the one read before the claim with what the claim wrote (``values``, from
    :func:`_plan`, whose START columns map one to one onto the record's fields).
    """
    if command.type is not CommandType.START:
        return None
    return replace(
        instance,
        state=state,
        command_type=command.type,
        host=host,
        epoch=epoch,
        start_time=values["start_time"],
        end_time=values["end_time"],
        state_reason=values["state_reason"],
    )


def _superseded(
    command: CommandRecord, attempts: list[TaskInstanceRecord], dag: Dag, scope: RunScope
) -> list[TaskInstanceRecord]:
    """Valid attempts the command replaces (they stay in the store, marked not valid)."""
    if command.type is CommandType.RERUN:
        return list(attempts)
    if command.type is CommandType.RECOVER_FAILED:
        return [a for a in attempts if a.state in (TaskState.FAILED, TaskState.KILLED)]
    if command.type is CommandType.EXECUTE_FROM_TASK:
        covered = dag.scope(scope.start_tasks, scope.depend_type)
        return [a for a in attempts if a.task_name in covered]
    return []
