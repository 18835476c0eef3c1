"""`RackWeights`: disk-weighted draws over "every rack but E" scopes (spec bookkeeper-rackaware.md §7.3-§7.4).

The reference is `selection.WeightedSelector`, i.e. a fresh BookKeeper `WeightedRandomSelectionImpl` built
over exactly the scope's leaves (median cap computed over the scope, zero weights get the smallest non-zero
weight, all-zero weights are uniform). Probabilities must agree within 1e-9; sampled frequencies are
checked with a 5-sigma binomial tolerance (false-failure odds below 1e-6 per count).
"""

from __future__ import annotations

import math
import random
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from policies.rack_weights import RackWeights
from policies.selection import WeightedSelector

WEIGHTS = [0, 0, 1, 7, 50, 100, 100, 200, 1000, 10**6]


def make_index(sizes: list[int]) -> tuple[list[str], list[str], dict[str, tuple[int, int]]]:
    flat: list[str] = []
    flat_racks: list[str] = []
    ranges: dict[str, tuple[int, int]] = {}
    for r, n in enumerate(sizes):
        rack = f"/r{r:02d}"
        ranges[rack] = (len(flat), len(flat) + n)
        flat.extend(f"b{r}-{i}" for i in range(n))
        flat_racks.extend([rack] * n)
    return flat, flat_racks, ranges


def reference(flat, flat_racks, weights, multiple, excluded_racks=(), removed=()):
    """Probabilities of a fresh selector over the scope's leaves (the spec's definition)."""
    leaves = [b for b, r in zip(flat, flat_racks) if r not in excluded_racks and b not in removed]
    if not leaves:
        return {}
    selector = WeightedSelector(leaves, weights, multiple)
    return {b: selector.probability(b) for b in leaves}


def assert_same(got: dict[str, float], expected: dict[str, float]) -> None:
    assert set(got) == set(expected)
    for bookie, p in expected.items():
        assert abs(got[bookie] - p) <= 1e-9, (bookie, got[bookie], p)


def assert_binomial(count: int, trials: int, p: float) -> None:
    sigma = math.sqrt(trials * p * (1 - p))
    assert abs(count - trials * p) <= 5 * sigma + 1e-9, (count, trials * p, sigma)


@st.composite
def clusters(draw):
    sizes = draw(st.lists(st.integers(1, 5), min_size=1, max_size=8))
    index = make_index(sizes)
    weights = {b: draw(st.sampled_from(WEIGHTS)) for b in index[0]}
    multiple = draw(st.sampled_from([-1, 0, 1, 2, 3, 4]))
    racks = sorted(index[2])
    # several scopes per sampler, so that scopes share (and must not corrupt) the per-(cap, zero mass) layouts
    scopes = draw(st.lists(st.sets(st.sampled_from(racks)), min_size=1, max_size=4))
    removed = draw(st.lists(st.sets(st.sampled_from(index[0]), max_size=4), min_size=1, max_size=3))
    return index, weights, multiple, [tuple(sorted(s)) for s in scopes], removed


@settings(max_examples=300, deadline=None)
@given(clusters())
def test_scope_probabilities_equal_a_fresh_selector_over_the_scope(case):
    """Rack scopes, "all but E" scopes and "all but E minus some bookies" scopes: same probabilities."""
    (flat, flat_racks, ranges), weights, multiple, scopes, removed_sets = case
    sampler = RackWeights((flat, flat_racks, ranges), weights, multiple)
    for rack in sorted(ranges):
        assert_same(sampler.probabilities(sampler.scope_rack(rack)),
                    reference(flat, flat_racks, weights, multiple, set(ranges) - {rack}))
    for excluded in scopes:
        scope = sampler.scope_excluding(excluded)
        expected = reference(flat, flat_racks, weights, multiple, set(excluded))
        assert (scope is None) == (not expected)
        assert_same(sampler.probabilities(scope), expected)
        assert sampler.probabilities(sampler.scope_excluding(excluded)) == sampler.probabilities(scope)  # cached
        for removed in removed_sets:
            without = sampler.scope_without(excluded, removed)
            expected = reference(flat, flat_racks, weights, multiple, set(excluded), removed)
            assert (without is None) == (not expected)
            assert_same(sampler.probabilities(without), expected)


@settings(max_examples=150, deadline=None)
@given(clusters(), st.integers(0, 2**32 - 1))
def test_a_draw_maps_its_random_number_onto_the_scope_masses(case, seed):
    """`_draw` turns u = rng.random() into the leaf whose interval of the scope's masses holds u.

    A grid of u values over [0, 1) must then hit each leaf in proportion to its probability, up to
    one grid step per interval edge; excluded racks are never returned.
    """
    (flat, flat_racks, ranges), weights, multiple, scopes, _ = case
    sampler = RackWeights((flat, flat_racks, ranges), weights, multiple)
    grid = 4000

    class Grid(random.Random):
        def __init__(self) -> None:
            super().__init__(seed)
            self.i = 0

        def random(self) -> float:
            self.i += 1
            return (self.i - 0.5) / grid

    for excluded in scopes:
        scope = sampler.scope_excluding(excluded)
        if scope is None:
            continue
        expected = sampler.probabilities(scope)
        rng = Grid()
        counts = Counter(sampler._draw(scope, rng) for _ in range(grid))
        assert set(counts) <= set(expected)
        for bookie, p in expected.items():
            assert abs(counts[bookie] - p * grid) <= 2.0, (bookie, counts[bookie], p * grid)


def test_seeded_draws_follow_the_selector_over_an_all_but_e_scope():
    """12 racks with zeros and an outlier above the cap; racks 3 and 7 excluded; 60,000 seeded picks."""
    sizes = [3, 1, 4, 2, 5, 3, 2, 4, 1, 3, 2, 2]
    flat, flat_racks, ranges = make_index(sizes)
    rng = random.Random(20)
    weights = {b: rng.choice([0, 5, 100, 120, 300, 900]) for b in flat}
    weights[flat[-1]] = 10**9                   # far above 3 x median: capped
    excluded = ("/r03", "/r07")
    sampler = RackWeights((flat, flat_racks, ranges), weights, 3)
    scope = sampler.scope_excluding(excluded)
    expected = reference(flat, flat_racks, weights, 3, set(excluded))
    trials = 60000
    draw_rng = random.Random(21)
    counts = Counter(sampler.pick(scope, draw_rng, lambda b: True) for _ in range(trials))
    assert set(counts) <= set(expected)
    for bookie, p in expected.items():
        assert_binomial(counts[bookie], trials, p)


def test_removed_bookies_are_never_picked_and_the_rest_keep_the_candidates_distribution():
    """`scope_without`: the cap is the candidates' median; removed bookies are rejected, not redrawn unfairly."""
    flat, flat_racks, ranges = make_index([4, 4, 4])
    weights = dict(zip(flat, [0, 10, 100, 100, 200, 200, 300, 400, 100, 5000, 50, 60]))
    removed = {"b1-0", "b1-1", "b2-1"}          # removing them moves the median, so the cap changes
    sampler = RackWeights((flat, flat_racks, ranges), weights, 2)
    scope = sampler.scope_without(("/r00",), removed)
    expected = reference(flat, flat_racks, weights, 2, {"/r00"}, removed)
    assert_same(sampler.probabilities(scope), expected)
    trials = 40000
    rng = random.Random(22)
    counts = Counter(sampler.pick(scope, rng, lambda b: True) for _ in range(trials))
    assert not set(counts) & removed
    for bookie, p in expected.items():
        assert_binomial(counts[bookie], trials, p)


def test_empty_scopes_are_none():
    flat, flat_racks, ranges = make_index([2, 1])
    sampler = RackWeights((flat, flat_racks, ranges), {}, 3)
    assert sampler.scope_excluding(("/r00", "/r01")) is None
    assert sampler.scope_without(("/r00",), {"b1-0"}) is None
    assert sampler.pick(None, random.Random(1), lambda b: True) is None
    # all-zero weights: uniform over the scope
    assert_same(sampler.probabilities(sampler.scope_excluding(("/r01",))), {"b0-0": 0.5, "b0-1": 0.5})
