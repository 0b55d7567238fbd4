"""MasterService: projects and versioned workflow definitions."""

from __future__ import annotations

from typing import Any

from grpc import aio

from dsched.convert import RELEASE_STATE, workflow_spec_from_proto
from dsched.errors import InvalidWorkflow
from dsched.names import reason_for
from dsched.options import ReleaseState
from dsched.server.api import convert
from dsched.server.api.context import MasterContext
from dsched.server.api.idempotency import once
from dsched.server.api.validation import Checks
from dsched.server.store import definitions as repo
from dsched.server.store.database import Conn
from dsched.spec import MAX_DESCRIPTION_LENGTH, WorkflowSpec, text_violation, validate_workflow
from dsched.v1 import master_service_pb2 as pb
from dsched.v1 import resources_pb2

Ctx = aio.ServicerContext[Any, Any]


def _workflow_spec(msg: resources_pb2.Workflow, request_id: str) -> WorkflowSpec:
    """Decodes and validates a definition from a request; raises with every violation."""
    spec, violations = workflow_spec_from_proto(msg)
    more, cyclic = validate_workflow(spec)
    violations.extend(more)
    checks = Checks()
    checks.request_id(request_id)
    violations.extend(checks.violations)
    if violations:
        raise InvalidWorkflow(
            f"workflow {msg.name!r} is invalid",
            reason=reason_for(violations, "CYCLE_DETECTED" if cyclic else "INVALID_WORKFLOW"),
            metadata={"project": msg.project, "workflow": msg.name},
            violations=violations,
        )
    return spec


class DefinitionsApi:
    ctx: MasterContext

    async def CreateProject(self, request: pb.CreateProjectRequest, context: Ctx) -> Any:
        checks = Checks()
        checks.name("project.name", request.project.name, "project name")
        description = request.project.description
        violation = text_violation("project.description", description, MAX_DESCRIPTION_LENGTH)
        if violation is not None:
            checks.violations.append(violation)
        checks.request_id(request.request_id)
        checks.raise_if_any()

        async def work(conn: Conn) -> pb.CreateProjectResponse:
            record = await repo.create_project(
                conn, request.project.name, description, self.ctx.clock.now()
            )
            return pb.CreateProjectResponse(project=convert.project(record))

        return await once(
            self.ctx, request.request_id, "CreateProject", pb.CreateProjectResponse, work
        )

    async def GetProject(self, request: pb.GetProjectRequest, context: Ctx) -> Any:
        checks = Checks()
        checks.name("name", request.name, "project name")
        checks.raise_if_any()
        async with self.ctx.db.read() as conn:
            record = await repo.get_project(conn, request.name)
        return pb.GetProjectResponse(project=convert.project(record))

    async def ListProjects(self, request: pb.ListProjectsRequest, context: Ctx) -> Any:
        async with self.ctx.db.read() as conn:
            page = await repo.list_projects(conn, request.page_size, request.page_token)
        return pb.ListProjectsResponse(
            projects=[convert.project(p) for p in page.items], next_page_token=page.next_token
        )

    async def DeleteProject(self, request: pb.DeleteProjectRequest, context: Ctx) -> Any:
        checks = Checks()
        checks.name("name", request.name, "project name")
        checks.request_id(request.request_id)
        checks.raise_if_any()

        async def work(conn: Conn) -> pb.DeleteProjectResponse:
            await repo.delete_project(conn, request.name)
            return pb.DeleteProjectResponse()

        return await once(
            self.ctx, request.request_id, "DeleteProject", pb.DeleteProjectResponse, work
        )

    async def CreateWorkflow(self, request: pb.CreateWorkflowRequest, context: Ctx) -> Any:
        spec = _workflow_spec(request.workflow, request.request_id)

        async def work(conn: Conn) -> pb.CreateWorkflowResponse:
            record = await repo.create_workflow(conn, spec, self.ctx.clock.now())
            return pb.CreateWorkflowResponse(workflow=convert.workflow(record))

        return await once(
            self.ctx, request.request_id, "CreateWorkflow", pb.CreateWorkflowResponse, work
        )

    async def UpdateWorkflow(self, request: pb.UpdateWorkflowRequest, context: Ctx) -> Any:
        spec = _workflow_spec(request.workflow, request.request_id)

        async def work(conn: Conn) -> pb.UpdateWorkflowResponse:
            record = await repo.update_workflow(conn, spec, self.ctx.clock.now())
            return pb.UpdateWorkflowResponse(workflow=convert.workflow(record))

        return await once(
            self.ctx, request.request_id, "UpdateWorkflow", pb.UpdateWorkflowResponse, work
        )

    async def GetWorkflow(self, request: pb.GetWorkflowRequest, context: Ctx) -> Any:
        checks = Checks()
        checks.name("project", request.project, "project name")
        checks.name("name", request.name, "workflow name")
        if request.version < 0:
            checks.add("version", "must not be negative")
        checks.raise_if_any()
        async with self.ctx.db.read() as conn:
            record = await repo.get_workflow(conn, request.project, request.name, request.version)
        return pb.GetWorkflowResponse(workflow=convert.workflow(record))

    async def ListWorkflows(self, request: pb.ListWorkflowsRequest, context: Ctx) -> Any:
        checks = Checks()
        checks.name("project", request.project, "project name")
        checks.raise_if_any()
        async with self.ctx.db.read() as conn:
            page = await repo.list_workflows(
                conn, request.project, request.page_size, request.page_token
            )
        return pb.ListWorkflowsResponse(
            workflows=[convert.workflow(w) for w in page.items], next_page_token=page.next_token
        )

    async def ListWorkflowVersions(
        self, request: pb.ListWorkflowVersionsRequest, context: Ctx
    ) -> Any:
        checks = Checks()
        checks.name("project", request.project, "project name")
        checks.name("name", request.name, "workflow name")
        checks.raise_if_any()
        async with self.ctx.db.read() as conn:
            page = await repo.list_versions(
                conn, request.project, request.name, request.page_size, request.page_token
            )
        return pb.ListWorkflowVersionsResponse(
            versions=[convert.workflow_version(v) for v in page.items],
            next_page_token=page.next_token,
        )

    async def DeleteWorkflow(self, request: pb.DeleteWorkflowRequest, context: Ctx) -> Any:
        checks = Checks()
        checks.name("project", request.project, "project name")
        checks.name("name", request.name, "workflow name")
        checks.request_id(request.request_id)
        checks.raise_if_any()

        async def work(conn: Conn) -> pb.DeleteWorkflowResponse:
            await repo.delete_workflow(conn, request.project, request.name)
            return pb.DeleteWorkflowResponse()

        return await once(
            self.ctx, request.request_id, "DeleteWorkflow", pb.DeleteWorkflowResponse, work
        )

    async def SetWorkflowReleaseState(
        self, request: pb.SetWorkflowReleaseStateRequest, context: Ctx
    ) -> Any:
        checks = Checks()
        checks.name("project", request.project, "project name")
        checks.name("name", request.name, "workflow name")
        checks.request_id(request.request_id)
        state = RELEASE_STATE.by_number.get(request.release_state)
        if state is None:
            checks.add("release_state", "must be ONLINE or OFFLINE")
        checks.raise_if_any()
        wanted = ReleaseState(str(state))

        async def work(conn: Conn) -> pb.SetWorkflowReleaseStateResponse:
            record = await repo.set_release_state(
                conn, request.project, request.name, wanted, self.ctx.clock.now()
            )
            return pb.SetWorkflowReleaseStateResponse(workflow=convert.workflow(record))

        return await once(
            self.ctx,
            request.request_id,
            "SetWorkflowReleaseState",
            pb.SetWorkflowReleaseStateResponse,
            work,
        )
