"""Unicode names over the wire: accepted forms are stored and run exactly as sent; rejected forms
answer INVALID_ARGUMENT with the field and store nothing (README: Names)."""

from __future__ import annotations

import unicodedata
from collections.abc import Awaitable, Callable

import pytest

from tests.integration.api.conftest import (
    SUCCEEDED,
    Cluster,
    Failure,
    assert_invalid,
    chain,
    failure,
    online_workflow,
    pb,
    res,
    run_to_end,
    shell,
    snapshot,
    start,
    task_instances,
    workflow,
)

ACCEPTED = [
    "每日报表",
    "日次レポート",
    "일일 보고서",
    "отчёт",
    "تقرير",
    "café",
    "a;b (v2)",
    "表" * 64,
]

REJECTED = {
    "not NFC": "cafe\u0301",
    "bidi override": "abc\u202edcb",
    "bidi isolate": "a\u2066b",
    "zero-width space": "每日\u200b报表",
    "byte order mark": "\ufeffreport",
    "hangul filler": "a\u3164",
    "no-break space": "a\u00a0b",
    "ideographic space": "每日\u3000报表",
    "slash": "a/b",
    "backslash": "a\\b",
    "control": "a\x07",
    "C1 control": "a\x9b",
    "leading space": " a",
    "trailing space": "a ",
    "line separator": "a\u2028b",
    "private use": "a\ue000",
    "unassigned": "a\U0003fffe",
    "65 characters": "表" * 65,
    "193 bytes": "r" + "\U0001f600" * 48,
}


async def test_names_in_any_script_are_stored_and_run_exactly_as_sent(cluster: Cluster) -> None:
    for i, name in enumerate(ACCEPTED):
        tasks = [shell(name, 'echo "$DSCHED_TASK_NAME"'), shell("后", "true", [name])]
        project = f"项目{i}"
        stored = await online_workflow(cluster, project, name, tasks)
        assert stored.name == name and stored.project == project
        assert [t.name for t in stored.tasks] == [name, "后"]
        got = await cluster.stub.GetWorkflow(pb.GetWorkflowRequest(project=project, name=name))
        assert got.workflow.name == name
        inst = await start(cluster, project, name, start_tasks=[name])
        assert (await run_to_end(cluster, inst.id)).state == SUCCEEDED
        tis = await task_instances(cluster, inst.id)
        assert [t.task_name for t in tis] == [name, "后"]
        listed = await cluster.stub.ListWorkflowInstances(
            pb.ListWorkflowInstancesRequest(project=project, workflow=name)
        )
        assert [w.id for w in listed.instances] == [inst.id]


Call = Callable[[Cluster, str], Awaitable[Failure]]
WHERE: dict[str, tuple[Call, str, str]] = {
    "project": (
        lambda c, n: failure(
            c.stub.CreateProject(pb.CreateProjectRequest(project=res.Project(name=n)))
        ),
        "project.name",
        "INVALID_ARGUMENT",
    ),
    "workflow": (
        lambda c, n: failure(
            c.stub.CreateWorkflow(pb.CreateWorkflowRequest(workflow=workflow("p", n, chain("a"))))
        ),
        "workflow.name",
        "INVALID_WORKFLOW",
    ),
    "task": (
        lambda c, n: failure(
            c.stub.CreateWorkflow(pb.CreateWorkflowRequest(workflow=workflow("p", "w2", chain(n))))
        ),
        "workflow.tasks[0].name",
        "INVALID_WORKFLOW",
    ),
    "lookup": (
        lambda c, n: failure(c.stub.GetWorkflow(pb.GetWorkflowRequest(project="p", name=n))),
        "name",
        "INVALID_ARGUMENT",
    ),
    "start task": (
        lambda c, n: failure(
            c.stub.StartWorkflow(
                pb.StartWorkflowRequest(project="p", workflow="w", start_tasks=[n])
            )
        ),
        "start_tasks[0]",
        "INVALID_ARGUMENT",
    ),
}


@pytest.mark.parametrize("where", WHERE)
async def test_rejected_names_answer_invalid_argument_and_store_nothing(
    cluster: Cluster, where: str
) -> None:
    await online_workflow(cluster, "p", "w", chain("a"))
    call, field_path, reason = WHERE[where]
    before = await snapshot(cluster)
    for label, name in REJECTED.items():
        got = await call(cluster, name)
        assert_invalid(got, field_path, reason=reason)
        assert got.fields == [field_path], (label, got)
    assert await snapshot(cluster) == before


async def test_a_name_not_in_nfc_is_refused_not_normalised(cluster: Cluster) -> None:
    nfc = "café"
    nfd = unicodedata.normalize("NFD", nfc)
    await online_workflow(cluster, "p", nfc, chain("a"))
    # The decomposed spelling neither finds the stored workflow nor creates a second one.
    got = await failure(cluster.stub.GetWorkflow(pb.GetWorkflowRequest(project="p", name=nfd)))
    assert_invalid(got, "name", contains="normal form NFC")
    before = await snapshot(cluster)
    got = await failure(
        cluster.stub.CreateWorkflow(
            pb.CreateWorkflowRequest(workflow=workflow("p", nfd, chain("a")))
        )
    )
    assert_invalid(got, "workflow.name", reason="INVALID_WORKFLOW", contains="normal form NFC")
    assert await snapshot(cluster) == before
