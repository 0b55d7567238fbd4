"""Names and ids are case-sensitive on every backend, as the spec validator treats them."""

from __future__ import annotations

from dsched.options import Priority
from dsched.states import TaskState
from dsched_server.store import definitions, requests, task_instances
from dsched_server.store.database import Database
from dsched_server.store.task_instances import NewAttempt
from tests.integration.store.conftest import (
    NOW,
    claim_instance,
    make_instance,
    make_project,
    make_workflow,
    read,
    shell,
    workflow_spec,
    write,
)


async def test_projects_whose_names_differ_only_in_case_are_distinct(db: Database) -> None:
    lower = await make_project(db, "etl")
    upper = await make_project(db, "ETL")
    assert lower.id != upper.id
    assert (await read(db, lambda c: definitions.get_project(c, "etl"))).id == lower.id
    assert (await read(db, lambda c: definitions.get_project(c, "ETL"))).id == upper.id


async def test_workflows_whose_names_differ_only_in_case_are_distinct(db: Database) -> None:
    lower = await make_workflow(db, workflow_spec(name="daily"))
    upper = await make_workflow(db, workflow_spec(name="Daily", tasks=(shell("only"),)))
    assert lower.id != upper.id
    loaded = await read(db, lambda c: definitions.get_workflow(c, "proj", "Daily"))
    assert [t.name for t in loaded.spec.tasks] == ["only"]


async def test_tasks_whose_names_differ_only_in_case_are_stored_and_run_apart(
    db: Database,
) -> None:
    spec = workflow_spec(tasks=(shell("load"), shell("Load", "load"), shell("LOAD", "Load")))
    workflow = await make_workflow(db, spec)
    assert workflow.spec == spec
    instance_id = await make_instance(db, workflow)
    await claim_instance(db, instance_id)
    # Second attempts for the last two: creating them supersedes the earlier attempts of the
    # tasks named (a first attempt has none), which must not reach "load".
    attempts = [
        NewAttempt(
            task_name=name,
            attempt=number,
            retry_times=0,
            state=TaskState.SUBMITTED,
            priority=Priority.MEDIUM,
            worker_group="",
        )
        for name, number in (("load", 1), ("Load", 2), ("LOAD", 2))
    ]
    await write(db, lambda c: task_instances.create_attempts(c, instance_id, attempts[:1], NOW))
    await write(db, lambda c: task_instances.create_attempts(c, instance_id, attempts[1:], NOW))
    valid = await read(db, lambda c: task_instances.valid_attempts(c, instance_id))
    assert sorted(a.task_name for a in valid) == ["LOAD", "Load", "load"]


async def test_request_ids_that_differ_only_in_case_are_different_requests(db: Database) -> None:
    await write(db, lambda c: requests.remember(c, "req-a", "StartWorkflow", b"lower", NOW))
    assert await read(db, lambda c: requests.recall(c, "REQ-A", "DeleteWorkflow")) is None
    await write(db, lambda c: requests.remember(c, "REQ-A", "DeleteWorkflow", b"upper", NOW))
    assert await read(db, lambda c: requests.recall(c, "req-a", "StartWorkflow")) == b"lower"
