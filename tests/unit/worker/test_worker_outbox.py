"""The on-disk outbox: persistence, reload in emission order, rewrite, removal, corruption."""

from __future__ import annotations

from dsched.worker.execution import TaskEventType
from dsched.worker.outbox import Outbox, OutboxEntry


def entry(make_event, epoch: int, seq: int, owner: str = "m1:1", **kw) -> OutboxEntry:
    event = make_event(f"{epoch}-{seq}", **kw)
    return OutboxEntry(event=event, worker_epoch=epoch, seq=seq, owner_address=owner)


async def test_entries_reload_in_emission_order_across_epochs(tmp_path, make_event) -> None:
    outbox = Outbox(tmp_path / "outbox")
    outbox.load()
    stored = [
        entry(make_event, 7, 10, type=TaskEventType.RUNNING),
        entry(make_event, 7, 9, out_params={"a": "1"}, type=TaskEventType.SUCCEEDED),
        entry(make_event, 12, 1, owner="m2:2", message="timed out after 3s"),
        entry(make_event, 7, 100),
    ]
    for e in stored:
        await outbox.put(e)

    loaded = Outbox(tmp_path / "outbox").load()

    assert [e.event.event_id for e in loaded] == ["7-9", "7-10", "7-100", "12-1"]
    assert loaded[0] == stored[1]  # every field survives the round trip
    assert loaded[3].owner_address == "m2:2"


async def test_remove_and_rewrite(tmp_path, make_event) -> None:
    outbox = Outbox(tmp_path)
    outbox.load()
    first, second, third = (entry(make_event, 3, s) for s in (1, 2, 3))
    for e in (first, second, third):
        await outbox.put(e)

    outbox.remove(second)  # acknowledged out of order
    outbox.remove(second)  # twice is harmless
    moved = OutboxEntry(event=third.event, worker_epoch=3, seq=3, owner_address="new:9")
    outbox.rewrite(moved)

    loaded = outbox.load()
    assert [e.event.event_id for e in loaded] == ["3-1", "3-3"]
    assert loaded[1].owner_address == "new:9"


async def test_fsync_mode_writes_the_same_files(tmp_path, make_event) -> None:
    outbox = Outbox(tmp_path, fsync=True)
    outbox.load()
    await outbox.put(entry(make_event, 1, 1))
    assert [e.event.event_id for e in outbox.load()] == ["1-1"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"{1:020d}-{1:020d}.event"]


async def test_corrupt_and_temporary_files_are_not_resent(tmp_path, make_event) -> None:
    outbox = Outbox(tmp_path)
    outbox.load()
    await outbox.put(entry(make_event, 1, 1))
    good = entry(make_event, 1, 2)
    (tmp_path / good.file_name).write_bytes(b"garbage")
    (tmp_path / f"{good.file_name}.tmp").write_bytes(b"half written")
    mismatched = entry(make_event, 1, 3)
    await outbox.put(mismatched)
    (tmp_path / mismatched.file_name).rename(tmp_path / entry(make_event, 1, 4).file_name)
    (tmp_path / "README").write_text("not an event")

    loaded = outbox.load()

    assert [e.event.event_id for e in loaded] == ["1-1"]
    names = sorted(p.name for p in tmp_path.iterdir())
    assert f"{good.file_name}.corrupt" in names
    assert not any(n.endswith(".tmp") for n in names)
    assert "README" in names
