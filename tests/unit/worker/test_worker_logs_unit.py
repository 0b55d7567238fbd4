"""Log paths, the index, and the live log's follow notifications."""

from __future__ import annotations

import asyncio
import os
import threading
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from dsched_worker.logs import LogStore, TaskLog, log_path, task_instance_of


def test_log_path_is_numeric_and_dated_by_utc_submit_time(make_execution) -> None:
    local = timezone(timedelta(hours=-5))
    execution = make_execution(
        task_name="../../etc/passwd", submit_time=datetime(2024, 3, 1, 20, 30, tzinfo=local)
    )

    path = log_path(Path("/data/logs"), execution)

    assert path == Path("/data/logs/20240302/9001/4/5-11.log")


def test_task_instance_of_reads_this_and_the_earlier_layouts_names() -> None:
    assert task_instance_of("5-11.log") == 11
    assert task_instance_of("11.log") == 11  # an earlier version's <wi>/<ti>.log
    for name in ("5-11", "x-11.log", "5-x.log", "5-.log", "-11.log", "1-2-3.log", "\u0663.log"):
        assert task_instance_of(name) is None, name


def test_create_writes_the_header_and_links_the_index(tmp_path, make_execution) -> None:
    store = LogStore(tmp_path)
    execution = make_execution()

    task_log = store.create(execution, ["task load", "accepted"])

    link = tmp_path / "logs" / "index" / "11.log"
    assert not link.is_symlink() and os.path.samefile(link, task_log.path)  # a hard link
    assert store.resolve(11) == task_log.path
    assert task_log.path.read_text() == "[dsched] task load\n[dsched] accepted\n"
    assert store.live(11) is task_log
    store.release(11)
    assert store.live(11) is None
    assert store.resolve(11) == link  # still found through the index: the same file
    assert store.resolve(12) is None


def test_an_earlier_versions_symlink_is_followed_and_kept_when_the_log_is_made_again(
    tmp_path, make_execution
) -> None:
    store = LogStore(tmp_path)
    execution = make_execution()
    path = store.path_for(execution)
    path.parent.mkdir(parents=True)
    path.write_text("[dsched] before\n")
    store.index.mkdir(parents=True)
    link = store.index / "11.log"
    link.symlink_to(os.path.relpath(path, store.index))
    assert store.resolve(11) == path.resolve()

    store.create(execution, ["again"])

    assert link.is_symlink() and os.path.samefile(link, path)
    assert store.resolve(11) == path
    store.release(11)
    assert store.resolve(11) == path.resolve()
    assert link.read_text() == "[dsched] before\n[dsched] again\n"


def test_create_kept_open_appends_and_again_continues_the_same_file(
    tmp_path, make_execution
) -> None:
    store = LogStore(tmp_path)
    execution = make_execution()
    task_log = store.create(execution, ["first"], keep_open=True)
    task_log.append(b"out\n")
    task_log.finish()
    store.release(11)
    path = task_log.path
    # Its directories went (log expiry) and came back; the index link is made again in place.
    os.unlink(store.index / "11.log")
    os.rename(path, tmp_path / "kept.log")
    path.parent.rmdir()

    again = store.create(execution, ["second"], keep_open=True)
    assert again.path == path and again.size == len("[dsched] second\n")
    (tmp_path / "kept.log").rename(tmp_path / "other.log")
    again.append(b"more\n")
    again.finish()
    third = store.create(execution, ["third"])  # over an existing file and link: appended
    assert third.size == path.stat().st_size
    assert path.read_text() == "[dsched] second\nmore\n[dsched] third\n"
    assert os.path.samefile(store.resolve(11) or "", path)
    assert sorted(p.name for p in store.index.iterdir()) == ["11.log"]
    assert (tmp_path / "other.log").read_text() == "[dsched] first\nout\n"


def test_resolve_refuses_links_leaving_the_log_root(tmp_path) -> None:
    store = LogStore(tmp_path)
    store.index.mkdir(parents=True)
    (tmp_path / "outside.txt").write_text("secret")
    (store.index / "1.log").symlink_to(tmp_path / "outside.txt")
    (store.index / "2.log").symlink_to("../../outside.txt")
    (store.index / "3.log").symlink_to("4.log")  # a link into the index itself

    assert [store.resolve(i) for i in (1, 2, 3)] == [None, None, None]
    assert store.open_for_read(1) is None


async def test_followers_wake_on_append_and_finish(tmp_path) -> None:
    task_log = TaskLog(tmp_path / "t.log")
    task_log.open()

    waiter = asyncio.create_task(task_log.wait_beyond(0, timeout=10))
    await asyncio.sleep(0)  # let it start waiting
    task_log.append(b"hello")
    assert await asyncio.wait_for(waiter, 5) is True

    assert await task_log.wait_beyond(5, timeout=0.01) is False  # nothing new: times out
    finisher = asyncio.create_task(task_log.wait_beyond(5, timeout=10))
    await asyncio.sleep(0)
    task_log.finish()
    assert await asyncio.wait_for(finisher, 5) is True
    assert task_log.finished and task_log.size == 5


def test_notes_start_on_a_new_line_and_nothing_is_written_after_finish(tmp_path) -> None:
    path = tmp_path / "t.log"
    task_log = TaskLog(path)
    task_log.note("queued")  # before open: written with a one-off descriptor
    task_log.open()
    task_log.append(b"partial")
    task_log.note("done")
    task_log.finish()
    task_log.append(b"late")

    assert path.read_bytes() == b"[dsched] queued\npartial\n[dsched] done\n"
    assert task_log.size == len(path.read_bytes())


def test_write_failures_are_counted_not_raised(tmp_path) -> None:
    task_log = TaskLog(tmp_path / "missing-dir" / "t.log")
    task_log.open()  # fails: logged
    task_log.append(b"lost")
    assert task_log.dropped_bytes == 4
    assert task_log.size == 0


def test_a_deferred_log_touches_no_disk_until_made_then_is_what_create_makes(
    tmp_path, make_execution
) -> None:
    store = LogStore(tmp_path)
    execution = make_execution()

    task_log = store.defer(execution, ["task load", "accepted"])

    assert not store.root.exists()  # no file, no directory, no link
    assert store.live(11) is task_log and task_log.size == 0
    task_log.open()  # the attempt starts: the descriptor made next stays open
    thread = threading.Thread(target=task_log.make)  # as the spawning thread makes it
    thread.start()
    thread.join()
    assert task_log.made and task_log.size == len(task_log.path.read_bytes())
    task_log.append(b"out\n")
    task_log.make()  # made already: nothing happens
    task_log.finish()
    assert task_log.path.read_text() == "[dsched] task load\n[dsched] accepted\nout\n"
    assert os.path.samefile(store.index / "11.log", task_log.path)
    assert task_log.size == len(task_log.path.read_bytes())


def test_a_deferred_log_is_made_by_whatever_touches_it_first(tmp_path, make_execution) -> None:
    store = LogStore(tmp_path)
    # a reader
    read = store.defer(make_execution(task_instance_id=1), ["one"])
    fd = store.open_for_read(1)
    assert fd is not None and os.read(fd, 100) == b"[dsched] one\n"
    os.close(fd)
    assert read.made
    # a note (a queued attempt killed before it started)
    noted = store.defer(make_execution(task_instance_id=2), ["two"])
    noted.note("killed before it started")
    assert noted.path.read_text() == "[dsched] two\n[dsched] killed before it started\n"
    # the end, with nothing written: the header alone still makes the log
    ended = store.defer(make_execution(task_instance_id=3), ["three"])
    ended.finish()
    assert ended.made and ended.path.read_text() == "[dsched] three\n"
    assert sorted(p.name for p in store.index.iterdir()) == ["1.log", "2.log", "3.log"]


def test_a_log_that_cannot_be_made_stays_deferred_and_the_store_says_why(
    tmp_path, make_execution
) -> None:
    store = LogStore(tmp_path)
    tmp_path.joinpath("logs").write_text("a file where the log root belongs")
    task_log = store.defer(make_execution(), ["header"])

    with pytest.raises(OSError):
        task_log.make()
    assert not task_log.path.exists() and store.failure is not None
    task_log.note("lost")  # counted, not raised
    assert task_log.dropped_bytes > 0

    tmp_path.joinpath("logs").unlink()
    again = store.create(make_execution(task_instance_id=12), ["header"])
    assert again.made and store.failure is None  # one log made: the store is healthy again
