"""MasterService: starting runs and controlling workflow instances.

Starting, resuming, rerunning, recovering and executing-from-task write the instance state and a
command in one transaction and wake the command consumer, so any master serves them. Pause and stop
are in :mod:`dsched.server.api.controls`.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from google.protobuf.message import Message
from grpc import aio

from dsched.convert import FAILURE_STRATEGY, PRIORITY, TASK_DEPEND_TYPE
from dsched.errors import FailedPrecondition, InvalidArgument, Unavailable
from dsched.options import (
    CommandType,
    FailureStrategy,
    Priority,
    ReleaseState,
    TaskDependType,
)
from dsched.server.api import convert
from dsched.server.api.context import MasterContext
from dsched.server.api.idempotency import once
from dsched.server.api.validation import Checks
from dsched.server.core import transitions
from dsched.server.core.dag import Dag
from dsched.server.core.records import InstanceRecord, RunOptions, RunScope
from dsched.server.store import definitions, events
from dsched.server.store import instances as instance_repo
from dsched.server.store import task_instances as ti_repo
from dsched.server.store.database import Conn
from dsched.server.store.events import NewEvent
from dsched.spec import MAX_TIMEOUT
from dsched.states import TaskState, WorkflowState
from dsched.v1 import master_service_pb2 as pb

Ctx = aio.ServicerContext[Any, Any]
W = WorkflowState

# (allowed states, command) per "restart" style action.
_RESTARTS: dict[str, tuple[frozenset[WorkflowState], CommandType]] = {
    "resume": (transitions.CAN_RESUME, CommandType.RESUME),
    "rerun": (transitions.CAN_RERUN, CommandType.RERUN),
    "recover": (transitions.CAN_RECOVER_FAILED, CommandType.RECOVER_FAILED),
    "execute from task": (transitions.CAN_EXECUTE_FROM_TASK, CommandType.EXECUTE_FROM_TASK),
}


def _id_checks(instance_id: int, request_id: str, field: str = "id") -> None:
    checks = Checks()
    checks.positive_id(field, instance_id)
    checks.request_id(request_id)
    checks.raise_if_any()


def _dispatch_timeout(request: pb.StartWorkflowRequest, checks: Checks) -> timedelta | None:
    """The run's dispatch timeout (None: the master's default); 0 to 7 days."""
    if not request.HasField("dispatch_timeout"):
        return None
    value = request.dispatch_timeout
    if not (0 <= value.seconds <= MAX_TIMEOUT.total_seconds() and 0 <= value.nanos < 10**9):
        checks.add("dispatch_timeout", f"must be between 0 and {MAX_TIMEOUT}")
        return None
    return timedelta(seconds=value.seconds, microseconds=value.nanos // 1000)


class RunsApi:
    ctx: MasterContext

    # ------------------------------------------------------------------------ start

    async def StartWorkflow(self, request: pb.StartWorkflowRequest, context: Ctx) -> Any:
        checks = Checks()
        checks.name("project", request.project, "project name")
        checks.name("workflow", request.workflow, "workflow name")
        checks.params("params", request.params)
        checks.task_names("start_tasks", request.start_tasks)
        checks.optional_worker_group("worker_group", request.worker_group)
        checks.request_id(request.request_id)
        options = RunOptions(
            params=dict(request.params),
            scope=RunScope(
                start_tasks=tuple(request.start_tasks),
                depend_type=checks.enum(
                    TASK_DEPEND_TYPE,
                    TaskDependType,
                    "task_depend_type",
                    request.task_depend_type,
                    TaskDependType.TASK_POST,
                ),
            ),
            failure_strategy=checks.enum(
                FAILURE_STRATEGY,
                FailureStrategy,
                "failure_strategy",
                request.failure_strategy,
                FailureStrategy.CONTINUE,
            ),
            priority=checks.enum(PRIORITY, Priority, "priority", request.priority, Priority.MEDIUM),
            worker_group=request.worker_group,
            dry_run=request.dry_run,
            dispatch_timeout=_dispatch_timeout(request, checks),
        )
        checks.raise_if_any()

        async def work(conn: Conn) -> pb.StartWorkflowResponse:
            workflow = await definitions.get_workflow(conn, request.project, request.workflow)
            if workflow.release_state is not ReleaseState.ONLINE:
                raise FailedPrecondition(
                    f"workflow {request.project}/{request.workflow} is OFFLINE; put it online "
                    "to run it",
                    reason="WORKFLOW_OFFLINE",
                    metadata={"project": request.project, "workflow": request.workflow},
                )
            known = {t.name for t in workflow.spec.tasks}
            unknown = [(i, n) for i, n in enumerate(options.scope.start_tasks) if n not in known]
            if unknown:
                raise InvalidArgument(
                    "unknown start tasks",
                    violations=[
                        Checks.violation(f"start_tasks[{i}]", f"no task {n!r} in the workflow")
                        for i, n in unknown
                    ],
                )
            project = await definitions.get_project(conn, request.project)
            instance_id = await instance_repo.create_instance(
                conn, workflow, project.id, options, self.ctx.clock.now()
            )
            await events.append(
                conn,
                [
                    NewEvent(
                        workflow_instance_id=instance_id,
                        workflow_state=W.SUBMITTED,
                        message="submitted",
                    )
                ],
                self.ctx.clock.now(),
            )
            record = await instance_repo.get_instance(conn, instance_id)
            return pb.StartWorkflowResponse(instance=convert.instance(record))

        response = await once(self.ctx, request, "StartWorkflow", pb.StartWorkflowResponse, work)
        self.ctx.notifier.notify_commands(response.instance.id)
        return response

    # ------------------------------------------------------------------------ restarts

    async def ResumeWorkflowInstance(
        self, request: pb.ResumeWorkflowInstanceRequest, context: Ctx
    ) -> Any:
        _id_checks(request.id, request.request_id)
        record = await self._restart(request.id, request, "resume", None, "ResumeWorkflowInstance")
        return pb.ResumeWorkflowInstanceResponse.FromString(record)

    async def RerunWorkflowInstance(
        self, request: pb.RerunWorkflowInstanceRequest, context: Ctx
    ) -> Any:
        _id_checks(request.id, request.request_id)
        record = await self._restart(request.id, request, "rerun", None, "RerunWorkflowInstance")
        return pb.RerunWorkflowInstanceResponse.FromString(record)

    async def RecoverFailedWorkflowInstance(
        self, request: pb.RecoverFailedWorkflowInstanceRequest, context: Ctx
    ) -> Any:
        _id_checks(request.id, request.request_id)
        record = await self._restart(
            request.id, request, "recover", None, "RecoverFailedWorkflowInstance"
        )
        return pb.RecoverFailedWorkflowInstanceResponse.FromString(record)

    async def ExecuteFromTask(self, request: pb.ExecuteFromTaskRequest, context: Ctx) -> Any:
        checks = Checks()
        checks.positive_id("id", request.id)
        checks.request_id(request.request_id)
        if not request.start_tasks:
            checks.add("start_tasks", "name at least one task")
        checks.task_names("start_tasks", request.start_tasks)
        depend = checks.enum(
            TASK_DEPEND_TYPE,
            TaskDependType,
            "task_depend_type",
            request.task_depend_type,
            TaskDependType.TASK_POST,
        )
        checks.raise_if_any()
        scope = RunScope(start_tasks=tuple(request.start_tasks), depend_type=depend)
        record = await self._restart(
            request.id, request, "execute from task", scope, "ExecuteFromTask"
        )
        return pb.ExecuteFromTaskResponse.FromString(record)

    async def _restart(
        self, instance_id: int, request: Message, action: str, scope: RunScope | None, method: str
    ) -> bytes:
        """Puts a finished instance back in the command queue; returns the serialized answer
        (every restart response is ``{instance}``, so one wire shape serves all four)."""
        allowed, command = _RESTARTS[action]

        async def work(conn: Conn) -> pb.ResumeWorkflowInstanceResponse:
            instance = await instance_repo.get_instance(conn, instance_id)
            transitions.require_state(
                instance.state, allowed, action=action, instance_id=instance_id
            )
            if scope is not None:
                workflow = await definitions.get_workflow_by_code(
                    conn, instance.workflow_code, instance.workflow_version
                )
                Dag(workflow.spec)  # definitions in the store are valid DAGs
                known = {t.name for t in workflow.spec.tasks}
                missing = [(i, n) for i, n in enumerate(scope.start_tasks) if n not in known]
                if missing:
                    raise InvalidArgument(
                        "unknown start tasks",
                        violations=[
                            Checks.violation(f"start_tasks[{i}]", f"no task {n!r} in the workflow")
                            for i, n in missing
                        ],
                    )
            if not await instance_repo.set_state(
                conn,
                instance_id,
                epoch=None,
                expected={instance.state},
                state=W.SUBMITTED,
                # Not terminal any more (the proto: end_time is absent while not terminal), and
                # restarted by this command; the claim sets both again with the start time.
                values={"state_reason": "", "end_time": None, "command_type": command.value},
            ):
                raise Unavailable(
                    "the instance changed meanwhile; retry", reason="CONCURRENT_CHANGE"
                )
            await instance_repo.add_command(
                conn,
                instance_id,
                command,
                instance.options.priority.rank,
                scope,
                self.ctx.clock.now(),
            )
            await events.append(
                conn,
                [
                    NewEvent(
                        workflow_instance_id=instance_id,
                        workflow_state=W.SUBMITTED,
                        message=f"{action} requested",
                    )
                ],
                self.ctx.clock.now(),
            )
            record = await instance_repo.get_instance(conn, instance_id)
            return pb.ResumeWorkflowInstanceResponse(instance=convert.instance(record))

        answer = await once(self.ctx, request, method, pb.ResumeWorkflowInstanceResponse, work)
        self.ctx.notifier.notify_commands(instance_id)
        self.ctx.notifier.notify(instance_id)
        return answer.SerializeToString()

    # ------------------------------------------------------------------------ force success

    async def ForceTaskInstanceSuccess(
        self, request: pb.ForceTaskInstanceSuccessRequest, context: Ctx
    ) -> Any:
        _id_checks(request.id, request.request_id)

        async def work(conn: Conn) -> pb.ForceTaskInstanceSuccessResponse:
            ti = await ti_repo.get(conn, request.id)
            instance = await instance_repo.get_instance(conn, ti.workflow_instance_id)
            if not instance.state.terminal:
                raise FailedPrecondition(
                    f"workflow instance {instance.id} is {instance.state}; force success only "
                    "applies to finished instances",
                    reason="INSTANCE_NOT_FINISHED",
                    metadata={"instance": str(instance.id), "state": instance.state.value},
                )
            if not ti.valid or ti.state not in (TaskState.FAILED, TaskState.KILLED):
                raise FailedPrecondition(
                    f"task instance {ti.id} is {ti.state}"
                    f"{'' if ti.valid else ' and superseded'}; only a current FAILED or KILLED "
                    "attempt can be forced to success",
                    reason="ILLEGAL_TRANSITION",
                    metadata={"task_instance": str(ti.id), "state": ti.state.value},
                )
            now = self.ctx.clock.now()
            await ti_repo.transition(
                conn,
                ti.id,
                expected={ti.state},
                state=TaskState.FORCED_SUCCESS,
                values={"end_time": now},
            )
            new_events = [
                NewEvent(
                    workflow_instance_id=instance.id,
                    task_instance_id=ti.id,
                    task_name=ti.task_name,
                    task_state=TaskState.FORCED_SUCCESS,
                    message="forced to success by user",
                )
            ]
            if instance.state in (W.FAILED, W.STOPPED) and await self._all_succeeded(
                conn, instance
            ):
                await instance_repo.set_state(
                    conn,
                    instance.id,
                    epoch=None,
                    expected={instance.state},
                    state=W.SUCCEEDED,
                    values={"state_reason": "all tasks succeeded (forced)"},
                )
                new_events.append(
                    NewEvent(
                        workflow_instance_id=instance.id,
                        workflow_state=W.SUCCEEDED,
                        message="all tasks succeeded (forced)",
                    )
                )
            await events.append(conn, new_events, now)
            return pb.ForceTaskInstanceSuccessResponse(
                task_instance=convert.task_instance(await ti_repo.get(conn, ti.id)),
                instance=convert.instance(await instance_repo.get_instance(conn, instance.id)),
            )

        answer = await once(
            self.ctx,
            request,
            "ForceTaskInstanceSuccess",
            pb.ForceTaskInstanceSuccessResponse,
            work,
        )
        self.ctx.notifier.notify(answer.instance.id)
        return answer

    @staticmethod
    async def _all_succeeded(conn: Conn, instance: InstanceRecord) -> bool:
        workflow = await definitions.get_workflow_by_code(
            conn, instance.workflow_code, instance.workflow_version
        )
        dag = Dag(workflow.spec)
        scope = dag.scope(instance.run_scope.start_tasks, instance.run_scope.depend_type)
        done = {
            a.task_name
            for a in await ti_repo.valid_attempts(conn, instance.id)
            if a.state.successful
        }
        return all(name in done or dag.tasks[name].disabled for name in scope)

    async def _instance(self, instance_id: int) -> InstanceRecord:
        async with self.ctx.db.read() as conn:
            return await instance_repo.get_instance(conn, instance_id)
