"""Pulsar isolation groups (spec bookkeeper-region-zone-isolation.md §4), ported from the behaviours of
Pulsar's IsolatedBookieEnsemblePlacementPolicyTest and BookieRackAffinityMappingTest, plus this
port's fail-closed decisions."""

from __future__ import annotations

import json
import random

import pytest

from policies import NotEnoughBookiesError, create_policy
from policies.isolation import IsolatedPolicy, IsolationGroupError, IsolationGroups, group_names, is_valid_bookie_id

B1, B2, B3, B4, B5 = (f"127.0.0.{i}:3181" for i in range(1, 6))
ISOLATED_CLASS = "org.apache.pulsar.bookie.rackawareness.IsolatedBookieEnsemblePlacementPolicy"


def groups(**members: dict[str, str]) -> dict:
    """rack info: group -> {bookie: rack}."""
    return {group: {bookie: {"rack": rack} for bookie, rack in bookies.items()} for group, bookies in members.items()}


def make_policy(rack_info, writable=(B1, B2, B3, B4), readonly=(), **conf) -> IsolatedPolicy:
    policy = create_policy(conf, rack_info=rack_info)
    assert isinstance(policy, IsolatedPolicy)
    policy.on_cluster_changed(list(writable), list(readonly))
    return policy


def ledger_config(primary="", secondary="", policy_class=ISOLATED_CLASS, **extra) -> dict[str, bytes]:
    properties = {"isolationBookieGroups": primary, "secondaryIsolationBookieGroups": secondary, **extra}
    body = {"policyClass": policy_class, "properties": properties}
    return {"EnsemblePlacementPolicyConfig": json.dumps(body).encode("utf-8")}


def ensembles(policy, size, metadata=None, exclude=(), seeds=range(8)):
    return [policy.new_ensemble(size, size, min(size, 2), metadata, exclude, rng=random.Random(s)).ensemble
            for s in seeds]


# -- primary, secondary and ungrouped bookies ------------------------------------------------------


def test_only_primary_group_bookies_are_used_when_there_are_enough():
    policy = make_policy(groups(group1={B1: "rack0", B2: "rack1"}), bookkeeperClientIsolationGroups="group1")
    for ensemble in ensembles(policy, 2):
        assert set(ensemble) == {B1, B2}


def test_ungrouped_bookies_fill_in_when_primary_and_secondary_are_short():
    policy = make_policy(groups(group1={B1: "rack0", B2: "rack1"}, group2={B3: "rack0"}),
                         bookkeeperClientIsolationGroups="group1")
    result = policy.new_ensemble(3, 3, 2, {})
    assert set(result.ensemble) == {B1, B2, B4}  # B4 belongs to no group; B3 to another group
    assert result.explain["excluded"]["isolation_group"] == [B3]
    assert any("belong to no isolation group" in note for note in result.explain["fallbacks"])
    for ensemble in ensembles(policy, 1):
        assert B3 not in ensemble
    with pytest.raises(NotEnoughBookiesError, match="isolation groups from client: primary \\[group1\\]"):
        policy.new_ensemble(4, 4, 4, {})
    with pytest.raises(NotEnoughBookiesError):
        policy.new_ensemble(2, 2, 2, {}, {B1})


def test_other_groups_are_never_eligible():
    policy = make_policy(groups(group1={B1: "rack0", B2: "rack1"}, group2={B3: "rack0", B4: "rack2"}),
                         bookkeeperClientIsolationGroups="group1")
    for ensemble in ensembles(policy, 2):
        assert set(ensemble) == {B1, B2}
    with pytest.raises(NotEnoughBookiesError):
        policy.new_ensemble(3, 3, 3, {})
    with pytest.raises(NotEnoughBookiesError):
        policy.replace_bookie(3, 3, 3, {}, [B1, B2], B2)
    result = policy.new_ensemble(1, 1, 1, {}, {B1})
    assert result.ensemble == [B2]
    assert policy.replace_bookie(1, 1, 1, {}, [B2], B2).bookie == B1


def test_a_group_membership_change_applies_at_once():
    info = groups(group1={B1: "rack0", B2: "rack1"}, group2={B3: "rack0", B4: "rack2"})
    policy = make_policy(info, bookkeeperClientIsolationGroups="group1")
    with pytest.raises(NotEnoughBookiesError):
        policy.new_ensemble(3, 3, 3, {})
    policy.update_rack_info(groups(group1={B1: "rack0", B2: "rack1", B3: "rack1"}, group2={B4: "rack2"}))
    assert set(policy.new_ensemble(3, 3, 3, {}).ensemble) == {B1, B2, B3}


def test_a_membership_change_applies_at_once():
    policy = make_policy(groups(group1={B1: "rack0", B2: "rack1", B3: "rack1"}),
                         writable=(B1, B2, B4), bookkeeperClientIsolationGroups="group1")
    assert set(policy.new_ensemble(3, 3, 2, {}).ensemble) == {B1, B2, B4}
    policy.on_cluster_changed([B1, B2, B3, B4], [])
    assert set(policy.new_ensemble(3, 3, 2, {}).ensemble) == {B1, B2, B3}


def test_a_bookie_in_a_primary_and_another_group_stays_eligible():
    info = groups(default={B1: "rack0", B2: "rack1", B3: "rack1", B4: "rack1", B5: "rack1"},
                  isolatedGroup={B1: "rack1", B2: "rack0", B4: "rack0"})
    policy = make_policy(info, bookkeeperClientIsolationGroups="isolatedGroup")
    for ensemble in ensembles(policy, 3):
        assert set(ensemble) == {B1, B2, B4}


def test_secondary_groups_fill_in_when_the_primary_is_short():
    info = groups(default={B1: "rack0", B2: "rack1", B3: "rack1", B4: "rack1", B5: "rack1"},
                  primaryGroup={B1: "rack0"}, secondaryGroup={B2: "rack1", B4: "rack1"})
    policy = make_policy(info, bookkeeperClientIsolationGroups="primaryGroup",
                         bookkeeperClientSecondaryIsolationGroups="secondaryGroup")
    result = policy.new_ensemble(3, 3, 2, {})
    assert set(result.ensemble) == {B1, B2, B4}
    assert any("admitted secondary groups [secondaryGroup]" in note for note in result.explain["fallbacks"])
    assert result.explain["excluded"]["isolation_group"] == [B3, B5]
    assert policy.new_ensemble(1, 1, 1, {}).ensemble == [B1]  # primary suffices: no fallback
    assert policy.new_ensemble(1, 1, 1, {}).explain["fallbacks"] == []


def test_an_empty_secondary_group_does_not_help():
    info = groups(default={B1: "rack0", B2: "rack1", B3: "rack1", B4: "rack1", B5: "rack1"},
                  primaryGroup={B1: "rack1"}, secondaryGroup={})
    policy = make_policy(info, bookkeeperClientIsolationGroups="primaryGroup",
                         bookkeeperClientSecondaryIsolationGroups="secondaryGroup")
    with pytest.raises(NotEnoughBookiesError):
        policy.new_ensemble(3, 3, 2, {})


def test_listed_secondary_bookies_count_even_when_not_writable():
    """BK quirk kept (spec App. A #8): a listed but absent secondary bookie still counts towards E,
    so the ungrouped fallback is not reached."""
    info = groups(primary={B1: "rack0"}, secondary={B2: "rack1", "10.0.0.9:3181": "rack2"})
    policy = make_policy(info, bookkeeperClientIsolationGroups="primary",
                         bookkeeperClientSecondaryIsolationGroups="secondary")
    with pytest.raises(NotEnoughBookiesError):
        policy.new_ensemble(3, 3, 2, {})  # B3, B4 (ungrouped) stay excluded
    assert set(policy.new_ensemble(2, 2, 2, {}).ensemble) == {B1, B2}


def test_replace_compares_with_the_ensemble_size_not_one_bookie():
    """BK quirk kept (spec §4.5): replacing one bookie of a 3-bookie ensemble admits the secondary
    group when the primary has fewer than 3 writable bookies."""
    info = groups(primary={B1: "rack0", B2: "rack1"}, secondary={B3: "rack2"})
    policy = make_policy(info, writable=(B1, B2, B3), bookkeeperClientIsolationGroups="primary",
                         bookkeeperClientSecondaryIsolationGroups="secondary")
    result = policy.replace_bookie(3, 3, 2, {}, [B1, B2, "10.0.0.7:3181"], "10.0.0.7:3181")
    assert result.bookie == B3
    assert result.ensemble == [B1, B2, B3]


# -- per-ledger groups (custom metadata) -----------------------------------------------------------


def test_ledger_metadata_groups_apply_to_replace_bookie():
    info = groups(primary={B1: "rack0", B2: "rack0", B3: "rack1"}, secondary={B4: "rack0"})
    policy = make_policy(info, bookkeeperClientIsolationGroups="primary")
    metadata = ledger_config("primary", "secondary")
    for seed in range(8):
        result = policy.replace_bookie(2, 1, 1, metadata, [B1, B3], B3, rng=random.Random(seed))
        assert result.bookie == B2
        assert result.explain["isolation"] == {"primary": ["primary"], "secondary": ["secondary"],
                                               "source": "ledger"}


def test_ledger_metadata_groups_override_the_client_groups_for_that_call_only():
    info = groups(Group1={B1: "rack0", B2: "rack0"}, Group2={B3: "rack1", B4: "rack1"})
    policy = make_policy(info, bookkeeperClientIsolationGroups="Group1",
                         bookkeeperClientSecondaryIsolationGroups="Group2")
    metadata = ledger_config("Group2", "")
    for ensemble in ensembles(policy, 2, metadata):
        assert set(ensemble) == {B3, B4}
    for ensemble in ensembles(policy, 2, {}):
        assert set(ensemble) == {B1, B2}
    # Client groups would replace B4 from Group1; the ledger's groups allow Group2 only, which is used up.
    assert policy.replace_bookie(2, 2, 2, {}, [B3, B4], B4).bookie in {B1, B2}
    with pytest.raises(NotEnoughBookiesError, match="isolation groups from ledger: primary \\[Group2\\]"):
        policy.replace_bookie(2, 2, 2, metadata, [B3, B4], B4)


def test_empty_ledger_groups_mean_bookies_of_no_group():
    """Pulsar's strictBookieAffinityEnabled gives non-system topics "" groups: no grouped bookie."""
    policy = make_policy(groups(group1={B1: "rack0", B2: "rack1"}), bookkeeperClientIsolationGroups="group1")
    for ensemble in ensembles(policy, 2, ledger_config("", "")):
        assert set(ensemble) == {B3, B4}


def test_star_primary_group_means_no_isolation():
    policy = make_policy(groups(group1={B1: "rack0", B2: "rack1"}, group2={B3: "rack0"}),
                         bookkeeperClientIsolationGroups="group1")
    result = policy.new_ensemble(4, 4, 2, ledger_config("*", "*"))
    assert set(result.ensemble) == {B1, B2, B3, B4}
    assert "isolation_group" not in result.explain["excluded"]


def test_another_policy_class_in_metadata_means_no_groups():
    policy = make_policy(groups(group1={B1: "rack0", B2: "rack1"}), bookkeeperClientIsolationGroups="group1")
    metadata = ledger_config("group1", "", policy_class="org.apache.bookkeeper.client.RackawareEnsemblePlacementPolicy")
    for ensemble in ensembles(policy, 2, metadata):
        assert set(ensemble) == {B3, B4}
    result = policy.new_ensemble(2, 2, 2, metadata)
    assert any("RackawareEnsemblePlacementPolicy" in note for note in result.explain["fallbacks"])


@pytest.mark.parametrize("raw", [b"\xff\xfe", b"not json", b"[1, 2]", b'{"properties": {}}',
                                 b'{"policyClass": "x", "properties": [1]}',
                                 b"[" * 5000 + b"]" * 5000])   # too deep for json (found by fuzzing)
def test_undecodable_metadata_falls_back_to_the_client_groups(raw):
    policy = make_policy(groups(group1={B1: "rack0", B2: "rack1"}), bookkeeperClientIsolationGroups="group1")
    result = policy.new_ensemble(2, 2, 2, {"EnsemblePlacementPolicyConfig": raw})
    assert set(result.ensemble) == {B1, B2}
    assert result.explain["isolation"]["source"] == "client"
    assert any("could not be decoded" in note for note in result.explain["fallbacks"])


def test_metadata_groups_may_be_a_list_of_names():
    policy = make_policy(groups(g1={B1: "rack0"}, g2={B2: "rack1"}, g3={B3: "rack1"}),
                         bookkeeperClientIsolationGroups="g3")
    metadata = {"EnsemblePlacementPolicyConfig": json.dumps(
        {"policyClass": ISOLATED_CLASS, "properties": {"isolationBookieGroups": ["g1", "g2"]}}).encode()}
    assert set(policy.new_ensemble(2, 2, 2, metadata).ensemble) == {B1, B2}


def test_metadata_applies_only_when_isolation_is_configured():
    """CONTRACT §1: without bookkeeperClientIsolationGroups the policy is plain rack-aware."""
    info = groups(group1={B1: "rack0", B2: "rack1"}, group2={B3: "rack0", B4: "rack2"})
    policy = make_policy(info, ensemblePlacementPolicy="isolated")
    for metadata in (ledger_config("", ""), {"EnsemblePlacementPolicyConfig": b'{"policyClass": "%s"}'
                                             % ISOLATED_CLASS.encode()}):
        assert policy.replace_bookie(3, 3, 3, metadata, [B1, B2, B3], B3).bookie == B4
    assert set(policy.new_ensemble(4, 4, 2, ledger_config("group1")).ensemble) == {B1, B2, B3, B4}


# -- groups rack info does not have: Pulsar's answers, or fail closed ----------------------------------

FAIL_CLOSED = {"placement.isolation.failClosed": "true"}


def test_without_rack_info_nothing_is_excluded_as_in_pulsar():
    """Pulsar `IsolatedBookieEnsemblePlacementPolicyTest.testNoBookieInfo`: groups configured, no
    /bookies data: every writable bookie is eligible, and the explanation says the group is missing."""
    policy = make_policy({}, bookkeeperClientIsolationGroups="group1")
    for seed in range(5):
        result = policy.new_ensemble(4, 4, 4, {}, None, rng=random.Random(seed))
        assert set(result.ensemble) == {B1, B2, B3, B4}
        assert "isolation group(s) group1 named by bookkeeperClientIsolationGroups" in result.explain["fallbacks"][0]
        assert "isolation_group" not in result.explain["excluded"]


def test_an_unknown_secondary_group_adds_no_bookie_as_in_pulsar():
    """Pulsar `testSecondaryIsolationGroupsBookiesNegative`: the secondary group does not exist, so only
    the primary group's bookie and ungrouped bookies could be admitted; there are none ungrouped."""
    info = groups(default={B1: "rack0", B2: "rack1", B3: "rack1"}, primaryGroup={B1: "rack1"})
    policy = make_policy(info, writable=(B1, B2, B3), bookkeeperClientIsolationGroups="primaryGroup",
                         bookkeeperClientSecondaryIsolationGroups="secondaryGroup")
    with pytest.raises(NotEnoughBookiesError):
        policy.new_ensemble(3, 3, 2, {})


def test_a_misspelt_group_in_ledger_metadata_places_like_pulsar_and_says_so():
    """`gruop1` holds no bookies: the ledger falls back to the bookies of no group (B3, B4), never to
    group1's, and the explanation names the missing group."""
    policy = make_policy(groups(group1={B1: "rack0", B2: "rack1"}), bookkeeperClientIsolationGroups="group1")
    result = policy.new_ensemble(2, 2, 2, ledger_config("gruop1"), rng=random.Random(1))
    assert set(result.ensemble) == {B3, B4}
    assert result.explain["fallbacks"][0].startswith("isolation group(s) gruop1 named by the ledger")
    assert result.explain["relaxed"][0]["admitted"] == "ungrouped"


def test_the_missing_group_note_names_who_named_it_whatever_was_asked_before():
    """The same missing group named by a ledger, then by the client's defaults: each explanation says
    who named it. The analysis was cached by groups alone, so the second call repeated the first one's
    "named by the ledger" (seen as decisions that differed after a snapshot restore, where the audit's
    re-check had asked first)."""
    policy = make_policy(groups(group1={B1: "rack0", B2: "rack1"}), bookkeeperClientIsolationGroups="gruop1")
    by_ledger = policy.new_ensemble(2, 2, 2, ledger_config("gruop1"), rng=random.Random(1))
    by_client = policy.new_ensemble(2, 2, 2, {}, rng=random.Random(1))
    assert by_ledger.explain["fallbacks"][0].startswith("isolation group(s) gruop1 named by the ledger")
    assert by_client.explain["fallbacks"][0].startswith(
        "isolation group(s) gruop1 named by bookkeeperClientIsolationGroups")
    assert by_client.ensemble == by_ledger.ensemble


def test_fail_closed_without_rack_info_a_named_group_is_an_error_not_an_unisolated_placement():
    """placement.isolation.failClosed=true: Pulsar with no /bookies data excludes nothing; this refuses."""
    policy = make_policy({}, bookkeeperClientIsolationGroups="group1", **FAIL_CLOSED)
    with pytest.raises(IsolationGroupError, match="group1") as caught:
        policy.new_ensemble(4, 4, 4, {})
    assert caught.value.code == "ISOLATION_GROUP_ERROR"
    policy.update_rack_info(groups(group1={B1: "rack0", B2: "rack1"}, group2={B3: "rack0", B4: "rack2"}))
    assert set(policy.new_ensemble(2, 2, 2, {}).ensemble) == {B1, B2}
    with pytest.raises(NotEnoughBookiesError):
        policy.new_ensemble(3, 3, 3, {})


def test_fail_closed_an_unknown_secondary_group_is_an_error():
    info = groups(default={B1: "rack0", B2: "rack1", B3: "rack1"}, primaryGroup={B1: "rack1"})
    policy = make_policy(info, bookkeeperClientIsolationGroups="primaryGroup",
                         bookkeeperClientSecondaryIsolationGroups="secondaryGroup", **FAIL_CLOSED)
    with pytest.raises(IsolationGroupError, match="secondaryGroup.*bookkeeperClientIsolationGroups"):
        policy.new_ensemble(3, 3, 2, {})


def test_fail_closed_an_unknown_group_in_ledger_metadata_is_an_error_on_both_calls():
    policy = make_policy(groups(group1={B1: "rack0", B2: "rack1"}), bookkeeperClientIsolationGroups="group1",
                         **FAIL_CLOSED)
    metadata = ledger_config("gruop1")
    with pytest.raises(IsolationGroupError, match="gruop1 named by the ledger"):
        policy.new_ensemble(2, 2, 2, metadata)
    with pytest.raises(IsolationGroupError):
        policy.replace_bookie(2, 2, 2, metadata, [B1, B2], B2)


def test_unreadable_group_names_are_an_error():
    policy = make_policy(groups(group1={B1: "rack0"}), bookkeeperClientIsolationGroups="group1")
    with pytest.raises(IsolationGroupError, match="isolationBookieGroups"):
        policy.new_ensemble(1, 1, 1, ledger_config(5))
    with pytest.raises(IsolationGroupError):
        policy.new_ensemble(1, 1, 1, ledger_config("group1", None))


def test_an_invalid_bookie_id_in_rack_info_is_an_error():
    policy = make_policy(groups(group1={B1: "rack0", "bad/id:3181": "rack1"}),
                         bookkeeperClientIsolationGroups="group1")
    with pytest.raises(IsolationGroupError, match="bad/id"):
        policy.new_ensemble(1, 1, 1, {})


def test_invalid_bookie_ids_are_named_for_the_first_such_group_sorted_also_after_a_per_bookie_update():
    policy = make_policy(groups(group1={B1: "rack0"}, group2={B2: "rack1"}),
                         bookkeeperClientIsolationGroups="group1")
    policy.new_ensemble(1, 1, 1, {})
    policy.update_rack_entries({"z z:1": {"group2": {"rack": "rack1"}}, "a/b:1": {"group2": {"rack": "rack1"}},
                                "c c:1": {"group3": {"rack": "rack1"}}})
    with pytest.raises(IsolationGroupError, match=r"group 'group2' lists invalid bookie id\(s\) 'a/b:1', 'z z:1':"):
        policy.new_ensemble(1, 1, 1, {})


@pytest.mark.parametrize("bookie, valid", [("127.0.0.1:3181", True), ("bookie-1.example.com:3181", True),
                                           ("host_1:3181", True), ("readonly", False), ("READONLY", False),
                                           ("", False), ("a/b:1", False), ("a b:1", False), ("é:1", False)])
def test_bookie_id_validation(bookie, valid):
    assert is_valid_bookie_id(bookie) is valid


def test_group_names_parsing():
    assert group_names(" g1, g2 ,,", "k") == {"g1", "g2"}
    assert group_names(["g1", "g2,g3"], "k") == {"g1", "g2", "g3"}
    assert group_names("", "k") == frozenset()
    for bad in (None, 5, {"g": 1}, [1]):
        with pytest.raises(IsolationGroupError):
            group_names(bad, "k")


# -- Pulsar's getExcludedBookiesWithIsolationGroups cases --------------------------------------------


def test_excluded_set_cases():
    info = groups(Group1={B1: "rack0", B2: "rack0"}, Group2={B3: "rack1", B4: "rack1"})
    policy = make_policy(info, bookkeeperClientIsolationGroups="Group1",
                         bookkeeperClientSecondaryIsolationGroups="Group2")

    def excluded(size, primary, secondary=()):
        return policy.isolation_exclusion(size, IsolationGroups(frozenset(primary), frozenset(secondary),
                                                                "client")).excluded

    assert excluded(2, {"Group1"}) == {B3, B4}
    assert excluded(2, {"Group1"}, {"Group2"}) == {B3, B4}
    assert excluded(3, {"Group1"}, {"Group2"}) == set()

    policy.update_rack_info(groups(Group1={B1: "rack0"}, Group2={B2: "rack0", B3: "rack1", B4: "rack1"},
                                   Group3={B1: "rack0"}))
    assert excluded(2, {"Group1", "Group3"}) == {B2, B3, B4}
    assert excluded(2, {"Group1", "Group3"}, {"Group2"}) == set()

    policy.update_rack_info(groups(Group1={B1: "rack0"}, Group2={B2: "rack0"}, Group3={B1: "rack0"}))
    assert excluded(2, {"Group1"}, {"Group2"}) == {B3, B4}
    assert excluded(3, {"Group1"}, {"Group2"}) == set()

    policy.update_rack_info(groups(Group1={B1: "rack0"}, Group2={B1: "rack0"}))
    assert excluded(2, {"Group1"}, {"Group2"}) == set()


# -- rack parsing of rack info (BookieRackAffinityMapping) ----------------------------------------------


def test_rack_info_gives_locations_as_pulsar_reads_them():
    info = {"group1": {B1: {"rack": "/rack0", "hostname": "bookie1.example.com"},
                       B2: {"rack": "rack1"}, B3: {"rack": "/"}, B4: {"rack": ""}}}
    policy = make_policy(info, writable=(B1, B2, B3, B4, B5), ensemblePlacementPolicy="isolated")
    assert policy.known == {B1: "/rack0", B2: "/rack1", B3: "/default-rack", B4: "/default-rack",
                            B5: "/default-rack"}
    policy.update_rack_info({"group1": {B1: {"rack": "rack0"}, B2: {"rack": "rack1"}},
                             "group2": {B5: {"rack": "rack0"}}})
    assert policy.known[B5] == "/rack0"
    policy.update_rack_info({})
    assert set(policy.known.values()) == {"/default-rack"}


def test_rack_info_is_also_looked_up_by_host():
    policy = make_policy({"g": {"127.0.0.1:3181": {"rack": "rack7"}}}, writable=("127.0.0.1:4181",),
                         ensemblePlacementPolicy="isolated")
    assert policy.known == {"127.0.0.1:4181": "/rack7"}


# -- hygiene --------------------------------------------------------------------------------------------


def test_arguments_are_not_mutated_and_seeds_repeat():
    info = groups(group1={B1: "rack0", B2: "rack1", B3: "rack1"}, group2={B4: "rack0"})
    policy = make_policy(info, bookkeeperClientIsolationGroups="group1")
    exclude = {B3}
    metadata = ledger_config("group1")
    snapshot = dict(metadata)
    first = policy.new_ensemble(2, 2, 2, metadata, exclude, rng=random.Random(5))
    assert first == policy.new_ensemble(2, 2, 2, metadata, exclude, rng=random.Random(5))
    assert exclude == {B3} and metadata == snapshot
    assert first.explain["excluded"]["caller"] == [B3]
    assert first.explain["excluded"]["isolation_group"] == [B4]
    current = list(first.ensemble)
    no_exclusions: set[str] = set()
    replaced = policy.replace_bookie(2, 2, 2, metadata, current, current[0], no_exclusions, rng=random.Random(5))
    assert current == first.ensemble and no_exclusions == set()
    assert replaced.bookie == B3


def test_explain_keeps_caller_exclusions_apart_from_isolation():
    policy = make_policy(groups(group1={B1: "rack0", B2: "rack1"}, group2={B3: "rack0"}),
                         bookkeeperClientIsolationGroups="group1")
    result = policy.new_ensemble(2, 2, 2, {})
    assert result.explain["policy"] == "isolated"
    assert "caller" not in result.explain["excluded"]
    assert result.explain["excluded"]["isolation_group"] == [B3, B4]
    assert result.explain["isolation"] == {"primary": ["group1"], "secondary": [], "source": "client"}


def test_star_as_a_secondary_group_is_ignored_not_an_error():
    policy = make_policy(groups(group1={B1: "rack0", B2: "rack1"}), bookkeeperClientIsolationGroups="group1",
                         bookkeeperClientSecondaryIsolationGroups="*")
    for ensemble in ensembles(policy, 3):
        assert {B1, B2} < set(ensemble) <= {B1, B2, B3, B4}  # no secondary bookies: ungrouped ones fill in
