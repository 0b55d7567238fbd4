"""Working directories of attempts: made for an attempt, removed when it is done with them.

Layout: ``<exec_root>/<workflow_instance_id>/<task_instance_id>/`` (numbers only; a task instance
*is* one attempt, so no two attempts share a directory). A directory goes away when its attempt
succeeds; after a failure, a kill or a stop it is kept for ``keep_failed`` seconds (to look at what
the task left), counted from the attempt's end, then :meth:`WorkDirs.sweep` removes it. The sweep
also removes what an earlier incarnation left behind, but never the directory of an attempt that
runs here.

The directory of an attempt that ended is removed in a thread, with the others that ended
meanwhile (one thread hop per burst): an ``rmdir`` if it is empty (what most tasks leave), else a
rename into ``<exec_root>/.trash`` and a delete of the trash (a task may have left a large tree).
These are file system metadata operations, which wait on the journal when the disk is busy; on
the event loop they stalled everything else the process does. The sweep renames into the trash on
the loop. The instance's directory goes when its last attempt's does; the task type makes the
instance's directory again if a removal slips between its ``mkdir`` of it and that of the
attempt's (:mod:`dsched_worker.tasks.shell`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import time
from collections.abc import Callable, Container
from pathlib import Path

from dsched_server.constants import WORKDIR_KEEP_FAILED_S
from dsched_server.protocol.execution import TaskExecution

log = logging.getLogger(__name__)

TRASH = ".trash"


def work_dir(exec_root: Path, execution: TaskExecution) -> Path:
    """The attempt's working directory (numbers only: no client text reaches the path)."""
    return exec_root / str(execution.workflow_instance_id) / str(execution.task_instance_id)


class WorkDirs:
    """Removes attempts' working directories under ``root``; see the module docstring. ``clock``
    is wall-clock seconds (it is compared with file modification times)."""

    def __init__(
        self,
        root: Path,
        *,
        keep_failed: float = WORKDIR_KEEP_FAILED_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.root = root
        self.keep_failed = keep_failed
        self._clock = clock
        self._trash = root / TRASH
        self._emptying: asyncio.Task[None] | None = None
        self._more = False  # work arrived since the current thread hop began
        self._ended: list[Path] = []  # successful attempts' directories, removed in a thread

    def path(self, execution: TaskExecution) -> Path:
        return work_dir(self.root, execution)

    def ended(self, execution: TaskExecution, *, succeeded: bool) -> None:
        """The attempt is over: its directory goes now if it succeeded (or nothing is kept),
        else it is kept and its age counts from now."""
        path = self.path(execution)
        if succeeded or self.keep_failed <= 0:
            self._ended.append(path)
            self._empty_trash_soon()
            return
        with contextlib.suppress(OSError):  # never made (a spawn failure): nothing to keep
            os.utime(path)

    async def sweep(self, live: Container[int]) -> int:
        """Removes the kept directories older than ``keep_failed`` whose task instance id is not
        in ``live`` (attempts running here, looked up at each removal); returns how many it
        removed. Yields to the loop between instances (a first sweep may meet a long history)."""
        cutoff = self._clock() - self.keep_failed
        removed = 0
        for instance_dir in _numbered(self.root):
            for attempt_dir in _numbered(instance_dir):
                try:
                    old = attempt_dir.stat().st_mtime <= cutoff
                except OSError:
                    continue
                if old and int(attempt_dir.name) not in live and self._remove(attempt_dir):
                    removed += 1
            with contextlib.suppress(OSError):
                instance_dir.rmdir()  # only if empty
            await asyncio.sleep(0)
        if _has_entries(self._trash):
            self._empty_trash_soon()  # also what an earlier incarnation left there
        return removed

    async def wait_emptied(self) -> None:
        """Waits for the removals under way and the trash being emptied, if any (tests, stop)."""
        while self._emptying is not None:
            await asyncio.shield(self._emptying)

    def _remove(self, path: Path) -> bool:
        """Moves ``path`` to the trash; False if there was nothing to move."""
        if not self._to_trash(path):
            return False
        self._empty_trash_soon()
        return True

    def _to_trash(self, path: Path) -> bool:
        target = self._trash / f"{path.parent.name}-{path.name}-{time.monotonic_ns()}"
        try:
            try:
                os.rename(path, target)
            except FileNotFoundError:
                if not path.exists():
                    return False  # never made (a dry run, a spawn failure), or gone already
                self._trash.mkdir(exist_ok=True)
                os.rename(path, target)
        except OSError as exc:
            log.warning("cannot remove the working directory %s: %s", path, exc)
            return False
        with contextlib.suppress(OSError):
            path.parent.rmdir()  # the instance's directory, once its last attempt's is gone
        return True

    def _remove_ended(self, paths: list[Path]) -> None:
        """In a thread: removes the directories of attempts that ended, then empties the trash."""
        for path in paths:
            try:
                os.rmdir(path)  # most tasks leave nothing behind
            except FileNotFoundError:
                continue  # never made (a dry run, a spawn failure)
            except OSError:
                self._to_trash(path)
                continue
            with contextlib.suppress(OSError):
                path.parent.rmdir()
        if _has_entries(self._trash):
            _delete_contents(self._trash)

    def _empty_trash_soon(self) -> None:
        self._more = True
        if self._emptying is None:
            self._emptying = asyncio.get_running_loop().create_task(self._empty_trash())

    async def _empty_trash(self) -> None:
        try:
            # Again while work arrives during a hop: one thread hop per burst, not per run.
            while self._more:
                self._more = False
                ended, self._ended = self._ended, []
                await asyncio.to_thread(self._remove_ended, ended)
        finally:
            self._emptying = None


def _numbered(directory: Path) -> list[Path]:
    """The entries of ``directory`` named by a number (not the trash); none if it is unreadable."""
    try:
        return [p for p in directory.iterdir() if p.name.isdigit()]
    except OSError:
        return []


def _has_entries(directory: Path) -> bool:
    try:
        with os.scandir(directory) as entries:
            return any(True for _ in entries)
    except OSError:
        return False


def _delete_contents(directory: Path) -> None:
    """Deletes everything in ``directory``."""
    try:
        entries = list(directory.iterdir())
    except OSError:
        return
    for entry in entries:
        # A task may have left what cannot be deleted; the next sweep tries again.
        shutil.rmtree(entry, ignore_errors=True)
