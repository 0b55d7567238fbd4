"""MasterService: projects and versioned workflow definitions."""

from __future__ import annotations

from typing import Any

from grpc import aio

from dsched.convert import RELEASE_STATE, workflow_spec_from_proto
from dsched.errors import InvalidArgument
from dsched.options import ReleaseState
from dsched.spec import MAX_DESCRIPTION_LENGTH, WorkflowSpec, check_workflow, text_violation
from dsched.v1 import master_service_pb2 as pb
from dsched.v1 import resources_pb2
from dsched_server.api import convert
from dsched_server.api.context import MasterContext
from dsched_server.api.idempotency import once
from dsched_server.api.pages import collect, page_by_name, sync
from dsched_server.api.validation import Checks, check_name_request
from dsched_server.app.transaction import Transaction
from dsched_server.store import definitions as repo
from dsched_server.store import paging

Ctx = aio.ServicerContext[Any, Any]


def _workflow_spec(msg: resources_pb2.Workflow, request_id: str) -> WorkflowSpec:
    """Decodes and validates a definition from a request; raises with every violation."""
    spec, violations = workflow_spec_from_proto(msg)
    checks = Checks()
    checks.request_id(request_id)
    check_workflow(spec, [*violations, *checks.violations])
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

        async def work(tx: Transaction) -> pb.CreateProjectResponse:
            record = await repo.create_project(tx.conn, request.project.name, description, tx.now)
            return pb.CreateProjectResponse(project=convert.project(record))

        return await once(self.ctx, request, "CreateProject", pb.CreateProjectResponse, work)

    async def GetProject(self, request: pb.GetProjectRequest, context: Ctx) -> Any:
        checks = Checks()
        checks.name("name", request.name, "project name")
        checks.raise_if_any()
        async with self.ctx.db.read() as conn:
            record = await repo.get_project(conn, request.name)
        return pb.GetProjectResponse(project=convert.project(record))

    async def ListProjects(self, request: pb.ListProjectsRequest, context: Ctx) -> Any:
        items, token = await page_by_name(
            self.ctx.db, "projects", request, repo.list_projects, lambda p: p.name, convert.project
        )
        return pb.ListProjectsResponse(projects=items, next_page_token=token)

    async def DeleteProject(self, request: pb.DeleteProjectRequest, context: Ctx) -> Any:
        check_name_request(request.name, "project name", request.request_id)

        async def work(tx: Transaction) -> pb.DeleteProjectResponse:
            await repo.delete_project(tx.conn, request.name)
            return pb.DeleteProjectResponse()

        return await once(self.ctx, request, "DeleteProject", pb.DeleteProjectResponse, work)

    async def CreateWorkflow(self, request: pb.CreateWorkflowRequest, context: Ctx) -> Any:
        spec = _workflow_spec(request.workflow, request.request_id)

        async def work(tx: Transaction) -> pb.CreateWorkflowResponse:
            record = await repo.create_workflow(tx.conn, spec, tx.now)
            return pb.CreateWorkflowResponse(workflow=convert.workflow(record))

        return await once(self.ctx, request, "CreateWorkflow", pb.CreateWorkflowResponse, work)

    async def UpdateWorkflow(self, request: pb.UpdateWorkflowRequest, context: Ctx) -> Any:
        expected = None
        if request.HasField("expected_version"):
            expected = request.expected_version
            if expected < 1:
                raise InvalidArgument(
                    "invalid expected_version",
                    violations=[Checks.violation("expected_version", "must be at least 1")],
                )
        spec = _workflow_spec(request.workflow, request.request_id)

        async def work(tx: Transaction) -> pb.UpdateWorkflowResponse:
            record = await repo.update_workflow(tx.conn, spec, tx.now, expected)
            return pb.UpdateWorkflowResponse(workflow=convert.workflow(record))

        return await once(self.ctx, request, "UpdateWorkflow", pb.UpdateWorkflowResponse, work)

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
        cursor = paging.cursor(
            "workflows",
            {"project": request.project},
            paging.NAME_KEY,
            request.page_size,
            request.page_token,
        )
        async with self.ctx.db.read() as conn:
            project = await repo.get_project(conn, request.project)

            async def load(row: tuple[int, str]) -> resources_pb2.Workflow:
                return convert.workflow(await repo.get_workflow_by_code(conn, row[0]))

            items, token = await collect(
                cursor,
                lambda after, n: repo.workflow_codes(conn, project.id, after, n),
                lambda row: row[1],
                load,
            )
        return pb.ListWorkflowsResponse(workflows=items, next_page_token=token)

    async def ListWorkflowVersions(
        self, request: pb.ListWorkflowVersionsRequest, context: Ctx
    ) -> Any:
        checks = Checks()
        checks.name("project", request.project, "project name")
        checks.name("name", request.name, "workflow name")
        checks.raise_if_any()
        cursor = paging.cursor(
            "versions",
            {"project": request.project, "workflow": request.name},
            paging.VERSION_KEY,
            request.page_size,
            request.page_token,
        )
        async with self.ctx.db.read() as conn:
            code = await repo.workflow_code(conn, request.project, request.name)
            items, token = await collect(
                cursor,
                lambda after, n: repo.list_versions(conn, code, after, n),
                lambda v: v.version,
                sync(convert.workflow_version),
            )
        return pb.ListWorkflowVersionsResponse(versions=items, next_page_token=token)

    async def DeleteWorkflow(self, request: pb.DeleteWorkflowRequest, context: Ctx) -> Any:
        checks = Checks()
        checks.name("project", request.project, "project name")
        checks.name("name", request.name, "workflow name")
        checks.request_id(request.request_id)
        checks.raise_if_any()

        async def work(tx: Transaction) -> pb.DeleteWorkflowResponse:
            await repo.delete_workflow(tx.conn, request.project, request.name)
            return pb.DeleteWorkflowResponse()

        return await once(self.ctx, request, "DeleteWorkflow", pb.DeleteWorkflowResponse, work)

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

        async def work(tx: Transaction) -> pb.SetWorkflowReleaseStateResponse:
            record = await repo.set_release_state(
                tx.conn, request.project, request.name, wanted, tx.now
            )
            return pb.SetWorkflowReleaseStateResponse(workflow=convert.workflow(record))

        return await once(
            self.ctx,
            request,
            "SetWorkflowReleaseState",
            pb.SetWorkflowReleaseStateResponse,
            work,
        )
