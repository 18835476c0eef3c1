"""Rack-aware replace_bookie and replace_to_adhere (spec bookkeeper-rackaware.md §5;
upstream TestRackawareEnsemblePlacementPolicy.testReplaceBookie*, testReplaceToAdhere*)."""

from __future__ import annotations

import random

import pytest

from policies import Adherence, NotEnoughBookiesError

D = "/default-region/default-rack"
R1, R2, R3 = "/default-region/r1", "/default-region/r2", "/default-region/r3"


def addr(i: int) -> str:
    return f"127.0.0.{i}:3181"


def test_replace_prefers_the_same_rack(make_policy):
    policy = make_policy({D: [addr(2)], "/default-region/r2": [addr(3), addr(4)], "/default-region/r3": [addr(5)]},
                         default_rack=D)
    for seed in range(20):
        result = policy.replace_bookie(1, 1, 1, None, [], addr(3), rng=random.Random(seed))
        assert result.bookie == addr(4)
        assert result.ensemble == [addr(4)]
        assert result.adherence == Adherence.MEETS_STRICT
        assert result.explain["fallbacks"] == []


def test_replace_from_another_rack_when_the_rack_is_empty(make_policy):
    policy = make_policy({D: [addr(2)], "/default-region/r2": [addr(3)], "/default-region/r3": [addr(4)],
                          "/default-region/r4": [addr(5)]}, default_rack=D)
    seen = {policy.replace_bookie(1, 1, 1, None, [], addr(3), exclude={addr(2)}, rng=random.Random(s)).bookie
            for s in range(40)}
    assert seen == {addr(4), addr(5)}


def test_replace_with_not_enough_bookies(make_policy):
    policy = make_policy({D: [addr(2)], "/default-region/r2": [addr(3)], "/default-region/r3": [addr(4)],
                          "/default-region/r4": [addr(5)]}, default_rack=D)
    with pytest.raises(NotEnoughBookiesError, match=f"cannot replace {addr(3)}"):
        policy.replace_bookie(1, 1, 1, None, [], addr(3), exclude={addr(2), addr(4), addr(5)})


def test_replace_prefers_a_rack_unused_by_the_ensemble(make_policy):
    """testReplaceBookieWithEnoughBookiesInSameRackAsEnsemble: /r2 is used, /default-rack is not."""
    policy = make_policy({"/default-rack": [addr(5)], "/r2": [addr(2), addr(3)], "/r3": [addr(4)]},
                         default_rack=D)
    for seed in range(20):
        result = policy.replace_bookie(1, 1, 1, None, [addr(2), addr(4)], addr(4), rng=random.Random(seed))
        assert result.bookie == addr(5)
        assert result.ensemble == [addr(2), addr(5)]
        assert any("racks not used" in note for note in result.explain["fallbacks"])


def test_replace_falls_back_to_any_bookie_without_enforcement(make_policy):
    policy = make_policy({"/r1": ["a:1", "b:1"], "/r2": ["c:1", "d:1"]})
    result = policy.replace_bookie(3, 2, 2, None, ["a:1", "b:1", "c:1"], "a:1", rng=random.Random(0))
    assert result.bookie == "d:1"
    assert result.ensemble == ["d:1", "b:1", "c:1"]
    assert len(result.explain["fallbacks"]) == 2


def test_replace_with_enforcement_never_falls_back_to_a_used_rack(make_policy):
    """testReplaceBookieWithEnforceMinNumRacks: only the same rack or an unused rack may take the slot."""
    racks = {f"/default-region/r{r}": [f"128.0.0.{r * 5 + i}:3181" for i in range(5)] for r in range(3)}
    racks[D] = [f"127.0.0.{100 + i}:3181" for i in range(5)]
    conf = dict(minNumRacksPerWriteQuorum=4, enforceMinNumRacksPerWriteQuorum=True, default_rack=D)
    policy = make_policy(racks, **conf)
    ensemble = policy.new_ensemble(15, 3, 3, rng=random.Random(1)).ensemble
    assert not set(ensemble) & set(racks[D])
    victim, neighbour = ensemble[7], ensemble[8]
    # every bookie of the three racks is used: the victim's rack has no spare and no rack is unused
    with pytest.raises(NotEnoughBookiesError, match="enforceMinNumRacksPerWriteQuorum is on"):
        policy.replace_bookie(15, 3, 3, None, ensemble, victim)
    # a new bookie in a new rack can take it
    grown = {**racks, "/default-region/r100": ["128.0.0.101:3181"]}
    policy = make_policy(grown, **conf)
    result = policy.replace_bookie(15, 3, 3, None, ensemble, victim, rng=random.Random(2))
    assert result.bookie == "128.0.0.101:3181"
    assert result.adherence == Adherence.MEETS_STRICT
    with pytest.raises(NotEnoughBookiesError):
        policy.replace_bookie(15, 3, 3, None, ensemble, victim, exclude={"128.0.0.101:3181"})
    # a spare bookie in the victim's own rack is preferred even over the new rack
    victim_rack = policy.known[victim]
    grown[victim_rack] = [*grown[victim_rack], "128.0.0.102:3181"]
    policy = make_policy(grown, **conf)
    result = policy.replace_bookie(15, 3, 3, None, ensemble, victim, exclude={"128.0.0.101:3181"},
                                   rng=random.Random(3))
    assert result.bookie == "128.0.0.102:3181"
    assert policy.known[neighbour] != "/default-region/r100"


def test_replace_never_picks_default_rack_bookies_under_enforcement(make_policy):
    policy = make_policy({"/r1": ["a:1"], "/r2": ["b:1"], D: ["c:1", "d:1"]}, default_rack=D,
                         enforceMinNumRacksPerWriteQuorum=True)
    with pytest.raises(NotEnoughBookiesError):
        policy.replace_bookie(2, 2, 2, None, ["a:1", "b:1"], "a:1")


def test_replace_of_a_departed_bookie_uses_its_resolved_rack(make_policy):
    """testReplaceNotAvailableBookieWithDefaultRack: an unknown bookie is placed by its mapping."""
    policy = make_policy({"/default-rack": ["127.0.0.5:3181"], "/r1": ["127.0.0.3:3181", "127.0.0.4:3181"]},
                         resolver_extra={"127.0.0.2:3181": "/default-rack"})
    result = policy.replace_bookie(1, 1, 1, None, [], "127.0.0.2:3181")
    assert result.bookie == "127.0.0.5:3181"


def test_replace_does_not_mutate_arguments(make_policy):
    policy = make_policy({"/r1": ["a:1", "b:1"], "/r2": ["c:1", "d:1"]})
    ensemble, exclude = ["a:1", "c:1"], {"b:1"}
    policy.replace_bookie(2, 2, 2, None, ensemble, "a:1", exclude)
    assert ensemble == ["a:1", "c:1"] and exclude == {"b:1"}


def test_replace_of_a_non_member_is_a_value_error(make_policy):
    policy = make_policy({"/r1": ["a:1", "b:1"], "/r2": ["c:1"], "/r3": ["d:1"]})
    with pytest.raises(ValueError, match="not a member"):
        policy.replace_bookie(2, 2, 2, None, ["a:1", "c:1"], "b:1")
    with pytest.raises(NotEnoughBookiesError):   # nothing to pick: Java never reaches the lookup
        policy.replace_bookie(2, 2, 2, None, ["a:1", "c:1"], "b:1", exclude={"d:1"})


# -- replace_to_adhere ---------------------------------------------------------------------------

NINE = {R1: [addr(1), addr(2), addr(3)], R2: [addr(4), addr(5), addr(6)], R3: [addr(7), addr(8), addr(9)]}
ENFORCED = dict(minNumRacksPerWriteQuorum=2, enforceMinNumRacksPerWriteQuorum=True, default_rack=D)


@pytest.mark.parametrize("current, expected", [
    # first, same, same, same, same, same, condition (a)
    ([1, 4, 7, 2, 5, 8, 9], [{1}, {4}, {7}, {2}, {5}, {8}, {6}]),
    # first, condition (a), same, same, same, same, same
    ([6, 4, 7, 2, 5, 8, 3], [{6}, {1}, {7}, {2}, {5}, {8}, {3}]),
    # first, a /r3 bookie, same, same, a bookie of /r1 or /r3, same, same
    ([1, 2, 3, 4, 5, 6, 7], [{1}, {7, 8, 9}, {3}, {4}, {1, 2, 3, 7, 8, 9}, {6}, {7}]),
    ([1, 2, 4, 5, 7, 8, 9], [{1}, {4, 5, 6, 7, 8, 9}, set(range(1, 10)), set(range(1, 10)),
                             set(range(1, 10)), set(range(1, 10)), {4, 5, 6, 7, 8, 9}]),
])
def test_replace_to_adhere_changes_few_positions(make_policy, current, expected):
    """testReplaceToAdherePlacementPolicy: E=7, WQ=2 over three racks of three."""
    policy = make_policy(NINE, **ENFORCED)
    ensemble = [addr(i) for i in current]
    assert policy.is_ensemble_adhering(ensemble, 2, 2) == Adherence.FAIL
    for seed in range(30):
        result = policy.replace_to_adhere(7, 2, 2, set(), ensemble, rng=random.Random(seed))
        assert result.adherence == Adherence.MEETS_STRICT
        assert len(result.ensemble) == 7 and len(set(result.ensemble)) == 7
        for bookie, allowed in zip(result.ensemble, expected):
            assert bookie in {addr(i) for i in allowed}, (result.ensemble, expected)


def test_replace_to_adhere_out_of_order(make_policy):
    """All bookies already in the ensemble, only their order is wrong: a reordering fixes it.

    As upstream notes, the outcome is random: 1,2,3,4,5,6 -> 1,5,3,4,2,6 (2 changes) or 1,6,3,4,2,5 (3).
    """
    six = {R1: [addr(1), addr(2), addr(3)], R2: [addr(4), addr(5), addr(6)]}
    policy = make_policy(six, **ENFORCED)
    ensemble = [addr(i) for i in range(1, 7)]
    for seed in range(30):
        result = policy.replace_to_adhere(6, 2, 2, set(), ensemble, rng=random.Random(seed))
        assert result.adherence == Adherence.MEETS_STRICT
        assert sorted(result.ensemble) == sorted(ensemble)
        assert sum(a != b for a, b in zip(ensemble, result.ensemble)) in (2, 3)


def test_replace_to_adhere_impossible_gives_empty_fail(make_policy):
    """testReplaceToAdherePlacementPolicyWithNoMoreRackBookie: 3 positions, WQ=2, 2 racks: impossible."""
    six = {R1: [addr(1), addr(2), addr(3)], R2: [addr(4), addr(5), addr(6)]}
    policy = make_policy(six, **ENFORCED)
    result = policy.replace_to_adhere(3, 2, 2, set(), [addr(1), addr(2), addr(4)], rng=random.Random(0))
    assert result.adherence == Adherence.FAIL
    assert result.ensemble == []


def test_replace_to_adhere_replaces_unknown_bookies(make_policy):
    """testReplaceToAdherePlacementPolicyWithUnknowBookie."""
    six = {R1: [addr(1), addr(2), addr(3)], R2: [addr(4), addr(5), addr(6)]}
    policy = make_policy(six, **ENFORCED)
    ensemble = ["127.0.0.10:3181", "127.0.0.11:3181", addr(3), addr(4), addr(5), addr(6)]
    for seed in range(30):
        result = policy.replace_to_adhere(6, 2, 2, set(), ensemble, rng=random.Random(seed))
        assert result.adherence == Adherence.MEETS_STRICT
        assert policy.known[result.ensemble[0]] == R1 and policy.known[result.ensemble[4]] == R1
        assert result.ensemble[1:4] == [addr(5), addr(3), addr(4)]
        assert result.ensemble[5] == addr(6)
        assert result.explain["excluded"]["not_writable"] == ["127.0.0.10:3181", "127.0.0.11:3181"]


def test_replace_to_adhere_returns_adhering_ensembles_unchanged(make_policy):
    policy = make_policy(NINE, **ENFORCED)
    ensemble = [addr(1), addr(4), addr(7)]
    result = policy.replace_to_adhere(3, 2, 2, set(), ensemble)
    assert result.ensemble == ensemble and result.ensemble is not ensemble
    assert result.adherence == Adherence.MEETS_STRICT


def test_replace_to_adhere_with_a_single_rack_fails(make_policy):
    policy = make_policy({R1: [addr(1), addr(2), addr(3)]})
    result = policy.replace_to_adhere(3, 2, 2, set(), [addr(1), addr(2), addr(3)])
    assert (result.ensemble, result.adherence) == ([], Adherence.FAIL)


def test_replace_to_adhere_weighted_moves_on_when_a_condition_is_empty(make_policy):
    """BK bug fixed (App. A #9): with m=1 condition (a) has no leaves; Java's weighted mode gives up."""
    policy = make_policy(NINE, minNumRacksPerWriteQuorum=1, diskWeightBasedPlacementEnabled=True)
    policy.on_cluster_changed([b for members in NINE.values() for b in members if b != addr(7)], [])
    # addr(7) left: the ensemble has an unknown member, so a window has no known rack -> FAIL
    ensemble = [addr(1), addr(7), addr(4)]
    assert policy.is_ensemble_adhering(ensemble, 1, 1) == Adherence.FAIL
    result = policy.replace_to_adhere(3, 1, 1, set(), ensemble, rng=random.Random(0))
    assert result.adherence == Adherence.MEETS_STRICT
    assert result.ensemble[0] == addr(1) and result.ensemble[2] == addr(4)
    assert result.ensemble[1] in policy.known


def test_replace_to_adhere_does_not_mutate_arguments(make_policy):
    policy = make_policy(NINE, **ENFORCED)
    ensemble, exclude = [addr(1), addr(2), "127.0.0.99:3181"], {addr(9)}
    policy.replace_to_adhere(3, 2, 2, exclude, ensemble)
    assert ensemble == [addr(1), addr(2), "127.0.0.99:3181"] and exclude == {addr(9)}


@pytest.mark.parametrize("policy_name", ["rackaware", "default"])
def test_a_bookie_listed_twice_is_replaced_at_its_first_position_only(policy_name):
    """Java: `newEnsemble.set(currentEnsemble.indexOf(bookieToReplace), candidate)` (spec §3, §5.1 step 7);
    the adherence is then judged on that ensemble."""
    from policies import create_policy

    mapping = {"a:1": "/r1", "b:1": "/r2", "d:1": "/r3"}
    policy = create_policy({"ensemblePlacementPolicy": policy_name, "minNumRacksPerWriteQuorum": "3"}, resolver=mapping)
    policy.on_cluster_changed(list(mapping), [])
    result = policy.replace_bookie(3, 3, 2, None, ["a:1", "b:1", "a:1"], "a:1", rng=random.Random(0))
    assert result.ensemble == ["d:1", "b:1", "a:1"] and result.bookie == "d:1"
    if policy_name == "rackaware":
        assert result.adherence == Adherence.MEETS_STRICT    # three racks in the one write set


@pytest.mark.parametrize("policy_name", ["rackaware", "default"])
def test_a_bookie_not_in_the_ensemble_is_looked_up_after_the_pick_as_in_java(policy_name):
    """Upstream IsolatedBookieEnsemblePlacementPolicyTest.testBasic: with nothing eligible Java raises
    NotEnoughBookies before it looks the replaced bookie up; with a candidate, the lookup fails."""
    from policies import create_policy

    mapping = {"a:1": "/r1", "b:1": "/r2", "c:1": "/r3"}
    policy = create_policy({"ensemblePlacementPolicy": policy_name}, resolver=mapping)
    policy.on_cluster_changed(list(mapping), [])
    with pytest.raises(NotEnoughBookiesError):
        policy.replace_bookie(3, 3, 2, None, ["a:1", "b:1"], "z:1", exclude={"c:1"}, rng=random.Random(0))
    with pytest.raises(ValueError, match="not a member"):
        policy.replace_bookie(3, 3, 2, None, ["a:1", "b:1"], "z:1", rng=random.Random(0))
