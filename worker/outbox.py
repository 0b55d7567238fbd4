"""The on-disk outbox: a task event is written here before it is first sent, and forgotten only when
its owner master has settled it (ACCEPTED, DUPLICATE or REJECTED_STALE).

One append-only log, ``<data_dir>/outbox/events.log``, of records::

    <u32 length><u32 crc32 of the payload><payload>
    payload: b"P" <u64 epoch><u64 seq><u16 owner length><owner address><TaskEvent bytes>   (put)
             b"D" <u64 epoch><u64 seq>                                                 (done)

An event is named by its worker epoch and sequence number; a later put of the same name replaces
it (its owner changed), a done record forgets it. Storing, re-addressing and settling an event
each cost one ``write`` to an open file: no file is created, renamed or deleted per event (a file
per event cost three of those, which on a busy ext4 journal took a large share of a fan-out's
time). When nothing is pending and the log has grown past :data:`COMPACT_BYTES`, it is truncated
to nothing; when events stay pending for long, their records alone are copied to a new log that
replaces the old one by rename, so the log stays small.

A crash can leave the last record cut short: its length or checksum does not match, and reading
stops there (the event was never sent: a record is complete before its event is queued). A bad
record before the end stops reading too; that log is kept aside as ``events.log.corrupt``. By
default nothing is fsynced: the outbox then survives a crash of the worker (the writes are in the
kernel) but not a power loss. With ``fsync`` each put is flushed to disk in a worker thread before
the event is sent, and the copies of a compaction before they replace the log.

Event files of the format before this one (``<epoch:020>-<seq:020>.event``, a header line with
the owner, then the event) are read at ``load`` and moved into the log.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from dsched.worker.convert import event_from_bytes, event_to_bytes
from dsched.worker.execution import TaskEvent

log = logging.getLogger(__name__)

LOG_NAME = "events.log"
# Truncate or compact the log once it is this large (and, while events stay pending, once their
# records are less than a quarter of it).
COMPACT_BYTES = 4 * 2**20
_FRAME = struct.Struct("<II")  # length and crc32 of the payload
_NAME = struct.Struct("<QQ")  # worker epoch, sequence number
_OWNER = struct.Struct("<H")
_PUT, _DONE = b"P", b"D"
# The file-per-event format of earlier versions, read once at load.
LEGACY_MAGIC = b"dsched-outbox-1 "
_LEGACY_NAME_RE = re.compile(r"(\d{20})-(\d{20})\.event\Z")


@dataclass(frozen=True, slots=True, kw_only=True)
class OutboxEntry:
    """An event waiting for its acknowledgement, with the epoch and sequence that name it and the
    address of the master it is sent to."""

    event: TaskEvent
    worker_epoch: int
    seq: int
    owner_address: str

    @property
    def name(self) -> tuple[int, int]:
        return (self.worker_epoch, self.seq)


def _record(payload: bytes) -> bytes:
    return _FRAME.pack(len(payload), zlib.crc32(payload)) + payload


def put_record(entry: OutboxEntry) -> bytes:
    owner = entry.owner_address.encode("ascii")
    return _record(
        _PUT
        + _NAME.pack(*entry.name)
        + _OWNER.pack(len(owner))
        + owner
        + event_to_bytes(entry.event)
    )


def done_record(name: tuple[int, int]) -> bytes:
    return _record(_DONE + _NAME.pack(*name))


def _parse(payload: bytes) -> tuple[tuple[int, int], OutboxEntry | None]:
    """A record's event name and, for a put, its entry. Raises ValueError if it is malformed."""
    kind = payload[:1]
    epoch, seq = _NAME.unpack_from(payload, 1)
    if kind == _DONE:
        return (epoch, seq), None
    if kind != _PUT:
        raise ValueError(f"unknown record kind {kind!r}")
    start = 1 + _NAME.size
    (size,) = _OWNER.unpack_from(payload, start)
    start += _OWNER.size
    owner = payload[start : start + size].decode("ascii")
    event = event_from_bytes(payload[start + size :])
    if event.event_id != f"{epoch}-{seq}":
        raise ValueError(f"event id {event.event_id!r} does not match its record ({epoch}-{seq})")
    return (epoch, seq), OutboxEntry(event=event, worker_epoch=epoch, seq=seq, owner_address=owner)


def _records(data: bytes) -> Iterator[tuple[int, bytes]]:
    """(offset after the record, payload) of each whole record; stops at a cut or bad one."""
    offset = 0
    while offset + _FRAME.size <= len(data):
        size, crc = _FRAME.unpack_from(data, offset)
        end = offset + _FRAME.size + size
        payload = data[offset + _FRAME.size : end]
        if end > len(data) or zlib.crc32(payload) != crc:
            return
        yield end, payload
        offset = end


def read_log(path: Path) -> tuple[dict[tuple[int, int], OutboxEntry], bool]:
    """The pending entries of a log (none if it does not exist) and whether it was read to its
    end. A record cut short at the very end (a crash during its write) counts as read to the end."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return {}, True
    entries: dict[tuple[int, int], OutboxEntry] = {}
    offset = 0
    try:
        for offset, payload in _records(data):  # noqa: B007 (offset is read after the loop)
            name, entry = _parse(payload)
            if entry is None:
                entries.pop(name, None)
            else:
                entries[name] = entry
    except (ValueError, struct.error) as exc:
        log.error("unreadable outbox record in %s after byte %d: %s", path, offset, exc)
        return entries, False
    rest = len(data) - offset
    if rest >= _FRAME.size and _FRAME.unpack_from(data, offset)[0] + _FRAME.size <= rest:
        log.error("corrupt outbox record in %s at byte %d", path, offset)
        return entries, False  # a whole record whose checksum is wrong: not a cut-short write
    if rest:
        log.warning("outbox %s ends with a record cut short (%d bytes): ignored", path, rest)
    return entries, True


def stored_entries(directory: Path) -> list[OutboxEntry]:
    """The events stored in ``directory``, oldest first, read without changing anything."""
    entries, _ = read_log(directory / LOG_NAME)
    return sorted(entries.values(), key=lambda e: e.name)


class Outbox:
    """The outbox directory: ``load`` once at start, then ``put``/``rewrite``/``remove``."""

    def __init__(self, directory: Path, *, fsync: bool = False) -> None:
        self.directory = directory
        self._fsync = fsync
        self._path = directory / LOG_NAME
        self._fd: int | None = None
        self._size = 0
        self._pending: dict[tuple[int, int], OutboxEntry] = {}
        self._record_sizes: dict[tuple[int, int], int] = {}  # each pending entry's latest put
        self._pending_bytes = 0  # their sum

    def load(self) -> list[OutboxEntry]:
        """Returns every stored event, oldest first, and makes the log hold just those (event
        files of the earlier format are moved into it; an unreadable log is kept aside as
        ``*.corrupt`` and what could be read of it is kept, never an event twice)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        self.close()
        entries, whole = read_log(self._path)
        legacy = self._legacy()
        for entry, _ in legacy:
            entries.setdefault(entry.name, entry)
        if not whole:
            with contextlib.suppress(OSError):
                self._path.replace(self._path.with_name(LOG_NAME + ".corrupt"))
        self._pending = entries
        self._compact()
        if self._fsync:
            self._sync_directory()  # the log's own name, if load made it
        for _, path in legacy:  # only once their events are in the log
            with contextlib.suppress(OSError):
                path.unlink()
        return sorted(entries.values(), key=lambda e: e.name)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    async def put(self, entry: OutboxEntry) -> None:
        """Stores a new event. Raises OSError if it cannot be written."""
        self._append(put_record(entry), entry)
        if self._fsync and self._fd is not None:
            fd = os.dup(self._fd)  # a compaction may close the log's descriptor meanwhile
            try:
                await asyncio.to_thread(os.fdatasync, fd)
            finally:
                os.close(fd)

    def rewrite(self, entry: OutboxEntry) -> None:
        """Replaces a stored event (its owner changed). Raises OSError if it cannot be written."""
        self._append(put_record(entry), entry)

    def remove(self, entry: OutboxEntry) -> None:
        """Forgets a settled event; an event not stored is not an error. A failure to write is
        logged, not raised: the event would only be sent again after a restart (a duplicate,
        which its master settles)."""
        if entry.name not in self._pending:
            return
        try:
            self._append(done_record(entry.name), None, name=entry.name)
        except OSError as exc:
            log.error("cannot record event %s as settled: %s", entry.event.event_id, exc)

    def _append(
        self, record: bytes, entry: OutboxEntry | None, *, name: tuple[int, int] | None = None
    ) -> None:
        if self._fd is None:
            self._open()
        assert self._fd is not None
        view = memoryview(record)
        try:
            while view:
                view = view[os.write(self._fd, view) :]
        except OSError:
            # A partial record would hide every record after it: cut the log back where it was.
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, self._size)
            raise
        self._size += len(record)
        key = entry.name if entry is not None else name
        assert key is not None
        self._pending.pop(key, None)
        self._pending_bytes -= self._record_sizes.pop(key, 0)
        if entry is not None:
            self._pending[key] = entry
            self._record_sizes[key] = len(record)
            self._pending_bytes += len(record)
        if self._size >= COMPACT_BYTES and self._pending_bytes * 4 <= self._size:
            self._compact()

    def _open(self) -> None:
        self._fd = os.open(self._path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        self._size = os.fstat(self._fd).st_size

    def _compact(self) -> None:
        """Makes the log hold only the pending events' records."""
        if not self._pending:
            if self._fd is None:
                self._open()
            assert self._fd is not None
            os.ftruncate(self._fd, 0)  # nothing pending: whatever the log held is settled
            self._size = self._pending_bytes = 0
            self._record_sizes.clear()
            return
        records = {name: put_record(e) for name, e in sorted(self._pending.items())}
        data = b"".join(records.values())
        tmp = self._path.with_name(LOG_NAME + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if self._fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self._path)
        if self._fsync:
            self._sync_directory()
        self.close()
        self._open()
        self._record_sizes = {name: len(r) for name, r in records.items()}
        self._pending_bytes = len(data)

    def _sync_directory(self) -> None:
        dir_fd = os.open(self.directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    def _legacy(self) -> list[tuple[OutboxEntry, Path]]:
        """Events stored as files by earlier versions (temporary files are deleted; unreadable
        ones are renamed to ``*.corrupt``, kept for inspection and never resent)."""
        found = []
        for path in sorted(self.directory.iterdir()):
            if path.name.endswith(".event.tmp"):
                with contextlib.suppress(OSError):
                    path.unlink()
                continue
            match = _LEGACY_NAME_RE.match(path.name)
            if match is None:
                continue
            try:
                found.append((_read_legacy(path, int(match[1]), int(match[2])), path))
            except (OSError, ValueError) as exc:
                log.error("unreadable outbox file %s (%s); moved aside", path.name, exc)
                with contextlib.suppress(OSError):
                    path.replace(path.with_name(path.name + ".corrupt"))
        return found


def _read_legacy(path: Path, epoch: int, seq: int) -> OutboxEntry:
    data = path.read_bytes()
    if not data.startswith(LEGACY_MAGIC) or b"\n" not in data:
        raise ValueError("bad header")
    header, _, body = data.partition(b"\n")
    owner = header[len(LEGACY_MAGIC) :].decode("ascii")
    event = event_from_bytes(body)
    if event.event_id != f"{epoch}-{seq}":
        raise ValueError(f"event id {event.event_id!r} does not match the file name")
    return OutboxEntry(event=event, worker_epoch=epoch, seq=seq, owner_address=owner)
