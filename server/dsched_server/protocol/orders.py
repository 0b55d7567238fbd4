"""What a master orders a worker to do with an attempt it already has."""

from __future__ import annotations

from dataclasses import dataclass

from dsched_server.protocol.attempt import AttemptKey


@dataclass(frozen=True, slots=True)
class Kill:
    """End the attempt (its result is reported as KILLED); ``reason`` goes to its log."""

    key: AttemptKey
    reason: str


@dataclass(frozen=True, slots=True)
class TakeOver:
    """Report the attempt's events to another master from now on (it adopted the instance)."""

    key: AttemptKey
    owner_address: str
    owner_epoch: int
