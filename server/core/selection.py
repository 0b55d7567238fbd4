"""Choosing a worker for a task: host weights from heartbeats, warm-up, and the selectors.

Direction matters (DESIGN.md §5): an idle worker and an old worker must be preferred. A worker's
base weight is ``100 * (1 - load score)``, where the load score (0 = idle, 1 = saturated) combines
CPU, memory, load average and slot usage; during warm-up the weight ramps linearly from a small
floor to its full value, so a fresh worker is not flooded. DolphinScheduler 3.2 inverted both by
accident.
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


def load_score(c: Candidate) -> float:
    """0 (idle) .. 1 (saturated)."""
    slots = c.slots_in_use / c.slots_total if c.slots_total > 0 else 1.0
    score = 0.3 * c.cpu + 0.2 * c.memory + 0.2 * min(c.load, 1.0) + 0.3 * min(slots, 1.0)
    return max(0.0, min(score, 1.0))


def weight(c: Candidate, now: datetime, warmup: timedelta) -> float:
    """Effective weight: idler is heavier; during warm-up it grows linearly with uptime."""
    base = 100.0 * (1.0 - load_score(c))
    if warmup > timedelta(0):
        uptime = max(now - c.start_time, timedelta(0))
        if uptime < warmup:
            base *= uptime / warmup
    return max(base, MIN_WEIGHT)


class Selector(Protocol):
    def select(self, candidates: Sequence[Candidate], now: datetime) -> Candidate | None: ...


@dataclass(slots=True)
class LowerWeight:
    """Picks the candidate with the highest effective weight (lowest load), ties by address."""

    warmup: timedelta = timedelta(minutes=10)

    def select(self, candidates: Sequence[Candidate], now: datetime) -> Candidate | None:
        if not candidates:
            return None
        # Among equal weights (all saturated, say) the fewest slots in use per slot wins, so a
        # burst spreads evenly; then the smallest address.
        return min(
            candidates,
            key=lambda c: (-weight(c, now, self.warmup), _slot_ratio(c), c.address),
        )


def _slot_ratio(c: Candidate) -> float:
    return c.slots_in_use / c.slots_total if c.slots_total > 0 else float("inf")


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
