"""Uniform and disk-weighted picks (spec bookkeeper-rackaware.md §4.5, §7.3; upstream TestWeightedRandomSelection).

Distribution checks use fixed seeds and a tolerance of 5 binomial sigmas per cell
(sigma = sqrt(n p (1-p))), so a correct implementation fails with probability < 1e-6 per cell.
"""

from __future__ import annotations

import random
from collections import Counter

import pytest

from policies.selection import WeightedSelector, capped_probabilities, pick_uniform


def assert_matches(counts: Counter, expected: dict[str, float], n: int) -> None:
    for item, p in expected.items():
        sigma = (n * p * (1 - p)) ** 0.5
        assert abs(counts[item] - n * p) <= 5 * sigma + 1, (item, counts[item], n * p, sigma)
    assert set(counts) <= set(expected)


def relative(probabilities: list[float]) -> list[float]:
    total = sum(probabilities)
    return [p / total for p in probabilities]


@pytest.mark.parametrize("weights, multiple, ratios", [
    ([50, 100, 100, 200, 500], 4, [50, 100, 100, 200, 400]),    # spec §7.3 first example
    ([100, 100, 100, 1000], 4, [100, 100, 100, 400]),           # even count: median = mean of the middle two
    ([0, 0, 0], 3, [1, 1, 1]),                                   # all zero: uniform
    ([0, 100, 200], 3, [100, 100, 200]),                         # zero weight = smallest non-zero
    ([100, 100, 100, 1_000_000], 0, [100, 100, 100, 1_000_000]),  # multiple <= 0: no cap
    ([0, 0, 100], 3, [100, 100, 100]),                           # median 0 -> no cap; zeros take the minimum
])
def test_capped_probabilities_examples(weights, multiple, ratios):
    assert relative(capped_probabilities(weights, multiple)) == pytest.approx(relative(ratios))


def test_equal_weights_are_uniform():
    population = [f"k{i}" for i in range(10)]
    selector = WeightedSelector(population, dict.fromkeys(population, 100), 3)
    rng = random.Random(1)
    n = 50_000
    counts = Counter(selector.draw(rng) for _ in range(n))
    assert_matches(counts, dict.fromkeys(population, 0.1), n)


def test_some_zero_weights():
    """testSelectionWithSomeZeroWeights: zeros are drawn like the smallest non-zero weight."""
    population = [str(i) for i in range(50)]
    weights = {k: (0 if i < 16 else 100 if i < 32 else 200) for i, k in enumerate(population)}
    selector = WeightedSelector(population, weights, 3)
    rng = random.Random(2)
    n = 100_000
    counts = Counter(selector.draw(rng) for _ in range(n))
    mass = {k: (100 if w == 0 else w) for k, w in weights.items()}
    total = sum(mass.values())
    assert_matches(counts, {k: m / total for k, m in mass.items()}, n)


def test_hot_node_is_capped_at_three_times_the_median():
    """testSelectionWithHotNodeWithLimit: a bookie with 10x the rest's space gets 3x the median."""
    population = [str(i) for i in range(50)]
    weights = dict.fromkeys(population, 100)
    weights["49"] = 10 * 49 * 100
    selector = WeightedSelector(population, weights, 3)
    assert selector.probability("49") == pytest.approx(300 / (49 * 100 + 300))
    rng = random.Random(3)
    n = 100_000
    counts = Counter(selector.draw(rng) for _ in range(n))
    p_hot = 300 / 5200
    assert_matches(counts, {**dict.fromkeys(population[:-1], 100 / 5200), "49": p_hot}, n)


def test_pick_with_acceptance_is_conditional_on_the_acceptable():
    population = ["a", "b", "c", "d"]
    selector = WeightedSelector(population, {"a": 100, "b": 200, "c": 300, "d": 400}, 0)
    rng = random.Random(4)
    n = 40_000
    counts = Counter(selector.pick(rng, lambda x: x in ("b", "d")) for _ in range(n))
    assert_matches(counts, {"b": 1 / 3, "d": 2 / 3}, n)
    assert selector.pick(rng, lambda x: False) is None


def test_pick_uniform_among_acceptable():
    population = [f"k{i}" for i in range(20)]
    rng = random.Random(5)
    n = 40_000
    counts = Counter(pick_uniform(rng, population, lambda x: int(x[1:]) % 4 == 0) for _ in range(n))
    assert_matches(counts, {f"k{i}": 0.2 for i in range(0, 20, 4)}, n)
    assert pick_uniform(rng, population, lambda x: False) is None
    assert pick_uniform(rng, [], None) is None


def test_same_seed_same_draws():
    population = [f"k{i}" for i in range(30)]
    selector = WeightedSelector(population, {k: i for i, k in enumerate(population)}, 3)
    first = [selector.draw(random.Random(9)) for _ in range(3)]
    second = [selector.draw(random.Random(9)) for _ in range(3)]
    assert first == second
