"""Which attempt a message is about."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, order=True)
class AttemptKey:
    """Identifies one attempt. Dispatch, kill and take-over are idempotent on it."""

    task_instance_id: int
    attempt: int

    def __str__(self) -> str:
        return f"{self.task_instance_id}#{self.attempt}"
