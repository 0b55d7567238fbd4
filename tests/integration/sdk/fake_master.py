"""A fake dsched master on a real gRPC server (127.0.0.1:0): canned answers, rich errors.

The SDK and the CLI talk to it exactly as to a real master. Tests script failures with
:meth:`FakeMaster.fail` (any RPC aborts with a ``google.rpc.Status`` carrying ``ErrorInfo`` and
``BadRequest``), make streams break with UNAVAILABLE after a number of frames, and read back every
request the fake received.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from typing import Any

import grpc
from google.protobuf.message import Message

from dsched.convert import workflow_spec_from_proto
from dsched.spec import validate_workflow
from dsched.v1 import (
    enums_pb2,
    master_service_pb2,
    master_service_pb2_grpc,
    resources_pb2,
)
from tests.integration.sdk.fake_state import TERMINAL, World, now, page, rich_status

M = master_service_pb2
WS = enums_pb2.WorkflowInstanceState


class FakeMaster(master_service_pb2_grpc.MasterServiceServicer):
    """MasterService over a :class:`World`; see the module docstring."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.requests: list[tuple[str, Message]] = []
        self.failures: dict[str, grpc.Status] = {}
        self.watch_batch = 0  # events per frame; 0 = all available
        self.watch_breaks = 0  # how many watch streams break with UNAVAILABLE ...
        self.watch_break_after = 1  # ... after this many frames

    def fail(self, method: str, status: grpc.Status) -> None:
        """Makes every call of ``method`` abort with ``status`` until :meth:`heal`."""
        self.failures[method] = status

    def heal(self, method: str) -> None:
        self.failures.pop(method, None)

    def seen(self, method: str) -> list[Any]:
        return [r for name, r in self.requests if name == method]

    def _enter(self, method: str, request: Message, context: grpc.ServicerContext) -> None:
        self.requests.append((method, request))
        status = self.failures.get(method)
        if status is not None:
            context.abort_with_status(status)

    def _not_found(self, context: grpc.ServicerContext, what: str) -> Any:
        context.abort_with_status(
            rich_status(grpc.StatusCode.NOT_FOUND, f"{what} not found", reason="NOT_FOUND")
        )

    # ------------------------------------------------------------------------- projects

    def CreateProject(self, request: Any, context: Any) -> Any:
        self._enter("CreateProject", request, context)
        if request.project.name in self.world.projects:
            context.abort_with_status(
                rich_status(grpc.StatusCode.ALREADY_EXISTS, "taken", reason="PROJECT_EXISTS")
            )
        project = resources_pb2.Project(name=request.project.name)
        project.create_time.CopyFrom(now())
        self.world.projects[project.name] = project
        return M.CreateProjectResponse(project=project)

    def GetProject(self, request: Any, context: Any) -> Any:
        self._enter("GetProject", request, context)
        project = self.world.projects.get(request.name)
        if project is None:
            return self._not_found(context, f"project {request.name!r}")
        return M.GetProjectResponse(project=project)

    def ListProjects(self, request: Any, context: Any) -> Any:
        self._enter("ListProjects", request, context)
        items, token = page(
            list(self.world.projects.values()), request.page_size, request.page_token
        )
        return M.ListProjectsResponse(projects=items, next_page_token=token)

    def DeleteProject(self, request: Any, context: Any) -> Any:
        self._enter("DeleteProject", request, context)
        self.world.projects.pop(request.name, None)
        return M.DeleteProjectResponse()

    # ------------------------------------------------------------------------- workflows

    def _validated(self, request: Any, context: Any) -> None:
        spec, violations = workflow_spec_from_proto(request.workflow)
        cyclic = False
        if not violations:
            violations, cyclic = validate_workflow(spec)
        if violations:
            context.abort_with_status(
                rich_status(
                    grpc.StatusCode.INVALID_ARGUMENT,
                    "invalid workflow",
                    reason="CYCLE_DETECTED" if cyclic else "INVALID_WORKFLOW",
                    violations=[(v.field, v.description) for v in violations],
                )
            )

    def CreateWorkflow(self, request: Any, context: Any) -> Any:
        self._enter("CreateWorkflow", request, context)
        self._validated(request, context)
        stored = self.world.store_workflow(request.workflow, new=True)
        return M.CreateWorkflowResponse(workflow=stored)

    def UpdateWorkflow(self, request: Any, context: Any) -> Any:
        self._enter("UpdateWorkflow", request, context)
        self._validated(request, context)
        key = (request.workflow.project, request.workflow.name)
        if self.world.workflows[key].online:
            context.abort_with_status(
                rich_status(grpc.StatusCode.FAILED_PRECONDITION, "online", reason="WORKFLOW_ONLINE")
            )
        stored = self.world.store_workflow(request.workflow, new=False)
        return M.UpdateWorkflowResponse(workflow=stored)

    def GetWorkflow(self, request: Any, context: Any) -> Any:
        self._enter("GetWorkflow", request, context)
        found = self.world.current(request.project, request.name)
        if found is None:
            return self._not_found(context, f"workflow {request.name!r}")
        return M.GetWorkflowResponse(workflow=found)

    def ListWorkflows(self, request: Any, context: Any) -> Any:
        self._enter("ListWorkflows", request, context)
        names = [n for (p, n) in self.world.workflows if p == request.project]
        current = [self.world.current(request.project, n) for n in sorted(names)]
        items, token = page(current, request.page_size, request.page_token)
        return M.ListWorkflowsResponse(workflows=items, next_page_token=token)

    def ListWorkflowVersions(self, request: Any, context: Any) -> Any:
        self._enter("ListWorkflowVersions", request, context)
        record = self.world.workflows[(request.project, request.name)]
        versions = [
            resources_pb2.WorkflowVersion(version=w.version, task_count=len(w.tasks))
            for w in reversed(record.versions)
        ]
        items, token = page(versions, request.page_size, request.page_token)
        return M.ListWorkflowVersionsResponse(versions=items, next_page_token=token)

    def DeleteWorkflow(self, request: Any, context: Any) -> Any:
        self._enter("DeleteWorkflow", request, context)
        self.world.workflows.pop((request.project, request.name), None)
        return M.DeleteWorkflowResponse()

    def SetWorkflowReleaseState(self, request: Any, context: Any) -> Any:
        self._enter("SetWorkflowReleaseState", request, context)
        record = self.world.workflows[(request.project, request.name)]
        record.online = request.release_state == enums_pb2.RELEASE_STATE_ONLINE
        workflow = self.world.current(request.project, request.name)
        return M.SetWorkflowReleaseStateResponse(workflow=workflow)

    # ------------------------------------------------------------------------- instances

    def StartWorkflow(self, request: Any, context: Any) -> Any:
        self._enter("StartWorkflow", request, context)
        workflow = self.world.current(request.project, request.workflow)
        if workflow is None:
            return self._not_found(context, f"workflow {request.workflow!r}")
        if workflow.release_state != enums_pb2.RELEASE_STATE_ONLINE:
            context.abort_with_status(
                rich_status(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    f"workflow {request.workflow!r} is OFFLINE",
                    reason="WORKFLOW_NOT_ONLINE",
                    metadata={"workflow": request.workflow},
                )
            )
        instance = self.world.add_instance(
            request.project,
            workflow,
            params=dict(request.params),
            start_tasks=list(request.start_tasks),
            task_depend_type=request.task_depend_type,
            failure_strategy=request.failure_strategy,
            priority=request.priority,
            worker_group=request.worker_group,
            dry_run=request.dry_run,
        )
        if self.world.auto_run:
            self.world.drive(instance.id, workflow)
        return M.StartWorkflowResponse(instance=instance)

    def _control(
        self, method: str, request: Any, context: Any, allowed: Collection[Any], to: int
    ) -> Any:
        self._enter(method, request, context)
        instance = self.world.instances.get(request.id)
        if instance is None:
            return self._not_found(context, f"instance {request.id}")
        if instance.state not in allowed:
            name = WS.Name(instance.state).removeprefix("WORKFLOW_INSTANCE_STATE_")
            context.abort_with_status(
                rich_status(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    f"instance {request.id} is {name}",
                    reason="ILLEGAL_TRANSITION",
                    metadata={"instance": str(request.id), "state": name},
                )
            )
        self.world.set_state(request.id, to)
        return self.world.instances[request.id]

    def _pending(self, method: str, request: Any, context: Any) -> Any:
        self._enter(method, request, context)
        return self.world.instances[request.id]

    def PauseWorkflowInstance(self, request: Any, context: Any) -> Any:
        if self.world.controls_pending:
            instance = self._pending("PauseWorkflowInstance", request, context)
            return M.PauseWorkflowInstanceResponse(
                instance=instance, status=enums_pb2.CONTROL_STATUS_PENDING
            )
        running = {WS.WORKFLOW_INSTANCE_STATE_RUNNING}
        instance = self._control(
            "PauseWorkflowInstance",
            request,
            context,
            running,
            WS.WORKFLOW_INSTANCE_STATE_READY_PAUSE,
        )
        return M.PauseWorkflowInstanceResponse(
            instance=instance, status=enums_pb2.CONTROL_STATUS_APPLIED
        )

    def StopWorkflowInstance(self, request: Any, context: Any) -> Any:
        if self.world.controls_pending:
            instance = self._pending("StopWorkflowInstance", request, context)
            return M.StopWorkflowInstanceResponse(
                instance=instance, status=enums_pb2.CONTROL_STATUS_PENDING
            )
        unfinished = set(WS.values()) - TERMINAL
        instance = self._control(
            "StopWorkflowInstance", request, context, unfinished, WS.WORKFLOW_INSTANCE_STATE_STOPPED
        )
        return M.StopWorkflowInstanceResponse(
            instance=instance, status=enums_pb2.CONTROL_STATUS_APPLIED
        )

    def ResumeWorkflowInstance(self, request: Any, context: Any) -> Any:
        paused = {WS.WORKFLOW_INSTANCE_STATE_PAUSED}
        instance = self._control(
            "ResumeWorkflowInstance", request, context, paused, WS.WORKFLOW_INSTANCE_STATE_SUBMITTED
        )
        return M.ResumeWorkflowInstanceResponse(instance=instance)

    def RerunWorkflowInstance(self, request: Any, context: Any) -> Any:
        instance = self._control(
            "RerunWorkflowInstance",
            request,
            context,
            TERMINAL,
            WS.WORKFLOW_INSTANCE_STATE_SUBMITTED,
        )
        return M.RerunWorkflowInstanceResponse(instance=instance)

    def RecoverFailedWorkflowInstance(self, request: Any, context: Any) -> Any:
        failed = {WS.WORKFLOW_INSTANCE_STATE_FAILED, WS.WORKFLOW_INSTANCE_STATE_STOPPED}
        instance = self._control(
            "RecoverFailedWorkflowInstance",
            request,
            context,
            failed,
            WS.WORKFLOW_INSTANCE_STATE_SUBMITTED,
        )
        return M.RecoverFailedWorkflowInstanceResponse(instance=instance)

    def ExecuteFromTask(self, request: Any, context: Any) -> Any:
        instance = self._control(
            "ExecuteFromTask", request, context, TERMINAL, WS.WORKFLOW_INSTANCE_STATE_SUBMITTED
        )
        return M.ExecuteFromTaskResponse(instance=instance)

    def GetWorkflowInstance(self, request: Any, context: Any) -> Any:
        self._enter("GetWorkflowInstance", request, context)
        instance = self.world.instances.get(request.id)
        if instance is None:
            return self._not_found(context, f"instance {request.id}")
        return M.GetWorkflowInstanceResponse(instance=instance)

    def ListWorkflowInstances(self, request: Any, context: Any) -> Any:
        self._enter("ListWorkflowInstances", request, context)
        found = [
            i
            for i in sorted(self.world.instances.values(), key=lambda i: -i.id)
            if (not request.project or i.project == request.project)
            and (not request.workflow or i.workflow == request.workflow)
            and (not request.states or i.state in request.states)
        ]
        items, token = page(found, request.page_size, request.page_token)
        return M.ListWorkflowInstancesResponse(instances=items, next_page_token=token)

    def WatchWorkflowInstance(self, request: Any, context: Any) -> Iterator[Any]:
        self._enter("WatchWorkflowInstance", request, context)
        world = self.world
        if request.id not in world.instances:
            self._not_found(context, f"instance {request.id}")
        cursor = request.after_sequence
        sent = 0
        while context.is_active() and not world.stopping.is_set():
            with world.cond:
                pending = [e for e in world.events[request.id] if e.sequence > cursor]
                if not pending:
                    world.cond.wait(timeout=0.5)
                    pending = [e for e in world.events[request.id] if e.sequence > cursor]
                batch = pending[: self.watch_batch] if self.watch_batch else pending
                state = world.instances[request.id].state
            if self.watch_breaks and sent >= self.watch_break_after:
                self.watch_breaks -= 1
                context.abort(grpc.StatusCode.UNAVAILABLE, "master restarting")
            if batch:
                cursor = batch[-1].sequence
            yield M.WatchWorkflowInstanceResponse(events=batch, cursor=cursor, state=state)
            sent += 1
            ended = bool(batch) and batch[-1].workflow_state in TERMINAL and state in TERMINAL
            if ended and not request.keep_open:
                return

    # ------------------------------------------------------------------------- tasks

    def GetTaskInstance(self, request: Any, context: Any) -> Any:
        self._enter("GetTaskInstance", request, context)
        task = self.world.tasks.get(request.id)
        if task is None:
            return self._not_found(context, f"task instance {request.id}")
        return M.GetTaskInstanceResponse(task_instance=task)

    def ListTaskInstances(self, request: Any, context: Any) -> Any:
        self._enter("ListTaskInstances", request, context)
        tasks = [
            t
            for t in self.world.tasks.values()
            if t.workflow_instance_id == request.workflow_instance_id
        ]
        items, token = page(tasks, request.page_size, request.page_token)
        return M.ListTaskInstancesResponse(task_instances=items, next_page_token=token)

    def ForceTaskInstanceSuccess(self, request: Any, context: Any) -> Any:
        self._enter("ForceTaskInstanceSuccess", request, context)
        task = self.world.tasks[request.id]
        task.state = enums_pb2.TASK_INSTANCE_STATE_FORCED_SUCCESS
        instance = self.world.instances[task.workflow_instance_id]
        return M.ForceTaskInstanceSuccessResponse(task_instance=task, instance=instance)

    # ------------------------------------------------------------------------- cluster

    def ListClusterMembers(self, request: Any, context: Any) -> Any:
        self._enter("ListClusterMembers", request, context)
        beat = resources_pb2.Heartbeat(
            cpu_usage=0.25,
            memory_usage=0.5,
            slots_total=8,
            slots_in_use=2,
            queued=3,
            pid=77,
            status=enums_pb2.SERVER_STATUS_NORMAL,
        )
        beat.start_time.CopyFrom(now())
        beat.start_time.seconds -= 3723  # up 1h02m03s
        beat.report_time.CopyFrom(now())
        members = [
            resources_pb2.ClusterMember(
                role=enums_pb2.SERVER_ROLE_MASTER,
                address="10.0.0.1:5678",
                heartbeat=beat,
                cluster_address="10.0.0.1:5680",
            ),
            resources_pb2.ClusterMember(
                role=enums_pb2.SERVER_ROLE_WORKER,
                address="10.0.0.2:5679",
                group="default",
                heartbeat=beat,
                weight=42.5,
            ),
        ]
        if request.role:
            members = [m for m in members if m.role == request.role]
        return M.ListClusterMembersResponse(members=members)

    def CleanUpHistory(self, request: Any, context: Any) -> Any:
        """Says, per kind asked, that it deleted (dry: would delete) 10 times the kind's number,
        from a day before now to now; 0 of the instances."""
        self._enter("CleanUpHistory", request, context)
        response = M.CleanUpHistoryResponse(dry_run=request.dry_run)
        for kind in request.kinds:
            count = 0 if kind == enums_pb2.HISTORY_KIND_INSTANCES else 10 * kind
            tally = response.tallies.add(kind=kind, count=count)
            if count:
                tally.newest.CopyFrom(now())
                tally.oldest.CopyFrom(now())
                tally.oldest.seconds -= 86400
        return response

    def GetServerInfo(self, request: Any, context: Any) -> Any:
        self._enter("GetServerInfo", request, context)
        response = M.GetServerInfoResponse(
            version="0.1.0-fake",
            api_version="dsched.v1",
            role=enums_pb2.SERVER_ROLE_MASTER,
            address="127.0.0.1:5678",
            counters={"stale_events": 2, "commands_claimed": 5},
        )
        response.start_time.CopyFrom(now())
        return response

    # ------------------------------------------------------------------------- backfills
    # Not served by the fake: the SDK's backfill and schedule calls are tested against a real
    # master (tests/integration/api/test_backfill.py, test_schedules.py, tests/e2e/).

    def _unserved(self, method: str, request: Message, context: grpc.ServicerContext) -> Any:
        self._enter(method, request, context)
        context.abort(grpc.StatusCode.UNIMPLEMENTED, f"the fake master does not serve {method}")

    def CreateBackfill(self, request: Any, context: Any) -> Any:
        return self._unserved("CreateBackfill", request, context)

    def GetBackfill(self, request: Any, context: Any) -> Any:
        return self._unserved("GetBackfill", request, context)

    def ListBackfills(self, request: Any, context: Any) -> Any:
        return self._unserved("ListBackfills", request, context)

    def PauseBackfill(self, request: Any, context: Any) -> Any:
        return self._unserved("PauseBackfill", request, context)

    def ResumeBackfill(self, request: Any, context: Any) -> Any:
        return self._unserved("ResumeBackfill", request, context)

    def CancelBackfill(self, request: Any, context: Any) -> Any:
        return self._unserved("CancelBackfill", request, context)

    def CreateSchedule(self, request: Any, context: Any) -> Any:
        return self._unserved("CreateSchedule", request, context)

    def UpdateSchedule(self, request: Any, context: Any) -> Any:
        return self._unserved("UpdateSchedule", request, context)

    def GetSchedule(self, request: Any, context: Any) -> Any:
        return self._unserved("GetSchedule", request, context)

    def ListSchedules(self, request: Any, context: Any) -> Any:
        return self._unserved("ListSchedules", request, context)

    def DeleteSchedule(self, request: Any, context: Any) -> Any:
        return self._unserved("DeleteSchedule", request, context)

    def SetScheduleState(self, request: Any, context: Any) -> Any:
        return self._unserved("SetScheduleState", request, context)

    def PreviewSchedule(self, request: Any, context: Any) -> Any:
        return self._unserved("PreviewSchedule", request, context)

    def CreateDatasource(self, request: Any, context: Any) -> Any:
        return self._unserved("CreateDatasource", request, context)

    def GetDatasource(self, request: Any, context: Any) -> Any:
        return self._unserved("GetDatasource", request, context)

    def ListDatasources(self, request: Any, context: Any) -> Any:
        return self._unserved("ListDatasources", request, context)

    def UpdateDatasource(self, request: Any, context: Any) -> Any:
        return self._unserved("UpdateDatasource", request, context)

    def DeleteDatasource(self, request: Any, context: Any) -> Any:
        return self._unserved("DeleteDatasource", request, context)

    def TestDatasource(self, request: Any, context: Any) -> Any:
        return self._unserved("TestDatasource", request, context)
