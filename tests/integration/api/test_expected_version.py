"""UpdateWorkflow's expected_version: a stale one is ABORTED (VERSION_MISMATCH, the current version
in the metadata) and stores nothing; the check and the insert are atomic; absent, the last update
wins as before."""

from __future__ import annotations

import asyncio

import grpc
import pytest

import dsched
from dsched.v1 import enums_pb2
from tests.integration.api.conftest import (
    Cluster,
    assert_invalid,
    assert_status,
    chain,
    failure,
    online_workflow,
    pb,
    snapshot,
    workflow,
)
from tests.integration.api.listing import DEFAULT_RECEIVE_LIMIT, list_everything


def update(expected: int | None, *tasks: str) -> pb.UpdateWorkflowRequest:
    request = pb.UpdateWorkflowRequest(workflow=workflow("p", "w", chain(*tasks)))
    if expected is not None:
        request.expected_version = expected
    return request


@pytest.fixture
async def draft(cluster: Cluster) -> Cluster:
    await online_workflow(cluster, "p", "w", chain("a"))
    await cluster.stub.SetWorkflowReleaseState(
        pb.SetWorkflowReleaseStateRequest(
            project="p", name="w", release_state=enums_pb2.RELEASE_STATE_OFFLINE
        )
    )
    return cluster


async def test_the_expected_version_makes_the_next_one(draft: Cluster) -> None:
    got = await draft.stub.UpdateWorkflow(update(1, "a", "b"))
    assert got.workflow.version == 2


@pytest.mark.parametrize("stale", [1, 99])
async def test_a_stale_expected_version_is_aborted_and_stores_nothing(
    draft: Cluster, stale: int
) -> None:
    await draft.stub.UpdateWorkflow(update(1, "a", "b"))
    before = await snapshot(draft)
    got = await failure(draft.stub.UpdateWorkflow(update(stale, "a", "c")))
    assert_status(got, grpc.StatusCode.ABORTED, "VERSION_MISMATCH")
    assert got.metadata["current_version"] == "2"
    assert got.metadata["expected_version"] == str(stale)
    assert await snapshot(draft) == before
    listed = await list_everything(draft.address)
    assert listed.workflows["p/w"] == ["2", "1"]
    assert listed.largest < DEFAULT_RECEIVE_LIMIT


async def test_without_an_expected_version_the_last_update_wins(draft: Cluster) -> None:
    await draft.stub.UpdateWorkflow(update(1, "a", "b"))
    got = await draft.stub.UpdateWorkflow(update(None, "a", "c"))
    assert got.workflow.version == 3


@pytest.mark.parametrize("bad", [0, -1])
async def test_an_expected_version_below_one_is_invalid(draft: Cluster, bad: int) -> None:
    before = await snapshot(draft)
    got = await failure(draft.stub.UpdateWorkflow(update(bad, "a", "b")))
    assert_invalid(got, "expected_version")
    assert await snapshot(draft) == before


async def test_of_concurrent_updates_from_one_version_exactly_one_wins(draft: Cluster) -> None:
    results = await asyncio.gather(
        *(draft.stub.UpdateWorkflow(update(1, "a", f"b{i}")) for i in range(8)),
        return_exceptions=True,
    )
    won = [r for r in results if isinstance(r, pb.UpdateWorkflowResponse)]
    lost = [r for r in results if not isinstance(r, pb.UpdateWorkflowResponse)]
    assert len(won) == 1 and won[0].workflow.version == 2
    for err in lost:
        assert isinstance(err, grpc.aio.AioRpcError), err
        assert err.code() == grpc.StatusCode.ABORTED
    listed = await list_everything(draft.address)
    assert listed.workflows["p/w"] == ["2", "1"]


async def test_the_sdk_refuses_a_stale_submit_and_leaves_the_workflow_online(
    cluster: Cluster,
) -> None:
    with dsched.Client.connect(cluster.address) as client:
        with dsched.Workflow("w", project="p") as first:
            dsched.Shell("a", "echo one")
        v1 = await asyncio.to_thread(first.submit, client)
        with dsched.Workflow("w", project="p") as theirs:
            dsched.Shell("a", "echo theirs")
        v2 = await asyncio.to_thread(theirs.submit, client, expected_version=v1.version)
        assert (v2.version, v2.online) == (2, True)
        with dsched.Workflow("w", project="p") as mine:
            dsched.Shell("a", "echo mine")
        with pytest.raises(dsched.Aborted) as caught:
            await asyncio.to_thread(mine.submit, client, expected_version=v1.version)
        assert caught.value.reason == "VERSION_MISMATCH"
        assert caught.value.metadata["current_version"] == "2"
        now = await asyncio.to_thread(client.get_workflow, "p", "w")
        assert (now.version, now.online, now.spec) == (2, True, v2.spec)


async def test_the_sdk_sends_the_expected_version_to_the_server(draft: Cluster) -> None:
    await draft.stub.UpdateWorkflow(update(1, "a", "b"))
    with dsched.Client.connect(draft.address) as client:
        spec = (await asyncio.to_thread(client.get_workflow, "p", "w", version=1)).spec
        with pytest.raises(dsched.Aborted) as caught:
            await asyncio.to_thread(client.update_workflow, spec, expected_version=1)
    assert caught.value.reason == "VERSION_MISMATCH"
