"""A bystander's view of cluster membership: when each member's znode appeared and went away.

:class:`RegistryWatcher` is its own kazoo client (session) under the cluster's chroot, watching the
children of the masters' and workers' paths. Every change is recorded with a ``time.monotonic()``
stamp, so a test measures detection time (T_detect: fault injected -> znode gone) on the same clock
as its fault injection, independent of what the servers log. Kazoo calls the watches on its own
thread; the record is guarded by a lock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Literal

from kazoo.client import KazooClient, KazooState
from kazoo.recipe.watchers import ChildrenWatch

from dsched_server.constants import MASTERS_PATH, WORKERS_PATH

Role = Literal["master", "worker"]
_POLL_S = 0.05


@dataclass(frozen=True, slots=True)
class MembershipEvent:
    at: float  # time.monotonic()
    role: Role
    node: str  # "<host:port>" for masters, "<group>@<host:port>" for workers
    kind: Literal["appeared", "gone"]

    @property
    def address(self) -> str:
        return self.node.rpartition("@")[2]


class RegistryWatcher:
    """Records membership changes of the cluster under ``chroot`` of ZooKeeper ``hosts``. Start,
    then stop."""

    def __init__(self, hosts: str, chroot: str, *, session_timeout: float = 10.0) -> None:
        # No chroot in the client itself: the cluster's chroot may not exist yet, and a chrooted
        # kazoo client warns about that (the tests turn warnings into errors).
        self._chroot = chroot
        self._client = KazooClient(hosts=hosts, timeout=session_timeout)
        self._lock = threading.Lock()
        self._current: dict[Role, set[str]] = {"master": set(), "worker": set()}
        self._events: list[MembershipEvent] = []
        self._states: list[tuple[float, str]] = []

    def start(self, timeout: float = 15.0) -> None:
        """Connects and starts watching (creating the member paths if the servers have not yet:
        a ChildrenWatch on a missing node would end at once)."""
        self._client.add_listener(self._on_state)
        self._client.start(timeout=timeout)
        paths: tuple[tuple[Role, str], ...] = (("master", MASTERS_PATH), ("worker", WORKERS_PATH))
        for role, path in paths:
            self._client.ensure_path(self._chroot + path)
            ChildrenWatch(self._client, self._chroot + path, partial(self._on_children, role))

    def stop(self) -> None:
        """Closes the session; bounded even when ZooKeeper is down (kazoo gives up on close)."""
        try:
            self._client.stop()
        finally:
            self._client.close()

    # -- kazoo thread -------------------------------------------------------------------------

    def _on_state(self, state: KazooState) -> None:
        with self._lock:
            self._states.append((time.monotonic(), str(state)))

    def _on_children(self, role: Role, children: list[str]) -> None:
        now = time.monotonic()
        with self._lock:
            seen = set(children)
            before = self._current[role]
            for node in sorted(seen - before):
                self._events.append(MembershipEvent(now, role, node, "appeared"))
            for node in sorted(before - seen):
                self._events.append(MembershipEvent(now, role, node, "gone"))
            self._current[role] = seen

    # -- queries ------------------------------------------------------------------------------

    def events(self, *, after: float = 0.0) -> list[MembershipEvent]:
        with self._lock:
            return [e for e in self._events if e.at >= after]

    def states(self) -> list[tuple[float, str]]:
        """The watcher's own connection states (SUSPENDED/CONNECTED/LOST) with their times."""
        with self._lock:
            return list(self._states)

    def present(self, role: Role) -> set[str]:
        """The addresses of ``role`` members registered now."""
        with self._lock:
            return {node.rpartition("@")[2] for node in self._current[role]}

    def first(
        self, address: str, kind: Literal["appeared", "gone"], *, after: float = 0.0
    ) -> float | None:
        """When the node of ``address`` first appeared/went away at or after ``after``."""
        for event in self.events(after=after):
            if event.kind == kind and event.address == address:
                return event.at
        return None

    def wait(
        self,
        address: str,
        kind: Literal["appeared", "gone"],
        *,
        after: float,
        timeout: float,
    ) -> float:
        """Waits (bounded) for :meth:`first` to have an answer and returns it."""
        return _wait_for(
            lambda: self.first(address, kind, after=after), timeout, f"{address} {kind}"
        )

    def gone_since(self, *, after: float) -> list[MembershipEvent]:
        """Every disappearance at or after ``after`` (a restarted ZooKeeper should cause none)."""
        return [e for e in self.events(after=after) if e.kind == "gone"]


def _wait_for(check: Callable[[], float | None], timeout: float, what: str) -> float:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value is not None:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"registry: not within {timeout}s: {what}")
        time.sleep(_POLL_S)
