"""MasterService: starting runs, restarting instances, forcing a task to success.

Each handler parses its request into domain values, calls the application layer
(:mod:`dsched_server.app.runs`, :mod:`dsched_server.app.tasks`) in the transaction that also
stores its answer (:func:`~dsched_server.api.idempotency.once`), and renders the result. Pause and
stop are in :mod:`dsched_server.api.controls`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any, TypeVar

from grpc import aio

from dsched.convert import TASK_DEPEND_TYPE
from dsched.options import TaskDependType
from dsched.spec import MAX_TIMEOUT
from dsched.v1 import master_service_pb2 as pb
from dsched_server.api import convert
from dsched_server.api.context import MasterContext
from dsched_server.api.idempotency import once
from dsched_server.api.validation import Checks, check_id_request
from dsched_server.app import runs, tasks
from dsched_server.app.transaction import Transaction
from dsched_server.core.records import InstanceRecord, RunOptions, RunScope

Ctx = aio.ServicerContext[Any, Any]
RestartRequest = (
    pb.ResumeWorkflowInstanceRequest
    | pb.RerunWorkflowInstanceRequest
    | pb.RecoverFailedWorkflowInstanceRequest
    | pb.ExecuteFromTaskRequest
)
R = TypeVar(
    "R",
    pb.ResumeWorkflowInstanceResponse,
    pb.RerunWorkflowInstanceResponse,
    pb.RecoverFailedWorkflowInstanceResponse,
    pb.ExecuteFromTaskResponse,
)


def _depend_type(checks: Checks, number: int) -> TaskDependType:
    return checks.enum(
        TASK_DEPEND_TYPE, TaskDependType, "task_depend_type", number, TaskDependType.TASK_POST
    )


def _dispatch_timeout(request: pb.StartWorkflowRequest, checks: Checks) -> timedelta | None:
    """The run's dispatch timeout (None: the master's default); 0 to 7 days."""
    if not request.HasField("dispatch_timeout"):
        return None
    value = request.dispatch_timeout
    if not (0 <= value.seconds <= MAX_TIMEOUT.total_seconds() and 0 <= value.nanos < 10**9):
        checks.add("dispatch_timeout", f"must be between 0 and {MAX_TIMEOUT}")
        return None
    return timedelta(seconds=value.seconds, microseconds=value.nanos // 1000)


def _start_run(request: pb.StartWorkflowRequest) -> runs.StartRun:
    """Parses a StartWorkflow request; INVALID_ARGUMENT with every violation."""
    checks = Checks()
    checks.name("project", request.project, "project name")
    checks.name("workflow", request.workflow, "workflow name")
    checks.params("params", request.params)
    checks.templates("params", request.params)
    checks.task_names("start_tasks", request.start_tasks)
    checks.optional_worker_group("worker_group", request.worker_group)
    checks.request_id(request.request_id)
    options = RunOptions(
        params=dict(request.params),
        scope=RunScope(
            start_tasks=tuple(request.start_tasks),
            depend_type=_depend_type(checks, request.task_depend_type),
        ),
        failure_strategy=checks.failure_strategy("failure_strategy", request.failure_strategy),
        priority=checks.priority("priority", request.priority),
        worker_group=request.worker_group,
        dry_run=request.dry_run,
        dispatch_timeout=_dispatch_timeout(request, checks),
    )
    schedule_time = (
        checks.instant("schedule_time", request.schedule_time)
        if request.HasField("schedule_time")
        else None
    )
    zone = checks.time_zone("time_zone", request.time_zone)
    checks.raise_if_any()
    return runs.StartRun(request.project, request.workflow, options, schedule_time, zone)


def _scope(request: pb.ExecuteFromTaskRequest) -> RunScope:
    """Parses an ExecuteFromTask request's scope (and checks its id and request id)."""
    checks = Checks()
    checks.positive_id("id", request.id)
    checks.request_id(request.request_id)
    if not request.start_tasks:
        checks.add("start_tasks", "name at least one task")
    checks.task_names("start_tasks", request.start_tasks)
    depend = _depend_type(checks, request.task_depend_type)
    checks.raise_if_any()
    return RunScope(start_tasks=tuple(request.start_tasks), depend_type=depend)


class RunsApi:
    ctx: MasterContext

    async def StartWorkflow(self, request: pb.StartWorkflowRequest, context: Ctx) -> Any:
        run = _start_run(request)

        async def work(tx: Transaction) -> pb.StartWorkflowResponse:
            return pb.StartWorkflowResponse(instance=convert.instance(await runs.start(tx, run)))

        return await once(self.ctx, request, "StartWorkflow", pb.StartWorkflowResponse, work)

    # ------------------------------------------------------------------------ restarts

    async def ResumeWorkflowInstance(
        self, request: pb.ResumeWorkflowInstanceRequest, context: Ctx
    ) -> Any:
        check_id_request(request.id, request.request_id)
        return await self._restart(
            request, "ResumeWorkflowInstance", pb.ResumeWorkflowInstanceResponse, runs.resume
        )

    async def RerunWorkflowInstance(
        self, request: pb.RerunWorkflowInstanceRequest, context: Ctx
    ) -> Any:
        check_id_request(request.id, request.request_id)
        return await self._restart(
            request, "RerunWorkflowInstance", pb.RerunWorkflowInstanceResponse, runs.rerun
        )

    async def RecoverFailedWorkflowInstance(
        self, request: pb.RecoverFailedWorkflowInstanceRequest, context: Ctx
    ) -> Any:
        check_id_request(request.id, request.request_id)
        return await self._restart(
            request,
            "RecoverFailedWorkflowInstance",
            pb.RecoverFailedWorkflowInstanceResponse,
            runs.recover,
        )

    async def ExecuteFromTask(self, request: pb.ExecuteFromTaskRequest, context: Ctx) -> Any:
        scope = _scope(request)

        async def execute_from(tx: Transaction, instance_id: int) -> InstanceRecord:
            return await runs.execute_from(tx, instance_id, scope)

        return await self._restart(
            request, "ExecuteFromTask", pb.ExecuteFromTaskResponse, execute_from
        )

    async def _restart(
        self,
        request: RestartRequest,
        method: str,
        response_type: type[R],
        restart: Callable[[Transaction, int], Awaitable[InstanceRecord]],
    ) -> R:
        """Calls ``restart`` on the request's instance; answers ``{instance}``."""

        async def work(tx: Transaction) -> R:
            return response_type(instance=convert.instance(await restart(tx, request.id)))

        return await once(self.ctx, request, method, response_type, work)

    # ------------------------------------------------------------------------ force success

    async def ForceTaskInstanceSuccess(
        self, request: pb.ForceTaskInstanceSuccessRequest, context: Ctx
    ) -> Any:
        check_id_request(request.id, request.request_id)

        async def work(tx: Transaction) -> pb.ForceTaskInstanceSuccessResponse:
            forced = await tasks.force_success(tx, request.id)
            return pb.ForceTaskInstanceSuccessResponse(
                task_instance=convert.task_instance(forced.task_instance),
                instance=convert.instance(forced.instance),
            )

        return await once(
            self.ctx,
            request,
            "ForceTaskInstanceSuccess",
            pb.ForceTaskInstanceSuccessResponse,
            work,
        )
