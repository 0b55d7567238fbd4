"""Working directories of attempts: made for an attempt, removed when it is done with them.

Layout: ``<exec_root>/<workflow_instance_id>/<task_instance_id>/`` (numbers only; a task instance
*is* one attempt, so no two attempts share a directory). A directory goes away when its attempt
succeeds; after a failure, a kill or a stop it is kept for ``keep_failed`` seconds (to look at what
the task left), counted from the attempt's end, then :meth:`WorkDirs.sweep` removes it. The sweep
also removes what an earlier incarnation left behind, but never the directory of an attempt that
runs here.

The directory of an attempt that ended is removed in a thread, with the others that ended meanwhile
and in the next :data:`GATHER_S` (one thread hop per burst): an empty one (what most tasks leave) is
kept for a later attempt in ``<exec_root>/.pool`` (at most :data:`POOL_MAX`; beyond that it is
removed), and so is its instance's directory once empty, a non-empty one is renamed into
``<exec_root>/.trash`` and the trash deleted (a task may have left a large tree).
:meth:`WorkDirs.make` (called by the task type on the loop, right before the spawn) renames a pooled
directory to the attempt's path, and one to the instance's if it has none (each one-task run is an
instance), and gives them the mode ``mkdir`` would, else makes them. A lock keeps it and the removal
thread apart: an instance's directory found empty stays empty until it is moved. Why a pool: making
and removing a directory per attempt allocates and frees an inode each time, and ext4 without a
journal (this development machine's disk) skips every inode freed in the last minute or more when it
allocates one, reading its inode table block each time (``find_inode_bit`` and ``recently_deleted``
in fs/ext4/ialloc.c): an ``mkdir`` + ``rmdir`` per attempt cost 170 us and made every other file the
worker created (the logs) slower the more attempts had ended lately, where two renames cost 26 us.
These are file system metadata operations, which also wait on the journal when a disk has one and is
busy; on the event loop they stalled everything else the process does. The sweep renames into the
trash on the loop. The instance's directory goes when its last attempt's does; the sweep's removal
(an ``rmdir``, on the loop) can slip between making it and placing the attempt's in it: then it is
made again.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import logging
import os
import shutil
import threading
import time
from collections.abc import Callable, Container
from pathlib import Path

from dsched_server.constants import WORKDIR_KEEP_FAILED_S
from dsched_server.protocol.execution import TaskExecution

log = logging.getLogger(__name__)

TRASH = ".trash"
POOL = ".pool"
POOL_MAX = 64  # empty directories kept for later attempts (about the attempts ending at once)
GATHER_S = 0.02  # how long the removal of an ended attempt's directory waits for others to join


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
        self._pool_dir = root / POOL
        # Empty directories in the pool, ready to be renamed to an attempt's path. Taken by spawns
        # (on the loop) and filled by the removal thread: deque's append and popleft are atomic.
        self._pool: collections.deque[Path] = collections.deque()
        self._pool_names = itertools.count()
        self._pool_ready = False  # what an earlier incarnation left in the pool went to the trash
        # Held while an attempt's directory is placed in its instance's and while an instance's
        # directory is pooled: a directory found empty must stay empty until it is moved.
        self._placing = threading.Lock()
        mask = os.umask(0)  # the process's umask (read by setting it; no thread runs yet)
        os.umask(mask)
        self._mode = 0o777 & ~mask  # what mkdir gives a directory
        self._emptying: asyncio.Task[None] | None = None
        self._more = False  # work arrived since the current thread hop began
        self._ended: list[Path] = []  # successful attempts' directories, removed in a thread

    def path(self, execution: TaskExecution) -> Path:
        return work_dir(self.root, execution)

    def make(self, path: Path) -> None:
        """Right before the attempt's spawn: makes the attempt's directory ``path`` and, for the
        instance's first attempt here, the instance's, each an empty one from the pool if there is
        one (see the module). Raises OSError if it cannot."""
        with self._placing:  # the removal thread pools an instance's directory only if empty
            if not os.path.isdir(path.parent):
                self._place(path.parent)
            self._place(path)

    def _place(self, path: Path) -> None:
        try:
            spare = self._pool.popleft()
        except IndexError:
            make_dir(path)
            return
        try:
            os.rename(spare, path)  # onto an empty directory left at ``path``: replaces it
            os.chmod(path, self._mode)  # the mode mkdir gives, whatever the last task made of it
        except OSError:
            # E.g. ``path`` exists with files in it (an attempt sent again after a restart):
            # kept as mkdir would keep it; the spare is not worth a second try.
            with contextlib.suppress(OSError):
                os.rmdir(spare)
            make_dir(path)

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
        removed. Yields to the loop between instances (a first sweep may meet a long history), so
        ``live`` must answer for attempts that start meanwhile: the directory one gets from the
        pool keeps the modification time it had, often older than ``keep_failed``."""
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
        """In a thread: pools or removes the directories of attempts that ended, then empties the
        trash."""
        for path in paths:
            try:
                with os.scandir(path) as entries:
                    empty = next(entries, None) is None  # most tasks leave nothing behind
            except FileNotFoundError:
                continue  # never made (a dry run, a spawn failure)
            except OSError:
                empty = False
            if not empty:
                self._to_trash(path)
                continue
            with self._placing:  # no attempt is placed in the instance's directory meanwhile
                self._pool_or_remove(path)
                if _is_empty(path.parent):  # the instance's last attempt here is done with it
                    self._pool_or_remove(path.parent)
        if _has_entries(self._trash):
            _delete_contents(self._trash)

    def _pool_or_remove(self, path: Path) -> None:
        """An empty directory goes into the pool, or is removed if the pool is full."""
        if not self._to_pool(path):
            with contextlib.suppress(OSError):
                os.rmdir(path)

    def _to_pool(self, path: Path) -> bool:
        """In the removal thread: moves an empty directory into the pool; False if it is full or
        the move failed."""
        if len(self._pool) >= POOL_MAX:
            return False
        try:
            if not self._pool_ready:
                if self._pool_dir.exists():  # an earlier incarnation's: not known to be empty
                    self._trash.mkdir(exist_ok=True)
                    os.rename(self._pool_dir, self._trash / f"pool-{time.monotonic_ns()}")
                self._pool_dir.mkdir(exist_ok=True)
                self._pool_ready = True
            spare = self._pool_dir / str(next(self._pool_names))
            os.rename(path, spare)
        except OSError as exc:
            log.debug("cannot pool the working directory %s: %s", path, exc)
            return False
        self._pool.append(spare)
        return True

    def _empty_trash_soon(self) -> None:
        self._more = True
        if self._emptying is None:
            self._emptying = asyncio.get_running_loop().create_task(self._empty_trash())

    async def _empty_trash(self) -> None:
        try:
            # Let the directories of the attempts ending meanwhile join this hop: a fan-out ends
            # an attempt every 2 ms or so, and a hop each (a task, a thread's turn, the lock
            # handed back and forth) cost the worker 0.1 ms of CPU per attempt.
            await asyncio.sleep(GATHER_S)
            # Again while work arrives during a hop: one thread hop per burst, not per run.
            while self._more:
                self._more = False
                ended, self._ended = self._ended, []
                await asyncio.to_thread(self._remove_ended, ended)
        finally:
            self._emptying = None


def make_dir(path: Path) -> None:
    """Makes ``path`` and its parents. The worker removes an instance's directory in a thread when
    its last attempt's goes, which can fall between making the parent and the directory itself:
    then the parent is made again."""
    for _ in range(3):
        try:
            path.mkdir(parents=True, exist_ok=True)
            return
        except FileNotFoundError:
            continue
    path.mkdir(parents=True, exist_ok=True)


def _numbered(directory: Path) -> list[Path]:
    """The entries of ``directory`` named by a number (not the trash); none if it is unreadable."""
    try:
        return [p for p in directory.iterdir() if p.name.isdigit()]
    except OSError:
        return []


def _is_empty(directory: Path) -> bool:
    """True if ``directory`` exists and holds nothing."""
    try:
        with os.scandir(directory) as entries:
            return next(entries, None) is None
    except OSError:
        return False


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
