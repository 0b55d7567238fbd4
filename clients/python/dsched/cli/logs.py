"""Live output of ``dsched run --wait [--logs]``: state events and interleaved task logs.

The main thread follows the instance's event stream and prints one line per event. With logs on,
each task instance that starts gets a thread tailing its log with ``follow``; lines are prefixed
with the task's name (like ``docker compose up``). Every line goes through one lock and is
flushed, so lines from concurrent tasks interleave whole and appear as they happen. A tail ends by
itself when the server sends ``end_of_log`` (the task instance is terminal).
"""

from __future__ import annotations

import threading
from typing import TextIO

from dsched.cli.format import clock
from dsched.client import Client
from dsched.errors import DschedError, NotFound
from dsched.results import InstanceEvent
from dsched.states import InstanceEventKind, TaskState

# Task states in which a task instance has (or had) a process, hence a log worth tailing.
_HAS_RUN = frozenset({TaskState.RUNNING, TaskState.SUCCEEDED, TaskState.FAILED, TaskState.KILLED})


def event_line(event: InstanceEvent) -> str:
    """``12:00:01  extract  RUNNING  message`` (``workflow`` for workflow-level events)."""
    who = event.task_name if event.is_task_event else "workflow"
    state = event.task_state if event.is_task_event else event.workflow_state
    what = str(state if state is not None else event.kind)
    if event.kind is not InstanceEventKind.STATE and state is not None:
        what = f"{what} ({event.kind})"
    parts = [clock(event.create_time), who, what]
    if event.message:
        parts.append(event.message)
    return "  ".join(parts)


class Printer:
    """Writes whole lines to ``out`` under one lock, flushing each."""

    def __init__(self, out: TextIO) -> None:
        self._out = out
        self._lock = threading.Lock()

    def line(self, text: str) -> None:
        with self._lock:
            self._out.write(text + "\n")
            self._out.flush()


class LogFollower:
    """Tails the log of every task instance that starts, one daemon thread per task instance.

    Feed it every event with :meth:`on_event`; call :meth:`join` once the instance is terminal.
    """

    def __init__(self, client: Client, printer: Printer) -> None:
        self._client = client
        self._printer = printer
        self._threads: dict[int, threading.Thread] = {}

    def on_event(self, event: InstanceEvent) -> None:
        """Starts a tail for a task instance seen running (or finished) for the first time."""
        tid = event.task_instance_id
        if not tid or tid in self._threads or event.task_state not in _HAS_RUN:
            return
        thread = threading.Thread(
            target=self._tail, args=(tid, event.task_name), name=f"tail-{tid}", daemon=True
        )
        self._threads[tid] = thread
        thread.start()

    def join(self, timeout: float = 30.0) -> None:
        """Waits for the tails to reach their end of log, at most ``timeout`` seconds each."""
        for thread in self._threads.values():
            thread.join(timeout)

    def _tail(self, task_instance_id: int, task: str) -> None:
        prefix = f"{task} | "
        pending = b""
        try:
            for chunk in self._client.tail_log(task_instance_id, follow=True):
                # Split on bytes, decode whole lines: a chunk may end inside a UTF-8 sequence.
                *lines, pending = (pending + chunk.data).split(b"\n")
                for raw in lines:
                    self._printer.line(prefix + raw.decode(errors="replace"))
        except NotFound:
            pass  # the task failed before it could write a log: nothing to show
        except DschedError as err:
            self._printer.line(f"{prefix}(log unavailable: {err.message})")
        if pending:
            self._printer.line(prefix + pending.decode(errors="replace"))
