"""Disk-weighted rack-aware placement (spec bookkeeper-rackaware.md §7.4; upstream testWeightedPlacement*).

Ratios are checked against the exact expected probabilities with a 5-sigma binomial tolerance.
"""

from __future__ import annotations

import random
from collections import Counter

import pytest

from policies import BookieInfo, NotEnoughBookiesError

D = "/default-region/default-rack"
R = "/default-region/r"


def addr(i: int) -> str:
    return f"127.0.0.{i}:3181"


def disk(policy, free: dict[str, int]) -> None:
    policy.update_bookie_info({b: BookieInfo(total_disk=f, free_disk=f) for b, f in free.items()})


def within(count: int, n: int, p: float) -> bool:
    return abs(count - n * p) <= 5 * (n * p * (1 - p)) ** 0.5


def test_replace_in_the_same_rack_by_weight(make_policy):
    """testWeightedPlacementAndReplaceBookieWithEnoughBookiesInSameRack (no cap): 1:10."""
    policy = make_policy({D: [addr(2)], R + "2": [addr(3), addr(4), addr(5)]}, default_rack=D,
                         diskWeightBasedPlacementEnabled=True, bookieMaxMultipleForWeightBasedPlacement=-1)
    disk(policy, {addr(2): 100, addr(3): 100, addr(4): 100, addr(5): 1000})
    rng = random.Random(1)
    n = 20000
    counts = Counter(policy.replace_bookie(1, 1, 1, None, [], addr(3), rng=rng).bookie for _ in range(n))
    assert set(counts) == {addr(4), addr(5)}
    assert within(counts[addr(5)], n, 10 / 11)


def test_replace_outside_used_racks_weighs_over_all_known_bookies(make_policy):
    """testWeightedPlacementAndReplaceBookieWithoutEnoughBookiesInSameRack: the cap (4 x median 100)
    is computed over all known bookies, the replaced one included: chances 50:100:200:400."""
    layout = {R + "0": [addr(1)], D: [addr(2)], R + "2": [addr(3)], R + "3": [addr(4)], R + "4": [addr(5)]}
    policy = make_policy(layout, default_rack=D, diskWeightBasedPlacementEnabled=True,
                         bookieMaxMultipleForWeightBasedPlacement=4)
    disk(policy, {addr(1): 50, addr(2): 100, addr(3): 100, addr(4): 200, addr(5): 500})
    rng = random.Random(2)
    n = 20000
    counts = Counter(policy.replace_bookie(1, 1, 1, None, [], addr(3), rng=rng).bookie for _ in range(n))
    expected = {addr(1): 50, addr(2): 100, addr(4): 200, addr(5): 400}
    total = sum(expected.values())
    assert set(counts) == set(expected)
    for bookie, mass in expected.items():
        assert within(counts[bookie], n, mass / total), (bookie, counts)


def test_new_ensemble_honours_weights_within_racks(make_policy):
    """testWeightedPlacementAndNewEnsembleWithEnoughBookiesInSameRack: heavy bookies capped at 4 x median."""
    layout = {D: [addr(1)], R + "2": [addr(i) for i in range(2, 6)], R + "3": [addr(i) for i in range(6, 10)]}
    policy = make_policy(layout, default_rack=D, diskWeightBasedPlacementEnabled=True,
                         bookieMaxMultipleForWeightBasedPlacement=4)
    disk(policy, {**{addr(i): 100 for i in range(1, 10)}, addr(5): 1000, addr(9): 1000})
    rng = random.Random(3)
    counts = Counter()
    for _ in range(6000):
        result = policy.new_ensemble(3, 2, 2, rng=rng)
        racks = [policy.known[b] for b in result.ensemble]
        assert len(set(racks)) == 3
        counts.update(result.ensemble)
    assert 3.3 < counts[addr(5)] / counts[addr(2)] < 4.7
    assert 3.3 < counts[addr(9)] / counts[addr(6)] < 4.7


def test_weighted_not_enough_bookies(make_policy):
    """testWeightedPlacementAndNewEnsembleWithoutEnoughBookies."""
    layout = {D: [addr(1)], R + "2": [addr(2), addr(3)], R + "3": [addr(4), addr(5)]}
    policy = make_policy(layout, default_rack=D, diskWeightBasedPlacementEnabled=True,
                         bookieMaxMultipleForWeightBasedPlacement=4)
    disk(policy, {addr(1): 100, addr(2): 100, addr(3): 1000, addr(4): 100, addr(5): 1000})
    exclude = {addr(1), addr(2), addr(3), addr(4)}
    with pytest.raises(NotEnoughBookiesError):
        policy.new_ensemble(3, 2, 2, exclude=exclude)
    assert policy.new_ensemble(1, 1, 1, exclude=exclude).ensemble == [addr(5)]


def test_position_zero_distribution_is_the_capped_weight(make_policy):
    """Position 0 draws over the whole cluster with the cluster's cap: 100:100:300:300 (cap 3 x median)."""
    layout = {"/r1": ["a:1", "b:1"], "/r2": ["c:1", "d:1"]}
    policy = make_policy(layout, diskWeightBasedPlacementEnabled=True)
    disk(policy, {"a:1": 100, "b:1": 100, "c:1": 300, "d:1": 10_000})
    rng = random.Random(4)
    n = 20000
    counts = Counter(policy.new_ensemble(1, 1, 1, rng=rng).ensemble[0] for _ in range(n))
    # median = (100 + 300) / 2 = 200, cap = 600; d is capped at 600
    expected = {"a:1": 100 / 1100, "b:1": 100 / 1100, "c:1": 300 / 1100, "d:1": 600 / 1100}
    for bookie, p in expected.items():
        assert within(counts[bookie], n, p), (bookie, counts)


def test_unreported_bookies_weigh_like_the_smallest(make_policy):
    policy = make_policy({"/r1": ["a:1", "b:1", "c:1"], "/r2": ["d:1"]}, diskWeightBasedPlacementEnabled=True)
    disk(policy, {"a:1": 100, "b:1": 300})
    rng = random.Random(5)
    n = 15000
    counts = Counter(policy.replace_bookie(1, 1, 1, None, [], "d:1", exclude={"zz"}, rng=rng).bookie
                     for _ in range(n))
    # d's rack /r2 has no other bookie, so the pick is among the known bookies of unused racks, weighed
    # over all known bookies: weights 100, 300, 0, 0 -> median (0 + 100) / 2 = 50, cap 3 x 50 = 150;
    # zeros weigh the smallest non-zero weight (100): a 100, b 150 (capped), c 100
    total = 100 + 150 + 100
    assert within(counts["a:1"], n, 100 / total) and within(counts["b:1"], n, 150 / total)
    assert within(counts["c:1"], n, 100 / total)


def test_weights_are_ignored_when_disabled(make_policy):
    policy = make_policy({"/r1": ["a:1"], "/r2": ["b:1"]})
    disk(policy, {"a:1": 100})
    assert policy.weights == {}


# -- the O(racks) weighted sampler agrees with BookKeeper's selector over the scope --------------

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from policies.rack_weights import RackWeights  # noqa: E402
from policies.selection import capped_probabilities  # noqa: E402


@st.composite
def weighted_scopes(draw):
    sizes = draw(st.lists(st.integers(1, 4), min_size=1, max_size=5))
    flat, flat_racks, ranges = [], [], {}
    for r, n in enumerate(sizes):
        rack = f"/r{r}"
        ranges[rack] = (len(flat), len(flat) + n)
        flat.extend(f"b{r}-{i}" for i in range(n))
        flat_racks.extend([rack] * n)
    weights = {b: draw(st.sampled_from([0, 0, 1, 50, 100, 100, 200, 1000, 10**6])) for b in flat}
    excluded = draw(st.sets(st.sampled_from(sorted(ranges)), max_size=len(ranges) - 1))
    multiple = draw(st.sampled_from([-1, 0, 1, 3, 4]))
    return (flat, flat_racks, ranges), weights, sorted(excluded), multiple


@given(weighted_scopes())
def test_scope_masses_match_the_selector_over_the_scope(case):
    """Each leaf's probability equals `capped_probabilities` over the scope's leaves (spec §7.3)."""
    index, weights, excluded, multiple = case
    flat, flat_racks, _ = index
    sampler = RackWeights(index, weights, multiple)
    scope = sampler.scope_excluding(tuple(excluded))
    leaves = [b for b, r in zip(flat, flat_racks) if r not in excluded]
    expected = dict(zip(leaves, capped_probabilities([weights[b] for b in leaves], multiple)))
    total = sum(expected.values())
    got = dict(sampler._capped(scope))
    got_total = sum(got.values())
    assert set(got) == set(expected)
    for bookie in leaves:
        assert got[bookie] / got_total == pytest.approx(expected[bookie] / total, rel=1e-9, abs=1e-12)
    # rack masses are the sums of their leaves' masses
    racks_, cumulative, _, _, _ = scope
    previous = 0.0
    for rack, running in zip(racks_, cumulative):
        assert running - previous == pytest.approx(sum(got[b] for b in sampler.members[rack]), rel=1e-9)
        previous = running


def test_sampler_draws_follow_the_masses():
    index = (["a", "b", "c", "d", "e"], ["/r0", "/r0", "/r0", "/r1", "/r1"], {"/r0": (0, 3), "/r1": (3, 5)})
    weights = {"a": 0, "b": 100, "c": 5000, "d": 300, "e": 200}
    sampler = RackWeights(index, weights, 3)
    scope = sampler.scope_excluding(())
    masses = dict(sampler._capped(scope))     # median 200 -> cap 600; a takes the minimum 100
    assert masses == {"a": 100, "b": 100, "c": 600, "d": 300, "e": 200}
    rng = random.Random(6)
    n = 26000
    counts = Counter(sampler._draw(scope, rng) for _ in range(n))
    for bookie, mass in masses.items():
        assert within(counts[bookie], n, mass / 1300), (bookie, counts)
    accepted = Counter(sampler.pick(scope, rng, lambda b: b in "ce", tries=0) for _ in range(8000))
    assert within(accepted["c"], 8000, 600 / 800)
