"""Server incarnations: every start gets a strictly greater epoch."""

from __future__ import annotations

import asyncio

from dsched_server.store import servers
from dsched_server.store.database import Database
from tests.integration.store.conftest import NOW, at, write


async def _epoch(db: Database, address: str = "master-1:5678") -> int:
    return await write(db, lambda c: servers.new_epoch(c, "master", address, NOW))


async def test_new_epochs_are_strictly_increasing(db: Database) -> None:
    epochs = [await _epoch(db) for _ in range(5)]
    assert epochs[0] > 0
    assert epochs == sorted(set(epochs))  # strictly increasing


async def test_epochs_keep_increasing_on_a_new_database_object(
    db: Database, migrated_db_url: str
) -> None:
    before = [await _epoch(db) for _ in range(3)]
    await db.stop()
    restarted = Database(migrated_db_url)
    await restarted.start()
    try:
        after = await write(restarted, lambda c: servers.new_epoch(c, "worker", "w:1", at(60)))
    finally:
        await restarted.stop()
    assert after > max(before)


async def test_concurrent_starts_get_distinct_epochs(db: Database, migrated_db_url: str) -> None:
    other = Database(migrated_db_url)
    await other.start()
    try:
        epochs = await asyncio.gather(
            *(_epoch(db, f"a:{i}") for i in range(4)), *(_epoch(other, f"b:{i}") for i in range(4))
        )
        later = await _epoch(other)
    finally:
        await other.stop()
    assert len(set(epochs)) == 8
    assert later > max(epochs)
