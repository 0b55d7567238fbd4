"""What a task type is: something that starts an attempt and hands back a running task to supervise.

The runner owns the attempt's life cycle (slots, events, timeout, kill requests, the log); a task
type only knows how to start its kind of work, where its output goes, and how to stop it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from dsched_server.protocol.execution import TaskExecution


class SpawnError(Exception):
    """The task could not be started (the attempt ends FAILED with this message)."""


class OutputSink(Protocol):
    """Where a task's output goes (the attempt's log)."""

    def append(self, data: bytes) -> None: ...

    def note(self, text: str) -> None:
        """Adds a line from the worker itself (marked as such) to the log."""
        ...

    def make(self) -> None:
        """Makes the log's file if that was deferred (:meth:`dsched_worker.logs.TaskLog.make`):
        called right before the process starts; raises OSError."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskExit:
    """How a task ended: ``returncode`` as Python reports it (negative: killed by that signal);
    ``application_id``: the Spark application it ran, if any; ``ended``: :func:`time.monotonic`
    when its main process was seen to exit (the time its end event carries), None if unknown."""

    returncode: int
    out_params: Mapping[str, str] = field(default_factory=dict)
    application_id: str = ""
    ended: float | None = None


class RunningTask(Protocol):
    """A started task. ``wait`` returns once it and everything it started are gone."""

    @property
    def pid(self) -> int:
        """The process id of its main process (0 if it has none)."""
        ...

    @property
    def started(self) -> float:
        """:func:`time.monotonic` when it started (the time its RUNNING event carries)."""
        ...

    async def wait(self) -> TaskExit: ...

    async def kill(self, grace: float) -> None:
        """Asks it to stop, then forces it after ``grace`` seconds. ``wait`` reports the end."""
        ...


@runtime_checkable
class ReportsApplications(Protocol):
    """A running task that learns the id of an application it runs elsewhere (a Spark job)."""

    def watch_applications(self, listener: Callable[[str], None]) -> None:
        """Calls ``listener`` with the latest id found so far, if any, and with each new one."""
        ...


class TaskType(Protocol):
    async def start(self, execution: TaskExecution, output: OutputSink) -> RunningTask:
        """Starts the attempt; raises :class:`SpawnError` if it cannot."""
        ...
