"""Projects: create, get, keyset-paged listing, delete."""

from __future__ import annotations

import asyncio
import base64
import random
from dataclasses import dataclass

import pytest
from sqlalchemy import insert

from dsched.errors import AlreadyExists, FailedPrecondition, InvalidArgument, NotFound
from dsched.v1 import resources_pb2
from dsched_server.api import convert
from dsched_server.api.pages import collect, sync
from dsched_server.store import definitions, paging
from dsched_server.store.database import Conn, Database
from dsched_server.store.models import Project, table
from tests.integration.store.conftest import (
    NOW,
    at,
    make_project,
    make_workflow,
    overlap,
    read,
    write,
)


async def _bulk_projects(db: Database, count: int) -> list[str]:
    names = [f"p{i:05d}" for i in range(count)]
    rows = [{"name": n, "description": "", "create_time": NOW, "update_time": NOW} for n in names]
    random.Random(count).shuffle(rows)  # the listing must not depend on insertion order
    await write(db, lambda c: c.execute(insert(table(Project)), rows))
    return names


@dataclass(frozen=True)
class Page:
    items: list[resources_pb2.Project]
    next_token: str


async def _page(conn: Conn, size: int, token: str) -> Page:
    """One page of ListProjects as the API makes it: the store's keyset query behind the page
    collector, with a token of the "projects" listing."""
    cursor = paging.cursor("projects", {}, paging.NAME_KEY, size, token)
    items, next_token = await collect(
        cursor,
        lambda after, n: definitions.list_projects(conn, after, n),
        lambda p: p.name,
        sync(convert.project),
    )
    return Page(items, next_token)


async def _all_pages(db: Database, size: int) -> list[list[str]]:
    pages: list[list[str]] = []
    token = ""
    async with db.read() as conn:
        while True:
            page = await _page(conn, size, token)
            pages.append([p.name for p in page.items])
            if not page.next_token:
                return pages
            token = page.next_token


async def test_create_project_returns_the_stored_record(db: Database) -> None:
    created = await write(
        db, lambda c: definitions.create_project(c, "etl", "the nightly loads", NOW)
    )
    loaded = await read(db, lambda c: definitions.get_project(c, "etl"))
    assert created == loaded
    assert created.id > 0
    assert (created.name, created.description) == ("etl", "the nightly loads")
    assert created.create_time == created.update_time == NOW


async def test_creating_a_project_twice_is_already_exists(db: Database) -> None:
    first = await make_project(db, "etl")
    with pytest.raises(AlreadyExists) as caught:
        await make_project(db, "etl", now=at(5))
    assert caught.value.metadata == {"project": "etl"}
    assert await read(db, lambda c: definitions.get_project(c, "etl")) == first


async def test_getting_an_unknown_project_is_not_found(db: Database) -> None:
    with pytest.raises(NotFound) as caught:
        await read(db, lambda c: definitions.get_project(c, "ghost"))
    assert caught.value.metadata == {"project": "ghost"}


async def test_projects_are_listed_by_name_in_pages_linked_by_tokens(db: Database) -> None:
    for name in ["delta", "alpha", "echo", "charlie", "bravo"]:
        await make_project(db, name)
    assert await _all_pages(db, 2) == [["alpha", "bravo"], ["charlie", "delta"], ["echo"]]


async def test_a_page_that_ends_exactly_at_the_last_project_has_no_next_token(
    db: Database,
) -> None:
    for name in ["alpha", "bravo"]:
        await make_project(db, name)
    page = await read(db, lambda c: _page(c, 2, ""))
    assert [p.name for p in page.items] == ["alpha", "bravo"]
    assert page.next_token == ""


async def test_listing_an_empty_store_gives_an_empty_page(db: Database) -> None:
    page = await read(db, lambda c: _page(c, 10, ""))
    assert (page.items, page.next_token) == ([], "")


async def test_page_size_zero_means_the_default_page_size(db: Database) -> None:
    names = await _bulk_projects(db, paging.DEFAULT_PAGE_SIZE + 3)
    first = await read(db, lambda c: _page(c, 0, ""))
    assert [p.name for p in first.items] == names[: paging.DEFAULT_PAGE_SIZE]
    rest = await read(db, lambda c: _page(c, 0, first.next_token))
    assert [p.name for p in rest.items] == names[paging.DEFAULT_PAGE_SIZE :]
    assert rest.next_token == ""


async def test_page_size_is_capped(db: Database) -> None:
    names = await _bulk_projects(db, paging.MAX_PAGE_SIZE + 1)
    first = await read(db, lambda c: _page(c, 10**9, ""))
    assert len(first.items) == paging.MAX_PAGE_SIZE
    assert first.next_token
    rest = await read(db, lambda c: _page(c, 10**9, first.next_token))
    assert [p.name for p in rest.items] == names[-1:]


async def test_a_negative_page_size_is_invalid(db: Database) -> None:
    with pytest.raises(InvalidArgument) as caught:
        await read(db, lambda c: _page(c, -1, ""))
    assert caught.value.field == "page_size"


@pytest.mark.parametrize(
    "token",
    [
        "not a token!",
        base64.urlsafe_b64encode(b"not json").decode(),
        base64.urlsafe_b64encode(b'{"other": 1}').decode(),
        base64.urlsafe_b64encode(b"[1, 2]").decode(),
        "e30",  # unpadded base64
    ],
    ids=["not-base64", "not-json", "no-key", "not-an-object", "unpadded"],
)
async def test_a_malformed_page_token_is_invalid(db: Database, token: str) -> None:
    await make_project(db, "alpha")
    with pytest.raises(InvalidArgument) as caught:
        await read(db, lambda c: _page(c, 10, token))
    assert caught.value.field == "page_token"


async def test_deleting_an_empty_project_removes_it(db: Database) -> None:
    await make_project(db, "gone")
    await make_project(db, "kept")
    await write(db, lambda c: definitions.delete_project(c, "gone"))
    with pytest.raises(NotFound):
        await read(db, lambda c: definitions.get_project(c, "gone"))
    assert await _all_pages(db, 10) == [["kept"]]


async def test_deleting_a_project_with_workflows_is_a_failed_precondition(db: Database) -> None:
    workflow = await make_workflow(db)
    with pytest.raises(FailedPrecondition) as caught:
        await write(db, lambda c: definitions.delete_project(c, workflow.project))
    assert caught.value.reason == "PROJECT_NOT_EMPTY"
    assert "1 workflow" in caught.value.message
    assert (await read(db, lambda c: definitions.get_project(c, "proj"))).name == "proj"


async def test_deleting_an_unknown_project_is_not_found(db: Database) -> None:
    with pytest.raises(NotFound):
        await write(db, lambda c: definitions.delete_project(c, "ghost"))


async def _create_after(db: Database, barrier: asyncio.Barrier, description: str) -> object:
    async with db.transaction() as conn:
        await definitions.list_projects(conn, None, 1)
        await overlap(db, barrier)
        return await definitions.create_project(conn, "etl", description, NOW)


async def test_of_two_overlapping_creates_of_one_project_one_wins_the_other_already_exists(
    db: Database,
) -> None:
    barrier = asyncio.Barrier(2)
    results = await asyncio.wait_for(
        asyncio.gather(
            _create_after(db, barrier, "a"), _create_after(db, barrier, "b"), return_exceptions=True
        ),
        timeout=20,
    )
    lost = [r for r in results if isinstance(r, BaseException)]
    assert len(lost) == 1
    assert isinstance(lost[0], AlreadyExists)
    winner = "b" if results[0] is lost[0] else "a"
    stored = await read(db, lambda c: definitions.get_project(c, "etl"))
    assert stored.description == winner
    assert await _all_pages(db, 10) == [["etl"]]
