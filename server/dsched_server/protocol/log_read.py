"""A read of a task's log on the worker that ran it (the master's LogService proxy forwards it)."""

from __future__ import annotations

from dataclasses import dataclass

MAX_LOG_READ = 1024 * 1024  # ReadTaskLog's default and largest length


@dataclass(frozen=True, slots=True)
class LogRead:
    """Up to ``length`` bytes (1..MAX_LOG_READ) from byte ``offset`` of the task instance's log."""

    task_instance_id: int
    offset: int
    length: int = MAX_LOG_READ
