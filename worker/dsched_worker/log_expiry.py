"""Retention of task logs: a log not written for longer than the retention goes, with its index
entry (a hard link: the file's blocks are freed only once both names are gone).

The layout is :mod:`dsched_worker.logs`'s (``<yyyymmdd>/.../<wi>-<ti>.log``, earlier versions'
``<yyyymmdd>/.../<wi>/<ti>.log``, plus ``index/<ti>.log``; ``wi``, ``ti``: workflow and task
instance ids). A log file is created on or after its day directory's date, so
only day directories dated before the cutoff can hold a file older than it: a sweep walks those
alone, whatever the history. A file written since the cutoff (a long instance's late task) stays,
and so does the log of an attempt running here. Empty directories are removed bottom-up, and so is
an empty scratch directory older than the cutoff (a day's directory is made under a scratch name,
then renamed: :func:`dsched_worker.topdir.make_below_top`; a worker killed in between leaves one).

Runs in a thread (a day of logs can be a hundred thousand files); it only unlinks, so it never
blocks the event loop.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Container
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from dsched_worker.logs import INDEX_DIR, same_file, task_instance_of
from dsched_worker.topdir import SCRATCH_PREFIX

log = logging.getLogger(__name__)

DAY_S = 86400.0


@dataclass(frozen=True, slots=True)
class Expired:
    """What one pass removed."""

    files: int = 0
    bytes: int = 0


def expire_logs(root: Path, *, older_than: float, now: float, live: Container[int]) -> Expired:
    """Removes the logs under ``root`` last written before ``now - older_than`` (wall-clock
    seconds) whose task instance id is not in ``live``, with their index links."""
    cutoff = now - older_than
    cutoff_day = datetime.fromtimestamp(cutoff, UTC).strftime("%Y%m%d")
    index = root / INDEX_DIR
    files = size = 0
    try:
        entries = list(root.iterdir())
    except OSError:
        return Expired()
    days = [d for d in entries if d.name.isdigit() and d.name < cutoff_day]
    for scratch in (d for d in entries if d.name.startswith(SCRATCH_PREFIX)):
        with contextlib.suppress(OSError):  # gone, not empty or not old: left alone
            if scratch.stat().st_mtime < cutoff:
                scratch.rmdir()
    # A day directory named like today's cutoff day may hold older files too: walk it as well.
    days += [d for d in [root / cutoff_day] if d.is_dir()]
    for day in days:
        for directory, _subdirs, names in os.walk(day, topdown=False):
            for name in names:
                path = Path(directory) / name
                task_instance_id = task_instance_of(name)
                try:
                    st = path.lstat()
                except OSError:
                    continue
                if st.st_mtime >= cutoff or task_instance_id in live:
                    continue
                if task_instance_id is not None:
                    _unlink_index(index, task_instance_id, st)
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
                    files += 1
                    size += st.st_size
            if directory != str(root):
                with contextlib.suppress(OSError):
                    os.rmdir(directory)  # only if empty
    return Expired(files=files, bytes=size)


def _unlink_index(index: Path, task_instance_id: int, target: os.stat_result) -> None:
    """Removes ``index/<task_instance_id>.log`` if it leads to the file ``target`` (a hard link to
    it, or an earlier version's symlink; a newer attempt's entry stays). A hard link left behind
    would keep the file's blocks."""
    link = index / f"{task_instance_id}.log"
    try:
        if same_file(link, target):
            link.unlink()
    except OSError as exc:
        log.debug("cannot remove the index link %s: %s", link, exc)
