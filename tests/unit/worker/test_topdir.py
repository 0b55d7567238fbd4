"""The top-directory mark on the worker's busiest directories (dsched_worker.topdir)."""

from __future__ import annotations

import os
from pathlib import Path

from dsched_worker.topdir import is_top, mark_top
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
