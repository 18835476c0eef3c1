"""`PlacementPolicy.expected_shares`: each bookie's share of one placement over the bookies a call may
place on now, as each policy places (what the write-skew detector, `state.skew`, judges against)."""

from __future__ import annotations

import pytest

from policies import BookieInfo, PlacementError
from policies.isolation import IsolationGroupError, IsolationGroups

from .conftest import build_policy, cluster

RACKS = cluster(3, 2)                       # /r0../r2, two bookies each
BOOKIES = sorted(b for members in RACKS.values() for b in members)


def reported(policy, free: dict[str, int]) -> None:
    policy.update_bookie_info({b: BookieInfo(total_disk=2 * f + 1, free_disk=f) for b, f in free.items()})


@pytest.mark.parametrize("name", ["default", "rackaware", "zoneaware", "isolated"])
def test_uniform_over_the_writable_bookies_and_a_departed_one_has_none(name):
    racks = {f"/z{k}/ud1" if name == "zoneaware" else rack: members
             for k, (rack, members) in enumerate(RACKS.items())}
    policy = build_policy(racks, policy=name)
    scope = policy.placement_scope(3, None)
    assert scope == (), "isolation is not configured: the isolated policy is rack-aware"
    assert policy.expected_shares(scope) == dict.fromkeys(BOOKIES, 1 / 6)
    policy.on_cluster_changed(BOOKIES[1:], [])
    assert policy.expected_shares(scope) == dict.fromkeys(BOOKIES[1:], 1 / 5)


@pytest.mark.parametrize("name", ["default", "rackaware", "regionaware"])
def test_weighted_by_free_disk_with_the_cap_at_three_times_the_median(name):
    racks = {f"/a{rack}" if name == "regionaware" else rack: members for rack, members in RACKS.items()}
    policy = build_policy(racks, policy=name, diskWeightBasedPlacementEnabled="true")
    # One bookie reports 100 units, four report 1, one reports nothing (weight 0).
    reported(policy, {b: (100 if b == BOOKIES[0] else 1) for b in BOOKIES[:-1]})
    shares = policy.expected_shares(policy.placement_scope(3, None))
    # Median 1 of 104 units: the heavy bookie is capped at 3 units, the unreported one gets the smallest
    # non-zero weight (1): 3 + 5 x 1 = 8 units in all.
    assert list(shares) == BOOKIES
    assert shares == pytest.approx({BOOKIES[0]: 3 / 8, **dict.fromkeys(BOOKIES[1:], 1 / 8)})


def test_the_cap_is_the_configured_multiple_of_the_median():
    policy = build_policy(RACKS, diskWeightBasedPlacementEnabled="true", bookieMaxMultipleForWeightBasedPlacement="2")
    reported(policy, {b: (100 if b == BOOKIES[0] else 1) for b in BOOKIES})
    assert policy.expected_shares(())[BOOKIES[0]] == pytest.approx(2 / 7)


def test_weights_off_means_uniform_whatever_the_disk_reports():
    policy = build_policy(RACKS)
    reported(policy, {b: (100 if b == BOOKIES[0] else 1) for b in BOOKIES})
    assert policy.expected_shares(()) == dict.fromkeys(BOOKIES, 1 / 6)


def test_a_disallowed_region_expects_nothing_until_it_is_allowed_again():
    features: dict[str, int] = {}
    racks = {"/east/r1": ["e1:3181", "e2:3181"], "/west/r1": ["w1:3181", "w2:3181", "w3:3181"]}
    policy = build_policy(racks, policy="regionaware", features=features,
                          reppDisallowBookiePlacementInRegionFeatureName="disallowBookies")
    assert policy.expected_shares(()) == dict.fromkeys(["e1:3181", "e2:3181", "w1:3181", "w2:3181", "w3:3181"], 1 / 5)
    features["west.disallowBookies"] = 1
    assert policy.expected_shares(()) == {"e1:3181": 0.5, "e2:3181": 0.5}
    features["west.disallowBookies"] = 0
    assert len(policy.expected_shares(())) == 5


@pytest.mark.parametrize(("name", "skipped"), [("rackaware", True), ("isolated", True), ("regionaware", True),
                                               ("zoneaware", False), ("default", False)])
def test_default_rack_bookies_expect_nothing_when_enforcement_keeps_them_unused(name, skipped):
    """Under `enforceMinNumRacksPerWriteQuorum` the rack-aware placements never pick a bookie of the default
    location (spec §4.3); the zone-aware and default policies do not have that rule."""
    racks = {"zoneaware": {"/z0/ud1": ["a:3181"], "/z1/ud1": ["b:3181"]},
             "regionaware": {"/east/r0": ["a:3181"], "/east/r1": ["b:3181"]}}.get(name, {"/r0": ["a:3181"],
                                                                                      "/r1": ["b:3181"]})
    for enforced in (False, True):
        policy = build_policy(racks, policy=name, unmapped=["lost:3181"],
                              enforceMinNumRacksPerWriteQuorum=str(enforced).lower())
        shares = policy.expected_shares(policy.placement_scope(2, None))
        if enforced and skipped:
            assert shares == {"a:3181": 0.5, "b:3181": 0.5}
        else:
            assert list(shares) == ["a:3181", "b:3181", "lost:3181"] and shares["lost:3181"] == pytest.approx(1 / 3)


def _isolated(**conf):
    groups = {"g1": ["p1:3181", "p2:3181"], "g2": ["s1:3181", "s2:3181"]}
    racks = {"/r0": ["p1:3181", "s1:3181", "u1:3181"], "/r1": ["p2:3181", "s2:3181", "u2:3181"]}
    rack_of = {b: rack for rack, members in racks.items() for b in members}
    rack_info = {group: {b: {"rack": rack_of[b], "hostname": None} for b in members}
                 for group, members in groups.items()}
    settings = {"bookkeeperClientIsolationGroups": "g1", "bookkeeperClientSecondaryIsolationGroups": "g2", **conf}
    return build_policy(racks, policy="isolated", rack_info=rack_info, **settings)


def test_isolation_expects_the_primary_groups_then_the_secondary_then_ungrouped_bookies():
    policy = _isolated()
    primary, secondary = ["p1:3181", "p2:3181"], ["s1:3181", "s2:3181"]
    assert policy.placement_scope(2, None) == (("g1",), ("g2",), "client", 2)
    assert policy.expected_shares(policy.placement_scope(2, None)) == dict.fromkeys(primary, 0.5)
    assert policy.expected_shares(policy.placement_scope(3, None)) == dict.fromkeys(sorted(primary + secondary), 0.25)
    assert list(policy.expected_shares(policy.placement_scope(5, None))) == sorted(
        primary + secondary + ["u1:3181", "u2:3181"])
    assert policy.expected_shares(()) == dict.fromkeys(sorted(primary + secondary + ["u1:3181", "u2:3181"]), 1 / 6), \
        "the empty scope: no isolation"


def test_isolation_scope_comes_from_the_ledgers_metadata_when_it_names_groups():
    policy = _isolated()
    config = ('{"policyClass": "org.apache.pulsar.bookie.rackawareness.IsolatedBookieEnsemblePlacementPolicy", '
              '"properties": {"isolationBookieGroups": "g2"}}')
    scope = policy.placement_scope(2, {"EnsemblePlacementPolicyConfig": config.encode()})
    assert scope == (("g2",), (), "ledger", 2)
    assert policy.expected_shares(scope) == {"s1:3181": 0.5, "s2:3181": 0.5}
    with pytest.raises(PlacementError):
        policy.placement_scope(2, {"EnsemblePlacementPolicyConfig": b'{"policyClass": "org.apache.pulsar.bookie.'
                                   b'rackawareness.IsolatedBookieEnsemblePlacementPolicy", '
                                   b'"properties": {"isolationBookieGroups": 7}}'})


def test_groups_that_cannot_be_applied_now_exclude_nothing():
    """A scope whose groups vanished from rack info since the call (fail-closed refuses them now): the
    shares cover every bookie the policy may use, rather than none."""
    policy = _isolated(**{"placement.isolation.failClosed": "true"})
    scope = (("gone",), (), "ledger", 2)
    with pytest.raises(IsolationGroupError):
        policy.isolation_exclusion(2, IsolationGroups(frozenset({"gone"}), frozenset(), "ledger"))
    assert len(policy.expected_shares(scope)) == 6
