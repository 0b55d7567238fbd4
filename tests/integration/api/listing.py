"""Reads everything a client can list, page by page, over a channel with gRPC's default settings
(4 MiB receive limit, 8 KiB of metadata): the proof that every answer fits such a client."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from grpc import aio

from dsched.v1 import master_service_pb2 as pb
from dsched.v1 import master_service_pb2_grpc

DEFAULT_RECEIVE_LIMIT = 4 * 1024 * 1024
MAX_PAGES = 10_000  # a server that never ends a listing fails the test instead of hanging it


@dataclass
class Listed:
    """What :func:`list_everything` saw: the items of each listing and the largest answer."""

    projects: list[str] = field(default_factory=list)
    workflows: dict[str, list[str]] = field(default_factory=dict)  # "project/name" -> versions
    instances: list[int] = field(default_factory=list)
    task_instances: dict[int, int] = field(default_factory=dict)  # instance -> count
    pages: dict[str, int] = field(default_factory=dict)  # RPC -> pages read
    largest: int = 0  # bytes of the largest answer

    def counts(self) -> dict[str, int]:
        return {
            "projects": len(self.projects),
            "workflows": len(self.workflows),
            "versions": sum(len(v) for v in self.workflows.values()),
            "instances": len(self.instances),
            "task_instances": sum(self.task_instances.values()),
        }


async def pages(listed: Listed, name: str, call: Callable[[str], Awaitable[Any]]) -> list[Any]:
    """Every page of one listing, following ``next_page_token`` to the end."""
    token, replies = "", []
    for _ in range(MAX_PAGES):
        reply = await call(token)
        replies.append(reply)
        listed.largest = max(listed.largest, reply.ByteSize())
        listed.pages[name] = listed.pages.get(name, 0) + 1
        token = reply.next_page_token
        if not token:
            return replies
    raise AssertionError(f"{name} did not end after {MAX_PAGES} pages")


async def list_everything(address: str, *, page_size: int = 1000) -> Listed:
    """Lists projects, workflows (and GetWorkflow of each), versions, instances, task instances
    (with superseded attempts) and cluster members on a channel with default options."""
    listed = Listed()
    async with aio.insecure_channel(address) as channel:
        stub = master_service_pb2_grpc.MasterServiceStub(channel)
        for reply in await pages(
            listed,
            "ListProjects",
            lambda t: stub.ListProjects(pb.ListProjectsRequest(page_size=page_size, page_token=t)),
        ):
            listed.projects.extend(p.name for p in reply.projects)
        for project in listed.projects:
            await _workflows(listed, stub, project, page_size)
        for reply in await pages(
            listed,
            "ListWorkflowInstances",
            lambda t: stub.ListWorkflowInstances(
                pb.ListWorkflowInstancesRequest(page_size=page_size, page_token=t)
            ),
        ):
            listed.instances.extend(i.id for i in reply.instances)
        for instance_id in listed.instances:
            replies = await pages(
                listed,
                "ListTaskInstances",
                lambda t, i=instance_id: stub.ListTaskInstances(  # type: ignore[misc]
                    pb.ListTaskInstancesRequest(
                        workflow_instance_id=i,
                        include_superseded=True,
                        page_size=page_size,
                        page_token=t,
                    )
                ),
            )
            listed.task_instances[instance_id] = sum(len(r.task_instances) for r in replies)
        members = await stub.ListClusterMembers(pb.ListClusterMembersRequest())
        listed.largest = max(listed.largest, members.ByteSize())
    return listed


async def _workflows(
    listed: Listed, stub: master_service_pb2_grpc.MasterServiceAsyncStub, project: str, size: int
) -> None:
    for reply in await pages(
        listed,
        "ListWorkflows",
        lambda t: stub.ListWorkflows(
            pb.ListWorkflowsRequest(project=project, page_size=size, page_token=t)
        ),
    ):
        for wf in reply.workflows:
            versions: list[str] = []
            for vreply in await pages(
                listed,
                "ListWorkflowVersions",
                lambda t, n=wf.name: stub.ListWorkflowVersions(  # type: ignore[misc]
                    pb.ListWorkflowVersionsRequest(
                        project=project, name=n, page_size=size, page_token=t
                    )
                ),
            ):
                versions.extend(str(v.version) for v in vreply.versions)
            got = await stub.GetWorkflow(pb.GetWorkflowRequest(project=project, name=wf.name))
            listed.largest = max(listed.largest, got.ByteSize())
            listed.workflows[f"{project}/{wf.name}"] = versions
