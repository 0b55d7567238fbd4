"""Starting runs: a new instance of a workflow, or a finished instance put back in the command
queue (resume, rerun, recover, execute from tasks).

Each writes the instance state and a command in the caller's transaction, and wakes the command
consumer once it commits, so any master serves them (ARCHITECTURE.md §3).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from zoneinfo import ZoneInfo

from dsched.errors import FailedPrecondition, FieldViolation, InvalidArgument, Unavailable
from dsched.names import param_path
from dsched.options import CommandType, ReleaseState
from dsched.spec import WorkflowSpec
from dsched.states import WorkflowState
from dsched.time_expr import TimeExprError
from dsched_server.app.transaction import Transaction
from dsched_server.core import transitions
from dsched_server.core.builtin_params import RunIdentity
from dsched_server.core.param_values import ExpandedTooLarge, expanded_params
from dsched_server.core.records import InstanceRecord, RunOptions, RunScope, WorkflowRecord
from dsched_server.engine.notifier import Handover
from dsched_server.store import definitions, events
from dsched_server.store import instances as instance_repo
from dsched_server.store.events import NewEvent
from dsched_server.store.instances import Created, NewRun, RunTime

W = WorkflowState


@dataclass(frozen=True, slots=True)
class StartRun:
    """A run to start: the workflow's current version, with the caller's options."""

    project: str
    workflow: str
    options: RunOptions = field(default_factory=RunOptions)
    # What its time parameters count from (None: when it is started) and the zone they count in.
    schedule_time: datetime | None = None
    time_zone: str = "UTC"


@dataclass(frozen=True, slots=True)
class _Restart:
    allowed: frozenset[WorkflowState]
    action: str  # in messages: "cannot <action> workflow instance ..."


_RESTARTS: dict[CommandType, _Restart] = {
    CommandType.RESUME: _Restart(transitions.CAN_RESUME, "resume"),
    CommandType.RERUN: _Restart(transitions.CAN_RERUN, "rerun"),
    CommandType.RECOVER_FAILED: _Restart(transitions.CAN_RECOVER_FAILED, "recover"),
    CommandType.EXECUTE_FROM_TASK: _Restart(transitions.CAN_EXECUTE_FROM_TASK, "execute from task"),
}


async def start(tx: Transaction, run: StartRun) -> InstanceRecord:
    """Writes a SUBMITTED instance of the workflow's current version and its command.

    FAILED_PRECONDITION (WORKFLOW_OFFLINE) if the workflow is offline; INVALID_ARGUMENT if a start
    task is not in it; NOT_FOUND if the project or workflow does not exist.
    """
    workflow = await online_workflow(tx, run.project, run.workflow)
    _require_tasks(workflow.spec, run.options.scope.start_tasks)
    when = RunTime(schedule_time=run.schedule_time or tx.now, time_zone=run.time_zone)
    _require_expandable(workflow, run.options.params, when)
    # The instance as written: reading it back would return the same record.
    return (await _create(tx, [NewRun(workflow, run.options, when)]))[0].instance


async def online_workflow(tx: Transaction, project: str, name: str) -> WorkflowRecord:
    """The workflow's current version; FAILED_PRECONDITION (WORKFLOW_OFFLINE) if it is offline,
    NOT_FOUND if it or its project does not exist."""
    workflow = await definitions.get_workflow(tx.conn, project, name)
    if workflow.release_state is not ReleaseState.ONLINE:
        raise FailedPrecondition(
            f"workflow {project}/{name} is OFFLINE; put it online to run it",
            reason="WORKFLOW_OFFLINE",
            metadata={"project": project, "workflow": name},
        )
    return workflow


async def create(
    tx: Transaction, workflow: WorkflowRecord, options: RunOptions, when: RunTime
) -> int:
    """Writes a SUBMITTED instance, its event and its command; wakes the consumer after the
    commit. Returns the instance id."""
    return (await create_many(tx, [NewRun(workflow, options, when)]))[0]


async def create_many(tx: Transaction, new: Sequence[NewRun]) -> list[int]:
    """:func:`create` for each of ``new``, a statement per table for all of them (a batch of
    fire times, a backfill's dates); returns the instance ids in the order of ``new``."""
    return [c.instance.id for c in await _create(tx, new)]


async def _create(tx: Transaction, new: Sequence[NewRun]) -> list[Created]:
    created = await instance_repo.create_runs(tx.conn, new, tx.now)
    submitted = [
        NewEvent(
            workflow_instance_id=c.instance.id, workflow_state=W.SUBMITTED, message="submitted"
        )
        for c in created
    ]
    await events.append(tx.conn, submitted, tx.now)
    for c, run in zip(created, new, strict=True):
        tx.command_added(c.instance.id, Handover(c.command, c.instance, run.workflow))
    return created


async def resume(tx: Transaction, instance_id: int) -> InstanceRecord:
    """Resumes a PAUSED instance where it stopped."""
    return await _restart(tx, instance_id, CommandType.RESUME, None)


async def rerun(tx: Transaction, instance_id: int) -> InstanceRecord:
    """Runs a finished instance again from the start (a new attempt of every task)."""
    return await _restart(tx, instance_id, CommandType.RERUN, None)


async def recover(tx: Transaction, instance_id: int) -> InstanceRecord:
    """Runs the failed and unfinished tasks of a FAILED or STOPPED instance again."""
    return await _restart(tx, instance_id, CommandType.RECOVER_FAILED, None)


async def execute_from(tx: Transaction, instance_id: int, scope: RunScope) -> InstanceRecord:
    """Runs a finished instance again from ``scope``'s start tasks (INVALID_ARGUMENT if one is not
    in the instance's workflow version)."""
    return await _restart(tx, instance_id, CommandType.EXECUTE_FROM_TASK, scope)


async def _restart(
    tx: Transaction, instance_id: int, command: CommandType, scope: RunScope | None
) -> InstanceRecord:
    """Puts a finished instance back in the command queue (FAILED_PRECONDITION, reason
    ILLEGAL_TRANSITION, in a state the restart does not apply to)."""
    restart = _RESTARTS[command]
    instance = await instance_repo.get_instance(tx.conn, instance_id)
    transitions.require_state(
        instance.state, restart.allowed, action=restart.action, instance_id=instance_id
    )
    if scope is not None:
        workflow = await definitions.get_workflow_by_code(
            tx.conn, instance.workflow_code, instance.workflow_version
        )
        _require_tasks(workflow.spec, scope.start_tasks)
    if not await instance_repo.set_state(
        tx.conn,
        instance_id,
        epoch=None,
        expected={instance.state},
        state=W.SUBMITTED,
        # Not terminal any more (the proto: end_time is absent while not terminal), and
        # restarted by this command; the claim sets both again with the start time.
        values={"state_reason": "", "end_time": None, "command_type": command.value},
    ):
        raise Unavailable("the instance changed meanwhile; retry", reason="CONCURRENT_CHANGE")
    await instance_repo.add_command(
        tx.conn, instance_id, command, instance.queue_rank, scope, tx.now
    )
    await events.append(
        tx.conn,
        [
            NewEvent(
                workflow_instance_id=instance_id,
                workflow_state=W.SUBMITTED,
                message=f"{restart.action} requested",
            )
        ],
        tx.now,
    )
    tx.command_added(instance_id)
    tx.instance_changed(instance_id)
    return await instance_repo.get_instance(tx.conn, instance_id)


# The largest id an instance or attempt can get: its digits are the most ``${system.*.id}`` adds.
_LARGEST_ID = 2**63 - 1


def _require_expandable(
    workflow: WorkflowRecord, startup: Mapping[str, str], when: RunTime
) -> None:
    """INVALID_ARGUMENT (REQUEST_TOO_LARGE) naming the parameter whose value, expanded for this
    run, would exceed the limits its value as written was checked against (README "Limits"), so
    the run is refused here rather than failing its tasks at dispatch. The ids not known yet count
    as the longest. A value that cannot be expanded at all is the dispatch's to report."""
    spec = workflow.spec
    zone = ZoneInfo(when.time_zone)
    for i, task in enumerate(spec.tasks):
        identity = RunIdentity(
            workflow_instance_id=_LARGEST_ID,
            task_instance_id=_LARGEST_ID,
            task_name=task.name,
            workflow_name=spec.name,
            workflow_code=workflow.id,
            project_name=workflow.project,
            project_code=workflow.project_id,
        )
        levels = {"global": spec.params, "local": task.params, "startup": startup}
        try:
            expanded_params(
                schedule_time=when.schedule_time,
                zone=zone,
                identity=identity,
                levels=levels,
                var_pool={},
            )
        except TimeExprError:
            return
        except ExpandedTooLarge as exc:
            path = {
                "global": "workflow.params",
                "local": f"workflow.tasks[{i}].params",
                "startup": "params",
            }[exc.level]
            field = param_path(path, exc.name) if exc.name else path
            raise InvalidArgument(
                f"the parameters of workflow {spec.project}/{spec.name} are too large once "
                "expanded for this run",
                reason="REQUEST_TOO_LARGE",
                violations=[FieldViolation(field, exc.reason)],
            ) from None


def _require_tasks(spec: WorkflowSpec, names: Sequence[str]) -> None:
    """INVALID_ARGUMENT naming each of ``names`` that is not a task of ``spec``."""
    known = {t.name for t in spec.tasks}
    unknown = [(i, n) for i, n in enumerate(names) if n not in known]
    if unknown:
        raise InvalidArgument(
            "unknown start tasks",
            violations=[
                FieldViolation(f"start_tasks[{i}]", f"no task {n!r} in the workflow")
                for i, n in unknown
            ],
        )
