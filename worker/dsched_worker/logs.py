"""Task log files: where they live, how they are written, and how readers find and follow them.

Layout under ``<data_dir>/logs``::

    <yyyymmdd of submit_time, UTC>/<workflow_code>/<workflow_version>/
        <workflow_instance_id>-<task_instance_id>.log
    index/<task_instance_id>.log  a hard link to the file above (earlier versions: a relative
                                  symlink to it, still followed)

Earlier versions put each workflow instance in a directory of its own
(``.../<workflow_version>/<workflow_instance_id>/<task_instance_id>.log``); their logs stay
readable (readers go through the index, which does not depend on the layout) and expire like the
others (:func:`task_instance_of` reads both names). Why no directory per instance: every one-task
run is an instance, and its directory cost a failed ``open``, a ``mkdir`` and then the slowest
``open`` the worker made (the first file of a new directory): together over a quarter of the
worker's samples in a series of one-task runs, all on the event loop.

Every path component is made of numbers, so no client-supplied text ever reaches a path. Readers
resolve a task instance id only through the index (logs of earlier incarnations stay findable),
check that a symlink's target lies inside the log root, and open the file with ``O_NOFOLLOW``.

Why a hard link: a symlink is an inode of its own, and allocating inodes is what a busy worker's
file system does slowest (on ext4 without a journal, this development machine's disk, the allocator
skips every inode freed in the last 30 seconds: see :mod:`dsched_worker.workdirs`); a symlink per
attempt cost 25 us on a quiet disk and 360-380 us after a few thousand files were deleted, a hard
link 17-22 us in both cases. It is one more name of the log's inode, so log expiry
(:mod:`dsched_worker.log_expiry`) removes it with the file, or the file's blocks would stay.

A :class:`TaskLog` is the live side of one file: the runner appends to it and readers that follow it
wait on an :class:`asyncio.Event` that every append replaces, so a follower wakes on new bytes
without polling. Appends are synchronous writes to a local file (a few KiB at a time); if the disk
fails the task keeps running and the lost bytes are counted, because losing log lines is better than
failing work.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import stat
import threading
from collections.abc import Callable
from datetime import UTC
from pathlib import Path

from dsched_server.protocol.execution import TaskExecution
from dsched_worker.topdir import make_below_top

log = logging.getLogger(__name__)

LOGS_DIR = "logs"
INDEX_DIR = "index"
NOTE_PREFIX = "[dsched] "


def log_path(root: Path, execution: TaskExecution) -> Path:
    """The log file of an attempt under the log root ``root`` (numbers only: see the module)."""
    day = execution.submit_time.astimezone(UTC).strftime("%Y%m%d")
    # One Path made from a string: four joins cost 10 us a dispatch (pathlib, Python 3.11).
    return Path(
        f"{root}/{day}/{execution.workflow_code}/{execution.workflow_version}/"
        f"{execution.workflow_instance_id}-{execution.task_instance_id}.log"
    )


def task_instance_of(name: str) -> int | None:
    """The task instance id a log file's name carries (``<wi>-<ti>.log``, or an earlier version's
    ``<ti>.log``), or None for any other name."""
    stem = name.removesuffix(".log")
    instance, dash, task = stem.rpartition("-")
    if stem == name or not _number(task) or (dash and not _number(instance)):
        return None
    return int(task)


def _number(text: str) -> bool:
    return text.isascii() and text.isdigit()


class TaskLog:
    """The writable, followable log of one live attempt. ``open`` before appending; ``finish`` once.

    ``size`` counts the bytes in the file; ``finished`` turns true after the last byte is written.

    A log registered by :meth:`LogStore.defer` has no file yet: :meth:`make` writes its header and
    links it into the index, from any thread (the spawn does it right before it starts the
    attempt's process: the inode allocation is the costliest file system call a dispatch makes,
    and accepting a dispatch stays cheap without it). Whatever touches the file first (a note, a
    reader, the end) makes it instead.
    """

    def __init__(
        self,
        path: Path,
        *,
        fd: int | None = None,
        size: int | None = None,
        pending: bytes | None = None,
        maker: Callable[[bytes], tuple[int, int]] | None = None,
    ) -> None:
        """``fd``: the file already open for appending (the log owns it from here); ``size``:
        the file's size, if known (else it is looked up). ``pending``: the header of a file not
        made yet, which ``maker`` makes (returning its descriptor and size)."""
        self.path = path
        self.dropped_bytes = 0
        self._file: int | None = fd
        self._pending = pending
        self._maker = maker
        self._making = threading.Lock()
        self._keep_open = False  # open() came before the file was made: make() keeps it open
        if pending is not None:
            size = 0
        elif size is None:
            size = path.stat().st_size if path.exists() else 0
        self._size = size
        self._finished = False
        self._line_open = False  # the last byte written was not a newline
        self._changed = asyncio.Event()

    @property
    def made(self) -> bool:
        """Whether the file exists (or its making was not deferred)."""
        return self._pending is None

    def make(self) -> None:
        """Makes a deferred file (see the class) if it is not made yet; kept open if :meth:`open`
        came first. Any thread; raises OSError (then it stays deferred). Followers are woken by
        the next append on the loop."""
        if self._pending is None:
            return
        with self._making:
            self._make_locked()

    def _make_locked(self) -> None:
        pending = self._pending
        if pending is None:
            return  # made meanwhile by another thread
        assert self._maker is not None
        fd, size = self._maker(pending)
        if self._keep_open:
            self._file = fd
        else:
            os.close(fd)
        self._size = size
        self._pending = None  # last: a reader that sees None sees the file and size too

    @property
    def size(self) -> int:
        return self._size

    @property
    def finished(self) -> bool:
        return self._finished

    def open(self) -> None:
        """Opens the file for appending (idempotent); a failure is logged, not raised. A deferred
        file is kept open once it is made."""
        self._keep_open = True
        if self._pending is not None:
            return
        if self._file is None and not self._finished:
            try:
                self._file = os.open(
                    self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
                )
            except OSError as exc:
                log.error("cannot open task log %s: %s", self.path, exc)

    def append(self, data: bytes) -> None:
        """Appends ``data`` and wakes followers. Before :meth:`open` (a queued attempt's notes) the
        file is opened for this one write; after :meth:`finish` nothing is written."""
        if not data or self._finished:
            return
        written = 0
        fd = None
        try:
            self.make()
            fd = self._file
            if fd is None:
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC)
            while written < len(data):  # short writes happen on nearly full disks
                written += os.write(fd, data[written:])
        except OSError as exc:
            if not self.dropped_bytes:
                log.error("cannot write task log %s: %s", self.path, exc)
            self.dropped_bytes += len(data) - written
        finally:
            if self._file is None and fd is not None:
                os.close(fd)
        self._size += written
        if written:
            self._line_open = data[written - 1 : written] != b"\n"
        self._wake()

    def note(self, text: str) -> None:
        """Appends a line from the worker itself, marked so it stands out from task output."""
        start = "\n" if self._line_open else ""  # after output that did not end its line
        self.append(f"{start}{NOTE_PREFIX}{text}\n".encode())

    def finish(self) -> None:
        """Closes the file; followers see the end of the log. Idempotent."""
        if self._pending is not None:  # nothing was written: the header alone still makes a log
            try:
                self.make()
            except OSError as exc:
                log.error("cannot create task log %s: %s", self.path, exc)
        if self._file is not None:
            with contextlib.suppress(OSError):
                os.close(self._file)
            self._file = None
        if self.dropped_bytes:
            log.warning("task log %s lost %d bytes", self.path, self.dropped_bytes)
        self._finished = True
        self._wake()

    async def wait_beyond(self, offset: int, timeout: float) -> bool:
        """Waits until the log grows past ``offset`` or finishes; False if ``timeout`` passed."""
        changed = self._changed  # grab before checking, so an append in between is not missed
        if self._size > offset or self._finished:
            return True
        try:
            await asyncio.wait_for(changed.wait(), timeout)
        except TimeoutError:
            return False
        return True

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()


class LogStore:
    """Creates attempt logs, keeps the live ones, resolves task instance ids through the index."""

    def __init__(self, data_dir: Path) -> None:
        self.root = data_dir / LOGS_DIR
        self.index = self.root / INDEX_DIR
        self._index_path = str(self.index)
        self._live: dict[int, TaskLog] = {}
        # Why the last attempt to make a log file failed (None: the last one worked): the runner
        # then makes each new attempt's file before it accepts the attempt (see Runner.submit).
        self.failure: str | None = None

    def path_for(self, execution: TaskExecution) -> Path:
        return log_path(self.root, execution)

    def create(
        self, execution: TaskExecution, header: list[str], *, keep_open: bool = False
    ) -> TaskLog:
        """Creates (or reopens) the attempt's file with ``header`` lines, links it into the index
        and registers it as live. ``keep_open``: the attempt starts now, so the descriptor that
        wrote the header stays open for its output. Raises OSError if the file or the link cannot
        be made. :meth:`defer` is the same without the file system work on the caller's thread."""
        path = self.path_for(execution)
        fd, size = self._make(path, execution.task_instance_id, _header_bytes(header))
        if not keep_open:
            os.close(fd)
        task_log = TaskLog(path, fd=fd if keep_open else None, size=size)
        self._live[execution.task_instance_id] = task_log
        return task_log

    def defer(self, execution: TaskExecution, header: list[str]) -> TaskLog:
        """Registers the attempt's live log with ``header`` lines and no file yet: the file is
        made by :meth:`TaskLog.make` (see :class:`TaskLog`), with what :meth:`create` does."""
        path = self.path_for(execution)
        tid = execution.task_instance_id
        task_log = TaskLog(
            path, pending=_header_bytes(header), maker=functools.partial(self._make, path, tid)
        )
        self._live[tid] = task_log
        return task_log

    def _make(self, path: Path, task_instance_id: int, data: bytes) -> tuple[int, int]:
        """Creates (or reopens) ``path``, appends ``data`` and links it into the index; returns
        the open descriptor and the file's size. Any thread. Records in :attr:`failure` why it
        failed, or None once it works again.

        The hot path of a fan-out: the usual case is one ``open``, one ``write`` and one
        ``link``; directories are made only when that fails for want of them."""
        try:
            fd, size = self._write_new(path, data)
            try:
                self._link(task_instance_id, path)
            except BaseException:
                os.close(fd)
                raise
        except OSError as exc:
            self.failure = str(exc)
            raise
        self.failure = None
        return fd, size

    def _write_new(self, path: Path, data: bytes) -> tuple[int, int]:
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
        try:
            fd = os.open(path, flags, 0o644)
        except FileNotFoundError:
            make_below_top(self.root, path.parent)  # the day's directory: see dsched_worker.topdir
            fd = os.open(path, flags, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            return fd, os.lseek(fd, 0, os.SEEK_END)
        except BaseException:
            os.close(fd)
            raise

    def release(self, task_instance_id: int) -> None:
        """Forgets a finished log; readers then find it complete through the index."""
        self._live.pop(task_instance_id, None)

    def live(self, task_instance_id: int) -> TaskLog | None:
        return self._live.get(task_instance_id)

    def open_for_read(self, task_instance_id: int) -> int | None:
        """Returns a read-only descriptor of the attempt's log, or None if there is none."""
        live = self._live.get(task_instance_id)
        if live is not None and not live.made:  # a reader comes first: the header is there
            try:
                live.make()
            except OSError as exc:
                log.error("cannot create task log %s: %s", live.path, exc)
        path = self.resolve(task_instance_id)
        if path is None:
            return None
        try:
            return os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return None

    def resolve(self, task_instance_id: int) -> Path | None:
        """The path of the attempt's log: its index entry (a hard link: the file itself), or the
        real path of an earlier version's symlink, only if it lies inside the log root."""
        live = self._live.get(task_instance_id)
        if live is not None:
            return live.path
        link = self.index / f"{int(task_instance_id)}.log"
        try:
            mode = os.lstat(link).st_mode
        except OSError:
            return None
        if stat.S_ISREG(mode):
            return link
        try:
            target = os.readlink(link)
        except OSError:
            return None
        real = Path(os.path.realpath(self.index / target))
        root = Path(os.path.realpath(self.root))
        if not real.is_relative_to(root) or real.is_relative_to(root / INDEX_DIR):
            log.warning("log index entry %s points outside the log root: %s", link, target)
            return None
        return real

    def _link(self, task_instance_id: int, path: Path) -> None:
        # A new entry is made in place (a link appears whole); one that exists and is not this
        # file (an earlier version's symlink, a file since moved away) is replaced by
        # link-then-rename, so readers never see it missing.
        # Strings, not Paths: the usual case is one os.link on the event loop.
        index = self._index_path
        link = f"{index}/{task_instance_id}.log"
        try:
            os.link(path, link)
            return
        except FileNotFoundError:
            os.makedirs(index, exist_ok=True)
            with contextlib.suppress(FileExistsError):
                os.link(path, link)
                return
        except FileExistsError:
            pass
        if same_file(link, os.stat(path)):
            return  # the attempt's log made again: its entry is right already
        tmp = f"{index}/.{task_instance_id}.log.{os.getpid()}.tmp"
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        os.link(path, tmp)
        os.replace(tmp, link)


def _header_bytes(header: list[str]) -> bytes:
    return "".join(f"{NOTE_PREFIX}{line}\n" for line in header).encode()


def same_file(entry: str | Path, target: os.stat_result) -> bool:
    """Whether the index entry ``entry`` leads to the file whose ``stat`` is ``target``: is a hard
    link to it, or a symlink to it (earlier versions)."""
    try:
        st = os.stat(entry)  # follows a symlink
    except OSError:
        return False
    return (st.st_dev, st.st_ino) == (target.st_dev, target.st_ino)
