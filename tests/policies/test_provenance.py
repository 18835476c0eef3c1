"""Provenance of every placement: `explain.steps` with the candidates each selection stage
really had, `explain.excluded` by reason, `explain.relaxed` for fallbacks a later topology can remove,
and the explanation a `PlacementError` carries when the call fails."""

from __future__ import annotations

import json
import random

import pytest

from policies import NotEnoughBookiesError, PlacementError
from policies.isolation import IsolationGroupError
from policies.provenance import position

STEP_KEYS = {"step", "scope", "candidates"}


def bk(name: str) -> str:
    return f"{name}:3181"


def grid(racks: int, per_rack: int, prefix: str = "/r") -> dict[str, list[str]]:
    """`{"/r0": ["r0b0:3181", ...], ...}`."""
    return {f"{prefix}{r}": [bk(f"r{r}b{b}") for b in range(per_rack)] for r in range(racks)}


def assert_shape(explain):
    """The keys every policy's explanation has, each step a small dict of JSON values."""
    assert {"policy", "steps", "fallbacks", "excluded"} <= set(explain)
    for step in explain["steps"]:
        assert STEP_KEYS <= set(step), step
        assert isinstance(step["candidates"], int) and step["candidates"] >= 0
    json.dumps(explain)


# -- rack-aware ---------------------------------------------------------------------------------------


def test_rackaware_records_one_step_per_position_with_the_bookies_and_racks_left(make_policy):
    policy = make_policy(grid(4, 3))
    result = policy.new_ensemble(3, 3, 2, rng=random.Random(1))
    assert_shape(result.explain)
    assert result.explain["steps"] == [
        {"step": "position 0", "scope": "cluster", "candidates": 12, "racks": 4},
        {"step": "position 1", "scope": "racks not used so far", "candidates": 9, "racks": 3},
        {"step": "position 2", "scope": "racks not used so far", "candidates": 6, "racks": 2},
    ]
    assert "relaxed" not in result.explain


@pytest.mark.parametrize("weighted", [False, True])
def test_rackaware_candidates_are_the_bookies_left_after_every_exclusion(make_policy, weighted):
    """Brute force: each position's candidates are the scope's bookies minus the excluded and the picked."""
    racks = grid(5, 4)
    rack_of = {b: rack for rack, members in racks.items() for b in members}
    conf = {"diskWeightBasedPlacementEnabled": "true"} if weighted else {}
    policy = make_policy(racks, readonly=[bk("ro")], resolver_extra={bk("ro"): "/r4"}, **conf)
    for seed in range(30):
        rng = random.Random(seed)
        caller = set(rng.sample(sorted(rack_of), 6))
        result = policy.new_ensemble(4, 2, 2, exclude=caller, rng=random.Random(seed))
        if result.explain["fallbacks"]:
            continue
        steps = result.explain["steps"]
        assert [s["step"] for s in steps] == [position(i) for i in range(4)]
        for i, step in enumerate(steps):
            used = {rack_of[b] for b in result.ensemble[:i]}
            eligible = [b for b in rack_of if rack_of[b] not in used and b not in caller]
            assert step["candidates"] == len(eligible), (seed, i)
            assert step["racks"] == len({rack_of[b] for b in eligible}), (seed, i)
            assert "failed" not in step


def test_rackaware_marks_a_failed_scope_and_records_the_fallback_it_tried(make_policy):
    policy = make_policy(grid(2, 3))
    result = policy.new_ensemble(4, 2, 2, rng=random.Random(3))
    steps = result.explain["steps"]
    assert steps[2] == {"step": "position 2", "scope": "racks not used so far", "candidates": 0, "racks": 0,
                        "failed": True}
    assert steps[3]["step"] == "position 2" and steps[3]["scope"] == "cluster (fallback)"
    assert steps[3]["candidates"] == 4 and steps[3]["racks"] == 2
    assert result.explain["relaxed"] == [{"rule": "racks", "spanned": 2}]


def test_rackaware_excluded_names_every_reason(make_policy):
    racks = {**grid(3, 2), "/default-rack": [bk("d1")]}
    policy = make_policy(racks, readonly=[bk("ro")], resolver_extra={bk("ro"): "/r0"},
                         enforceMinNumRacksPerWriteQuorum="true")
    policy.on_bookie_rack_change([])
    result = policy.new_ensemble(3, 2, 2, exclude=[bk("r0b0")], rng=random.Random(0))
    excluded = result.explain["excluded"]
    assert excluded["caller"] == [bk("r0b0")]
    assert excluded["default_rack"] == [bk("d1")]
    assert excluded["readonly"] == [bk("ro")]
    assert result.explain["steps"][0]["candidates"] == 5, "6 rack bookies + d1, minus r0b0 and d1"


def test_rackaware_replacement_steps_follow_its_three_scopes(make_policy):
    policy = make_policy({"/a": [bk("a1"), bk("a2")], "/b": [bk("b1"), bk("b2")], "/c": [bk("c1")]})
    result = policy.replace_bookie(3, 3, 2, None, [bk("a1"), bk("b1"), bk("c1")], bk("c1"), rng=random.Random(1))
    assert_shape(result.explain)
    assert [(s["scope"], s["candidates"], s.get("failed", False)) for s in result.explain["steps"]] == [
        ("rack of the replaced bookie", 0, True),
        ("racks unused by the ensemble", 0, True),
        ("cluster (random, rack rule ignored)", 2, False),
    ]
    assert result.explain["excluded"]["ensemble"] == [bk("a1"), bk("b1")]


def test_a_result_found_on_the_stabilized_topology_keeps_both_attempts(make_policy, clock):
    racks = {"/r1": [bk("a")], "/r2": [bk("b")], "/r3": [bk("c")]}
    policy = make_policy(racks, clock=clock, networkTopologyStabilizePeriodSeconds=60)
    policy.on_cluster_changed([bk("a"), bk("b")], [])
    result = policy.new_ensemble(3, 3, 2, rng=random.Random(0))
    steps = result.explain["steps"]
    retry = [s for s in steps if s["step"] == "retry"]
    assert retry == [{"step": "retry", "scope": "retried on the stabilized topology", "candidates": 3}]
    assert steps.index(retry[0]) > 0, "the live attempt's steps come first"
    assert result.explain["fallbacks"][-1] == "retried on the stabilized topology"


# -- failed calls ------------------------------------------------------------------------------------


def test_a_placement_error_has_an_empty_explanation_by_default():
    assert PlacementError("boom").explain == {}
    assert NotEnoughBookiesError("x", explain={"constraint": "c"}).explain == {"constraint": "c"}


def test_rackaware_failure_carries_the_steps_reached_and_the_constraint(make_policy):
    policy = make_policy(grid(2, 3), minNumRacksPerWriteQuorum=3, enforceMinNumRacksPerWriteQuorum="true")
    with pytest.raises(NotEnoughBookiesError) as caught:
        policy.new_ensemble(3, 3, 2, exclude=[bk("r0b0")], rng=random.Random(0))
    explain = caught.value.explain
    assert_shape(explain)
    assert explain["policy"] == "rackaware"
    assert "minNumRacksPerWriteQuorum=3 enforced" in explain["constraint"]
    assert "2 rack(s)" in explain["constraint"]
    assert explain["eligible"] == {"bookies": 5, "racks": 2}
    assert explain["excluded"] == {"caller": [bk("r0b0")]}
    assert explain["steps"][-1]["failed"] is True
    assert explain["steps"][0] == {"step": "position 0", "scope": "cluster", "candidates": 5, "racks": 2}


def test_rackaware_replacement_failure_names_its_constraint(make_policy):
    policy = make_policy({"/a": [bk("a1")], "/b": [bk("b1")]}, enforceMinNumRacksPerWriteQuorum="true")
    with pytest.raises(NotEnoughBookiesError) as caught:
        policy.replace_bookie(2, 2, 2, None, [bk("a1"), bk("b1")], bk("b1"), rng=random.Random(0))
    explain = caught.value.explain
    assert "rack /b or in a rack unused" in explain["constraint"]
    assert [s["failed"] for s in explain["steps"]] == [True, True]


def test_default_policy_has_one_step_and_explains_its_failure(make_policy):
    policy = make_policy(grid(1, 4), readonly=[bk("ro")], policy="default")
    result = policy.new_ensemble(3, 3, 2, exclude=[bk("r0b0")], rng=random.Random(0))
    assert_shape(result.explain)
    assert result.explain["steps"] == [{"step": "ensemble", "scope": "cluster", "candidates": 3}]
    assert result.explain["excluded"] == {"caller": [bk("r0b0")], "readonly": [bk("ro")]}
    with pytest.raises(NotEnoughBookiesError) as caught:
        policy.new_ensemble(4, 3, 2, exclude=[bk("r0b0")], rng=random.Random(0))
    assert caught.value.explain["steps"] == [{"step": "ensemble", "scope": "cluster", "candidates": 3,
                                              "failed": True}]
    assert caught.value.explain["constraint"].endswith("3 eligible")


# -- isolation ---------------------------------------------------------------------------------------

RACK_INFO = {"g1": {bk("p1"): {"rack": "/r1"}, bk("p2"): {"rack": "/r2"}},
             "g2": {bk("s1"): {"rack": "/r3"}, bk("s2"): {"rack": "/r3"}}}
ISOLATION = {"policy": "isolated", "bookkeeperClientIsolationGroups": "g1",
             "bookkeeperClientSecondaryIsolationGroups": "g2"}


def isolated(make_policy, **extra):
    racks = {"/r1": [bk("p1")], "/r2": [bk("p2")], "/r3": [bk("s1"), bk("s2")], "/r4": [bk("u1")]}
    return make_policy(racks, rack_info=RACK_INFO, **{**ISOLATION, **extra})


def test_isolation_filtering_is_the_first_step_with_the_group_counts(make_policy):
    policy = isolated(make_policy)
    result = policy.new_ensemble(2, 2, 2, rng=random.Random(0))
    assert_shape(result.explain)
    assert result.explain["steps"][0] == {"step": "isolation groups", "scope": "primary", "candidates": 2,
                                          "primary": 2, "secondary": 2, "ungrouped": 1, "excluded": 3}
    assert result.explain["steps"][1]["candidates"] == 2, "the rack-aware steps count inside the groups"
    assert result.explain["excluded"]["isolation_group"] == [bk("s1"), bk("s2"), bk("u1")]
    assert "relaxed" not in result.explain


def test_isolation_admitting_secondary_groups_is_a_relaxation_naming_the_groups(make_policy):
    policy = isolated(make_policy)
    result = policy.new_ensemble(3, 2, 2, rng=random.Random(0))
    assert result.explain["steps"][0]["scope"] == "primary+secondary"
    assert result.explain["relaxed"][0] == {"rule": "isolation", "admitted": "secondary", "primary": ["g1"],
                                            "secondary": ["g2"]}


def test_isolation_failure_names_the_groups_in_its_constraint(make_policy):
    policy = isolated(make_policy)
    with pytest.raises(NotEnoughBookiesError) as caught:
        policy.new_ensemble(6, 2, 2, rng=random.Random(0))
    explain = caught.value.explain
    assert explain["policy"] == "isolated"
    assert explain["steps"][0]["step"] == "isolation groups"
    assert "primary [g1], secondary [g2]" in explain["constraint"]
    assert "ensemble_size=6 needs 6 eligible bookies; 5 eligible" in explain["constraint"]
    assert explain["isolation"] == {"primary": ["g1"], "secondary": ["g2"], "source": "client"}


def test_an_unknown_isolation_group_error_carries_an_explanation(make_policy):
    policy = isolated(make_policy, bookkeeperClientIsolationGroups="nope", **{"placement.isolation.failClosed": "true"})
    with pytest.raises(IsolationGroupError) as caught:
        policy.new_ensemble(2, 2, 2, rng=random.Random(0))
    assert caught.value.explain["policy"] == "isolated"
    assert "isolation groups must exist" in caught.value.explain["constraint"]


def test_isolation_relaxation_fix_moves_secondary_members_into_the_primary_group(make_policy):
    policy = isolated(make_policy)
    rule = policy.new_ensemble(3, 2, 2, rng=random.Random(0)).explain["relaxed"][0]
    ensemble = [bk("p1"), bk("p2"), bk("s1")]
    assert policy.is_relaxed(ensemble, 2, 2, rule)
    still = policy.relaxation_fix(3, 2, 2, ensemble, rule, rng=random.Random(0))
    assert still.ensemble == [] and "still need secondary" in still.explain["fallbacks"][0]
    policy.update_rack_info({**RACK_INFO, "g1": {**RACK_INFO["g1"], bk("u1"): {"rack": "/r4"}}})
    fixed = policy.relaxation_fix(3, 2, 2, ensemble, rule, rng=random.Random(0))
    assert fixed.ensemble == [bk("p1"), bk("p2"), bk("u1")]
    assert fixed.explain["replaced"] == {"2": bk("u1")}
    assert not policy.is_relaxed(fixed.ensemble, 2, 2, rule)
    assert policy.relaxation_fix(3, 2, 2, fixed.ensemble, rule) is None


# -- region-aware and zone-aware -----------------------------------------------------------------------


def regions(make_policy, names=("x", "y", "z"), **conf):
    layout = {f"/{r}/rack{k}": [bk(f"{r}{k}")] for r in names for k in (1, 2)}
    return make_policy(layout, policy="regionaware", minNumRacksPerWriteQuorum="2", **conf)


def test_regionaware_steps_are_the_regions_then_each_regions_pick(make_policy):
    policy = regions(make_policy)
    result = policy.new_ensemble(3, 2, 2, rng=random.Random(0))
    assert_shape(result.explain)
    steps = result.explain["steps"]
    assert steps[0] == {"step": "regions", "scope": "available regions", "candidates": 6, "regions": 3}
    assert [s["step"] for s in steps[1:]] == ["region x", "region y", "region z"]
    assert all(s["candidates"] == 2 and s["racks"] == 2 for s in steps[1:])


def test_regionaware_single_region_placement_is_a_relaxation(make_policy):
    policy = regions(make_policy)
    policy.on_cluster_changed([bk("x1"), bk("x2")], [])
    result = policy.new_ensemble(2, 2, 2, rng=random.Random(0))
    assert result.explain["relaxed"] == [{"rule": "regions", "spanned": 1}]
    assert policy.is_relaxed(result.ensemble, 2, 2, result.explain["relaxed"][0])
    assert policy.relaxation_fix(2, 2, 2, result.ensemble, result.explain["relaxed"][0]).ensemble == []
    policy.on_cluster_changed([bk("x1"), bk("x2"), bk("y1")], [])
    fixed = policy.relaxation_fix(2, 2, 2, result.ensemble, result.explain["relaxed"][0], rng=random.Random(0))
    assert sorted(fixed.ensemble)[1] == bk("y1") and len(fixed.explain["replaced"]) == 1
    assert str(fixed.adherence) == "MEETS_STRICT"


def test_regionaware_failure_explains_the_allocation(make_policy):
    policy = regions(make_policy, names=("x", "y"))
    with pytest.raises(NotEnoughBookiesError) as caught:
        policy.new_ensemble(6, 2, 2, rng=random.Random(0))
    explain = caught.value.explain
    assert explain["policy"] == "regionaware"
    assert any(s.get("failed") for s in explain["steps"])
    assert "only 4 could be placed" in explain["constraint"]


def zones(make_policy, layout, desired="3", **conf):
    return make_policy(layout, policy="zoneaware", minNumZonesPerWriteQuorum="1",
                       desiredNumZonesPerWriteQuorum=desired, **conf)


def test_zoneaware_records_each_slot_and_tags_fewer_zones_than_desired(make_policy):
    two_zones = {f"/z{z}/ud{u}": [bk(f"z{z}u{u}")] for z in (1, 2) for u in (1, 2)}
    policy = zones(make_policy, two_zones, resolver_extra={bk("z3u1"): "/z3/ud1"})
    result = policy.new_ensemble(3, 3, 2, rng=random.Random(1))
    assert_shape(result.explain)
    assert [s["step"] for s in result.explain["steps"]] == ["position 0", "position 1", "position 2"]
    assert result.explain["steps"][0] == {"step": "position 0", "scope": "desired zones", "candidates": 4}
    assert result.explain["steps"][2]["scope"] == "fewer zones than desired"
    assert result.explain["relaxed"] == [{"rule": "zones"}]
    assert str(result.adherence) == "MEETS_SOFT"
    rule = result.explain["relaxed"][0]
    assert policy.relaxation_fix(3, 3, 2, result.ensemble, rule).ensemble == [], "no third zone yet"
    policy.on_cluster_changed([b for members in two_zones.values() for b in members] + [bk("z3u1")], [])
    fixed = policy.relaxation_fix(3, 3, 2, result.ensemble, rule, rng=random.Random(0))
    assert bk("z3u1") in fixed.ensemble and len(fixed.explain["replaced"]) == 1
    assert str(fixed.adherence) == "MEETS_STRICT"
    assert policy.relaxation_fix(3, 3, 2, fixed.ensemble, rule) is None


def test_zoneaware_failure_carries_the_slot_that_could_not_be_filled(make_policy):
    layout = {f"/z{z}/ud1": [bk(f"z{z}")] for z in (1, 2)}
    policy = zones(make_policy, layout, desired="2")
    with pytest.raises(NotEnoughBookiesError) as caught:
        policy.new_ensemble(4, 2, 2, rng=random.Random(0))
    explain = caught.value.explain
    assert explain["steps"][-1]["failed"] is True
    assert explain["constraint"].startswith("enforceStrictZoneawarePlacement: position 2")
