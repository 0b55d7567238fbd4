"""The request log: the first answer to a request_id is kept and handed out again."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy.exc import IntegrityError

from dsched.errors import FailedPrecondition
from dsched_server.store import requests
from dsched_server.store.database import Database
from tests.integration.store.conftest import NOW, at, overlap, read, write


class _Boom(Exception):
    pass


async def _remember(db: Database, request_id: str, method: str, answer: bytes) -> None:
    await write(db, lambda c: requests.remember(c, request_id, method, answer, NOW))


async def _recall(db: Database, request_id: str, method: str) -> bytes | None:
    return await read(db, lambda c: requests.recall(c, request_id, method))


async def test_a_remembered_answer_is_recalled_for_the_same_request_and_method(
    db: Database,
) -> None:
    await _remember(db, "req-1", "StartWorkflow", b"\x08\x2a")
    await _remember(db, "req-2", "StartWorkflow", b"")
    assert await _recall(db, "req-1", "StartWorkflow") == b"\x08\x2a"
    assert await _recall(db, "req-2", "StartWorkflow") == b""
    assert await _recall(db, "req-3", "StartWorkflow") is None


async def test_reusing_a_request_id_for_another_method_is_a_failed_precondition(
    db: Database,
) -> None:
    await _remember(db, "req-1", "StartWorkflow", b"answer")
    with pytest.raises(FailedPrecondition) as caught:
        await _recall(db, "req-1", "DeleteWorkflow")
    assert caught.value.reason == "REQUEST_ID_REUSED"
    assert caught.value.metadata == {"request_id": "req-1", "method": "StartWorkflow"}


async def test_reusing_a_request_id_for_a_different_request_is_a_failed_precondition(
    db: Database,
) -> None:
    fp_a, fp_b = "a" * 64, "b" * 64
    await write(db, lambda c: requests.remember(c, "req-1", "StartWorkflow", b"first", NOW, fp_a))
    got = await read(db, lambda c: requests.recall(c, "req-1", "StartWorkflow", fp_a))
    assert got == b"first"
    with pytest.raises(FailedPrecondition) as caught:
        await read(db, lambda c: requests.recall(c, "req-1", "StartWorkflow", fp_b))
    assert caught.value.reason == "REQUEST_ID_REUSED"
    assert caught.value.metadata == {"request_id": "req-1", "method": "StartWorkflow"}
    # A row without a fingerprint (written before revision 0003) answers any request with its id.
    await _remember(db, "old", "StartWorkflow", b"old")
    assert await read(db, lambda c: requests.recall(c, "old", "StartWorkflow", fp_b)) == b"old"


async def test_a_second_remember_of_the_same_id_fails_and_the_first_answer_stays(
    db: Database,
) -> None:
    await _remember(db, "req-1", "StartWorkflow", b"first")
    with pytest.raises(IntegrityError):
        await write(db, lambda c: requests.remember(c, "req-1", "StartWorkflow", b"second", at(1)))
    assert await _recall(db, "req-1", "StartWorkflow") == b"first"


async def _race(db: Database, barrier: asyncio.Barrier, answer: bytes) -> None:
    async with db.transaction() as conn:
        await requests.recall(conn, "req-1", "StartWorkflow")
        await overlap(db, barrier)
        await requests.remember(conn, "req-1", "StartWorkflow", answer, NOW)


async def test_of_two_overlapping_transactions_remembering_one_id_only_one_commits(
    db: Database,
) -> None:
    barrier = asyncio.Barrier(2)
    results = await asyncio.wait_for(
        asyncio.gather(
            _race(db, barrier, b"from-a"), _race(db, barrier, b"from-b"), return_exceptions=True
        ),
        timeout=20,
    )
    failures = [r for r in results if r is not None]
    assert len(failures) == 1
    assert isinstance(failures[0], IntegrityError)
    winner = b"from-a" if results[0] is None else b"from-b"
    assert await _recall(db, "req-1", "StartWorkflow") == winner


async def test_an_answer_rolled_back_with_its_change_is_not_remembered(db: Database) -> None:
    with pytest.raises(_Boom):
        async with db.transaction() as conn:
            await requests.remember(conn, "req-1", "StartWorkflow", b"lost", NOW)
            raise _Boom
    assert await _recall(db, "req-1", "StartWorkflow") is None
    await _remember(db, "req-1", "StartWorkflow", b"retried")
    assert await _recall(db, "req-1", "StartWorkflow") == b"retried"
