"""What the store remembers between transactions: committed rows that never change.

A workflow version (its description, parameters, tasks and edges) is written once and never
updated, so a master that read it once need not read it again: starting a run and claiming it
each loaded the same version with three queries. :class:`Memo` keeps the versions read lately
(bounded, least recently used out), one per :class:`~dsched_server.store.database.Database`.

Only what is known committed goes in. A transaction may read a version it wrote itself and then
roll back, and the id could be given again to another workflow; so a transaction's entries are
staged (:class:`Staged`) and published by the database only after its commit. The key also holds
the workflow's creation time, so an id a database gives again after a deletion (MariaDB may,
after a restart) does not meet the old entry.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from dsched.spec import TaskSpec

# About 1 KB per version of a small workflow: a few hundred keep the versions that run now.
SIZE = 256


@dataclass(frozen=True, slots=True)
class VersionKey:
    code: int
    created: datetime  # the workflow head's create_time
    version: int


@dataclass(frozen=True, slots=True)
class Version:
    """The immutable part of one stored workflow version."""

    description: str
    params: dict[str, str]
    create_time: datetime
    tasks: tuple[TaskSpec, ...]


class Versions(Protocol):
    """What a repository sees: look a version up, remember one it read."""

    def get(self, key: VersionKey) -> Version | None: ...

    def put(self, key: VersionKey, value: Version) -> None: ...


class Memo:
    """The committed versions read lately, at most ``size``."""

    def __init__(self, size: int = SIZE) -> None:
        self._size = size
        self._entries: OrderedDict[VersionKey, Version] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: VersionKey) -> Version | None:
        value = self._entries.get(key)
        if value is not None:
            self._entries.move_to_end(key)
        return value

    def put(self, key: VersionKey, value: Version) -> None:
        self._entries[key] = value
        self._entries.move_to_end(key)
        while len(self._entries) > self._size:
            self._entries.popitem(last=False)


class Staged:
    """A transaction's view of a :class:`Memo`: what it reads goes in only once it commits."""

    def __init__(self, memo: Memo) -> None:
        self._memo = memo
        self._new: dict[VersionKey, Version] = {}

    def get(self, key: VersionKey) -> Version | None:
        return self._new.get(key) or self._memo.get(key)

    def put(self, key: VersionKey, value: Version) -> None:
        self._new[key] = value

    def publish(self) -> None:
        """Called after the commit."""
        for key, value in self._new.items():
            self._memo.put(key, value)
        self._new.clear()
