"""Rack-aware `new_ensemble` (spec bookkeeper-rackaware.md §4; upstream TestRackawareEnsemblePlacementPolicy)."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from policies import Adherence, NotEnoughBookiesError
from policies.base import write_sets

from .conftest import cluster

D = "/default-region/default-rack"


def racks_of(policy, ensemble):
    return [policy.known[b] for b in ensemble]


def covered_write_sets(policy, ensemble, write_quorum, min_racks):
    """Write sets whose known bookies span at least min(WQ, min_racks) racks."""
    racks = racks_of(policy, ensemble)
    need = min(write_quorum, min_racks)
    return sum(1 for ws in write_sets(len(ensemble), write_quorum) if len({racks[i] for i in ws}) >= need)


def test_distinct_racks_when_racks_suffice(make_policy):
    """With as many racks as positions, every position lands in a rack of its own."""
    policy = make_policy(cluster(4, 3))
    rng = random.Random(7)
    for _ in range(200):
        result = policy.new_ensemble(3, 3, 2, rng=rng)
        assert len(set(result.ensemble)) == 3
        assert len(set(racks_of(policy, result.ensemble))) == 3
        assert result.adherence == Adherence.MEETS_STRICT
        assert result.explain["fallbacks"] == []


def test_single_rack_places_randomly_with_fail(make_policy):
    """One rack: random selection, adherence FAIL (BK quirk App. A #3), never NotEnough."""
    policy = make_policy({"/r1": ["a:1", "b:1", "c:1", "d:1"]})
    for ensemble_size, write_quorum in ((3, 2), (4, 2), (2, 1)):
        result = policy.new_ensemble(ensemble_size, write_quorum, write_quorum, rng=random.Random(1))
        assert len(set(result.ensemble)) == ensemble_size
        assert result.adherence == Adherence.FAIL
        assert "fewer than 2 racks: random selection" in result.explain["fallbacks"]


def test_single_rack_with_enforcement_raises(make_policy):
    policy = make_policy({D: ["a:1", "b:1", "c:1", "d:1"]}, minNumRacksPerWriteQuorum=2,
                         enforceMinNumRacksPerWriteQuorum=True)
    with pytest.raises(NotEnoughBookiesError, match="minNumRacksPerWriteQuorum=2"):
        policy.new_ensemble(3, 2, 2)


def test_not_enough_bookies_message_names_counts(make_policy):
    policy = make_policy(cluster(2, 2))
    with pytest.raises(NotEnoughBookiesError, match=r"only 4 eligible bookie\(s\)"):
        policy.new_ensemble(5, 2, 2)
    with pytest.raises(NotEnoughBookiesError, match=r"only 2 eligible"):
        policy.new_ensemble(3, 2, 2, exclude=["b0-0:3181", "b1-1:3181"])


def test_exclusions_are_honoured_and_not_mutated(make_policy):
    policy = make_policy(cluster(3, 3))
    exclude = {"b0-0:3181", "b1-0:3181", "b2-0:3181"}
    before = set(exclude)
    for seed in range(50):
        result = policy.new_ensemble(3, 2, 2, exclude=exclude, rng=random.Random(seed))
        assert not set(result.ensemble) & exclude
    assert exclude == before
    assert result.explain["excluded"] == {"caller": sorted(before)}


def test_same_seed_same_result(make_policy):
    policy = make_policy(cluster(5, 4))
    first = [policy.new_ensemble(4, 3, 2, rng=random.Random(s)).ensemble for s in range(20)]
    second = [policy.new_ensemble(4, 3, 2, rng=random.Random(s)).ensemble for s in range(20)]
    assert first == second
    assert len({tuple(e) for e in first}) > 1


def test_coverage_with_fewer_racks_than_positions(make_policy):
    """E=6, WQ=3 over 3 racks: every write set spans min(WQ, 2) racks (GenericEnsemble... coverage)."""
    policy = make_policy(cluster(3, 4))
    rng = random.Random(3)
    for _ in range(200):
        result = policy.new_ensemble(6, 3, 2, rng=rng)
        assert covered_write_sets(policy, result.ensemble, 3, 2) == 6
        assert result.adherence == Adherence.MEETS_STRICT


def test_position_zero_uniform_over_cluster(make_policy):
    """Without a local node, position 0 is uniform over all bookies (binomial tolerance 5 sigma)."""
    policy = make_policy(cluster(3, 2))
    rng = random.Random(11)
    n = 6000
    counts = Counter(policy.new_ensemble(2, 2, 2, rng=rng).ensemble[0] for _ in range(n))
    p = 1 / 6
    sigma = (n * p * (1 - p)) ** 0.5
    assert len(counts) == 6
    for bookie, count in counts.items():
        assert abs(count - n * p) < 5 * sigma, (bookie, count)


def test_local_rack_preferred_for_position_zero(make_policy):
    policy = make_policy(cluster(3, 3), localNodeLocation="/r1")
    for seed in range(100):
        result = policy.new_ensemble(3, 2, 2, rng=random.Random(seed))
        assert policy.known[result.ensemble[0]] == "/r1"


def test_local_rack_ignored_when_configured(make_policy):
    policy = make_policy(cluster(3, 3), localNodeLocation="/r1", ignoreLocalNodeInPlacementPolicy=True)
    firsts = {policy.known[policy.new_ensemble(3, 2, 2, rng=random.Random(s)).ensemble[0]] for s in range(200)}
    assert firsts == {"/r0", "/r1", "/r2"}


def test_local_rack_without_bookies_falls_back(make_policy):
    policy = make_policy(cluster(3, 3), localNodeLocation="/r9")
    result = policy.new_ensemble(3, 2, 2, rng=random.Random(0))
    assert len(set(result.ensemble)) == 3
    assert any("local rack /r9" in note for note in result.explain["fallbacks"])
