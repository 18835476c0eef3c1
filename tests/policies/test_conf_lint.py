"""The configuration lint (`policies.conf_lint`): catalog, severities, rules, and the truth of its
"this policy does not read that key" table."""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

import pytest

from policies import NotEnoughBookiesError, create_policy
from policies.conf_lint import (
    POLICY_KEYS,
    ROLE_READ_PATH,
    Finding,
    Severity,
    closest_key,
    configured_shape,
    effective_policy,
    exit_code,
    lint_conf,
)
from policies.key_catalog import BOOKKEEPER_CLIENT_KEYS, BOOKKEEPER_SERVER_KEYS, PULSAR_BROKER_KEYS
from policies.settings import KNOWN_KEYS, PlacementSettings
from tests.recording import RecordingConf

ENGINE_KEYS = frozenset({"engine.seed", "engine.flapThreshold", "engine.kafka.bootstrapServers"})


def lint(conf: Mapping[str, Any]) -> list[Finding]:
    return lint_conf(conf, engine_keys=ENGINE_KEYS, engine_prefixes=("engine.kafka.client.",))


def only(findings: list[Finding], rule: str) -> Finding:
    matching = [finding for finding in findings if finding.rule == rule]
    assert len(matching) == 1, findings
    return matching[0]


# -- the catalog --------------------------------------------------------------------------------------


def test_known_keys_are_exactly_the_keys_placement_settings_read():
    """KNOWN_KEYS cannot drift from `PlacementSettings.from_conf`: a key added there must be listed."""
    conf = RecordingConf()
    PlacementSettings.from_conf(conf)
    assert conf.read == KNOWN_KEYS


def test_every_placement_key_is_read_by_some_policy_or_is_a_read_path_key():
    by_policies = frozenset().union(*POLICY_KEYS.values())
    assert by_policies | ROLE_READ_PATH == KNOWN_KEYS
    assert not by_policies & ROLE_READ_PATH


def test_the_not_read_catalog_never_lists_a_key_the_engine_reads():
    assert not (BOOKKEEPER_CLIENT_KEYS | BOOKKEEPER_SERVER_KEYS | PULSAR_BROKER_KEYS) & KNOWN_KEYS


# -- severities and exit codes -----------------------------------------------------------------------


def test_exit_code_is_the_worst_severity_and_notes_leave_it_clean():
    note = Finding(severity=Severity.NOTE, rule="r", key="k", message="m")
    warning = Finding(severity=Severity.WARNING, rule="r", key="k", message="m")
    error = Finding(severity=Severity.ERROR, rule="r", key="k", message="m")
    assert exit_code([]) == 0
    assert exit_code([note]) == 0
    assert exit_code([note, warning]) == 1
    assert exit_code([warning, error, note]) == 2


# -- unknown keys --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("typo", "meant"), [
    ("minNumRackPerWriteQuorum", "minNumRacksPerWriteQuorum"),
    ("enforceMinNumRackPerWriteQuorum", "enforceMinNumRacksPerWriteQuorum"),
    ("MinNumRacksPerWriteQuorum", "minNumRacksPerWriteQuorum"),
    ("reppRegionToWrite", "reppRegionsToWrite"),
    ("diskWeightBasedPlacement", "diskWeightBasedPlacementEnabled"),
    ("enforceStrictZoneAwarePlacement", "enforceStrictZoneawarePlacement"),
    ("networkTopologyStabilizePeriodSecond", "networkTopologyStabilizePeriodSeconds"),
])
def test_a_near_miss_of_a_key_the_engine_reads_is_an_error_naming_the_key(typo, meant):
    findings = lint({typo: "3"})
    finding = only(findings, "unknown-key")
    assert finding.severity is Severity.ERROR
    assert finding.key == typo
    assert f"did you mean {meant}?" in finding.message
    assert exit_code(findings) == 2


def test_a_near_miss_says_which_value_applies_instead():
    finding = only(lint({"minNumRackPerWriteQuorum": "3", "minNumRacksPerWriteQuorum": "2"}), "unknown-key")
    assert "minNumRacksPerWriteQuorum keeps its value '2'" in finding.message
    finding = only(lint({"minNumRackPerWriteQuorum": "3"}), "unknown-key")
    assert "keeps its default" in finding.message


def test_a_near_miss_of_a_key_the_engine_does_not_read_is_a_warning_naming_it():
    finding = only(lint({"zkServer": "zk1:2181"}), "unknown-key")
    assert finding.severity is Severity.WARNING
    assert "did you mean zkServers?" in finding.message


def test_an_unknown_key_close_to_nothing_is_a_warning_without_a_guess():
    findings = lint({"foo.bar": "1"})
    finding = only(findings, "unknown-key")
    assert finding.severity is Severity.WARNING
    assert "did you mean" not in finding.message
    assert exit_code(findings) == 1


def test_an_unknown_engine_key_is_an_error_with_a_guess_among_engine_keys():
    finding = only(lint({"engine.sed": "1"}), "unknown-key")
    assert finding.severity is Severity.ERROR
    assert "did you mean engine.seed?" in finding.message


def test_engine_keys_and_prefixed_engine_keys_are_accepted():
    assert lint({"engine.seed": "1", "engine.kafka.client.security.protocol": "SSL"}) == []


def test_closest_key_ignores_case_and_refuses_distant_keys():
    assert closest_key("ENSEMBLEPLACEMENTPOLICY", KNOWN_KEYS) == "ensemblePlacementPolicy"
    assert closest_key("journalDirectory", KNOWN_KEYS) is None


@pytest.mark.parametrize("key", ["zkServers", "reppDnsResolverClass", "journalDirectories",
                                 "bookkeeperClientTimeoutInSeconds"])
def test_bookkeeper_and_pulsar_keys_the_engine_does_not_read_are_notes(key):
    findings = lint({key: "x"})
    assert [f.severity for f in findings] == [Severity.NOTE]
    assert exit_code(findings) == 0


# -- Pulsar keys --------------------------------------------------------------------------------------


def test_a_pulsar_placement_key_is_a_warning_naming_the_bookkeeper_key():
    finding = only(lint({"bookkeeperClientMinNumRacksPerWriteQuorum": "3"}), "pulsar-key")
    assert finding.severity is Severity.WARNING
    assert "write minNumRacksPerWriteQuorum=3" in finding.message


def test_pulsars_region_aware_switch_names_the_policy_to_write():
    finding = only(lint({"bookkeeperClientRegionawarePolicyEnabled": "true"}), "pulsar-key")
    assert "write ensemblePlacementPolicy=regionaware" in finding.message


def test_a_pulsar_pass_through_of_a_placement_key_is_a_warning():
    finding = only(lint({"bookkeeper_networkTopologyStabilizePeriodSeconds": "30"}), "pulsar-key")
    assert "write networkTopologyStabilizePeriodSeconds" in finding.message


def test_pulsars_default_shape_is_read_for_the_topology_check():
    assert configured_shape({}) is None
    assert configured_shape({"managedLedgerDefaultEnsembleSize": "3"}) == (3, 2, 2)
    assert configured_shape({"managedLedgerDefaultEnsembleSize": "5", "managedLedgerDefaultWriteQuorum": "3",
                             "managedLedgerDefaultAckQuorum": "2"}) == (5, 3, 2)
    assert configured_shape({"managedLedgerDefaultAckQuorum": "two"}) is None


# -- keys the policy does not read ----------------------------------------------------------------------


def test_a_region_key_under_rack_aware_is_ignored_with_a_warning():
    findings = lint({"ensemblePlacementPolicy": "rackaware", "reppRegionsToWrite": "a;b"})
    finding = only(findings, "ignored-by-policy")
    assert finding.severity is Severity.WARNING
    assert finding.key == "reppRegionsToWrite"
    assert "read by: regionaware" in finding.message
    assert exit_code(findings) == 1


def test_the_same_region_key_under_region_aware_is_clean():
    assert lint({"ensemblePlacementPolicy": "regionaware", "reppRegionsToWrite": "a;b"}) == []


def test_a_rack_key_under_zone_aware_is_ignored():
    finding = only(lint({"ensemblePlacementPolicy": "zoneaware", "enforceMinNumRacksPerWriteQuorum": "true"}),
                   "ignored-by-policy")
    assert finding.key == "enforceMinNumRacksPerWriteQuorum"


def test_a_blank_value_is_unset_and_not_reported():
    assert lint({"ensemblePlacementPolicy": "zoneaware", "bookkeeperClientIsolationGroups": ""}) == []


def test_read_path_keys_are_notes():
    finding = only(lint({"reorderReadSequenceEnabled": "true"}), "read-path-key")
    assert finding.severity is Severity.NOTE


def test_isolation_groups_select_the_isolated_policy():
    assert effective_policy({"bookkeeperClientIsolationGroups": "g1"}) == "isolated"
    findings = lint({"ensemblePlacementPolicy": "rackaware", "bookkeeperClientIsolationGroups": "g1"})
    assert only(findings, "isolation-selects-policy").severity is Severity.NOTE
    assert exit_code(findings) == 0


_LOCATIONS = {
    "default": lambda i: f"/rack{i % 3}",
    "rackaware": lambda i: f"/rack{i % 3}",
    "isolated": lambda i: f"/rack{i % 3}",
    "regionaware": lambda i: f"/region{i % 3}/rack{i % 2}",
    "zoneaware": lambda i: f"/zone{i % 3}/ud{i % 2}",
}
_NON_DEFAULT = {
    "placement.search": "complete",
    "localNodeLocation": "/region1/rack1",
    "ignoreLocalNodeInPlacementPolicy": "true",
    "minNumRacksPerWriteQuorum": "3",
    "enforceMinNumRacksPerWriteQuorum": "true",
    "networkTopologyStabilizePeriodSeconds": "30",
    "reppRegionsToWrite": "region0;region1",
    "reppMinimumRegionsForDurability": "1",
    "reppEnableDurabilityEnforcementInReplace": "false",
    "reppDisableDurabilityFeatureName": "durability-off",
    "reppDisallowBookiePlacementInRegionFeatureName": "disallow",
    "reppEnableValidation": "false",
    "minNumZonesPerWriteQuorum": "1",
    "desiredNumZonesPerWriteQuorum": "2",
    "enforceStrictZoneawarePlacement": "false",
    "bookkeeperClientSecondaryIsolationGroups": "g2",
    "secondaryIsolationBookieGroups": "g2",
    "placement.isolation.failClosed": "true",
}
# The primary isolation keys are not "ignored" anywhere: under rack-aware they select the isolated
# policy, under the other policies the configuration is refused (the invalid-value rule).
_PRIMARY_GROUPS = frozenset({"bookkeeperClientIsolationGroups", "isolationBookieGroups"})


def test_the_non_default_values_cover_every_key_some_policy_ignores():
    ignored_somewhere = {key for keys in POLICY_KEYS.values() for key in KNOWN_KEYS - ROLE_READ_PATH - keys}
    assert ignored_somewhere - _PRIMARY_GROUPS == set(_NON_DEFAULT)


def _outcomes(policy_name: str, extra: Mapping[str, str]) -> list[tuple]:
    bookies = [f"bk{i}:3181" for i in range(12)]
    locations = {bookie: _LOCATIONS[policy_name](i) for i, bookie in enumerate(bookies)}
    rack_info = {"g1": {b: {"rack": locations[b]} for b in bookies[:8]},
                 "g2": {b: {"rack": locations[b]} for b in bookies[8:]}}
    conf = {"ensemblePlacementPolicy": policy_name, **extra}
    if policy_name == "isolated":
        conf["bookkeeperClientIsolationGroups"] = "g1"
    policy = create_policy(conf, resolver=locations, rack_info=rack_info, features={"region1.disallow": 1})
    policy.on_cluster_changed(bookies, [])
    outcomes = []
    for shape in ((2, 2, 2), (3, 2, 2), (3, 3, 2), (6, 3, 2), (9, 3, 3)):
        for seed in range(3):
            try:
                result = policy.new_ensemble(*shape, rng=random.Random(seed))
            except (NotEnoughBookiesError, ValueError) as exc:
                outcomes.append((shape, seed, type(exc).__name__, str(exc)))
            else:
                outcomes.append((shape, seed, result.ensemble, result.adherence,
                                 policy.is_ensemble_adhering(result.ensemble, shape[1], shape[2])))
    return outcomes


@pytest.mark.parametrize("policy_name", sorted(POLICY_KEYS))
def test_a_key_the_table_says_a_policy_ignores_changes_none_of_its_placements(policy_name):
    """The ignored-by-policy warning is true: setting such a key changes no ensemble, adherence or error."""
    baseline = _outcomes(policy_name, {})
    ignored = sorted(set(_NON_DEFAULT) - POLICY_KEYS[policy_name])
    assert ignored
    for key in ignored:
        assert _outcomes(policy_name, {key: _NON_DEFAULT[key]}) == baseline, key


@pytest.mark.parametrize("policy_name", ["rackaware", "regionaware", "zoneaware"])
def test_the_table_is_not_vacuous_a_key_the_policy_reads_does_change_placements(policy_name):
    key = {"rackaware": "minNumRacksPerWriteQuorum", "regionaware": "reppRegionsToWrite",
           "zoneaware": "enforceStrictZoneawarePlacement"}[policy_name]
    assert key in POLICY_KEYS[policy_name]
    assert _outcomes(policy_name, {key: _NON_DEFAULT[key]}) != _outcomes(policy_name, {})


# -- combinations --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("conf", "rule", "key"), [
    ({"bookkeeperClientSecondaryIsolationGroups": "g2"}, "secondary-without-primary",
     "bookkeeperClientSecondaryIsolationGroups"),
    ({"bookkeeperClientIsolationGroups": "g1,g2", "bookkeeperClientSecondaryIsolationGroups": "g2"},
     "group-in-both", "bookkeeperClientSecondaryIsolationGroups"),
    ({"bookieMaxMultipleForWeightBasedPlacement": "2"}, "weights-off", "bookieMaxMultipleForWeightBasedPlacement"),
    ({"localNodeLocation": "/rack1", "ignoreLocalNodeInPlacementPolicy": "true"}, "local-node-ignored",
     "localNodeLocation"),
    ({"minNumRacksPerWriteQuorum": "1"}, "rack-rule-off", "minNumRacksPerWriteQuorum"),
    ({"placement.compat.keepStaleReadOnlySet": "true"}, "compat-bug", "placement.compat.keepStaleReadOnlySet"),
    ({"placement.search": "complete"}, "complete-search-idle", "placement.search"),
    ({"ensemblePlacementPolicy": "regionaware", "reppMinimumRegionsForDurability": "2"},
     "needs-regions-to-write", "reppMinimumRegionsForDurability"),
    ({"ensemblePlacementPolicy": "regionaware", "reppRegionsToWrite": "r1; r2"}, "region-name-spaces",
     "reppRegionsToWrite"),
    ({"ensemblePlacementPolicy": "default", "networkTopologyStabilizePeriodSeconds": "30"}, "ignored-by-policy",
     "networkTopologyStabilizePeriodSeconds"),
])
def test_a_risky_combination_is_a_warning_naming_its_key(conf, rule, key):
    findings = lint(conf)
    finding = only(findings, rule)
    assert finding.severity is Severity.WARNING
    assert finding.key == key
    assert exit_code(findings) == 1


def test_complete_search_under_enforcement_is_clean():
    assert not [f for f in lint({"placement.search": "complete", "enforceMinNumRacksPerWriteQuorum": "true"})
                if f.rule == "complete-search-idle"]


def test_region_aware_with_a_one_level_local_node_warns_and_rack_aware_does_not():
    finding = only(lint({"ensemblePlacementPolicy": "regionaware", "localNodeLocation": "/rack1"}),
                   "one-level-location")
    assert finding.severity is Severity.WARNING
    assert "/rack1" in finding.message and "random selection" in finding.message
    assert lint({"ensemblePlacementPolicy": "rackaware", "localNodeLocation": "/rack1"}) == []
    assert lint({"ensemblePlacementPolicy": "regionaware", "localNodeLocation": "/region-a/rack1"}) == []


@pytest.mark.parametrize(("conf", "key"), [
    ({"minNumRacksPerWriteQuorum": "two"}, "minNumRacksPerWriteQuorum"),
    ({"ensemblePlacementPolicy": "rackawar"}, "ensemblePlacementPolicy"),
    ({"ensemblePlacementPolicy": "zoneaware", "minNumZonesPerWriteQuorum": "4"}, "minNumZonesPerWriteQuorum"),
    ({"ensemblePlacementPolicy": "zoneaware", "bookkeeperClientIsolationGroups": "g1"},
     "bookkeeperClientIsolationGroups"),
])
def test_a_value_the_engine_refuses_is_an_error_naming_the_key(conf, key):
    findings = lint(conf)
    finding = only(findings, "invalid-value")
    assert finding.severity is Severity.ERROR
    assert finding.key == key
    assert exit_code(findings) == 2
