"""The on-disk outbox: a task event is written here before it is first sent, and forgotten only when
its owner master has settled it (ACCEPTED, DUPLICATE or REJECTED_STALE).

One append-only log (:mod:`dsched_worker.record_log`), ``<data_dir>/outbox/events.log``, of
records whose payloads are::

    b"P" <u64 epoch><u64 seq><u16 owner length><owner address><TaskEvent bytes>   (put)
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

import contextlib
import logging
import re
import struct
from dataclasses import dataclass, field
from pathlib import Path

from dsched_server.protocol.event import TaskEvent
from dsched_server.protocol.wire.event import event_from_bytes, event_to_bytes
from dsched_worker.record_log import Ending, RecordLog, frame, read_records

log = logging.getLogger(__name__)

LOG_NAME = "events.log"
# Truncate or compact the log once it is this large (and, while events stay pending, once their
# records are less than a quarter of it).
COMPACT_BYTES = 4 * 2**20
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
    # The event's wire bytes when known (made once by the reporter, or read from the log): the
    # outbox record and every send of the event carry them without serializing it again.
    event_bytes: bytes = field(default=b"", compare=False, repr=False)

    @property
    def name(self) -> tuple[int, int]:
        return (self.worker_epoch, self.seq)

    def wire_event(self) -> bytes:
        """The event as a serialized ``TaskEvent`` message."""
        return self.event_bytes or event_to_bytes(self.event)


def put_record(entry: OutboxEntry) -> bytes:
    owner = entry.owner_address.encode("ascii")
    head = _PUT + _NAME.pack(*entry.name) + _OWNER.pack(len(owner)) + owner
    return frame(head + entry.wire_event())


def done_record(name: tuple[int, int]) -> bytes:
    return frame(_DONE + _NAME.pack(*name))


def _parse(payload: bytes) -> tuple[tuple[int, int], OutboxEntry | None]:
    """A record's event name and, for a put, its entry. Raises ValueError if it is malformed."""
    kind = payload[:1]
    try:
        epoch, seq = _NAME.unpack_from(payload, 1)
        if kind == _DONE:
            return (epoch, seq), None
        if kind != _PUT:
            raise ValueError(f"unknown record kind {kind!r}")
        start = 1 + _NAME.size
        (size,) = _OWNER.unpack_from(payload, start)
    except struct.error as exc:
        raise ValueError(str(exc)) from exc
    start += _OWNER.size
    owner = payload[start : start + size].decode("ascii")
    data = payload[start + size :]
    event = event_from_bytes(data)
    if event.event_id != f"{epoch}-{seq}":
        raise ValueError(f"event id {event.event_id!r} does not match its record ({epoch}-{seq})")
    entry = OutboxEntry(
        event=event, worker_epoch=epoch, seq=seq, owner_address=owner, event_bytes=data
    )
    return (epoch, seq), entry


def read_log(path: Path) -> tuple[dict[tuple[int, int], OutboxEntry], bool]:
    """The pending entries of a log (none if it does not exist) and whether it was read to its
    end. A record cut short at the very end (a crash during its write) counts as read to the end."""
    payloads, ending = read_records(path)
    entries: dict[tuple[int, int], OutboxEntry] = {}
    for number, payload in enumerate(payloads):
        try:
            name, entry = _parse(payload)
        except ValueError as exc:
            log.error("unreadable outbox record %d in %s: %s", number, path, exc)
            return entries, False
        if entry is None:
            entries.pop(name, None)
        else:
            entries[name] = entry
    if ending is Ending.CORRUPT:
        log.error("corrupt outbox record %d in %s (checksum)", len(payloads), path)
        return entries, False
    if ending is Ending.CUT:
        log.warning("outbox %s ends with a record cut short: ignored", path)
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
        self._log = RecordLog(directory / LOG_NAME, fsync=fsync, compact_bytes=COMPACT_BYTES)
        self._pending: dict[tuple[int, int], OutboxEntry] = {}
        self._record_sizes: dict[tuple[int, int], int] = {}  # each pending entry's latest put
        self._pending_bytes = 0  # their sum

    def load(self) -> list[OutboxEntry]:
        """Returns every stored event, oldest first, and makes the log hold just those (event
        files of the earlier format are moved into it; an unreadable log is kept aside as
        ``*.corrupt`` and what could be read of it is kept, never an event twice)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        self._log.close()
        entries, whole = read_log(self._log.path)
        legacy = self._legacy()
        for entry, _ in legacy:
            entries.setdefault(entry.name, entry)
        if not whole:
            with contextlib.suppress(OSError):
                self._log.path.replace(self._log.path.with_name(LOG_NAME + ".corrupt"))
        self._pending = entries
        self._compact()
        if self._fsync:
            self._log.sync_directory()  # the log's own name, if load made it
        for _, path in legacy:  # only once their events are in the log
            with contextlib.suppress(OSError):
                path.unlink()
        return sorted(entries.values(), key=lambda e: e.name)

    def close(self) -> None:
        self._log.close()

    async def put(self, entry: OutboxEntry) -> None:
        """Stores a new event. Raises OSError if it cannot be written."""
        self._append(put_record(entry), entry.name, entry)
        if self._fsync:
            await self._log.sync()

    def rewrite(self, entry: OutboxEntry) -> None:
        """Replaces a stored event (its owner changed). Raises OSError if it cannot be written."""
        self._append(put_record(entry), entry.name, entry)

    def remove(self, entry: OutboxEntry) -> None:
        """Forgets a settled event; an event not stored is not an error. A failure to write is
        logged, not raised: the event would only be sent again after a restart (a duplicate,
        which its master settles)."""
        if entry.name not in self._pending:
            return
        try:
            self._append(done_record(entry.name), entry.name, None)
        except OSError as exc:
            log.error("cannot record event %s as settled: %s", entry.event.event_id, exc)

    def _append(self, record: bytes, name: tuple[int, int], entry: OutboxEntry | None) -> None:
        self._log.append(record)
        self._pending.pop(name, None)
        self._pending_bytes -= self._record_sizes.pop(name, 0)
        if entry is not None:
            self._pending[name] = entry
            self._record_sizes[name] = len(record)
            self._pending_bytes += len(record)
        if self._log.wants_compaction(self._pending_bytes):
            self._compact()

    def _compact(self) -> None:
        """Makes the log hold only the pending events' records."""
        records = {name: put_record(e) for name, e in sorted(self._pending.items())}
        self._log.replace(list(records.values()))
        self._record_sizes = {name: len(r) for name, r in records.items()}
        self._pending_bytes = sum(self._record_sizes.values())

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
