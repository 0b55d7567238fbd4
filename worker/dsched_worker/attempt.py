"""The runner's record of one attempt in flight, and how the way it ended becomes its result.

An :class:`Attempt` is mutable bookkeeping owned by the runner (phase, running task, why it is
being stopped); it never leaves the runner. :meth:`Attempt.outcome` decides the reported result
from the stop cause and the task's exit: a timeout is FAILED "timed out after <N>s", a kill request
is KILLED, otherwise exit code 0 is SUCCEEDED and anything else FAILED. Exit codes of processes
killed by a signal are reported the shell's way (128 + N).
"""

from __future__ import annotations

import asyncio
import enum

from dsched_server.protocol.event import AttemptReport, TaskEventType
from dsched_server.protocol.execution import TaskExecution
from dsched_worker.logs import TaskLog
from dsched_worker.process import exit_code
from dsched_worker.tasks import RunningTask, TaskExit

NO_PROCESS_EXIT_CODE = -1  # the exit code of attempts that never had a process


class Phase(enum.Enum):
    QUEUED = "queued"
    STARTING = "starting"
    RUNNING = "running"
    ENDING = "ending"  # the process is gone; the result is being recorded


class StopCause(enum.Enum):
    KILL = "kill"
    TIMEOUT = "timeout"
    FENCE = "fence"


class Attempt:
    """The runner's mutable bookkeeping for one attempt."""

    def __init__(self, execution: TaskExecution, task_log: TaskLog) -> None:
        self.execution = execution
        self.log = task_log
        self.phase = Phase.QUEUED
        self.run: RunningTask | None = None
        self.stop: StopCause | None = None  # why it is being stopped; the first reason wins
        self.kill_reason = ""
        self.silent = False  # fenced or shut down: report nothing more
        self.task: asyncio.Task[None] | None = None
        self.kill_task: asyncio.Task[None] | None = None
        # time.monotonic() when its process was seen to exit: the time its end event carries
        self.ended: float | None = None

    @property
    def timeout_text(self) -> str:
        return f"timed out after {self.execution.timeout.total_seconds():g}s"

    def outcome(self, result: TaskExit) -> AttemptReport:
        """The result of a task that ran and ended with ``result``."""
        code = exit_code(result.returncode)
        app = result.application_id
        if self.stop is StopCause.TIMEOUT:
            kind, message = TaskEventType.FAILED, self.timeout_text
        elif self.stop is StopCause.KILL:
            kind, message = TaskEventType.KILLED, self.kill_reason
        elif result.returncode == 0:
            return AttemptReport(
                type=TaskEventType.SUCCEEDED, out_params=result.out_params, application_id=app
            )
        else:
            kind, message = TaskEventType.FAILED, f"exited with code {code}"
        return AttemptReport(type=kind, exit_code=code, message=message, application_id=app)
