"""Region-aware new_ensemble: region discovery, parameter checks, the allocation loop, durability and the
runtime switches (spec bookkeeper-region-zone-isolation.md §1; ports of BookKeeper's
TestRegionAwareEnsemblePlacementPolicy behaviours, written fresh)."""

from __future__ import annotations

import random

import pytest

from policies import Adherence, NotEnoughBookiesError
from policies.location import UNKNOWN_REGION
from policies.region_allocation import _round_half_up_ratio
from policies.regionaware import region_of_location

from .test_regionaware_support import (
    ManualClock,
    blocks,
    grid,
    make_policy,
    multi_region_write_sets,
    region_counts,
    regions,
)

THREE_REGIONS = {  # upstream "three regions": region3 has only two bookies
    "127.0.0.2:3181": "/region2/r1", "127.0.0.3:3181": "/region1/r2", "127.0.0.4:3181": "/region2/r3",
    "127.0.0.5:3181": "/region3/r4", "127.0.0.6:3181": "/region1/r11", "127.0.0.7:3181": "/region1/r12",
    "127.0.0.8:3181": "/region2/r13", "127.0.0.9:3181": "/region3/r14", "127.0.0.10:3181": "/region2/r23",
    "127.0.0.11:3181": "/region1/r24",
}


# -- region discovery (§1.1) -------------------------------------------------------------------------

@pytest.mark.parametrize("location, region", [
    ("/r1/rack1", "r1"),
    ("/default-region/r3", "default-region"),
    ("/default-region/default-rack1", "default-region"),
    ("/region4", "region4"),
    ("/default-region/default-rack", UNKNOWN_REGION),
    ("", UNKNOWN_REGION),
])
def test_region_of_a_location_is_its_first_component(location, region):
    assert region_of_location(location) == region


def test_configured_regions_exist_before_any_bookie_and_enforce_durability():
    policy, _ = make_policy(grid({"d": 2}), reppRegionsToWrite="a;b;c", reppMinimumRegionsForDurability=2)
    assert sorted(policy.sub_policies) == ["a", "b", "c", "d"]
    assert [policy.sub_policies[r].enforce_durability for r in "abcd"] == [True, True, True, False]
    assert not policy.sub_policies["a"].known  # a region may exist with no bookie


def test_configured_regions_do_not_enforce_without_a_durability_minimum():
    policy, _ = make_policy({}, reppRegionsToWrite="a;b", reppMinimumRegionsForDurability=0)
    assert policy.min_regions == 0
    assert not any(sub.enforce_durability for sub in policy.sub_policies.values())


def test_fewer_configured_regions_than_the_durability_minimum_is_rejected():
    with pytest.raises(ValueError, match="reppRegionsToWrite"):
        make_policy({}, reppRegionsToWrite="a;b", reppMinimumRegionsForDurability=3)


def test_regions_to_write_do_not_restrict_placement():
    policy, mapping = make_policy(grid({"a": 2, "b": 2, "c": 2}), reppRegionsToWrite="a;b",
                                  reppMinimumRegionsForDurability=2)
    placed = policy.new_ensemble(3, 3, 3, rng=random.Random(1))
    assert region_counts(mapping, placed.ensemble) == {"a": 1, "b": 1, "c": 1}


@pytest.mark.parametrize("conf, region", [
    ({"localNodeLocation": "/region1/r2"}, "region1"),
    ({"localNodeLocation": "/region1/r2", "ignoreLocalNodeInPlacementPolicy": "true"}, UNKNOWN_REGION),
    ({"localNodeLocation": "/default-region/default-rack"}, UNKNOWN_REGION),
    ({}, UNKNOWN_REGION),
])
def test_local_region_comes_from_the_local_node_location(conf, region):
    policy, _ = make_policy({}, **conf)
    assert policy.local_region == region


def test_rack_change_inside_a_region_stays_in_its_sub_policy_and_across_regions_moves_it():
    bookies = {"127.0.1.1:3181": "/region1/rack-1", "127.0.1.2:3181": "/region1/rack-1",
               "127.0.1.3:3181": "/region2/rack-1", "127.0.1.4:3181": "/region2/rack-1"}
    policy, mapping = make_policy(bookies)
    mapping["127.0.1.2:3181"] = "/region1/rack-2"   # same region, new rack
    mapping["127.0.1.4:3181"] = "/region3/rack-1"   # a region nobody had before
    policy.on_bookie_rack_change(["127.0.1.2:3181", "127.0.1.4:3181"])
    policy.check_invariants()
    assert policy.known["127.0.1.2:3181"] == "/region1/rack-2"
    assert policy.sub_policies["region1"].known == {"127.0.1.1:3181": "/region1/rack-1",
                                                     "127.0.1.2:3181": "/region1/rack-2"}
    assert sorted(policy.sub_policies) == ["region1", "region2", "region3"]
    assert list(policy.sub_policies["region2"].known) == ["127.0.1.3:3181"]
    assert list(policy.sub_policies["region3"].known) == ["127.0.1.4:3181"]
    assert policy.region_of["127.0.1.4:3181"] == "region3"


def test_a_bookie_is_resolved_again_when_it_rejoins():
    bookies = {"127.0.1.1:3181": "/default-region/default-rack", "127.0.1.2:3181": "/region-1/default-rack",
               "127.0.1.3:3181": "/region-2/default-rack", "127.0.1.4:3181": "/region-3/default-rack"}
    policy, mapping = make_policy(bookies)
    assert policy.region_of["127.0.1.1:3181"] == UNKNOWN_REGION
    others = sorted(set(bookies) - {"127.0.1.1:3181"})
    policy.on_cluster_changed(others, [])
    assert "127.0.1.1:3181" not in policy.region_of
    assert len(policy.sub_policies) == 4  # sub-policies are never deleted
    mapping["127.0.1.1:3181"] = "/region-1/default-rack"
    policy.on_cluster_changed(sorted(bookies), [])
    policy.check_invariants()
    assert policy.region_of["127.0.1.1:3181"] == "region-1"
    assert not policy.sub_policies[UNKNOWN_REGION].known
    assert len(policy.sub_policies["region-1"].known) == 2


def _moved(bookies, bookie, location, **conf):
    """A policy over `bookies` after `bookie` was given `location` and told of the rack change."""
    policy, mapping = make_policy(bookies, **conf)
    mapping[bookie] = location
    policy.on_bookie_rack_change([bookie])
    policy.check_invariants()
    return policy


def test_rack_change_from_the_default_location_moves_the_bookie_out_of_the_unknown_region():
    bookies = {"127.0.1.1:3181": "/default-region/default-rack", "127.0.1.2:3181": "/region-1/default-rack"}
    policy = _moved(bookies, "127.0.1.1:3181", "/region-1/default-rack")
    assert policy.region_of["127.0.1.1:3181"] == "region-1"
    assert not policy.sub_policies[UNKNOWN_REGION].known


def test_a_bookie_moved_to_another_region_is_not_kept_as_a_departure_of_the_old_one():
    """With stabilization, the old region's sub-policy kept the moved bookie as a pending departure, so
    its retries could still place it there, in the region it left (and the policy reported a pending
    leave that the engine never saw). A move is not a departure."""
    bookies = {"a:3181": "/r1/k1", "b:3181": "/r1/k2", "c:3181": "/r2/k1"}
    policy = _moved(bookies, "a:3181", "/r2/k2", clock=ManualClock(), networkTopologyStabilizePeriodSeconds="30")
    assert policy.pending_leaves() == {}
    assert "a:3181" not in policy.sub_policies["r1"].secondary.topology
    assert policy.sub_policies["r2"].known["a:3181"] == "/r2/k2"


def test_a_departed_bookie_that_returns_in_another_region_is_no_longer_a_departure_of_the_old_one():
    """a:3181 leaves r1 (a pending departure there), then comes back writable at /r2/k2: it is back,
    and in r2 only. r1's stabilized view used to keep it pending for the rest of the period (its
    retries could place it in r1), while the engine, seeing the bookie return, cancelled the leave."""
    bookies = {"a:3181": "/r1/k1", "b:3181": "/r1/k2", "c:3181": "/r2/k1"}
    policy, mapping = make_policy(bookies, clock=ManualClock(), networkTopologyStabilizePeriodSeconds="30")
    policy.on_cluster_changed(["b:3181", "c:3181"], [])
    assert set(policy.pending_leaves()) == {"a:3181"}
    mapping["a:3181"] = "/r2/k2"
    policy.on_cluster_changed(["a:3181", "b:3181", "c:3181"], [])
    policy.check_invariants()
    assert policy.pending_leaves() == {}
    assert "a:3181" not in policy.sub_policies["r1"].secondary.topology
    assert policy.sub_policies["r2"].known["a:3181"] == "/r2/k2"


def test_a_rack_change_the_policy_refuses_leaves_the_sub_policy_alone_too():
    """The only bookie of region r1 is given a location of another depth: the policy refuses the move
    (the cluster's other leaves are one level deeper) and keeps it at /r1; its region's sub-policy, where
    it is the only leaf, used to accept the move on its own, holding it at a location outside r1."""
    policy = _moved({"bk0:3181": "/r1", "bk1:3181": "/r0"}, "bk0:3181", "/default-region/default-rack")
    assert policy.known["bk0:3181"] == "/r1"
    assert policy.sub_policies["r1"].known == {"bk0:3181": "/r1"}
    assert "bk0:3181" in policy.join_failures


def test_an_empty_region_is_not_offered_bookies():
    """apache/bookkeeper#4106: a region whose bookies all left is skipped, not tried."""
    bookies = {"b1:3181": "/default-region/default-rack", "b2:3181": "/region2/r2",
               "b3:3181": "/region3/r3", "b4:3181": "/region4/r4"}
    policy, _ = make_policy(bookies)
    policy.on_cluster_changed(["b2:3181", "b3:3181", "b4:3181"], [])
    placed = policy.new_ensemble(3, 3, 3, rng=random.Random(3))
    assert sorted(placed.ensemble) == ["b2:3181", "b3:3181", "b4:3181"]
    assert placed.explain["regions_available"] == ["region2", "region3", "region4"]
    assert not [note for note in placed.explain["fallbacks"] if UNKNOWN_REGION in note]


# -- parameter validation (§1.2) ---------------------------------------------------------------------

FIVE_REGIONS_THREE_RACKS = grid(dict.fromkeys(("a", "b", "c", "d", "e"), 3))


@pytest.mark.parametrize("write_quorum, min_regions, smallest_ack", [
    (6, 2, 4), (6, 3, 5), (3, 2, 3), (10, 5, 9), (5, 5, 5),
])
def test_ack_quorum_must_keep_entries_in_the_minimum_number_of_regions(write_quorum, min_regions, smallest_ack):
    policy, mapping = make_policy(FIVE_REGIONS_THREE_RACKS, reppRegionsToWrite="a;b;c;d;e",
                                  reppMinimumRegionsForDurability=min_regions)
    with pytest.raises(ValueError, match=f"ack_quorum={smallest_ack - 1} .*reppMinimumRegionsForDurability"):
        policy.new_ensemble(write_quorum, write_quorum, smallest_ack - 1)
    placed = policy.new_ensemble(write_quorum, write_quorum, smallest_ack, rng=random.Random(5))
    assert len(set(placed.ensemble)) == write_quorum
    assert len(set(regions(mapping, placed.ensemble))) >= min_regions


@pytest.mark.parametrize("sizes, message", [
    ((3, 2, 1), "smaller than the 2 regions"),          # checked first, although E, W, A are fine
    ((2, 3, 2), r"write_quorum \(3\) cannot exceed ensemble_size \(2\)"),
    ((3, 2, 3), r"ack_quorum \(3\) cannot exceed write_quorum \(2\)"),
    ((1, 3, 2), r"write_quorum \(3\) cannot exceed"),   # E < W is reported before W/A arithmetic
])
def test_quorum_checks_come_in_bookkeepers_order(sizes, message):
    policy, _ = make_policy(FIVE_REGIONS_THREE_RACKS, reppRegionsToWrite="a;b", reppMinimumRegionsForDurability=2)
    with pytest.raises(ValueError, match=message):
        policy.new_ensemble(*sizes)


def test_disabling_durability_accepts_any_ack_quorum():
    features = {"repp_disable_durability_enforcement": 1}
    policy, _ = make_policy(FIVE_REGIONS_THREE_RACKS, features=features, reppRegionsToWrite="a;b;c",
                            reppMinimumRegionsForDurability=3)
    placed = policy.new_ensemble(6, 6, 1, rng=random.Random(2))
    assert len(placed.ensemble) == 6
    assert any("durability disabled" in note for note in placed.explain["fallbacks"])


# -- the allocation loop (§1.4) ------------------------------------------------------------------------

@pytest.mark.parametrize("region_names, ensemble_size, split", [
    ("abc", 6, [2, 2, 2]),
    ("abc", 7, [3, 2, 2]),
    ("abc", 8, [3, 3, 2]),
    ("abc", 9, [3, 3, 3]),
    ("abcde", 3, [1, 1, 1]),
    ("abcd", 10, [3, 3, 2, 2]),
])
def test_ensemble_is_split_evenly_over_regions_in_contiguous_blocks(region_names, ensemble_size, split):
    policy, mapping = make_policy(grid(dict.fromkeys(region_names, 4)))
    placed = policy.new_ensemble(ensemble_size, ensemble_size, 2, rng=random.Random(ensemble_size))
    counts = region_counts(mapping, placed.ensemble)
    assert [counts[r] for r in region_names[:len(split)]] == split
    assert blocks(regions(mapping, placed.ensemble)) == list(region_names[:len(split)])
    assert placed.explain["allocation"] == dict(zip(region_names, split))


@pytest.mark.parametrize("numerator, denominator, expected", [
    (9, 5, 2), (6, 5, 1), (5, 2, 3), (3, 2, 2), (1, 2, 1), (7, 3, 2), (0, 4, 0),
])
def test_write_quorum_share_rounds_half_up_like_java(numerator, denominator, expected):
    assert _round_half_up_ratio(numerator, denominator) == expected


def test_a_region_that_cannot_take_its_share_leaves_the_rest_to_the_others():
    policy, mapping = make_policy(THREE_REGIONS)
    for size, ack in ((6, 4), (7, 4), (8, 5), (9, 5)):
        placed = policy.new_ensemble(size, size, ack, rng=random.Random(size))
        assert len(set(placed.ensemble)) == size
        assert {"127.0.0.5:3181", "127.0.0.9:3181"} <= set(placed.ensemble)  # region3's only two bookies
        assert len(set(regions(mapping, placed.ensemble))) == 3


def test_rotation_across_calls_starts_after_the_last_region_that_got_bookies():
    """Five single-bookie regions, E=3: the calls start at region index 0, then 3, then 1."""
    bookies = {f"b{i}:3181": f"/region{i}/r{i}" for i in range(1, 6)}
    policy, mapping = make_policy(bookies)
    chosen = [sorted(regions(mapping, policy.new_ensemble(3, 3, 2, rng=random.Random(k)).ensemble))
              for k in range(3)]
    assert chosen == [["region1", "region2", "region3"], ["region1", "region4", "region5"],
                      ["region2", "region3", "region4"]]
    assert policy.last_region_index == 4


def test_no_rotation_when_every_region_received_bookies():
    policy, mapping = make_policy(grid({"a": 2, "b": 2, "c": 2}))
    firsts = {regions(mapping, policy.new_ensemble(3, 3, 2, rng=random.Random(k)).ensemble)[0] for k in range(5)}
    assert firsts == {"a"}


def test_local_region_and_local_rack_come_first():
    bookies = {"127.0.0.10:3181": "/region1/r1", "127.0.0.2:3181": "/region2/r2", "127.0.0.3:3181": "/region2/r2",
               "127.0.0.4:3181": "/region2/r2", "127.0.0.5:3181": "/region3/r3", "127.0.0.6:3181": "/region4/r4",
               "127.0.0.7:3181": "/region5/r5", "127.0.0.8:3181": "/region1/r2", "127.0.0.9:3181": "/region1/r2"}
    policy, mapping = make_policy(bookies, localNodeLocation="/region1/r2")
    local_rack = {"127.0.0.8:3181", "127.0.0.9:3181"}
    for seed in range(100):
        ensemble = policy.new_ensemble(3, 3, 2, rng=random.Random(seed)).ensemble
        assert ensemble[0] in local_rack
        assert not {"127.0.0.2:3181", "127.0.0.3:3181"} <= set(ensemble)
    policy.on_cluster_changed(sorted(set(bookies) - local_rack), [])
    for seed in range(100):
        ensemble = policy.new_ensemble(3, 3, 2, rng=random.Random(seed)).ensemble
        assert ensemble[0] == "127.0.0.10:3181"  # the local region's remaining bookie
        assert not local_rack & set(ensemble)


def test_round_robin_skips_the_local_region():
    policy, mapping = make_policy(grid(dict.fromkeys("abcd", 2)), localNodeLocation="/b/r0")
    orders = [blocks(regions(mapping, policy.new_ensemble(2, 2, 2, rng=random.Random(k)).ensemble))
              for k in range(4)]
    assert [order[0] for order in orders] == ["b"] * 4
    assert [order[1] for order in orders] == ["a", "c", "d", "a"]


def test_later_passes_give_the_remainder_to_regions_with_room():
    bookies = {"127.0.0.1:3181": "/region-1/r1", "127.0.0.2:3181": "/region-1/r1", "127.0.0.3:3181": "/region-1/r2",
               "127.0.0.4:3181": "/region-1/r3", "127.0.0.5:3181": "/region-2/r1"}
    policy, _ = make_policy(bookies, minNumRacksPerWriteQuorum=2)
    for seed in range(50):
        ensemble = policy.new_ensemble(4, 4, 2, rng=random.Random(seed)).ensemble
        assert not {"127.0.0.1:3181", "127.0.0.2:3181"} <= set(ensemble)  # same rack
    policy.on_cluster_changed(sorted(set(bookies) - {"127.0.0.4:3181"}), [])
    for seed in range(50):
        ensemble = policy.new_ensemble(4, 4, 2, rng=random.Random(seed)).ensemble
        assert {"127.0.0.1:3181", "127.0.0.2:3181"} <= set(ensemble)


def test_write_quorums_span_regions_when_there_are_enough():
    bookies = {"b1:3181": "/default-region/default-rack1", "b2:3181": "/region1/r2", "b3:3181": "/region2/r3",
               "b4:3181": "/region3/r4", "b5:3181": "/default-region/default-rack2", "b6:3181": "/region1/r12",
               "b7:3181": "/region2/r13", "b8:3181": "/region3/r14"}
    policy, mapping = make_policy(bookies)
    for seed in range(10):
        three = policy.new_ensemble(3, 2, 2, rng=random.Random(seed)).ensemble
        assert multi_region_write_sets(mapping, three, 2) == 3
        four = policy.new_ensemble(4, 2, 2, rng=random.Random(seed)).ensemble
        assert multi_region_write_sets(mapping, four, 2) == 4


def test_enforced_rack_minimum_with_a_crowded_rack_still_places():
    bookies = {f"127.0.0.{i}:3181": "/region1/r1" for i in range(1, 7)}
    bookies.update({"127.0.0.7:3181": "/region1/r2", "127.0.0.8:3181": "/region1/r3",
                    "127.0.0.9:3181": "/region2/r1", "127.0.0.10:3181": "/region3/r1"})
    policy, _ = make_policy(bookies, enforceMinNumRacksPerWriteQuorum="true", minNumRacksPerWriteQuorum=3)
    for seed in range(50):
        placed = policy.new_ensemble(10, 10, 2, rng=random.Random(seed))
        assert sorted(placed.ensemble) == sorted(bookies)


def test_single_region_uses_rack_aware_placement_and_reports_a_single_rack_as_failing():
    policy, mapping = make_policy({f"b{i}:3181": "/region1/r2" for i in range(4)})
    placed = policy.new_ensemble(3, 2, 2, rng=random.Random(0))
    assert len(set(placed.ensemble)) == 3
    assert multi_region_write_sets(mapping, placed.ensemble, 2) == 0
    assert placed.adherence == Adherence.FAIL  # one rack cannot give each write set two racks
    assert "single region: rack-aware placement in region1" in placed.explain["fallbacks"]


def test_unknown_region_counts_as_a_region_for_spreading():
    bookies = {"b1:3181": "/default-region/default-rack", "b2:3181": "/region1/r2", "b3:3181": "/region1/r2",
               "b4:3181": "/region1/r2"}
    policy, mapping = make_policy(bookies)
    for size in (3, 4):
        placed = policy.new_ensemble(size, 2, 2, rng=random.Random(size))
        assert "b1:3181" in placed.ensemble
        assert 1 <= multi_region_write_sets(mapping, placed.ensemble, 2) < size


def test_not_enough_bookies_names_the_allocation():
    bookies = {"b1:3181": "/default-region/default-rack", "b2:3181": "/region2/r2", "b3:3181": "/region3/r3",
               "b4:3181": "/region4/r4"}
    policy, _ = make_policy(bookies)
    with pytest.raises(NotEnoughBookiesError, match="ensemble_size=5"):
        policy.new_ensemble(5, 5, 3)


def test_default_location_bookies_are_excluded_when_racks_are_enforced():
    bookies = grid({"a": 2, "b": 2})
    bookies["d1:3181"] = "/default-region/default-rack"
    policy, _ = make_policy(bookies, enforceMinNumRacksPerWriteQuorum="true")
    for seed in range(20):
        placed = policy.new_ensemble(4, 4, 2, rng=random.Random(seed))
        assert "d1:3181" not in placed.ensemble
    assert placed.explain["excluded"]["default_rack"] == ["d1:3181"]


def test_caller_exclusions_are_honoured_and_reported():
    policy, _ = make_policy(grid({"a": 3, "b": 3}))
    excluded = {"a-0-0:3181", "b-1-0:3181"}
    for seed in range(20):
        placed = policy.new_ensemble(4, 2, 2, exclude=excluded, rng=random.Random(seed))
        assert not excluded & set(placed.ensemble)
    assert placed.explain["excluded"]["caller"] == sorted(excluded)


# -- durability (§1.5) --------------------------------------------------------------------------------

def test_durability_over_five_regions_uses_every_region():
    policy, mapping = make_policy(grid({f"region{i}": 3 for i in range(1, 6)}),
                                  reppRegionsToWrite="region1;region2;region3;region4;region5",
                                  reppMinimumRegionsForDurability=5)
    placed = policy.new_ensemble(10, 10, 10, rng=random.Random(1))
    assert set(region_counts(mapping, placed.ensemble).values()) == {2}
    placed = policy.new_ensemble(10, 10, 10, exclude={"region4-0-0:3181"}, rng=random.Random(2))
    assert {"region4-1-0:3181", "region4-2-0:3181"} <= set(placed.ensemble)
    assert len(region_counts(mapping, placed.ensemble)) == 5


def test_durability_that_cannot_be_met_fails_even_without_validation():
    policy, _ = make_policy(grid({f"region{i}": 2 for i in range(1, 6)}),
                            reppRegionsToWrite="region1;region2;region3;region4;region5",
                            reppMinimumRegionsForDurability=5, reppEnableValidation="false")
    with pytest.raises(NotEnoughBookiesError):
        policy.new_ensemble(5, 5, 5, exclude={"region5-0-0:3181", "region5-1-0:3181"})


def test_validation_rejects_an_ensemble_in_too_few_regions():
    bookies = {"a1:3181": "/a/r1", "a2:3181": "/a/r1", "x1:3181": "/x/r1"}
    conf = {"reppRegionsToWrite": "a;b", "reppMinimumRegionsForDurability": 2}
    policy, _ = make_policy(bookies, **conf)
    with pytest.raises(NotEnoughBookiesError, match="span only a"):
        policy.new_ensemble(2, 2, 2, exclude={"x1:3181"})
    lenient, _ = make_policy(bookies, reppEnableValidation="false", **conf)
    placed = lenient.new_ensemble(2, 2, 2, exclude={"x1:3181"})
    assert sorted(placed.ensemble) == ["a1:3181", "a2:3181"]
    assert placed.adherence == Adherence.FAIL  # honest: one region cannot be durable


def test_durability_needs_other_regions_and_the_feature_switches_it_off():
    features: dict[str, int] = {}
    policy, _ = make_policy(grid({"region1": 9}), features=features,
                            reppRegionsToWrite="region1;region2;region3", reppMinimumRegionsForDurability=2)
    with pytest.raises(NotEnoughBookiesError, match="region1"):
        policy.new_ensemble(6, 6, 4)
    features["repp_disable_durability_enforcement"] = 1
    placed = policy.new_ensemble(6, 6, 4, rng=random.Random(4))
    assert len(set(placed.ensemble)) == 6
    assert placed.explain["fallbacks"][0].startswith("durability disabled by feature")
    replaced = policy.replace_bookie(6, 6, 4, None, placed.ensemble, placed.ensemble[2])
    assert replaced.bookie not in placed.ensemble


def test_disable_durability_feature_name_is_configurable():
    features = {"no-durability": 1}
    policy, _ = make_policy(grid({"region1": 9}), features=features, reppRegionsToWrite="region1;region2",
                            reppDisableDurabilityFeatureName="no-durability")
    assert len(policy.new_ensemble(4, 4, 3).ensemble) == 4


def test_minimum_of_one_region_places_in_a_single_region():
    policy, _ = make_policy(grid({"region1": 9}), reppRegionsToWrite="region1;region2;region3",
                            reppMinimumRegionsForDurability=1, reppEnableDurabilityEnforcementInReplace="false")
    placed = policy.new_ensemble(6, 6, 4, rng=random.Random(1))
    assert len(set(placed.ensemble)) == 6
    assert {location.split("/")[1] for location in map(grid({"region1": 9}).get, placed.ensemble)} == {"region1"}
    assert placed.adherence == Adherence.MEETS_STRICT   # one region meets a minimum of one
    assert placed.explain["allocation"] == {"region1": 6}

    replaced = policy.replace_bookie(6, 6, 4, None, placed.ensemble, placed.ensemble[2])
    assert replaced.bookie not in placed.ensemble
    assert replaced.ensemble == [*placed.ensemble[:2], replaced.bookie, *placed.ensemble[3:]]
    assert replaced.adherence == Adherence.MEETS_STRICT


# -- disallowed regions (§1.6) ------------------------------------------------------------------------

def test_disallowing_and_re_allowing_a_region_takes_effect_at_once():
    features: dict[str, int] = {}
    policy, mapping = make_policy(THREE_REGIONS, features=features,
                                  reppDisallowBookiePlacementInRegionFeatureName="disallowBookies")
    region2_and_3 = {b for b, loc in THREE_REGIONS.items() if not loc.startswith("/region1/")}
    features["region1.disallowBookies"] = 1
    placed = policy.new_ensemble(6, 6, 4, rng=random.Random(1))
    assert set(placed.ensemble) == region2_and_3
    assert placed.explain["disallowed_regions"] == ["region1"]
    features["region2.disallowBookies"] = 1
    with pytest.raises(NotEnoughBookiesError, match="region3, the only available region"):
        policy.new_ensemble(6, 6, 4)
    features["region2.disallowBookies"] = 0
    assert set(policy.new_ensemble(6, 6, 4, rng=random.Random(2)).ensemble) == region2_and_3


def test_every_region_disallowed_falls_back_to_random_selection():
    features = {"a.off": 1, "b.off": 1}
    policy, _ = make_policy(grid({"a": 2, "b": 2}), features=features,
                            reppDisallowBookiePlacementInRegionFeatureName="off")
    placed = policy.new_ensemble(3, 3, 2, rng=random.Random(0))
    assert len(set(placed.ensemble)) == 3
    assert placed.explain["fallbacks"] == ["0 regions available (every region is disallowed or empty): "
                                           "random selection"]
    with pytest.raises(NotEnoughBookiesError, match="no region is available"):
        policy.new_ensemble(5, 3, 2)


def test_feature_without_a_configured_name_never_disallows():
    features = {"a.None": 1, "a.": 1}
    policy, mapping = make_policy(grid({"a": 2, "b": 2}), features=features)
    placed = policy.new_ensemble(4, 4, 2, rng=random.Random(0))
    assert region_counts(mapping, placed.ensemble) == {"a": 2, "b": 2}


# -- stabilization (bookkeeper-rackaware.md §2.4, per region as in BookKeeper) ---------------------------

def test_a_region_can_still_use_a_bookie_that_just_left_within_the_stabilization_period():
    clock = ManualClock(1000.0)
    bookies = grid({"a": 2, "b": 2})
    policy, mapping = make_policy(bookies, clock=clock, networkTopologyStabilizePeriodSeconds=60)
    policy.on_cluster_changed(sorted(set(bookies) - {"a-1-0:3181"}), [])
    assert policy.pending_leaves() == {"a-1-0:3181": 1060.0}
    placed = policy.new_ensemble(4, 4, 2, rng=random.Random(0))
    assert sorted(placed.ensemble) == sorted(bookies)
    assert "a: retried on the stabilized topology" in placed.explain["fallbacks"]
    clock.advance(61)
    assert policy.pending_leaves() == {}
    with pytest.raises(NotEnoughBookiesError):
        policy.new_ensemble(4, 4, 2)
