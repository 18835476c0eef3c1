"""Configuration keys are read verbatim, strings parsed, and bad values rejected naming the key."""

import pytest

from policies import NotEnoughBookiesError, create_policy
from policies.settings import PlacementSettings, policy_name


def test_defaults_match_bookkeeper():
    s = PlacementSettings.from_conf({})
    assert s.policy == "rackaware"
    assert s.min_racks_per_write_quorum == 2
    assert s.enforce_min_racks is False
    assert s.stabilize_period_s == 0
    assert s.disk_weighted is False and s.max_weight_multiple == 3
    assert s.min_zones_per_write_quorum == 2 and s.desired_zones_per_write_quorum == 3
    assert s.strict_zoneaware is True
    assert s.failure_history_expiration_ms == 60000
    assert s.isolation_groups is None


@pytest.mark.parametrize("name, short", [
    ("org.apache.bookkeeper.client.RackawareEnsemblePlacementPolicy", "rackaware"),
    ("org.apache.bookkeeper.client.RegionAwareEnsemblePlacementPolicy", "regionaware"),
    ("org.apache.bookkeeper.client.ZoneawareEnsemblePlacementPolicy", "zoneaware"),
    ("org.apache.bookkeeper.client.DefaultEnsemblePlacementPolicy", "default"),
    ("org.apache.pulsar.bookie.rackawareness.IsolatedBookieEnsemblePlacementPolicy", "isolated"),
    ("rackaware", "rackaware"), ("RegionAware", "regionaware"), ("isolated", "isolated"),
])
def test_policy_names(name, short):
    assert policy_name(name) == short


def test_unknown_policy_names_the_key():
    with pytest.raises(ValueError, match="ensemblePlacementPolicy"):
        create_policy({"ensemblePlacementPolicy": "org.example.Nope"})


def test_string_values_are_parsed():
    s = PlacementSettings.from_conf({
        "minNumRacksPerWriteQuorum": " 3 ", "enforceMinNumRacksPerWriteQuorum": "TRUE",
        "networkTopologyStabilizePeriodSeconds": "30", "reppRegionsToWrite": "r1;r2;r3",
        "bookkeeperClientIsolationGroups": "g1, g2", "diskWeightBasedPlacementEnabled": "false",
    })
    assert s.min_racks_per_write_quorum == 3
    assert s.enforce_min_racks is True
    assert s.stabilize_period_s == 30
    assert s.regions_to_write == ("r1", "r2", "r3")
    assert s.isolation_groups == ("g1", "g2")
    assert s.disk_weighted is False


@pytest.mark.parametrize("key, value", [
    ("minNumRacksPerWriteQuorum", "two"),
    ("minNumRacksPerWriteQuorum", True),
    ("enforceMinNumRacksPerWriteQuorum", "maybe"),
    ("networkTopologyStabilizePeriodSeconds", "-1"),
    ("diskWeightBasedPlacementEnabled", 3),
    ("localNodeLocation", "rack1"),
])
def test_bad_values_raise_value_error_naming_the_key(key, value):
    with pytest.raises(ValueError, match=key):
        PlacementSettings.from_conf({key: value})


def test_impossible_zone_combination_names_a_key():
    zones = {"ensemblePlacementPolicy": "zoneaware", "minNumZonesPerWriteQuorum": "4",
             "desiredNumZonesPerWriteQuorum": "3"}
    with pytest.raises(ValueError, match="minNumZonesPerWriteQuorum"):
        PlacementSettings.from_conf(zones)
    with pytest.raises(ValueError, match="desiredNumZonesPerWriteQuorum"):
        PlacementSettings.from_conf({**zones, "minNumZonesPerWriteQuorum": "0", "desiredNumZonesPerWriteQuorum": "0"})


@pytest.mark.parametrize("policy", ["rackaware", "regionaware", "default"])
def test_only_the_zone_aware_policy_checks_the_zone_keys(policy):
    """Spec bookkeeper-region-zone-isolation.md §3.2: the check belongs to the zone-aware policy's
    initialisation; the others never read the keys."""
    settings = PlacementSettings.from_conf({"ensemblePlacementPolicy": policy, "minNumZonesPerWriteQuorum": "4",
                                            "desiredNumZonesPerWriteQuorum": "0"})
    assert settings.min_zones_per_write_quorum == 4


def test_too_few_regions_for_durability_names_a_key():
    with pytest.raises(ValueError, match="reppRegionsToWrite"):
        PlacementSettings.from_conf({"ensemblePlacementPolicy": "regionaware", "reppRegionsToWrite": "r1",
                                     "reppMinimumRegionsForDurability": "2"})


@pytest.mark.parametrize("value, regions", [
    ("r1;r2", ("r1", "r2")),
    ("r1;;r2", ("r1", "", "r2")),        # an empty name is a region of its own
    ("r1; r2", ("r1", " r2")),           # nothing is trimmed
    ("r1;r2;", ("r1", "r2")),            # trailing empty items are dropped
    (";r1", ("", "r1")),
    ("", ("",)),                         # no separator: one item
    (";", ()),
    (["r1", "r2"], ("r1", "r2")),
])
def test_regions_to_write_are_split_as_java_splits_them(value, regions):
    """BookKeeper reads `reppRegionsToWrite` with `String.split(";")` and counts every item against
    the durability minimum."""
    settings = PlacementSettings.from_conf({"ensemblePlacementPolicy": "regionaware", "reppRegionsToWrite": value,
                                            "reppMinimumRegionsForDurability": str(len(regions))})
    assert settings.regions_to_write == regions
    assert settings.effective_min_regions == len(regions)


def test_regions_to_write_set_but_empty_still_asks_for_the_minimum():
    """`reppRegionsToWrite=` is set (Java: one region named ""), so the default minimum of 2 is refused,
    where an absent key means no durability at all."""
    assert PlacementSettings.from_conf({"ensemblePlacementPolicy": "regionaware"}).effective_min_regions == 0
    for value in ("", ";"):
        with pytest.raises(ValueError, match="reppRegionsToWrite: lists [01] region"):
            PlacementSettings.from_conf({"ensemblePlacementPolicy": "regionaware", "reppRegionsToWrite": value})


def test_an_empty_region_name_counts_for_durability_but_holds_no_bookie():
    """`r1;;r2` with a minimum of 3 is accepted, as in Java, but no ensemble can then span 3 regions."""
    locations = {f"b{i}:3181": f"/r{1 + i % 2}/rack{i % 3}" for i in range(12)}
    policy = create_policy({"ensemblePlacementPolicy": "regionaware", "reppRegionsToWrite": "r1;;r2",
                            "reppMinimumRegionsForDurability": "3"}, resolver=locations)
    policy.on_cluster_changed(sorted(locations), [])
    assert sorted(policy.sub_policies) == ["", "r1", "r2"]
    with pytest.raises(NotEnoughBookiesError):
        policy.new_ensemble(3, 3, 3)


def test_pulsar_and_bookkeeper_spellings_of_isolation_groups():
    assert PlacementSettings.from_conf({"isolationBookieGroups": "a,b"}).isolation_groups == ("a", "b")
    s = PlacementSettings.from_conf({"bookkeeperClientIsolationGroups": "x",
                                     "bookkeeperClientSecondaryIsolationGroups": "y,z"})
    assert s.isolation_groups == ("x",) and s.secondary_isolation_groups == ("y", "z")


def test_isolation_groups_select_the_isolated_policy_over_rackaware():
    for policy in (None, "rackaware", "org.apache.bookkeeper.client.RackawareEnsemblePlacementPolicy"):
        conf = {"bookkeeperClientIsolationGroups": "g1"}
        if policy:
            conf["ensemblePlacementPolicy"] = policy
        assert PlacementSettings.from_conf(conf).policy == "isolated"


@pytest.mark.parametrize("policy", ["regionaware", "zoneaware", "default"])
def test_isolation_groups_cannot_be_combined_with_other_policies(policy):
    with pytest.raises(ValueError, match="bookkeeperClientIsolationGroups"):
        PlacementSettings.from_conf({"bookkeeperClientIsolationGroups": "g1", "ensemblePlacementPolicy": policy})


def test_blank_broker_isolation_groups_mean_unset():
    s = PlacementSettings.from_conf({"bookkeeperClientIsolationGroups": ""})
    assert s.isolation_groups is None and s.policy == "rackaware"


def test_isolation_fails_open_as_pulsar_unless_asked_to_fail_closed():
    assert PlacementSettings.from_conf({}).isolation_fail_closed is False
    assert PlacementSettings.from_conf({"placement.isolation.failClosed": "true"}).isolation_fail_closed is True
