"""The on-disk outbox: persistence, reload in emission order, rewrite, removal, a crash cutting
the last record short, corruption, compaction, the earlier file-per-event format."""

from __future__ import annotations

from dsched_server.protocol.event import TaskEventType
from dsched_server.protocol.wire.event import event_to_bytes
from dsched_worker import outbox as outbox_module
from dsched_worker.outbox import (
    LEGACY_MAGIC,
    LOG_NAME,
    Outbox,
    OutboxEntry,
    put_record,
    stored_entries,
)


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


async def test_fsync_mode_stores_the_same_log(tmp_path, make_event) -> None:
    synced, plain = Outbox(tmp_path / "a", fsync=True), Outbox(tmp_path / "b")
    for outbox in (synced, plain):
        outbox.load()
        await outbox.put(entry(make_event, 1, 1))
        outbox.rewrite(entry(make_event, 1, 1, owner="m2:2"))
    assert (tmp_path / "a" / LOG_NAME).read_bytes() == (tmp_path / "b" / LOG_NAME).read_bytes()
    assert [e.owner_address for e in synced.load()] == ["m2:2"]
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == [LOG_NAME]


async def test_events_cost_no_file_each(tmp_path, make_event) -> None:
    outbox = Outbox(tmp_path)
    outbox.load()
    entries = [entry(make_event, 2, s) for s in range(1, 51)]
    for e in entries:
        await outbox.put(e)
    for e in entries[:-1]:
        outbox.remove(e)
    assert [p.name for p in tmp_path.iterdir()] == [LOG_NAME]
    assert [e.event.event_id for e in stored_entries(tmp_path)] == ["2-50"]


async def test_a_record_cut_short_by_a_crash_is_ignored(tmp_path, make_event) -> None:
    outbox = Outbox(tmp_path)
    outbox.load()
    await outbox.put(entry(make_event, 1, 1))
    await outbox.put(entry(make_event, 1, 2))
    log_file = tmp_path / LOG_NAME
    whole = log_file.read_bytes()
    cut = len(put_record(entry(make_event, 1, 2))) // 2
    log_file.write_bytes(whole[:-cut])  # the second write was under way when the worker died

    loaded = Outbox(tmp_path).load()

    assert [e.event.event_id for e in loaded] == ["1-1"]
    assert [e.event.event_id for e in stored_entries(tmp_path)] == ["1-1"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [LOG_NAME]


async def test_a_corrupt_log_is_kept_aside_and_what_precedes_the_damage_kept(
    tmp_path, make_event
) -> None:
    outbox = Outbox(tmp_path)
    outbox.load()
    for seq in (1, 2, 3):
        await outbox.put(entry(make_event, 1, seq))
    log_file = tmp_path / LOG_NAME
    data = bytearray(log_file.read_bytes())
    second = len(put_record(entry(make_event, 1, 1)))
    data[second + 12] ^= 0xFF  # a flipped byte inside the second record (checksum mismatch)
    log_file.write_bytes(bytes(data))

    loaded = Outbox(tmp_path).load()

    assert [e.event.event_id for e in loaded] == ["1-1"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [LOG_NAME, f"{LOG_NAME}.corrupt"]
    assert (tmp_path / f"{LOG_NAME}.corrupt").read_bytes() == bytes(data)
    assert [e.event.event_id for e in stored_entries(tmp_path)] == ["1-1"]


async def test_the_log_is_truncated_once_all_is_settled_and_compacted_when_not(
    tmp_path, make_event, monkeypatch
) -> None:
    monkeypatch.setattr(outbox_module, "COMPACT_BYTES", 2000)
    outbox = Outbox(tmp_path)
    outbox.load()
    log_file = tmp_path / LOG_NAME
    kept = entry(make_event, 1, 1)
    await outbox.put(kept)  # stays pending throughout
    for seq in range(2, 200):
        e = entry(make_event, 1, seq)
        await outbox.put(e)
        outbox.remove(e)
        assert log_file.stat().st_size < 2000 + 2 * len(put_record(e))
    assert [e.event.event_id for e in stored_entries(tmp_path)] == ["1-1"]

    outbox.remove(kept)
    for seq in range(200, 230):
        e = entry(make_event, 1, seq)
        await outbox.put(e)
        outbox.remove(e)
    assert log_file.stat().st_size < 2000
    assert stored_entries(tmp_path) == []
    assert Outbox(tmp_path).load() == []


async def test_event_files_of_the_earlier_format_move_into_the_log(tmp_path, make_event) -> None:
    def legacy(e: OutboxEntry) -> str:
        name = f"{e.worker_epoch:020d}-{e.seq:020d}.event"
        header = LEGACY_MAGIC + e.owner_address.encode() + b"\n"
        (tmp_path / name).write_bytes(header + event_to_bytes(e.event))
        return name

    old = [entry(make_event, 4, 1, owner="m9:9"), entry(make_event, 4, 2)]
    for e in old:
        legacy(e)
    bad = legacy(entry(make_event, 4, 3))
    (tmp_path / bad).write_bytes(b"garbage")
    (tmp_path / f"{4:020d}-{5:020d}.event.tmp").write_bytes(b"half written")
    (tmp_path / "README").write_text("not an event")

    loaded = Outbox(tmp_path).load()

    assert loaded == old
    assert stored_entries(tmp_path) == old
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [LOG_NAME, f"{bad}.corrupt", "README"]
    )


async def test_an_event_is_serialized_once_and_its_bytes_are_kept(tmp_path, make_event) -> None:
    # The reporter serializes an event once; the record and every send reuse those bytes, and a
    # loaded entry keeps the bytes its record held.
    plain = entry(make_event, 5, 1, out_params={"rows": "3"}, type=TaskEventType.SUCCEEDED)
    data = event_to_bytes(plain.event)
    made = OutboxEntry(
        event=plain.event, worker_epoch=5, seq=1, owner_address="m1:1", event_bytes=data
    )
    assert made == plain and put_record(made) == put_record(plain)
    assert plain.wire_event() == made.wire_event() == data
    outbox = Outbox(tmp_path)
    outbox.load()
    await outbox.put(made)

    [loaded] = Outbox(tmp_path).load()

    assert loaded == plain and loaded.event_bytes == data
