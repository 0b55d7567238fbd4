"""The handlers' idempotency around the application layer, without a gRPC server: ``once`` runs
an application call and stores its rendered answer in one transaction (ARCHITECTURE.md §10), so
the change and its answer commit together or not at all."""

from __future__ import annotations

import pytest

from dsched.errors import FailedPrecondition
from dsched.v1 import master_service_pb2 as pb
from dsched_server.api import convert
from dsched_server.api.idempotency import once
from dsched_server.app import runs
from dsched_server.app.context import AppContext
from dsched_server.app.transaction import Transaction
from dsched_server.core.records import RunOptions
from dsched_server.engine.notifier import COMMANDS
from dsched_server.store import requests

from .conftest import commands_of, count_instances, make_workflow, read

METHOD = "StartWorkflow"


def request(request_id: str, **params: str) -> pb.StartWorkflowRequest:
    return pb.StartWorkflowRequest(
        project="proj", workflow="etl", params=params, request_id=request_id
    )


async def start(app: AppContext, req: pb.StartWorkflowRequest) -> pb.StartWorkflowResponse:
    """What StartWorkflow does once it has parsed ``req``."""
    run = runs.StartRun(req.project, req.workflow, RunOptions(params=dict(req.params)))

    async def work(tx: Transaction) -> pb.StartWorkflowResponse:
        return pb.StartWorkflowResponse(instance=convert.instance(await runs.start(tx, run)))

    return await once(app, req, METHOD, pb.StartWorkflowResponse, work)


async def test_a_repeated_request_gets_the_first_answer_and_starts_nothing_more(
    app: AppContext,
) -> None:
    await make_workflow(app)
    first = await start(app, request("r-1", DAY="1"))
    woken = app.notifier.signal(COMMANDS)

    again = await start(app, request("r-1", DAY="1"))

    assert again == first
    assert await count_instances(app) == 1
    assert len(await commands_of(app, first.instance.id)) == 1
    assert not woken.is_set()  # nothing new to claim


async def test_the_id_of_another_request_is_refused(app: AppContext) -> None:
    await make_workflow(app)
    await start(app, request("r-1", DAY="1"))

    with pytest.raises(FailedPrecondition) as refused:
        await start(app, request("r-1", DAY="2"))

    assert refused.value.reason == "REQUEST_ID_REUSED"
    assert await count_instances(app) == 1


async def test_no_answer_is_stored_without_the_change(app: AppContext) -> None:
    await make_workflow(app)
    req = request("r-1")

    async def start_then_fail(tx: Transaction) -> pb.StartWorkflowResponse:
        await runs.start(tx, runs.StartRun("proj", "etl"))
        raise RuntimeError("rendering failed")

    with pytest.raises(RuntimeError):
        await once(app, req, METHOD, pb.StartWorkflowResponse, start_then_fail)

    assert await count_instances(app) == 0
    assert await read(app, lambda c: requests.recall(c, "r-1", METHOD)) is None
    # The retry of the same request is a first request: it starts the run, once.
    answer = await start(app, req)
    assert await count_instances(app) == 1
    stored = await read(app, lambda c: requests.recall(c, "r-1", METHOD))
    assert stored == answer.SerializeToString()
