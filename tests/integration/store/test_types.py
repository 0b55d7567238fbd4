"""Column types behave the same on every backend: UTC times with microseconds, unicode text and
JSON, large binary answers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from sqlalchemy import func, select
from sqlalchemy.exc import StatementError

from dsched.spec import ShellSpec, TaskSpec
from dsched_server.core.records import RunOptions
from dsched_server.store import definitions, instances, requests
from dsched_server.store.database import Database
from dsched_server.store.models import RequestLog, table
from tests.integration.store.conftest import (
    NOW,
    make_instance,
    make_project,
    make_workflow,
    read,
    shell,
    workflow_spec,
    write,
)

UNICODE = "données — 数据 🚀 Ωμέγα"


@pytest.mark.parametrize(
    "moment",
    [
        NOW,
        datetime(2026, 1, 1, 0, 0, 0, 1, tzinfo=UTC),
        datetime(2026, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
        datetime(2100, 2, 28, 12, 0, 0, 500000, tzinfo=UTC),  # past MySQL's TIMESTAMP range
    ],
    ids=["now", "one-microsecond", "last-microsecond", "year-2100"],
)
async def test_aware_utc_datetimes_round_trip_with_microseconds(
    db: Database, moment: datetime
) -> None:
    created = await make_project(db, "p", now=moment)
    loaded = await read(db, lambda c: definitions.get_project(c, "p"))
    assert created.create_time == moment
    assert loaded.create_time == moment
    assert loaded.create_time.microsecond == moment.microsecond
    assert loaded.create_time.tzinfo is UTC


async def test_datetimes_in_other_zones_are_stored_as_the_same_instant_in_utc(
    db: Database,
) -> None:
    ist = timezone(timedelta(hours=5, minutes=30))
    local = datetime(2026, 3, 14, 20, 39, 26, 535897, tzinfo=ist)  # == NOW
    await make_project(db, "p", now=local)
    loaded = await read(db, lambda c: definitions.get_project(c, "p"))
    assert loaded.create_time == NOW
    assert loaded.create_time.tzinfo is UTC
    assert loaded.create_time.hour == 15


async def test_nullable_datetimes_round_trip_none_and_values(db: Database) -> None:
    workflow = await make_workflow(db)
    instance_id = await make_instance(db, workflow)
    fresh = await read(db, lambda c: instances.get_instance(c, instance_id))
    assert (fresh.start_time, fresh.end_time) == (None, None)

    end = NOW + timedelta(microseconds=7)
    times: instances.InstanceValues = {"start_time": NOW, "end_time": end}
    await write(db, lambda c: instances.update_fields(c, instance_id, 0, times))
    loaded = await read(db, lambda c: instances.get_instance(c, instance_id))
    assert (loaded.start_time, loaded.end_time) == (NOW, end)
    assert loaded.end_time is not None and loaded.end_time - NOW == timedelta(microseconds=7)


async def test_naive_datetimes_are_rejected_and_nothing_is_written(db: Database) -> None:
    naive = NOW.replace(tzinfo=None)
    with pytest.raises(StatementError) as caught:
        await write(db, lambda c: definitions.create_project(c, "naive", "", naive))
    assert isinstance(caught.value.orig, ValueError)
    assert "naive datetime" in str(caught.value.orig)
    assert await read(db, lambda c: definitions.list_projects(c, None, 10)) == []


async def test_unicode_text_fills_a_column_to_its_declared_length(db: Database) -> None:
    # 1024 characters of 3- and 4-byte UTF-8: the column counts characters on every backend.
    description = ("数据🚀" * 342)[:1024]
    await write(db, lambda c: definitions.create_project(c, "wide", description, NOW))
    loaded = await read(db, lambda c: definitions.get_project(c, "wide"))
    assert loaded.description == description
    assert len(loaded.description) == 1024


async def test_json_documents_round_trip_unicode(db: Database) -> None:
    spec = workflow_spec(
        description=f"workflow {UNICODE}",
        params={"GREETING": UNICODE, "EMPTY": ""},
        tasks=(
            shell("a", description=UNICODE, params={"CITY": "Zürich", "EMOJI": "🚀🚀"}),
            TaskSpec(name="b", kind=ShellSpec(script=f"echo '{UNICODE}'\nexit 0"), upstream=("a",)),
        ),
    )
    await make_workflow(db, spec)
    loaded = await read(db, lambda c: definitions.get_workflow(c, "proj", "wf"))
    assert loaded.spec == spec
    assert loaded.spec.params["GREETING"] == UNICODE
    assert loaded.spec.tasks[0].params == {"CITY": "Zürich", "EMOJI": "🚀🚀"}
    assert loaded.spec.tasks[1].kind == ShellSpec(script=f"echo '{UNICODE}'\nexit 0")


async def test_instance_options_and_var_pool_round_trip_unicode(db: Database) -> None:
    workflow = await make_workflow(db)
    options = RunOptions(params={"WHO": UNICODE}, worker_group="gpu")
    instance_id = await make_instance(db, workflow, options=options)
    await write(
        db, lambda c: instances.update_fields(c, instance_id, 0, {"var_pool": {"OUT": UNICODE}})
    )
    loaded = await read(db, lambda c: instances.get_instance(c, instance_id))
    assert loaded.options == options
    assert loaded.var_pool == {"OUT": UNICODE}


async def test_the_request_log_stores_answers_larger_than_64_kib(db: Database) -> None:
    answer = bytes(range(256)) * 1024 + b"\x00tail"  # 256 KiB + 5 bytes, every byte value
    await write(db, lambda c: requests.remember(c, "big", "CreateWorkflow", answer, NOW))
    recalled = await read(db, lambda c: requests.recall(c, "big", "CreateWorkflow"))
    assert recalled == answer
    stored = await read(db, lambda c: c.scalar(select(func.length(table(RequestLog).c.response))))
    assert stored == len(answer) > 64 * 1024  # binary, not its hex text
