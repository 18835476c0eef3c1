"""Region-aware replace_bookie, read ordering, disk weights, determinism and snapshots
(spec bookkeeper-region-zone-isolation.md §2.1, §2.3, bookkeeper-rackaware.md §7; ports of BookKeeper's
TestRegionAwareEnsemblePlacementPolicy behaviours, written fresh)."""

from __future__ import annotations

import json
import math
import random
from collections import Counter

import pytest

from policies import Adherence, BookieInfo, HealthInfo, NotEnoughBookiesError

from .test_regionaware_support import ManualClock, grid, make_policy, region_counts, regions

# -- replace_bookie (§2.1) -----------------------------------------------------------------------------


def test_replacement_prefers_the_same_region():
    bookies = {"b1:3181": "/default-region/default-rack", "b2:3181": "/region1/r1", "b3:3181": "/region1/r2",
               "b4:3181": "/default-region/r3"}
    policy, _ = make_policy(bookies)
    for seed in range(20):
        result = policy.replace_bookie(1, 1, 1, None, [], "b2:3181", rng=random.Random(seed))
        assert result.bookie == "b3:3181"
        assert result.ensemble == ["b3:3181"]


def test_replacement_goes_to_another_region_when_its_own_has_no_bookie():
    bookies = {"b1:3181": "/default-region/default-rack", "b2:3181": "/region1/r2", "b3:3181": "/region2/r3",
               "b4:3181": "/region3/r4"}
    policy, _ = make_policy(bookies)
    picks = {policy.replace_bookie(1, 1, 1, None, [], "b2:3181", {"b1:3181"}, rng=random.Random(s)).bookie
             for s in range(20)}
    assert picks == {"b3:3181", "b4:3181"}


def test_replacement_without_any_eligible_bookie_is_not_enough():
    bookies = {"b1:3181": "/default-region/default-rack", "b2:3181": "/region2/r2", "b3:3181": "/region3/r3",
               "b4:3181": "/region4/r4"}
    policy, _ = make_policy(bookies)
    with pytest.raises(NotEnoughBookiesError, match="cannot replace b2:3181"):
        policy.replace_bookie(1, 1, 1, None, [], "b2:3181", {"b1:3181", "b3:3181", "b4:3181"})


def test_a_departed_bookie_is_replaced_from_its_own_rack():
    bookies = {"b1:3181": "/region1/r1", "b2:3181": "/region1/r1", "b3:3181": "/region2/r2",
               "b4:3181": "/region2/r2", "b5:3181": "/region3/r3", "b6:3181": "/region3/r3"}
    policy, _ = make_policy(bookies)
    policy.on_cluster_changed(sorted(set(bookies) - {"b1:3181"}), [])
    result = policy.replace_bookie(3, 3, 2, None, ["b1:3181", "b3:3181", "b6:3181"], "b1:3181")
    assert result.bookie == "b2:3181"
    assert result.ensemble == ["b2:3181", "b3:3181", "b6:3181"]
    assert result.adherence == Adherence.MEETS_STRICT


NINE = {"a1:3181": "/region1/r1", "a2:3181": "/region1/r2", "a3:3181": "/region1/r3",
        "a4:3181": "/region2/r4", "a5:3181": "/region2/r11", "a6:3181": "/region2/r12",
        "a7:3181": "/region3/r13", "a8:3181": "/region3/r14", "a9:3181": "/region3/r23"}


@pytest.mark.parametrize("min_regions, disable, durable", [(3, False, True), (1, False, False), (1, True, False),
                                                           (3, True, False)])
def test_replacement_keeps_durability_across_regions_when_enforced(min_regions, disable, durable):
    features: dict[str, int] = {}
    policy, mapping = make_policy(NINE, features=features, reppRegionsToWrite="region1;region2;region3",
                                  reppMinimumRegionsForDurability=min_regions,
                                  reppEnableDurabilityEnforcementInReplace=str(min_regions > 1).lower())
    ack = 5 if min_regions > 2 else 4
    ensemble = policy.new_ensemble(6, 6, ack, rng=random.Random(7)).ensemble
    assert region_counts(mapping, ensemble) == {"region1": 2, "region2": 2, "region3": 2}
    if disable:
        features["repp_disable_durability_enforcement"] = 1
    in_region2 = [b for b in ensemble if mapping[b].startswith("/region2/")]
    spare = next(b for b in ("a4:3181", "a5:3181", "a6:3181") if b not in ensemble)
    result = policy.replace_bookie(6, 6, ack, None, ensemble, in_region2[0], rng=random.Random(1))
    assert result.bookie == spare  # the region's own spare comes first
    if durable:
        with pytest.raises(NotEnoughBookiesError, match="keeps 3 regions"):
            policy.replace_bookie(6, 6, ack, None, ensemble, in_region2[0], {spare})
    else:
        moved = policy.replace_bookie(6, 6, ack, None, ensemble, in_region2[0], {spare})
        assert mapping[moved.bookie].split("/")[1] in ("region1", "region3")


def test_replacements_leave_a_disallowed_region_while_keeping_durability():
    features: dict[str, int] = {}
    policy, mapping = make_policy(NINE, features=features, reppRegionsToWrite="region1;region2;region3",
                                  reppMinimumRegionsForDurability=2,
                                  reppDisallowBookiePlacementInRegionFeatureName="disallowBookies")
    ensemble = policy.new_ensemble(6, 6, 4, rng=random.Random(3)).ensemble
    features["region2.disallowBookies"] = 1
    for bookie in [b for b in ensemble if mapping[b].startswith("/region2/")]:
        result = policy.replace_bookie(6, 6, 4, None, ensemble, bookie, rng=random.Random(9))
        assert "region region2 of " + bookie + " is not available; chose from all allowed regions" \
            in result.explain["fallbacks"]
        ensemble = result.ensemble
    assert sorted(ensemble) == sorted(b for b, loc in NINE.items() if not loc.startswith("/region2/"))
    assert policy.is_ensemble_adhering(ensemble, 6, 4) == Adherence.MEETS_STRICT


def test_an_ensemble_that_already_breaks_durability_is_repaired_without_enforcement():
    bookies = {"a1:3181": "/a/r1", "a2:3181": "/a/r2", "a3:3181": "/a/r3", "a4:3181": "/a/r4", "b1:3181": "/b/r1"}
    policy, _ = make_policy(bookies, reppRegionsToWrite="a;b", reppMinimumRegionsForDurability=2)
    anomalous = ["a1:3181", "a2:3181", "a3:3181", "b1:3181"]  # three copies in a with ack quorum 3
    result = policy.replace_bookie(4, 4, 3, None, anomalous, "b1:3181")
    assert result.bookie == "a4:3181"
    assert any(note.startswith("anomalous ensemble") for note in result.explain["fallbacks"])
    assert result.adherence == Adherence.FAIL


def test_durable_ensemble_refuses_a_replacement_that_would_break_it():
    bookies = {"a1:3181": "/a/r1", "a2:3181": "/a/r2", "a3:3181": "/a/r3", "b1:3181": "/b/r1", "b2:3181": "/b/r2"}
    policy, _ = make_policy(bookies, reppRegionsToWrite="a;b", reppMinimumRegionsForDurability=2)
    with pytest.raises(NotEnoughBookiesError, match="keeps 2 regions per acknowledged entry"):
        policy.replace_bookie(4, 4, 3, None, ["a1:3181", "a2:3181", "b1:3181", "b2:3181"], "b1:3181")


def test_replacing_a_bookie_outside_the_ensemble_is_an_argument_error():
    policy, _ = make_policy(grid({"a": 2, "b": 2}))
    with pytest.raises(ValueError, match="not a member of current_ensemble"):
        policy.replace_bookie(2, 2, 2, None, ["a-0-0:3181", "b-0-0:3181"], "a-1-0:3181")


# -- read ordering (§2.3) ------------------------------------------------------------------------------

# The upstream fixture: two bookies in region r1, two at the default location (UnknownRegion).
READ_BOOKIES = {"127.0.0.2:3181": "/r1/rack1", "127.0.0.3:3181": "/default-region/default-rack",
                "127.0.0.4:3181": "/default-region/default-rack", "127.0.0.5:3181": "/r1/rack2"}
READ_ENSEMBLE = ["127.0.0.2:3181", "127.0.0.3:3181", "127.0.0.4:3181", "127.0.0.5:3181"]


def read_policy(local: str, writable=None, readonly=(), slow=()):
    policy, mapping = make_policy(READ_BOOKIES, localNodeLocation=local, writable=writable)
    for bookie in slow:
        policy.register_slow_bookie(bookie, 0)
    if readonly:
        policy.on_cluster_changed(writable, readonly)
    return policy


@pytest.mark.parametrize("local, writable, readonly, slow, expected", [
    ("/default-region/default-rack", [], (), (), [0, 1, 2, 3]),       # no local region: rack-aware order
    ("/r1/rack3", None, (), (), [0, 3, 1, 2]),                        # two locals, then the remotes
    ("/r2/rack1", [], (), (), [0, 1, 2, 3]),                          # nothing known, nothing local
    ("/r1/rack1", READ_ENSEMBLE[1:], (), (), [3, 1, 2, 0]),           # one down
    ("/r1/rack1", READ_ENSEMBLE[1:], ("127.0.0.2:3181",), (), [3, 1, 2, 0]),  # one read-only
    ("/r1/rack1", None, (), ("127.0.0.2:3181",), [3, 1, 2, 0]),       # one slow
    ("/r1/rack1", None, (), ("127.0.0.2:3181", "127.0.0.3:3181"), [3, 2, 0, 1]),  # two slow
    ("/r1/rack1", READ_ENSEMBLE[2:], (), (), [3, 2, 0, 1]),           # two down
    ("/r1/rack1", ["127.0.0.2:3181", "127.0.0.4:3181", "127.0.0.5:3181"], (), ("127.0.0.2:3181",),
     [3, 2, 0, 1]),                                                   # one down, one slow
    ("/r1/rack1", READ_ENSEMBLE[2:], ("127.0.0.3:3181",), ("127.0.0.4:3181",), [3, 1, 2, 0]),
])
def test_read_order_by_health_and_region(local, writable, readonly, slow, expected):
    policy = read_policy(local, writable, readonly, slow)
    write_set = [0, 1, 2, 3]
    assert policy.reorder_read_sequence(READ_ENSEMBLE, HealthInfo(), write_set) == expected
    assert write_set == [0, 1, 2, 3]


def test_read_order_with_failures_keeps_write_set_order_inside_each_class():
    bookies = {"b1:3181": "/r1/rack1", "b2:3181": "/r2/rack1", "b3:3181": "/r2/rack2", "b4:3181": "/r1/rack2",
               "b5:3181": "/r1/rack3", "b6:3181": "/r2/rack3", "b7:3181": "/r2/rack4", "b8:3181": "/r1/rack4"}
    policy, _ = make_policy(bookies, localNodeLocation="/r2/rack1")
    ensemble = [f"b{i}:3181" for i in range(1, 9)]
    health = HealthInfo(failures={"b1:3181": 20, "b2:3181": 22, "b3:3181": 24, "b4:3181": 25})
    order = policy.reorder_read_sequence(ensemble, health, list(range(8)))
    assert [ensemble[i] for i in order] == ["b6:3181", "b7:3181", "b5:3181", "b2:3181", "b3:3181", "b8:3181",
                                            "b1:3181", "b4:3181"]


NINE_READS = {f"b{r}{k}:3181": f"/region{r}/r{k}" for r in (1, 2, 3) for k in (1, 2, 3)}


@pytest.mark.parametrize("lac", [False, True])
def test_two_local_replicas_then_one_remote(lac):
    policy, mapping = make_policy(NINE_READS, localNodeLocation="/region2")
    ensemble = policy.new_ensemble(9, 9, 5, rng=random.Random(0)).ensemble
    reorder = policy.reorder_read_lac_sequence if lac else policy.reorder_read_sequence
    for start in range(9):
        write_set = [(start + j) % 9 for j in range(9)]
        order = reorder(ensemble, HealthInfo(), write_set)
        local = [regions(mapping, [ensemble[i]])[0] == "region2" for i in order]
        assert local == [True, True, False, True] + [False] * 5


@pytest.mark.parametrize("lac", [False, True])
def test_a_reader_in_another_region_keeps_the_write_set_order(lac):
    policy, _ = make_policy(NINE_READS, localNodeLocation="/region4")
    ensemble = policy.new_ensemble(9, 9, 5, rng=random.Random(0)).ensemble
    reorder = policy.reorder_read_lac_sequence if lac else policy.reorder_read_sequence
    for start in range(9):
        write_set = [(start + j) % 9 for j in range(9)]
        assert reorder(ensemble, HealthInfo(), list(write_set)) == write_set


def test_writable_then_read_only_then_unavailable():
    policy, mapping = make_policy(NINE_READS, localNodeLocation="/region4")
    ensemble = policy.new_ensemble(9, 9, 5, rng=random.Random(0)).ensemble
    writable = [b for b in ensemble if mapping[b].startswith("/region2/")]
    readonly = [b for b in ensemble if mapping[b].startswith("/region3/")]
    policy.on_cluster_changed(writable, readonly)
    rank = {"region2": 0, "region3": 1, "region1": 2}
    for start in range(9):
        write_set = [(start + j) % 9 for j in range(9)]
        expected = sorted(write_set, key=lambda i: rank[regions(mapping, [ensemble[i]])[0]])
        assert policy.reorder_read_sequence(ensemble, HealthInfo(), write_set) == expected


def test_lac_order_appends_the_rest_of_the_ensemble():
    policy = read_policy("/r1/rack3")
    assert policy.reorder_read_lac_sequence(READ_ENSEMBLE, HealthInfo(), [2, 3]) == [3, 2, 1, 0]


def test_slow_bookies_expire_on_the_injected_clock():
    clock = ManualClock(100.0)
    policy, _ = make_policy(READ_BOOKIES, localNodeLocation="/r1/rack1", clock=clock,
                            bookieFailureHistoryExpirationMSec=60000)
    policy.register_slow_bookie("127.0.0.2:3181", 5)
    clock.advance(59)
    assert policy.reorder_read_sequence(READ_ENSEMBLE, HealthInfo(), [0, 1, 2, 3]) == [3, 1, 2, 0]
    clock.advance(2)
    assert policy.reorder_read_sequence(READ_ENSEMBLE, HealthInfo(), [0, 1, 2, 3]) == [0, 3, 1, 2]


def test_pending_request_threshold_disables_the_slow_bookie_cache():
    policy, _ = make_policy(READ_BOOKIES, localNodeLocation="/r1/rack1", readReorderThresholdPendingRequests=5)
    policy.register_slow_bookie("127.0.0.2:3181", 5)
    assert policy.reorder_read_sequence(READ_ENSEMBLE, HealthInfo(), [0, 1, 2, 3]) == [0, 3, 1, 2]


# -- disk weights (bookkeeper-rackaware.md §7; apache/bookkeeper#4522) -----------------------------------

def binomial_tolerance(trials: int, p: float, sigmas: float = 5.0) -> float:
    """`sigmas` standard deviations of a binomial count (5 sigma: a false alarm about once in 3.5 million)."""
    return sigmas * math.sqrt(trials * p * (1 - p))


WEIGHTED = {"b1:3181": "/region1/r1", "b2:3181": "/region1/r1", "b3:3181": "/region2/r2", "b4:3181": "/region2/r2",
            "b5:3181": "/region2/r2"}


def free(**gigabytes: int) -> dict[str, BookieInfo]:
    return {f"{b}:3181": BookieInfo(total_disk=10**6, free_disk=g * 1000) for b, g in gigabytes.items()}


def test_disk_weights_decide_within_each_region():
    """One bookie from each single-rack region; within a region, chances follow free disk (cap 3x median)."""
    policy, _ = make_policy(WEIGHTED, diskWeightBasedPlacementEnabled="true")
    trials = 2000
    for weights, expected in (
            (free(b1=800, b2=400, b3=200, b4=300, b5=400), {"b1": 2 / 3, "b3": 2 / 9, "b4": 3 / 9, "b5": 4 / 9}),
            (free(b1=400, b2=800, b3=400, b4=300, b5=200), {"b1": 1 / 3, "b3": 4 / 9, "b4": 3 / 9, "b5": 2 / 9})):
        policy.update_bookie_info(weights)
        assert policy.sub_policies["region1"].weights == {"b1:3181": weights["b1:3181"].free_disk,
                                                          "b2:3181": weights["b2:3181"].free_disk}
        counts: Counter[str] = Counter()
        for seed in range(trials):
            counts.update(policy.new_ensemble(2, 2, 2, rng=random.Random(seed)).ensemble)
        for bookie, p in expected.items():
            assert abs(counts[f"{bookie}:3181"] - trials * p) <= binomial_tolerance(trials, p), (bookie, counts)


def test_disk_weights_decide_the_cross_region_fallback():
    features = {"a.off": 1}
    bookies = {"a1:3181": "/a/r1", "b1:3181": "/b/r1", "b2:3181": "/b/r2"}
    policy, _ = make_policy(bookies, features=features, diskWeightBasedPlacementEnabled="true",
                            reppDisallowBookiePlacementInRegionFeatureName="off")
    policy.update_bookie_info(free(a1=100, b1=300, b2=100))
    trials = 2000
    picks = Counter(policy.replace_bookie(1, 1, 1, None, ["a1:3181"], "a1:3181", rng=random.Random(s)).bookie
                    for s in range(trials))
    assert abs(picks["b1:3181"] - 0.75 * trials) <= binomial_tolerance(trials, 0.75)


def test_disk_weights_decide_when_no_region_is_available():
    features = {"a.off": 1, "b.off": 1}
    policy, _ = make_policy({"a1:3181": "/a/r1", "b1:3181": "/b/r1"}, features=features,
                            diskWeightBasedPlacementEnabled="true",
                            reppDisallowBookiePlacementInRegionFeatureName="off")
    policy.update_bookie_info(free(a1=100, b1=200))
    trials = 2000
    picks = Counter(policy.new_ensemble(1, 1, 1, rng=random.Random(s)).ensemble[0] for s in range(trials))
    assert abs(picks["b1:3181"] - trials * 2 / 3) <= binomial_tolerance(trials, 2 / 3)


def test_a_bookie_moving_to_another_region_keeps_its_weight():
    policy, mapping = make_policy(WEIGHTED, diskWeightBasedPlacementEnabled="true")
    policy.update_bookie_info(free(b1=800, b2=400, b3=200, b4=300, b5=400))
    mapping["b1:3181"] = "/region2/r3"
    policy.on_bookie_rack_change(["b1:3181"])
    assert policy.sub_policies["region2"].weights["b1:3181"] == 800_000
    assert "b1:3181" not in policy.sub_policies["region1"].weights


# -- determinism, arguments, snapshots ---------------------------------------------------------------------

def drive(policy, seed: int) -> list:
    """A fixed mix of calls; returns everything observable."""
    out: list = []
    for k in range(6):
        placed = policy.new_ensemble(5, 3, 3, rng=random.Random(seed + k))
        out.append((placed.ensemble, placed.adherence))
        try:
            replaced = policy.replace_bookie(5, 3, 3, None, placed.ensemble, placed.ensemble[k % 5],
                                             rng=random.Random(seed - k))
            out.append((replaced.bookie, replaced.ensemble))
        except NotEnoughBookiesError as exc:
            out.append(str(exc))
    out.append(policy.last_region_index)
    return out


def test_same_state_and_seed_give_the_same_decisions():
    bookies = grid({"a": 3, "b": 3, "c": 2, "d": 1}, bookies_per_rack=2)
    first, _ = make_policy(bookies, localNodeLocation="/b/r1")
    second, _ = make_policy(dict(reversed(list(bookies.items()))), localNodeLocation="/b/r1")
    assert drive(first, 11) == drive(second, 11)


def test_snapshot_round_trip_continues_identically():
    bookies = grid({"a": 3, "b": 3, "c": 2}, bookies_per_rack=2)
    conf = {"reppRegionsToWrite": "a;b;c", "reppMinimumRegionsForDurability": 2,
            "diskWeightBasedPlacementEnabled": "true"}
    original, mapping = make_policy(bookies, **conf)
    original.update_bookie_info({b: BookieInfo(total_disk=100, free_disk=10 + i) for i, b in enumerate(bookies)})
    original.register_slow_bookie("a-0-0:3181", 3)
    original.new_ensemble(4, 4, 3, rng=random.Random(1))
    assert original.last_region_index != 0
    restored, _ = make_policy(mapping, writable=[], **conf)
    restored.import_state(json.loads(json.dumps(original.export_state())))
    restored.check_invariants()
    assert restored.last_region_index == original.last_region_index
    assert restored.export_state() == original.export_state()
    assert drive(restored, 5) == drive(original, 5)


def test_arguments_are_never_mutated():
    features = {"repp_disable_durability_enforcement": 0}
    policy, mapping = make_policy(grid({"a": 4, "b": 4}), features=features, reppRegionsToWrite="a;b")
    before = (dict(mapping), dict(features))
    exclude = {"a-0-0:3181"}
    placed = policy.new_ensemble(4, 4, 3, exclude=exclude, rng=random.Random(0))
    current = list(placed.ensemble)
    policy.replace_bookie(4, 4, 3, None, current, current[0], exclude, rng=random.Random(0))
    policy.replace_to_adhere(4, 4, 3, exclude, current, rng=random.Random(0))
    write_set = [0, 1, 2, 3]
    policy.reorder_read_lac_sequence(current, HealthInfo(), write_set)
    assert exclude == {"a-0-0:3181"}
    assert current == placed.ensemble
    assert write_set == [0, 1, 2, 3]
    assert (dict(mapping), dict(features)) == before
