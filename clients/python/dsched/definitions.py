"""Client calls for projects and workflow definitions (versions and release state included)."""

from __future__ import annotations

from collections.abc import Iterator

from dsched import coerce, convert
from dsched.errors import Aborted, AlreadyExists, NotFound, version_mismatch
from dsched.options import ReleaseState
from dsched.results import Page, Project, WorkflowInfo, WorkflowVersionInfo
from dsched.rpc import RpcBase, iter_pages
from dsched.rpc import request_id as _rid
from dsched.spec import WorkflowSpec
from dsched.v1 import master_service_pb2, resources_pb2


class DefinitionCalls(RpcBase):
    """Projects and workflow definitions; part of :class:`dsched.Client`."""

    # ------------------------------------------------------------------------------- projects

    def create_project(
        self, name: str, description: str = "", *, request_id: str | None = None
    ) -> Project:
        """Creates a project. Raises AlreadyExists if the name is taken."""
        req = master_service_pb2.CreateProjectRequest(
            project=resources_pb2.Project(name=name, description=description),
            request_id=_rid(request_id),
        )
        return convert.project_from_proto(self._call(self._master.CreateProject, req).project)

    def get_project(self, name: str) -> Project:
        """Returns a project. Raises NotFound if it does not exist."""
        req = master_service_pb2.GetProjectRequest(name=name)
        return convert.project_from_proto(self._call(self._master.GetProject, req).project)

    def ensure_project(self, name: str, description: str = "") -> Project:
        """Returns the project ``name``, creating it first if it does not exist."""
        try:
            return self.get_project(name)
        except NotFound:
            pass
        try:
            return self.create_project(name, description)
        except AlreadyExists:  # someone created it between our two calls: fine
            return self.get_project(name)

    def list_projects(self, *, page_size: int = 0, page_token: str = "") -> Page[Project]:
        """Returns one page of projects by name (``page_size`` 0: the server's default)."""
        req = master_service_pb2.ListProjectsRequest(page_size=page_size, page_token=page_token)
        resp = self._call(self._master.ListProjects, req)
        return Page(tuple(map(convert.project_from_proto, resp.projects)), resp.next_page_token)

    def iter_projects(self, *, page_size: int = 0) -> Iterator[Project]:
        """Yields every project, fetching pages as the caller goes."""
        return iter_pages(lambda token: self.list_projects(page_size=page_size, page_token=token))

    def delete_project(self, name: str, *, request_id: str | None = None) -> None:
        """Deletes an empty project. Raises FailedPrecondition if it still has workflows."""
        req = master_service_pb2.DeleteProjectRequest(name=name, request_id=_rid(request_id))
        self._call(self._master.DeleteProject, req)

    # ------------------------------------------------------------------------------- workflows

    def create_workflow(self, spec: WorkflowSpec, *, request_id: str | None = None) -> WorkflowInfo:
        """Stores ``spec`` as version 1, OFFLINE.

        Raises:
            InvalidWorkflow: the server rejected the DAG (field violations say where).
            AlreadyExists: the project has a workflow of that name.
            NotFound: the project does not exist.
        """
        req = master_service_pb2.CreateWorkflowRequest(
            workflow=convert.workflow_spec_to_proto(spec), request_id=_rid(request_id)
        )
        return convert.workflow_info_from_proto(
            self._call(self._master.CreateWorkflow, req).workflow
        )

    def update_workflow(
        self,
        spec: WorkflowSpec,
        *,
        request_id: str | None = None,
        expected_version: int | None = None,
    ) -> WorkflowInfo:
        """Stores ``spec`` as a new version of an OFFLINE workflow; FailedPrecondition if ONLINE.

        Args:
            expected_version: the version the edit is based on; if the workflow has moved on,
                :class:`~dsched.errors.Aborted` with reason VERSION_MISMATCH (its metadata names
                ``current_version``) and nothing is stored. None: no check.
        """
        req = master_service_pb2.UpdateWorkflowRequest(
            workflow=convert.workflow_spec_to_proto(spec), request_id=_rid(request_id)
        )
        if expected_version is not None:
            req.expected_version = expected_version
        return convert.workflow_info_from_proto(
            self._call(self._master.UpdateWorkflow, req).workflow
        )

    def get_workflow(self, project: str, name: str, *, version: int = 0) -> WorkflowInfo:
        """Returns one version of a workflow (0: the current one). NotFound if there is none."""
        req = master_service_pb2.GetWorkflowRequest(project=project, name=name, version=version)
        return convert.workflow_info_from_proto(self._call(self._master.GetWorkflow, req).workflow)

    def list_workflows(
        self, project: str, *, page_size: int = 0, page_token: str = ""
    ) -> Page[WorkflowInfo]:
        """Returns one page of a project's workflows (current versions) by name."""
        req = master_service_pb2.ListWorkflowsRequest(
            project=project, page_size=page_size, page_token=page_token
        )
        resp = self._call(self._master.ListWorkflows, req)
        items = tuple(map(convert.workflow_info_from_proto, resp.workflows))
        return Page(items, resp.next_page_token)

    def iter_workflows(self, project: str, *, page_size: int = 0) -> Iterator[WorkflowInfo]:
        """Yields every workflow of a project, fetching pages as the caller goes."""
        return iter_pages(
            lambda token: self.list_workflows(project, page_size=page_size, page_token=token)
        )

    def list_workflow_versions(
        self, project: str, name: str, *, page_size: int = 0, page_token: str = ""
    ) -> Page[WorkflowVersionInfo]:
        """Returns one page of a workflow's versions, newest first."""
        req = master_service_pb2.ListWorkflowVersionsRequest(
            project=project, name=name, page_size=page_size, page_token=page_token
        )
        resp = self._call(self._master.ListWorkflowVersions, req)
        items = tuple(map(convert.workflow_version_from_proto, resp.versions))
        return Page(items, resp.next_page_token)

    def iter_workflow_versions(
        self, project: str, name: str, *, page_size: int = 0
    ) -> Iterator[WorkflowVersionInfo]:
        """Yields every version of a workflow, newest first."""
        return iter_pages(
            lambda token: self.list_workflow_versions(
                project, name, page_size=page_size, page_token=token
            )
        )

    def delete_workflow(self, project: str, name: str, *, request_id: str | None = None) -> None:
        """Deletes an OFFLINE workflow without unfinished instances, with all its versions."""
        req = master_service_pb2.DeleteWorkflowRequest(
            project=project, name=name, request_id=_rid(request_id)
        )
        self._call(self._master.DeleteWorkflow, req)

    def set_release_state(
        self,
        project: str,
        name: str,
        state: ReleaseState | str,
        *,
        request_id: str | None = None,
    ) -> WorkflowInfo:
        """Takes a workflow ONLINE (startable) or OFFLINE (editable); returns it afterwards."""
        member = coerce.enum_value(ReleaseState, state, "release_state")
        req = master_service_pb2.SetWorkflowReleaseStateRequest(
            project=project,
            name=name,
            release_state=convert.RELEASE_STATE.number(member),
            request_id=_rid(request_id),
        )
        resp = self._call(self._master.SetWorkflowReleaseState, req)
        return convert.workflow_info_from_proto(resp.workflow)

    def put_workflow(
        self, spec: WorkflowSpec, *, expected_version: int | None = None
    ) -> WorkflowInfo:
        """Makes ``spec`` the current, ONLINE version of its workflow, changing only what differs.

        Creates the project and the workflow if they are missing. An existing workflow whose
        current version equals ``spec`` keeps its version; otherwise it is taken OFFLINE, updated
        to a new version and taken ONLINE again. ``spec`` should be validated first (the server
        validates it too).

        Args:
            expected_version: the version the edit is based on. If an existing workflow that
                differs from ``spec`` is at another version, :class:`~dsched.errors.Aborted`
                (VERSION_MISMATCH) is raised and the workflow is left as it was (also when the
                server finds it moved on after this check).
        """
        self.ensure_project(spec.project)
        try:
            current: WorkflowInfo | None = self.get_workflow(spec.project, spec.name)
        except NotFound:
            current = None
        if current is None:
            try:
                current = self.create_workflow(spec)
            except AlreadyExists:  # created concurrently; compare with what won
                current = self.get_workflow(spec.project, spec.name)
        if current.spec != spec:
            if expected_version is not None and current.version != expected_version:
                raise version_mismatch(
                    current.project, current.name, current.version, expected_version
                )
            was_online = current.online
            if was_online:
                self.set_release_state(spec.project, spec.name, ReleaseState.OFFLINE)
            try:
                current = self.update_workflow(spec, expected_version=expected_version)
            except Aborted:
                if was_online:  # leave it as it was: ONLINE, at the version that won
                    self.set_release_state(spec.project, spec.name, ReleaseState.ONLINE)
                raise
        if not current.online:
            current = self.set_release_state(spec.project, spec.name, ReleaseState.ONLINE)
        return current
