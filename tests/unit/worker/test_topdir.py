"""The top-directory mark on the worker's busiest directories (dsched_worker.topdir)."""

from __future__ import annotations

import concurrent.futures
import os
import shutil
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dsched_worker.topdir import SCRATCH_PREFIX, is_top, make_below_top, mark_top
from tests.bench.common import fs_type

EXT = ("ext2", "ext3", "ext4")


def test_a_directory_is_made_and_marked_where_the_file_system_has_the_flag(tmp_path) -> None:
    root = tmp_path / "data" / "logs"

    marked = mark_top(root)

    assert root.is_dir() and is_top(root) is marked
    if fs_type(str(tmp_path)) in EXT:
        assert marked
        assert mark_top(root)  # marked already: nothing to do, still true
        sub = root / "20261129"
        sub.mkdir()
        assert not is_top(sub)  # the mark is not inherited


def test_a_file_system_without_the_flag_is_left_alone() -> None:
    base = Path("/dev/shm") / f"dsched-topdir-{os.getpid()}"  # tmpfs: no top-directory flag
    try:
        assert mark_top(base) is False
        assert base.is_dir() and not is_top(base)
    finally:
        base.rmdir()


def test_a_path_that_cannot_be_a_directory_is_reported_not_raised(tmp_path) -> None:
    (tmp_path / "exec").write_text("a file where the directory belongs")

    assert mark_top(tmp_path / "exec") is False
    assert mark_top(tmp_path / "exec" / "below") is False


def test_a_directory_below_a_top_is_made_with_its_parents_and_no_scratch_left(tmp_path) -> None:
    top = tmp_path / "logs"
    target = top / "20261129" / "7" / "1"

    make_below_top(top, target)
    make_below_top(top, target)  # there already: nothing to do
    make_below_top(top, top / "20261129" / "8" / "1")  # the day is there: only the rest is made

    assert target.is_dir() and (top / "20261129" / "8" / "1").is_dir()
    assert sorted(p.name for p in top.iterdir()) == ["20261129"]


def test_threads_making_the_same_day_at_once_all_succeed_and_keep_each_others_work(
    tmp_path,
) -> None:
    top = tmp_path / "logs"
    top.mkdir()
    barrier = threading.Barrier(8)

    def make(i: int) -> None:
        barrier.wait()
        make_below_top(top, top / "20261129" / str(i))
        (top / "20261129" / str(i) / "f.log").write_text("x")

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(make, range(8)))

    assert sorted(p.name for p in top.iterdir()) == ["20261129"]
    assert all((top / "20261129" / str(i) / "f.log").read_text() == "x" for i in range(8))


def test_the_day_is_made_under_a_scratch_name_then_renamed_into_place(
    tmp_path, monkeypatch
) -> None:
    made: list[str] = []
    real_mkdir = os.mkdir

    def mkdir(path: Any, mode: int = 0o777, *args: Any, **kwargs: Any) -> None:
        made.append(os.fspath(path))
        real_mkdir(path, mode, *args, **kwargs)

    monkeypatch.setattr(os, "mkdir", mkdir)
    top = tmp_path / "logs"
    top.mkdir()

    make_below_top(top, top / "20261129" / "7")

    scratch = [p for p in made if Path(p).name.startswith(SCRATCH_PREFIX)]
    assert len(scratch) == 1 and Path(scratch[0]).parent == top  # the day's inode, made there
    assert str(top / "20261129") not in made  # never made under its own name
    assert (top / "20261129" / "7").is_dir() and not Path(scratch[0]).exists()


def test_a_day_made_again_after_a_removal_is_not_held_to_the_removed_ones_group(tmp_path) -> None:
    # ext4 places a top directory's child by a hash of its name: made after another data
    # directory's day of the same name was removed, it lands in the same block group every time
    # (among the freed inodes, which ext4 without a journal then skips one by one). Orlov takes the
    # group with the fewest directories, the first such from the hashed start: made under scratch
    # names, the days spread over the groups that tie for fewest. Where one group alone has the
    # fewest, every day goes there whatever its name: then the two ways agree. An inode number
    # tells its group; statvfs gives the number of groups (a block bitmap of one block covers
    # 8 x block size blocks), and the flex group (16 groups) absorbs the rounding.
    if fs_type(str(tmp_path)) not in EXT:
        return  # another file system places directories its own way: nothing to compare
    sv = os.statvfs(tmp_path)
    per_flex_group = 16 * sv.f_files // -(-sv.f_blocks // (8 * sv.f_bsize))

    def groups(make: Callable[[Path, Path], None]) -> set[int]:
        found = set()
        for i in range(12):
            top = tmp_path / f"data{i}" / "logs"
            mark_top(top)
            make(top, top / "20261129")
            found.add((top / "20261129").stat().st_ino // per_flex_group)
            shutil.rmtree(top.parent)
        return found

    plain = groups(lambda _top, day: day.mkdir())
    scratch = groups(make_below_top)
    assert len(scratch) > 1 or scratch == plain, (plain, scratch)


def test_the_top_itself_is_made_as_mkdir_would(tmp_path) -> None:
    top = tmp_path / "data" / "logs"

    make_below_top(top, top)

    assert top.is_dir() and list(top.iterdir()) == []


def test_a_path_outside_the_top_is_refused(tmp_path) -> None:
    with pytest.raises(ValueError):
        make_below_top(tmp_path / "logs", tmp_path / "elsewhere")
