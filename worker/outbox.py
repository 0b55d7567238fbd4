"""The on-disk outbox: a task event is written here before it is first sent, and deleted only when
its owner master has settled it (ACCEPTED, DUPLICATE or REJECTED_STALE).

One small file per event in ``<data_dir>/outbox``, named ``<epoch:020>-<seq:020>.event`` so that a
directory listing sorts in emission order (epochs grow across incarnations, sequence numbers within
one). A file holds a one-line header with the address of the master the event goes to, then the
serialized ``dsched.v1.TaskEvent``::

    dsched-outbox-1 <owner address>\\n<TaskEvent bytes>

Files are written to a temporary name and renamed, so a crash never leaves a half-written event
under a real name. By default nothing is fsynced: the outbox then survives a worker crash but not a
power loss. With ``fsync`` each write (and its directory entry) is flushed to disk in a worker
thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path

from dsched.worker.convert import event_from_bytes, event_to_bytes
from dsched.worker.execution import TaskEvent

log = logging.getLogger(__name__)

MAGIC = b"dsched-outbox-1 "
_NAME_RE = re.compile(r"(\d{20})-(\d{20})\.event\Z")


@dataclass(frozen=True, slots=True, kw_only=True)
class OutboxEntry:
    """An event waiting for its acknowledgement, with the epoch and sequence that name it and the
    address of the master it is sent to."""

    event: TaskEvent
    worker_epoch: int
    seq: int
    owner_address: str

    @property
    def file_name(self) -> str:
        return f"{self.worker_epoch:020d}-{self.seq:020d}.event"


class Outbox:
    """The outbox directory: ``load`` once at start, then ``put``/``rewrite``/``remove``."""

    def __init__(self, directory: Path, *, fsync: bool = False) -> None:
        self.directory = directory
        self._fsync = fsync

    def load(self) -> list[OutboxEntry]:
        """Returns every stored event, oldest first. Leftover temporary files are deleted;
        unreadable files are renamed to ``*.corrupt`` (kept for inspection, never resent)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        found: list[OutboxEntry] = []
        for path in sorted(self.directory.iterdir()):
            if path.name.endswith(".tmp"):
                with contextlib.suppress(OSError):
                    path.unlink()
                continue
            match = _NAME_RE.match(path.name)
            if match is None:
                continue
            try:
                found.append(self._read(path, int(match.group(1)), int(match.group(2))))
            except (OSError, ValueError) as exc:
                log.error("unreadable outbox file %s (%s); moved aside", path.name, exc)
                with contextlib.suppress(OSError):
                    path.replace(path.with_name(path.name + ".corrupt"))
        return found

    async def put(self, entry: OutboxEntry) -> None:
        """Stores a new event. Raises OSError if it cannot be written."""
        if self._fsync:
            await asyncio.to_thread(self._write, entry)
        else:
            self._write(entry)

    def rewrite(self, entry: OutboxEntry) -> None:
        """Replaces a stored event (its owner changed). Raises OSError if it cannot be written."""
        self._write(entry)

    def remove(self, entry: OutboxEntry) -> None:
        """Deletes a settled event; a missing file is not an error."""
        with contextlib.suppress(FileNotFoundError):
            (self.directory / entry.file_name).unlink()

    def _read(self, path: Path, epoch: int, seq: int) -> OutboxEntry:
        data = path.read_bytes()
        if not data.startswith(MAGIC) or b"\n" not in data:
            raise ValueError("bad header")
        header, _, body = data.partition(b"\n")
        owner = header[len(MAGIC) :].decode("ascii")
        event = event_from_bytes(body)
        if event.event_id != f"{epoch}-{seq}":
            raise ValueError(f"event id {event.event_id!r} does not match the file name")
        return OutboxEntry(event=event, worker_epoch=epoch, seq=seq, owner_address=owner)

    def _write(self, entry: OutboxEntry) -> None:
        data = MAGIC + entry.owner_address.encode("ascii") + b"\n" + event_to_bytes(entry.event)
        final = self.directory / entry.file_name
        tmp = self.directory / f"{entry.file_name}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if self._fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, final)
        if self._fsync:
            dir_fd = os.open(self.directory, os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
