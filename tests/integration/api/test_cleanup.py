"""CleanUpHistory over real gRPC against a real master and worker, on SQLite, PostgreSQL and
MariaDB: validation, a dry run that deletes nothing and counts what the real run then deletes,
nothing of an unfinished instance, and a repeated request_id answered once."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path
from typing import Any

import grpc
from sqlalchemy import select, update

from dsched.v1 import enums_pb2
from dsched_server.store.models import InstanceEvent, RequestLog, WorkflowInstance, table
from tests.integration.api.conftest import (
    SUCCEEDED,
    Cluster,
    Gate,
    assert_status,
    chain,
    enums,
    failure,
    instance,
    online_workflow,
    pb,
    row_counts,
    run_to_end,
    seconds,
    shell,
    start,
    start_cluster,
    task_is,
    watch_until,
)

WI, EV, R = table(WorkflowInstance), table(InstanceEvent), table(RequestLog)
KINDS = [
    enums_pb2.HISTORY_KIND_REQUEST_IDS,
    enums_pb2.HISTORY_KIND_EVENTS,
    enums_pb2.HISTORY_KIND_INSTANCES,
]


async def age_everything(c: Cluster, by: timedelta) -> None:
    """Moves every recorded time ``by`` into the past, as if the history were that old."""
    async with c.master.db.transaction() as conn:
        for key, column in ((WI.c.id, WI.c.end_time), (EV.c.sequence, EV.c.create_time)):
            rows: list[Any] = list(
                await conn.execute(select(key, column).where(column.is_not(None)))
            )
            for k, t in rows:
                await conn.execute(update(key.table).where(key == k).values({column.name: t - by}))
        answers: list[Any] = list(await conn.execute(select(R.c.request_id, R.c.create_time)))
        for k, t in answers:
            await conn.execute(update(R).where(R.c.request_id == k).values(create_time=t - by))


async def test_invalid_requests_change_nothing(cluster: Cluster) -> None:
    got = await failure(cluster.stub.CleanUpHistory(pb.CleanUpHistoryRequest()))
    assert_status(got, grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT")
    assert got.fields == ["older_than", "kinds"]
    request = pb.CleanUpHistoryRequest(
        older_than=seconds(0),
        kinds=[enums_pb2.HISTORY_KIND_EVENTS, enums_pb2.HISTORY_KIND_EVENTS, 0, 99],  # type: ignore[list-item]
    )
    got = await failure(cluster.stub.CleanUpHistory(request))
    assert got.fields == ["older_than", "kinds[1]", "kinds[2]", "kinds[3]"]


async def test_dry_run_then_clean_up_spares_unfinished_instances(
    db_url: str, tmp_path: Path
) -> None:
    async with start_cluster(db_url, tmp_path) as c:
        gate = Gate(tmp_path / "gate")
        await online_workflow(c, "p", "w", chain("a", "b"))
        await online_workflow(c, "p", "held", [shell("wait", gate.wait)])
        done = [await start(c, "p", "w", request_id=f"start-{i}") for i in range(3)]
        for d in done:
            assert (await run_to_end(c, d.id)).state == SUCCEEDED
        running = await start(c, "p", "held")
        await watch_until(c, running.id, task_is("wait", enums.TASK_INSTANCE_STATE_RUNNING))
        await age_everything(c, timedelta(days=2))
        before = await row_counts(c)

        request = pb.CleanUpHistoryRequest(older_than=seconds(86400), kinds=KINDS, dry_run=True)
        dry = await c.stub.CleanUpHistory(request)
        assert dry.dry_run and await row_counts(c) == before
        counts = {t.kind: t.count for t in dry.tallies}
        assert [t.kind for t in dry.tallies] == KINDS
        # The three starts' request ids (and the definitions' requests had none); every event of
        # the finished runs; the finished runs.
        assert counts[enums_pb2.HISTORY_KIND_REQUEST_IDS] == 3
        assert counts[enums_pb2.HISTORY_KIND_INSTANCES] == 3
        assert counts[enums_pb2.HISTORY_KIND_EVENTS] > 3 * 6
        for t in dry.tallies:
            assert t.oldest.ToDatetime() <= t.newest.ToDatetime()

        request.dry_run, request.request_id = False, "clean-1"
        other = pb.CleanUpHistoryRequest()
        other.CopyFrom(request)
        other.request_id = "clean-2"
        # Two clean-ups at once (on one master here; the store tests have two pools): each row
        # is deleted once, so their counts add up to the dry run's.
        real, second = await asyncio.gather(
            c.stub.CleanUpHistory(request), c.stub.CleanUpHistory(other)
        )
        both = zip(real.tallies, second.tallies, strict=True)
        assert {a.kind: a.count + b.count for a, b in both} == counts
        after = await row_counts(c)
        assert after["workflow_instances"] == before["workflow_instances"] - 3
        for d in done:
            got = await failure(c.stub.GetWorkflowInstance(pb.GetWorkflowInstanceRequest(id=d.id)))
            assert got.code is grpc.StatusCode.NOT_FOUND
        # The same request again: the first answer, although nothing is left to delete.
        assert await c.stub.CleanUpHistory(request) == real
        # The unfinished instance kept everything and still ends well.
        assert (await instance(c, running.id)).state == enums.WORKFLOW_INSTANCE_STATE_RUNNING
        gate.open()
        assert (await run_to_end(c, running.id)).state == SUCCEEDED
