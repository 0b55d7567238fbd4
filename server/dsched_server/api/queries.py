"""MasterService: reading instances, task instances, events, the cluster and the server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import asdict
from typing import Any

from grpc import aio

from dsched.convert import SERVER_ROLE, SERVER_STATUS, WORKFLOW_STATE
from dsched.errors import DschedError
from dsched.states import WorkflowState
from dsched.v1 import enums_pb2, resources_pb2
from dsched.v1 import master_service_pb2 as pb
from dsched_server.api import convert
from dsched_server.api.context import MasterContext
from dsched_server.api.pages import collect, sync
from dsched_server.api.validation import Checks
from dsched_server.app import watches
from dsched_server.constants import MASTERS_PATH
from dsched_server.heartbeat import HeartbeatInfo, decode_heartbeat
from dsched_server.store import guard, paging
from dsched_server.store import instances as instance_repo
from dsched_server.store import task_instances as ti_repo

Ctx = aio.ServicerContext[Any, Any]


def heartbeat(info: HeartbeatInfo) -> resources_pb2.Heartbeat:
    """The client's view of a registry node: everything but the fencing epoch."""
    return resources_pb2.Heartbeat(
        cpu_usage=info.cpu_usage,
        memory_usage=info.memory_usage,
        load_average=info.load_average,
        disk_usage=info.disk_usage,
        slots_total=info.slots_total,
        slots_in_use=info.slots_in_use,
        queued=info.queued,
        start_time=convert.timestamp(info.start_time),
        report_time=convert.timestamp(info.report_time),
        status=SERVER_STATUS.number(info.status),
        pid=info.pid,
    )


class QueriesApi:
    ctx: MasterContext

    async def GetWorkflowInstance(self, request: pb.GetWorkflowInstanceRequest, ctx: Ctx) -> Any:
        checks = Checks()
        checks.positive_id("id", request.id)
        checks.raise_if_any()
        async with self.ctx.db.read() as conn:
            record = await instance_repo.get_instance(conn, request.id)
        return pb.GetWorkflowInstanceResponse(instance=convert.instance(record))

    async def ListWorkflowInstances(
        self, request: pb.ListWorkflowInstancesRequest, ctx: Ctx
    ) -> Any:
        checks = Checks()
        checks.optional_name("project", request.project, "project name")
        checks.optional_name("workflow", request.workflow, "workflow name")
        if request.workflow and not request.project:
            checks.add("project", "required when filtering by workflow")
        states: list[WorkflowState] = []
        for i, number in enumerate(request.states):
            member = WORKFLOW_STATE.by_number.get(number)
            if member is None:
                checks.add(f"states[{i}]", f"unknown value {number}")
            else:
                states.append(WorkflowState(member.value))
        after = None
        if request.HasField("submitted_after"):
            try:
                after = request.submitted_after.ToDatetime(tzinfo=self.ctx.clock.now().tzinfo)
            except ValueError as exc:  # seconds or nanos outside Timestamp's range
                checks.add("submitted_after", f"is not a valid timestamp: {exc}")
        checks.raise_if_any()
        query = {
            "project": request.project,
            "workflow": request.workflow,
            "states": sorted(s.value for s in states),
            "submitted_after": after.isoformat() if after is not None else None,
        }
        cursor = paging.cursor(
            "instances", query, paging.ID_KEY, request.page_size, request.page_token
        )
        async with self.ctx.db.read() as conn:
            items, token = await collect(
                cursor,
                lambda before, n: instance_repo.list_instances(
                    conn,
                    project=request.project,
                    workflow=request.workflow,
                    states=states,
                    submitted_after=after,
                    after=before,
                    limit=n,
                ),
                lambda r: r.id,
                sync(convert.instance),
            )
        return pb.ListWorkflowInstancesResponse(instances=items, next_page_token=token)

    async def WatchWorkflowInstance(
        self, request: pb.WatchWorkflowInstanceRequest, ctx: Ctx
    ) -> AsyncIterator[pb.WatchWorkflowInstanceResponse]:
        checks = Checks()
        checks.positive_id("id", request.id)
        if request.after_sequence < 0:
            checks.add("after_sequence", "must not be negative")
        checks.raise_if_any()
        async for frame in watches.watch(
            self.ctx,
            request.id,
            request.after_sequence,
            keep_open=request.keep_open,
            state_only=request.state_only,
        ):
            yield pb.WatchWorkflowInstanceResponse(
                events=convert.events(frame.events),
                cursor=frame.cursor,
                state=WORKFLOW_STATE.number(frame.state),
            )

    async def GetTaskInstance(self, request: pb.GetTaskInstanceRequest, ctx: Ctx) -> Any:
        checks = Checks()
        checks.positive_id("id", request.id)
        checks.raise_if_any()
        async with self.ctx.db.read() as conn:
            record = await ti_repo.get(conn, request.id)
        return pb.GetTaskInstanceResponse(task_instance=convert.task_instance(record))

    async def ListTaskInstances(self, request: pb.ListTaskInstancesRequest, ctx: Ctx) -> Any:
        checks = Checks()
        checks.positive_id("workflow_instance_id", request.workflow_instance_id)
        checks.raise_if_any()
        query = {
            "workflow_instance_id": request.workflow_instance_id,
            "include_superseded": request.include_superseded,
        }
        cursor = paging.cursor(
            "task_instances", query, paging.ID_KEY, request.page_size, request.page_token
        )
        async with self.ctx.db.read() as conn:
            await instance_repo.get_instance(conn, request.workflow_instance_id)
            items, token = await collect(
                cursor,
                lambda after, n: ti_repo.list_for_instance(
                    conn,
                    request.workflow_instance_id,
                    include_superseded=request.include_superseded,
                    after=after,
                    limit=n,
                ),
                lambda r: r.id,
                sync(convert.task_instance),
            )
        return pb.ListTaskInstancesResponse(task_instances=items, next_page_token=token)

    async def ListClusterMembers(self, request: pb.ListClusterMembersRequest, ctx: Ctx) -> Any:
        checks = Checks()
        if request.role not in SERVER_ROLE.by_number and request.role != 0:
            checks.add("role", f"unknown value {request.role}")
        checks.raise_if_any()
        members: list[resources_pb2.ClusterMember] = []
        if request.role in (0, enums_pb2.SERVER_ROLE_MASTER):
            masters = await self.ctx.registry.children(MASTERS_PATH)
            for address in sorted(masters):
                try:
                    info = decode_heartbeat(masters[address])
                except DschedError:
                    continue  # a member mid-registration; it shows up on the next call
                members.append(
                    resources_pb2.ClusterMember(
                        role=enums_pb2.SERVER_ROLE_MASTER,
                        address=address,
                        heartbeat=heartbeat(info),
                        cluster_address=info.cluster_address,
                    )
                )
        if request.role in (0, enums_pb2.SERVER_ROLE_WORKER):
            for worker in self.ctx.workers.members:
                members.append(
                    resources_pb2.ClusterMember(
                        role=enums_pb2.SERVER_ROLE_WORKER,
                        address=worker.address,
                        group=worker.group,
                        heartbeat=heartbeat(worker.heartbeat),
                        weight=self.ctx.workers.weight_of(worker),
                    )
                )
        return pb.ListClusterMembersResponse(members=members)

    async def GetServerInfo(self, request: pb.GetServerInfoRequest, ctx: Ctx) -> Any:
        return pb.GetServerInfoResponse(
            version=self.ctx.version,
            api_version="dsched.v1",
            role=enums_pb2.SERVER_ROLE_MASTER,
            address=self.ctx.address,
            start_time=convert.timestamp(self.ctx.start_time),
            # Generic over the counters, so ones the engine adds later show up without a change;
            # with the state writes the store refused in this process (store/guard.py).
            counters={
                **{name: int(value) for name, value in asdict(self.ctx.metrics).items()},
                **{f"refused_{table}": n for table, n in asdict(guard.REFUSALS).items()},
            },
        )
