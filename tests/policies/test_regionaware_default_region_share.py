"""Region-aware: how often an unmapped bookie (region `UnknownRegion`) enters new ensembles
(spec bookkeeper-region-zone-isolation.md §1.3-§1.4, the allocation loop's round robin).

BookKeeper visits the client's region first only when it is a real region: a client without a local
node has region `UnknownRegion`, and Java leaves `localRegionIndex` at -1 for it. A populated
`UnknownRegion` (bookies at `/default-region/default-rack`) then takes its turn in the round robin like
any other region. With four mapped regions and one unmapped bookie there are five available regions,
each call takes one bookie from each of `E` consecutive regions, and the next call starts after the
last region that took bookies; so over whole cycles every region, `UnknownRegion` included, is in
`E / 5` of the ensembles (Java's `HashMap` visits these five names in their sorted order, so the cycle
is the same as ours). Inside a mapped region (2 racks x 2 bookies) the one pick is uniform over its
four bookies. Shares are checked with a 5-sigma binomial bound.
"""

from __future__ import annotations

import math
import random
from collections import Counter

import pytest

from policies import create_policy

UNMAPPED = "unmapped:3181"
MAPPED = {f"r{region}-k{rack}-{n}:3181": f"/region{region}/rack{rack}"
          for region in range(1, 5) for rack in range(1, 3) for n in range(2)}
CONF = {"ensemblePlacementPolicy": "regionaware", "reppRegionsToWrite": "region1;region4",
        "reppMinimumRegionsForDurability": "1", "minNumRacksPerWriteQuorum": "2"}
SEEDS = 600
# Two whole round-robin cycles over the five available regions per policy.
CALLS_PER_POLICY = 10


def binomial_tolerance(trials: int, p: float, sigmas: float = 5.0) -> float:
    """`sigmas` standard deviations of a binomial count (5 sigma: a false alarm about once in 3.5 million)."""
    return sigmas * math.sqrt(trials * p * (1 - p))


def fresh_policy():
    """The policy over the four mapped regions plus the unmapped bookie, all writable."""
    policy = create_policy(CONF, resolver=dict(MAPPED))
    policy.on_cluster_changed(sorted(MAPPED) + [UNMAPPED], [])
    return policy


def region_of(bookie: str) -> str:
    return "UnknownRegion" if bookie == UNMAPPED else MAPPED[bookie].split("/")[1]


def ensembles(size: int) -> list[list[str]]:
    """`CALLS_PER_POLICY` consecutive `new_ensemble(size, size, size)` results on each of `SEEDS` fresh policies."""
    results = []
    for seed in range(SEEDS):
        policy = fresh_policy()
        rng = random.Random(seed)
        for _ in range(CALLS_PER_POLICY):
            results.append(list(policy.new_ensemble(size, size, size, rng=rng).ensemble))
    return results


def test_a_round_robin_cycle_visits_unknown_region_like_any_other_region():
    """Java's order for these regions is UnknownRegion, region1..region4; each call starts after the last
    region that took a bookie, and UnknownRegion is never put first as the client's region."""
    policy = fresh_policy()
    rng = random.Random(7)
    visited = [[region_of(b) for b in policy.new_ensemble(2, 2, 2, rng=rng).ensemble] for _ in range(5)]
    assert visited == [["UnknownRegion", "region1"], ["region2", "region3"], ["region4", "UnknownRegion"],
                       ["region1", "region2"], ["region3", "region4"]]


@pytest.mark.parametrize("size", [2, 3])
def test_the_unmapped_bookie_is_in_its_round_robin_share_of_ensembles(size):
    """(2,2,2): in 2/5 of the ensembles (a fifth of the picks); (3,3,3): in 3/5 of them."""
    results = ensembles(size)
    trials = len(results)
    p = size / 5
    containing = sum(UNMAPPED in ensemble for ensemble in results)
    assert abs(containing - trials * p) <= binomial_tolerance(trials, p), (size, containing / trials)


@pytest.mark.parametrize("size", [2, 3])
def test_every_mapped_bookie_keeps_its_share(size):
    """Each mapped region is in size/5 of the ensembles, and its one pick is uniform over its four bookies."""
    results = ensembles(size)
    trials = len(results)
    counts = Counter(bookie for ensemble in results for bookie in ensemble)
    p = size / 5 / 4
    for bookie in MAPPED:
        assert abs(counts[bookie] - trials * p) <= binomial_tolerance(trials, p), (size, bookie, counts[bookie])
    for ensemble in results:
        assert len({region_of(b) for b in ensemble}) == size
