"""Choosing a worker for a task: host weights from heartbeats, warm-up, and the selectors.

Direction matters (ARCHITECTURE.md §5): an idle worker and an old worker must be preferred. A
worker's base weight is ``100 * (1 - load score)``, where the load score (0 = idle, 1 = saturated)
combines CPU, memory, load average and slot usage; during warm-up the weight ramps linearly from a
small floor to its full value, so a fresh worker is not flooded. DolphinScheduler 3.2 inverted both
by accident.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

MIN_WEIGHT = 1.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Candidate:
    address: str
    cpu: float
    memory: float
    load: float
    slots_in_use: int
    slots_total: int
    start_time: datetime
    backlog: int = 0  # attempts queued on the worker or sent since its last heartbeat


def load_score(c: Candidate, *, saturate: bool = True) -> float:
    """0 (idle) .. 1 (saturated), counting the backlog as slots in use. With ``saturate=False`` a
    backlog beyond the slots keeps counting, past 1."""
    used = c.slots_in_use + c.backlog
    slots = used / c.slots_total if c.slots_total > 0 else 1.0
    if saturate:
        slots = min(slots, 1.0)
    score = 0.3 * c.cpu + 0.2 * c.memory + 0.2 * min(c.load, 1.0) + 0.3 * slots
    return max(0.0, min(score, 1.0) if saturate else score)


def warmup_factor(c: Candidate, now: datetime, warmup: timedelta) -> float:
    """0 .. 1: the share of the warm-up period the worker has been up (1 once warm)."""
    if warmup <= timedelta(0):
        return 1.0
    uptime = max(now - c.start_time, timedelta(0))
    return min(uptime / warmup, 1.0)


def weight(c: Candidate, now: datetime, warmup: timedelta) -> float:
    """Effective weight: idler is heavier; during warm-up it grows linearly with uptime."""
    base = 100.0 * (1.0 - load_score(c)) * warmup_factor(c, now, warmup)
    return max(base, MIN_WEIGHT)


def headroom(c: Candidate, now: datetime, warmup: timedelta) -> float:
    """What LowerWeight ranks by: the weight without its floor and without saturation, so that
    among workers that are all full, the one with the shortest backlog still wins (instead of
    the one whose last CPU or memory reading was a hair lower). Negative once over capacity."""
    base = 100.0 * (1.0 - load_score(c, saturate=False))
    # A warming worker gets less of the free capacity; its backlog counts in full.
    return base * warmup_factor(c, now, warmup) if base > 0 else base


class Selector(Protocol):
    def select(self, candidates: Sequence[Candidate], now: datetime) -> Candidate | None: ...


@dataclass(slots=True)
class LowerWeight:
    """Picks the candidate with the most headroom (lowest load, shortest backlog), ties by
    address."""

    warmup: timedelta = timedelta(minutes=10)

    def select(self, candidates: Sequence[Candidate], now: datetime) -> Candidate | None:
        if not candidates:
            return None
        return min(candidates, key=lambda c: (-headroom(c, now, self.warmup), c.address))


class SmoothRoundRobin:
    """nginx's smooth weighted round robin over the effective weights."""

    def __init__(self, warmup: timedelta = timedelta(minutes=10)) -> None:
        self.warmup = warmup
        self._current: dict[str, float] = {}

    def select(self, candidates: Sequence[Candidate], now: datetime) -> Candidate | None:
        if not candidates:
            return None
        weights = {c.address: weight(c, now, self.warmup) for c in candidates}
        total = sum(weights.values())
        for address, w in weights.items():
            self._current[address] = self._current.get(address, 0.0) + w
        # Highest current weight; ties go to the smallest address.
        best = min(candidates, key=lambda c: (-self._current[c.address], c.address))
        self._current[best.address] -= total
        for gone in set(self._current) - set(weights):
            del self._current[gone]
        return best


@dataclass(slots=True)
class WeightedRandom:
    """Random choice proportional to the effective weights."""

    warmup: timedelta = timedelta(minutes=10)
    rng: random.Random | None = None

    def select(self, candidates: Sequence[Candidate], now: datetime) -> Candidate | None:
        if not candidates:
            return None
        pick = self.rng or random
        weights = [weight(c, now, self.warmup) for c in candidates]
        return pick.choices(list(candidates), weights=weights, k=1)[0]


def make_selector(name: str, warmup: timedelta) -> Selector:
    if name == "round_robin":
        return SmoothRoundRobin(warmup)
    if name == "random":
        return WeightedRandom(warmup)
    return LowerWeight(warmup)
