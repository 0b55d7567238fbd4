"""Host selection (ARCHITECTURE.md §5): load score, weight with linear warm-up, the three selectors.

The point of most of these tests is the *direction*: DolphinScheduler 3.2 inverted it (a busier
worker got a smaller "cumulative weight" and was picked more often; warm-up inflated a young
worker's weight so it was picked less), so every selector is checked to prefer the idler and the
older worker, and the shares under the weighted selectors are checked against ``w_i / sum(w)``.
Time is a fixed ``NOW``; no wall clock.
"""

from __future__ import annotations

import itertools
import math
import random
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta

import pytest

from dsched_server.core.selection import (
    MIN_WEIGHT,
    Candidate,
    LowerWeight,
    Selector,
    SmoothRoundRobin,
    WeightedRandom,
    headroom,
    load_score,
    make_selector,
    weight,
)

NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
WARMUP = timedelta(minutes=10)
OLD = timedelta(days=1)  # long past any warm-up used here

MakeSelector = Callable[[timedelta], Selector]

SELECTORS: dict[str, MakeSelector] = {
    "lower_weight": LowerWeight,
    "round_robin": SmoothRoundRobin,
    # Seeded: the share assertions are then exact statements about one fixed sequence.
    "random": lambda warmup: WeightedRandom(warmup, random.Random(20250301)),
}
WEIGHTED = ["round_robin", "random"]


def cand(
    address: str,
    *,
    cpu: float = 0.0,
    memory: float = 0.0,
    load: float = 0.0,
    slots_in_use: int = 0,
    slots_total: int = 8,
    age: timedelta = OLD,
) -> Candidate:
    """A candidate started ``age`` before ``NOW``; idle unless told otherwise."""
    return Candidate(
        address=address,
        cpu=cpu,
        memory=memory,
        load=load,
        slots_in_use=slots_in_use,
        slots_total=slots_total,
        start_time=NOW - age,
    )


def pick_counts(selector: Selector, candidates: Sequence[Candidate], picks: int) -> Counter[str]:
    counts: Counter[str] = Counter()
    for _ in range(picks):
        chosen = selector.select(candidates, NOW)
        assert chosen is not None
        counts[chosen.address] += 1
    return counts


def sequence(selector: Selector, candidates: Sequence[Candidate], picks: int) -> str:
    """The addresses picked, concatenated (single-letter addresses make this readable)."""
    out = []
    for _ in range(picks):
        chosen = selector.select(candidates, NOW)
        assert chosen is not None
        out.append(chosen.address)
    return "".join(out)


def assert_shares(
    name: str, candidates: Sequence[Candidate], counts: Counter[str], picks: int
) -> None:
    """The share each selector owes: everything to the heaviest under LowerWeight; ``w_i/sum(w)``
    under the weighted ones (smooth RR within one pick, seeded random within four binomial
    standard deviations)."""
    weights = {c.address: weight(c, NOW, WARMUP) for c in candidates}
    total = sum(weights.values())
    if name == "lower_weight":
        heaviest = max(weights, key=lambda a: weights[a])
        assert counts == Counter({heaviest: picks})
        return
    for address, w in weights.items():
        expected = picks * w / total
        p = w / total
        tolerance = 1.0 if name == "round_robin" else 4 * math.sqrt(picks * p * (1 - p))
        assert abs(counts[address] - expected) <= tolerance, (address, counts, expected)


# ------------------------------------------------------------------------------ load score


def test_an_idle_worker_scores_zero_and_a_saturated_one_scores_one() -> None:
    assert load_score(cand("a")) == 0.0
    full = cand("a", cpu=1.0, memory=1.0, load=1.0, slots_in_use=8, slots_total=8)
    assert load_score(full) == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("metrics", "share"),
    [
        ({"cpu": 1.0}, 0.3),
        ({"memory": 1.0}, 0.2),
        ({"load": 1.0}, 0.2),
        ({"slots_in_use": 8}, 0.3),
        ({"slots_in_use": 4}, 0.15),
        ({"cpu": 0.5, "memory": 0.5}, 0.25),
    ],
    ids=["cpu", "memory", "load", "slots-full", "slots-half", "cpu+memory-half"],
)
def test_each_metric_contributes_its_share(metrics: dict[str, float], share: float) -> None:
    c = cand(
        "a",
        cpu=metrics.get("cpu", 0.0),
        memory=metrics.get("memory", 0.0),
        load=metrics.get("load", 0.0),
        slots_in_use=int(metrics.get("slots_in_use", 0)),
    )
    assert load_score(c) == pytest.approx(share)


def test_load_per_cpu_above_one_and_overcommitted_slots_count_as_full() -> None:
    # Load per CPU may exceed 1 (heartbeat.py); it must not push the score past its share.
    assert load_score(cand("a", load=3.5)) == pytest.approx(0.2)
    assert load_score(cand("a", slots_in_use=12, slots_total=8)) == pytest.approx(0.3)


def test_a_worker_without_slots_counts_as_slot_saturated() -> None:
    assert load_score(cand("a", slots_total=0)) == pytest.approx(0.3)


def test_out_of_range_readings_are_clamped_to_zero_one() -> None:
    assert load_score(cand("a", cpu=-5.0, memory=-5.0)) == 0.0
    assert load_score(cand("a", cpu=9.0, memory=9.0, load=9.0, slots_in_use=99)) == 1.0


def test_the_score_rises_with_every_metric() -> None:
    levels = [0.0, 0.25, 0.5, 0.75, 1.0]
    scores = [
        load_score(cand("a", cpu=x, memory=x, load=x, slots_in_use=int(8 * x))) for x in levels
    ]
    assert scores == sorted(scores)
    assert len(set(scores)) == len(scores)


# ---------------------------------------------------------------------------------- weight


def test_past_warm_up_the_weight_is_a_hundred_times_the_idle_fraction() -> None:
    assert weight(cand("a"), NOW, WARMUP) == pytest.approx(100.0)
    busy = cand("a", cpu=1.0, memory=0.5)  # score 0.4
    assert weight(busy, NOW, WARMUP) == pytest.approx(60.0)


def test_an_idler_worker_weighs_more() -> None:
    idle, busy = cand("a", cpu=0.1), cand("b", cpu=0.9)
    assert weight(idle, NOW, WARMUP) > weight(busy, NOW, WARMUP)


def test_an_older_worker_past_warm_up_weighs_more_than_a_fresh_one() -> None:
    old, fresh = cand("a", age=OLD), cand("b", age=timedelta(seconds=30))
    assert weight(old, NOW, WARMUP) > weight(fresh, NOW, WARMUP)


@pytest.mark.parametrize("fraction", [0.25, 0.5, 0.75, 1.0])
@pytest.mark.parametrize("cpu", [0.0, 0.6], ids=["idle", "busy"])
def test_during_warm_up_the_weight_grows_linearly_with_uptime(fraction: float, cpu: float) -> None:
    full = weight(cand("a", cpu=cpu), NOW, WARMUP)
    warming = weight(cand("a", cpu=cpu, age=WARMUP * fraction), NOW, WARMUP)
    assert warming == pytest.approx(full * fraction)


def test_warm_up_weights_at_quarter_steps_are_proportional_to_uptime() -> None:
    fractions = [0.25, 0.5, 0.75, 1.0]
    weights = [weight(cand("a", age=WARMUP * f), NOW, WARMUP) for f in fractions]
    assert weights == pytest.approx([25.0, 50.0, 75.0, 100.0])
    # Equal steps of uptime add equal steps of weight: a straight line through the origin.
    steps = [b - a for a, b in itertools.pairwise([0.0, *weights])]
    assert steps == pytest.approx([25.0] * 4)


def test_a_worker_that_just_started_gets_the_floor() -> None:
    assert weight(cand("a", age=timedelta(0)), NOW, WARMUP) == MIN_WEIGHT


def test_a_start_time_ahead_of_the_masters_clock_counts_as_just_started() -> None:
    # Clocks of different hosts disagree; a negative uptime must not give a negative weight.
    ahead = cand("a", age=-timedelta(minutes=5))
    assert weight(ahead, NOW, WARMUP) == MIN_WEIGHT


@pytest.mark.parametrize("age", [WARMUP, WARMUP * 2, timedelta(days=365)], ids=str)
def test_after_warm_up_age_no_longer_matters(age: timedelta) -> None:
    c = cand("a", cpu=0.5)
    assert weight(cand("a", cpu=0.5, age=age), NOW, WARMUP) == weight(c, NOW, WARMUP)


@pytest.mark.parametrize("warmup", [timedelta(0), -timedelta(seconds=1)], ids=["zero", "negative"])
@pytest.mark.parametrize("age", [timedelta(0), timedelta(seconds=1), OLD], ids=str)
def test_no_warm_up_means_full_weight_from_the_first_second(
    warmup: timedelta, age: timedelta
) -> None:
    assert weight(cand("a", cpu=0.5, age=age), NOW, warmup) == pytest.approx(85.0)


def test_the_weight_never_falls_below_the_floor() -> None:
    saturated = cand("a", cpu=1.0, memory=1.0, load=1.0, slots_in_use=8)
    assert weight(saturated, NOW, WARMUP) == MIN_WEIGHT
    fresh_and_saturated = cand(
        "a", cpu=1.0, memory=1.0, load=1.0, slots_in_use=8, age=timedelta(seconds=1)
    )
    assert weight(fresh_and_saturated, NOW, WARMUP) == MIN_WEIGHT
    nearly_fresh = cand("a", age=timedelta(seconds=1))  # 100 * 1/600 is below the floor
    assert weight(nearly_fresh, NOW, WARMUP) == MIN_WEIGHT


def test_a_worker_with_every_slot_used_weighs_less_than_an_idle_one() -> None:
    # Slots are 30 % of the score; a slot-saturated worker is BUSY (heartbeat.status_for) and the
    # directory leaves it out, but the weight itself must still point the right way.
    full = cand("a", slots_in_use=8, slots_total=8)
    assert weight(full, NOW, WARMUP) == pytest.approx(70.0)
    assert weight(full, NOW, WARMUP) < weight(cand("b", slots_in_use=7), NOW, WARMUP)


# ------------------------------------------------------- direction, under every selector


@pytest.mark.parametrize("name", SELECTORS)
def test_an_idler_worker_gets_more_work(name: str) -> None:
    candidates = [cand("a", cpu=1.0, memory=1.0), cand("b"), cand("c", cpu=0.5)]  # 50, 100, 85
    counts = pick_counts(SELECTORS[name](WARMUP), candidates, 2350)
    assert counts.most_common(1)[0][0] == "b"
    if name in WEIGHTED:
        assert counts["b"] > counts["c"] > counts["a"] > 0
    assert_shares(name, candidates, counts, 2350)


@pytest.mark.parametrize("name", SELECTORS)
def test_an_older_worker_gets_more_work_than_a_fresh_one(name: str) -> None:
    candidates = [cand("a", age=timedelta(minutes=1)), cand("b", age=OLD)]  # 10, 100
    counts = pick_counts(SELECTORS[name](WARMUP), candidates, 1100)
    assert counts["b"] > counts["a"]
    assert_shares(name, candidates, counts, 1100)


@pytest.mark.parametrize("name", WEIGHTED)
def test_a_warming_workers_share_rises_linearly_with_uptime(name: str) -> None:
    # Four idle workers at 25/50/75/100 % of warm-up: weights 25:50:75:100, shares 10/20/30/40 %.
    candidates = [cand(f"w{i}", age=WARMUP * i / 4) for i in range(1, 5)]
    picks = 1000 if name == "round_robin" else 20_000
    counts = pick_counts(SELECTORS[name](WARMUP), candidates, picks)
    assert_shares(name, candidates, counts, picks)
    if name == "round_robin":
        # Smooth RR is exact over whole periods (here 10 picks).
        assert [counts[f"w{i}"] for i in range(1, 5)] == [100, 200, 300, 400]


def test_a_fresh_idle_worker_takes_over_from_an_old_busy_one_as_it_warms_up() -> None:
    old_busy = cand("a", cpu=1.0)  # 70
    selector = LowerWeight(WARMUP)
    for fraction, winner in [(0.1, "a"), (0.5, "a"), (0.69, "a"), (0.71, "b"), (1.0, "b")]:
        fresh = cand("b", age=WARMUP * fraction)  # 100 * fraction
        chosen = selector.select([old_busy, fresh], NOW)
        assert chosen is not None and chosen.address == winner, fraction


def test_with_warm_up_disabled_a_fresh_worker_competes_at_once() -> None:
    candidates = [cand("a", age=timedelta(seconds=1)), cand("b", age=OLD)]
    counts = pick_counts(SmoothRoundRobin(timedelta(0)), candidates, 100)
    assert counts == Counter({"a": 50, "b": 50})


def test_a_floored_worker_still_gets_its_small_share_under_round_robin() -> None:
    candidates = [cand("a", age=timedelta(0)), cand("b")]  # 1, 100
    counts = pick_counts(SmoothRoundRobin(WARMUP), candidates, 1010)
    assert counts == Counter({"a": 10, "b": 1000})


# ------------------------------------------------------------------- smooth round robin


def weighted_by_warmup(weights: dict[str, int]) -> list[Candidate]:
    """Idle candidates whose weights are exactly ``weights`` (uptime = weight % of warm-up)."""
    return [cand(a, age=WARMUP * w / 100) for a, w in weights.items()]


@pytest.mark.parametrize("order", list(itertools.permutations("abc")), ids="".join)
def test_smooth_round_robin_matches_nginx(order: tuple[str, ...]) -> None:
    # nginx's ngx_http_upstream_get_peer example: weights 5, 1, 1 give a a b a c a a, and the
    # sequence repeats; the b/c tie goes to the smaller address whatever the candidates' order.
    by_address = {c.address: c for c in weighted_by_warmup({"a": 50, "b": 10, "c": 10})}
    candidates = [by_address[a] for a in order]
    assert sequence(SmoothRoundRobin(WARMUP), candidates, 14) == "aabacaa" * 2


def test_smooth_round_robin_interleaves_instead_of_bursting() -> None:
    candidates = weighted_by_warmup({"a": 100, "b": 50})
    got = sequence(SmoothRoundRobin(WARMUP), candidates, 9)
    assert got == "abaabaaba"
    assert "bb" not in got


def test_removing_a_candidate_mid_sequence_keeps_the_rest_proportional() -> None:
    a, b, c = weighted_by_warmup({"a": 50, "b": 10, "c": 10})
    selector = SmoothRoundRobin(WARMUP)
    assert sequence(selector, [a, b, c], 3) == "aab"
    after = sequence(selector, [a, b], 60)
    assert "c" not in after
    counts = Counter(after)
    assert abs(counts["a"] - 50) <= 1 and abs(counts["b"] - 10) <= 1, counts


def test_a_removed_candidate_that_comes_back_starts_afresh() -> None:
    a, b, c = weighted_by_warmup({"a": 100, "b": 100, "c": 100})
    selector = SmoothRoundRobin(WARMUP)
    assert sequence(selector, [a, b, c], 2) == "ab"
    # c had waited two rounds and carries that credit: it goes first twice. b is forgotten.
    assert sequence(selector, [a, c], 4) == "ccac"
    # Back with no debt from its earlier pick: it ties c and wins on address (with its old debt
    # of -100 it would lose to c: "ac").
    assert sequence(selector, [a, b, c], 2) == "ab"
    counts = pick_counts(selector, [a, b, c], 300)
    assert all(abs(n - 100) <= 1 for n in counts.values()), counts


def test_round_robin_follows_weights_that_change_between_picks() -> None:
    selector = SmoothRoundRobin(WARMUP)
    equal = [cand("a"), cand("b")]
    assert Counter(sequence(selector, equal, 100)) == Counter({"a": 50, "b": 50})
    skewed = [cand("a"), cand("b", cpu=1.0, memory=1.0)]  # 100, 50
    assert Counter(sequence(selector, skewed, 150)) == Counter({"a": 100, "b": 50})


# ------------------------------------------------------------------------------------ ties


@pytest.mark.parametrize("name", ["lower_weight", "round_robin"])
@pytest.mark.parametrize("order", list(itertools.permutations(range(3))), ids=str)
def test_ties_go_to_the_smallest_address_whatever_the_order(
    name: str, order: tuple[int, ...]
) -> None:
    pool = [cand("10.0.0.2:7000"), cand("10.0.0.1:7001"), cand("10.0.0.1:7000")]
    candidates = [pool[i] for i in order]
    chosen = SELECTORS[name](WARMUP).select(candidates, NOW)
    assert chosen is not None and chosen.address == "10.0.0.1:7000"


@pytest.mark.parametrize("name", ["lower_weight", "round_robin"])
def test_a_tie_between_an_address_and_its_extension_goes_to_the_shorter(name: str) -> None:
    candidates = [cand("127.0.0.1:50001"), cand("127.0.0.1:5000")]
    chosen = SELECTORS[name](WARMUP).select(candidates, NOW)
    assert chosen is not None and chosen.address == "127.0.0.1:5000"


def test_ties_are_broken_the_same_way_every_time() -> None:
    candidates = [cand(f"w{i}") for i in range(5)]
    runs = {sequence(SmoothRoundRobin(WARMUP), candidates, 50) for _ in range(3)}
    assert runs == {"w0w1w2w3w4" * 10}


def test_weighted_random_is_reproducible_with_a_seeded_rng() -> None:
    candidates = [cand("a"), cand("b", cpu=0.5), cand("c", age=timedelta(minutes=2))]

    def run(seed: int) -> str:
        return sequence(WeightedRandom(WARMUP, random.Random(seed)), candidates, 200)

    assert run(1) == run(1)
    assert run(1) != run(2)


# ----------------------------------------------------------------------- edges and factory


@pytest.mark.parametrize("name", SELECTORS)
def test_no_candidates_means_no_pick(name: str) -> None:
    assert SELECTORS[name](WARMUP).select([], NOW) is None


@pytest.mark.parametrize("name", SELECTORS)
def test_a_single_candidate_is_always_picked_even_when_floored(name: str) -> None:
    only = cand("a", cpu=1.0, memory=1.0, load=1.0, slots_in_use=8, age=timedelta(0))
    assert pick_counts(SELECTORS[name](WARMUP), [only], 20) == Counter({"a": 20})


@pytest.mark.parametrize(
    ("name", "kind"),
    [("lower_weight", LowerWeight), ("round_robin", SmoothRoundRobin), ("random", WeightedRandom)],
)
def test_make_selector_builds_the_named_selector_with_the_warm_up(
    name: str, kind: type[object]
) -> None:
    selector = make_selector(name, timedelta(seconds=42))
    assert isinstance(selector, kind)
    assert isinstance(selector, LowerWeight | SmoothRoundRobin | WeightedRandom)
    assert selector.warmup == timedelta(seconds=42)


def test_lower_weight_ranks_full_workers_by_backlog_not_by_reading_noise() -> None:
    # All three are past their slots; the one with the shortest backlog wins although its last
    # memory reading was a hair higher (the readings must not decide a burst's destination).
    candidates = [
        cand("a", memory=0.069, slots_in_use=12),
        cand("b", memory=0.070, slots_in_use=9),
        cand("c", memory=0.068, slots_in_use=10),
    ]
    chosen = LowerWeight(WARMUP).select(candidates, NOW)
    assert chosen is not None and chosen.address == "b"


def test_lower_weight_spreads_a_burst_evenly_once_every_worker_is_full() -> None:
    selector = LowerWeight(WARMUP)
    backlog = {"a": 8, "b": 8, "c": 8}  # every slot taken everywhere
    memory = {"a": 0.069, "b": 0.070, "c": 0.0695}
    for _ in range(90):
        candidates = [cand(k, memory=memory[k], slots_in_use=v) for k, v in backlog.items()]
        chosen = selector.select(candidates, NOW)
        assert chosen is not None
        backlog[chosen.address] += 1  # what the master's in-flight count does
    assert sorted(backlog.values()) == [38, 38, 38]


def test_a_warming_worker_gets_less_free_capacity_but_its_backlog_counts_in_full() -> None:
    warm = cand("warm", slots_in_use=2)
    fresh = cand("fresh", slots_in_use=0, age=WARMUP / 4)
    chosen = LowerWeight(WARMUP).select([warm, fresh], NOW)
    assert chosen is not None and chosen.address == "warm"
    over = [cand("x", slots_in_use=32), cand("y", slots_in_use=32, age=WARMUP / 4)]
    assert headroom(over[0], NOW, WARMUP) == headroom(over[1], NOW, WARMUP) < 0
