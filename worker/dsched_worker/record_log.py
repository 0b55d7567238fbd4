"""An append-only file of framed records: how the worker keeps per-task state on disk without a
file per task (the outbox's events, the process groups of running tasks).

A record is ``<u32 length><u32 crc32 of the payload><payload>``. Appending one is one ``write`` to
an open file; creating, renaming and deleting a file per item cost three file system operations,
which on a busy ext4 journal took a large share of the worker's time. The owner keeps what is live
in memory and, when the file has grown and little of it is live, rewrites it with the live records
alone (:meth:`RecordLog.replace`: a new file renamed over the old one) or empties it
(:meth:`RecordLog.truncate`, when nothing is live).

A crash can cut the last record short: reading stops there and :func:`read_records` says so (the
owner never acted on a record before its write returned). A whole record whose checksum is wrong is
corruption, not a crash: reading stops there too and says that instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import os
import struct
import zlib
from collections.abc import Sequence
from pathlib import Path

_FRAME = struct.Struct("<II")  # length and crc32 of the payload


class Ending(enum.Enum):
    """How reading a log ended."""

    WHOLE = "whole"  # at the end of the file
    CUT = "cut"  # at a last record cut short (a crash while writing it)
    CORRUPT = "corrupt"  # at a whole record whose checksum is wrong


def frame(payload: bytes) -> bytes:
    return _FRAME.pack(len(payload), zlib.crc32(payload)) + payload


def read_records(path: Path) -> tuple[list[bytes], Ending]:
    """The payloads of a log's records up to the first cut or corrupt one (none if the file does
    not exist), and how reading ended."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return [], Ending.WHOLE
    payloads: list[bytes] = []
    offset = 0
    while offset + _FRAME.size <= len(data):
        size, crc = _FRAME.unpack_from(data, offset)
        end = offset + _FRAME.size + size
        if end > len(data):
            return payloads, Ending.CUT
        payload = data[offset + _FRAME.size : end]
        if zlib.crc32(payload) != crc:
            return payloads, Ending.CORRUPT
        payloads.append(payload)
        offset = end
    return payloads, Ending.WHOLE if offset == len(data) else Ending.CUT


class RecordLog:
    """One log file, opened for appending on first use. ``fsync`` makes :meth:`replace` flush the
    new file and its directory entry before and after the rename, and :meth:`sync` available."""

    def __init__(self, path: Path, *, fsync: bool = False, compact_bytes: int) -> None:
        self.path = path
        self.fsync = fsync
        self.compact_bytes = compact_bytes
        self._fd: int | None = None
        self.size = 0

    def append(self, record: bytes) -> None:
        """Appends a framed record. Raises OSError if it cannot be written whole (then the file
        is cut back to where it was: a partial record would hide every record after it)."""
        fd = self._open()
        view = memoryview(record)
        try:
            while view:
                view = view[os.write(fd, view) :]
        except OSError:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, self.size)
            raise
        self.size += len(record)

    def wants_compaction(self, live_bytes: int) -> bool:
        """Whether the file has grown past ``compact_bytes`` with at most a quarter of it live."""
        return self.size >= self.compact_bytes and live_bytes * 4 <= self.size

    def truncate(self) -> None:
        """Empties the file (nothing in it is live)."""
        os.ftruncate(self._open(), 0)
        self.size = 0

    def replace(self, records: Sequence[bytes]) -> None:
        """Makes the file hold exactly ``records`` (a new file renamed over it), or empties it."""
        if not records:
            self.truncate()
            return
        data = b"".join(records)
        tmp = self.path.with_name(self.path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if self.fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        if self.fsync:
            self.sync_directory()
        self.close()
        self._open()

    async def sync(self) -> None:
        """Flushes what was appended to disk, in a worker thread."""
        fd = os.dup(self._open())  # a replace may close the log's descriptor meanwhile
        try:
            await asyncio.to_thread(os.fdatasync, fd)
        finally:
            os.close(fd)

    def sync_directory(self) -> None:
        dir_fd = os.open(self.path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _open(self) -> int:
        if self._fd is None:
            flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
            self._fd = os.open(self.path, flags, 0o600)
            self.size = os.fstat(self._fd).st_size
        return self._fd
