"""Backoff: exponential growth, cap, jitter bounds, deadline and attempt limits (seeded RNG); the
SDK's Reconnect is one."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from dsched.backoff import Backoff
from dsched.streams import Reconnect


def delays(backoff: Backoff, seed: int = 0, limit: int = 10_000) -> list[float]:
    return list(itertools.islice(backoff.delays(random.Random(seed)), limit))


def test_without_jitter_delays_double_until_the_cap() -> None:
    got = delays(Backoff(initial=0.05, maximum=1.0, jitter=0, attempts=8))
    assert got == pytest.approx([0.05, 0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0])


def test_the_multiplier_sets_the_growth() -> None:
    got = delays(Backoff(initial=1, maximum=1000, multiplier=3, jitter=0, attempts=5))
    assert got == pytest.approx([1, 3, 9, 27, 81])


def test_the_cap_holds_forever() -> None:
    got = delays(Backoff(initial=1, maximum=4, jitter=0), limit=1000)
    assert len(got) == 1000
    assert got[:3] == pytest.approx([1, 2, 4])
    assert set(got[2:]) == {4}


def test_an_initial_delay_above_the_maximum_is_capped() -> None:
    assert delays(Backoff(initial=10, maximum=5, jitter=0, attempts=3)) == [5, 5, 5]


def test_jitter_stays_within_its_bounds_and_spreads_both_ways() -> None:
    b = Backoff(initial=1, maximum=1, jitter=0.2)
    got = delays(b, limit=5000)
    assert all(0.8 <= d <= 1.2 for d in got)
    assert min(got) < 0.85
    assert max(got) > 1.15
    assert sum(got) / len(got) == pytest.approx(1.0, abs=0.02)  # symmetric around the base


def test_jitter_is_applied_around_each_base() -> None:
    b = Backoff(initial=0.1, maximum=3.0, multiplier=2, jitter=0.5, attempts=12)
    base = [min(0.1 * 2**n, 3.0) for n in range(12)]
    for seed in range(200):
        for d, mid in zip(delays(b, seed), base, strict=True):
            assert mid * 0.5 <= d <= mid * 1.5


def test_the_same_seed_gives_the_same_delays() -> None:
    b = Backoff(attempts=20)
    assert delays(b, seed=7) == delays(b, seed=7)
    assert delays(b, seed=7) != delays(b, seed=8)


def test_the_default_random_source_works() -> None:
    got = list(Backoff(initial=0.5, maximum=0.5, jitter=0.1, attempts=50).delays())
    assert len(got) == 50
    assert all(0.45 <= d <= 0.55 for d in got)


@pytest.mark.parametrize("attempts", [0, 1, 3, 100])
def test_attempts_bound_the_number_of_delays(attempts: int) -> None:
    assert len(delays(Backoff(attempts=attempts))) == attempts


def test_without_limits_the_delays_never_end() -> None:
    assert len(delays(Backoff(), limit=10_000)) == 10_000


def test_the_deadline_bounds_the_sum_and_the_last_delay_lands_on_it() -> None:
    got = delays(Backoff(initial=1, maximum=10, jitter=0, deadline=10))
    assert got == pytest.approx([1, 2, 4, 3])  # 1 + 2 + 4 = 7; the last is clipped to 3


def test_a_deadline_shorter_than_the_first_delay_gives_one_short_delay() -> None:
    assert delays(Backoff(initial=5, maximum=5, jitter=0, deadline=0.5)) == [0.5]


def test_a_zero_deadline_gives_no_delay() -> None:
    assert delays(Backoff(deadline=0)) == []


def test_attempts_and_deadline_whichever_comes_first() -> None:
    assert len(delays(Backoff(initial=1, jitter=0, deadline=100, attempts=2))) == 2
    assert delays(Backoff(initial=1, maximum=1, jitter=0, deadline=2.5, attempts=10)) == [1, 1, 0.5]


def test_the_deadline_never_adds_a_vanishing_extra_delay() -> None:
    # Float rounding must not leave total a hair under the deadline and yield a ~1e-16 "delay":
    # that is one more retry with no wait, after the deadline was spent.
    rng = random.Random(2024)
    for seed in range(20_000):
        deadline = rng.uniform(0.1, 20)
        b = Backoff(
            initial=rng.uniform(0.01, 1),
            maximum=rng.uniform(1, 5),
            multiplier=rng.uniform(1, 3),
            jitter=rng.uniform(0, 0.5),
            deadline=deadline,
        )
        got = delays(b, seed)
        assert got, b
        assert math.fsum(got) == pytest.approx(deadline)
        assert math.fsum(got) <= deadline + 1e-9
        assert got[-1] > 1e-9 or len(got) == 1, (b, got[-3:])


def test_a_backoff_is_a_reusable_value() -> None:
    b = Backoff(attempts=5)
    assert delays(b, 1) == delays(b, 1)  # iterating does not consume the object
    with pytest.raises(AttributeError):
        b.initial = 1.0  # type: ignore[misc]


def test_the_sdk_reconnects_with_the_same_backoff() -> None:
    # The SDK's Reconnect is a Backoff with its own defaults: eight tries from 0.2 s.
    reconnect = Reconnect(jitter=0)
    assert isinstance(reconnect, Backoff)
    assert delays(reconnect) == pytest.approx([0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0, 5.0])
