"""`PlacementPolicy` (policies.api): every policy `create_policy` builds implements the whole interface
the cluster model programs against, with compatible signatures, so a renamed or reshaped member fails
here instead of surfacing as a probe that silently stops matching."""

from __future__ import annotations

import inspect
from collections.abc import Collection, Hashable, Mapping

import pytest

from policies import BookieInfo, PlacementPolicy, create_policy
from policies.api import PlacementPolicy as ApiPlacementPolicy
from policies.resolver import LocationResolver
from policies.settings import PlacementSettings
from policies.topology import NetworkTopology

from .conftest import ManualClock

#: The interface, member by member: renaming one in the Protocol must be a deliberate change here too.
METHODS = {
    "on_cluster_changed", "on_bookie_rack_change", "update_rack_info", "update_rack_entries",
    "update_bookie_info", "restore_readonly", "known_location", "pending_leaves", "reads_feature",
    "disallowed_regions", "region_of_bookie", "placement_scope", "expected_shares", "new_ensemble",
    "replace_bookie", "replace_to_adhere",
    "is_ensemble_adhering", "are_acked_bookies_adhering", "is_relaxed", "relaxation_fix",
    "register_slow_bookie", "reorder_read_sequence", "reorder_read_lac_sequence", "export_state",
    "import_state", "check_invariants",
}
VIEWS = {"name", "settings", "default_location", "resolver", "topology", "known", "readonly", "join_failures"}

GROUPS = {"bookkeeperClientIsolationGroups": "g1"}
#: (label, configuration): every policy name, with and without disk weights, plus stabilized variants.
CONFIGURATIONS = [
    (f"{name}{'-weighted' if weighted else ''}{'-stabilized' if stabilized else ''}",
     {"ensemblePlacementPolicy": name, **(GROUPS if name == "isolated" else {}),
      **({"diskWeightBasedPlacementEnabled": "true"} if weighted else {}),
      **({"networkTopologyStabilizePeriodSeconds": "30"} if stabilized else {})})
    for name in ("default", "rackaware", "regionaware", "zoneaware", "isolated")
    for weighted in (False, True)
    for stabilized in (False, True)
]
LOCATIONS = {
    "default": ["/r1", "/r2", "/r3"],
    "rackaware": ["/r1", "/r2", "/r3"],
    "isolated": ["/r1", "/r2", "/r3"],
    "regionaware": ["/a/r1", "/b/r1", "/c/r1"],
    "zoneaware": ["/z1/ud1", "/z2/ud1", "/z3/ud1"],
}


def _protocol_members() -> tuple[set[str], set[str]]:
    """(methods, views) the Protocol class declares."""
    methods, views = set(), set(getattr(PlacementPolicy, "__annotations__", {}))
    for name, value in vars(PlacementPolicy).items():
        if name.startswith("_"):
            continue
        if isinstance(value, property):
            views.add(name)
        elif inspect.isfunction(value):
            methods.add(name)
    return methods, views


def _build(conf: Mapping[str, str], clock: ManualClock | None = None):
    name = conf["ensemblePlacementPolicy"]
    bookies = {f"b{i}:3181": location for i, location in enumerate(LOCATIONS[name] * 2)}
    policy = create_policy(conf, resolver=bookies, clock=clock or ManualClock(),
                           rack_info={"g1": {b: {"rack": loc, "hostname": None} for b, loc in bookies.items()}})
    policy.on_cluster_changed(sorted(bookies), [])
    return policy, bookies


def _compatible(declared: inspect.Signature, implemented: inspect.Signature) -> list[str]:
    """Why `implemented` cannot stand in for `declared` (empty when it can)."""
    problems = []
    params = implemented.parameters
    positional = [p.name for p in params.values() if p.kind is p.POSITIONAL_OR_KEYWORD]
    declared_positional = [p.name for p in declared.parameters.values() if p.kind is p.POSITIONAL_OR_KEYWORD]
    if positional[:len(declared_positional)] != declared_positional:
        problems.append(f"positional parameters {positional} do not start with {declared_positional}")
    for name, wanted in declared.parameters.items():
        got = params.get(name)
        if got is None:
            problems.append(f"no parameter {name!r}")
            continue
        if wanted.kind is wanted.KEYWORD_ONLY and got.kind not in (got.KEYWORD_ONLY, got.POSITIONAL_OR_KEYWORD):
            problems.append(f"{name!r} cannot be passed by keyword")
        if wanted.default is not wanted.empty and got.default is got.empty:
            problems.append(f"{name!r} has no default")
    for name, got in params.items():
        if name not in declared.parameters and got.default is got.empty \
                and got.kind not in (got.VAR_POSITIONAL, got.VAR_KEYWORD):
            problems.append(f"extra required parameter {name!r}")
    return problems


def test_the_protocol_declares_exactly_the_documented_members():
    methods, views = _protocol_members()
    assert (methods, views) == (METHODS, VIEWS)
    assert ApiPlacementPolicy is PlacementPolicy


@pytest.mark.parametrize(("label", "conf"), CONFIGURATIONS, ids=[label for label, _ in CONFIGURATIONS])
def test_every_policy_implements_the_interface(label, conf):
    policy, _ = _build(conf)
    assert isinstance(policy, PlacementPolicy)
    for name in sorted(METHODS):
        declared = inspect.signature(getattr(PlacementPolicy, name))
        declared = declared.replace(parameters=list(declared.parameters.values())[1:])    # drop `self`
        implemented = getattr(policy, name)
        assert callable(implemented), name
        assert _compatible(declared, inspect.signature(implemented)) == [], (label, name)
    assert policy.name == conf["ensemblePlacementPolicy"]
    assert isinstance(policy.settings, PlacementSettings)
    assert isinstance(policy.default_location, str) and policy.default_location.startswith("/")
    assert isinstance(policy.resolver, LocationResolver)
    assert isinstance(policy.known, Collection)
    assert isinstance(policy.readonly, frozenset)
    assert isinstance(policy.join_failures, Mapping)
    if policy.name == "default":
        assert policy.topology is None
    else:
        assert isinstance(policy.topology, NetworkTopology)


def test_a_class_missing_a_member_is_not_a_policy():
    policy, _ = _build({"ensemblePlacementPolicy": "default"})

    class Partial:
        def __getattr__(self, name):
            if name == "known_location":
                raise AttributeError(name)
            return getattr(policy, name)

    assert not isinstance(Partial(), PlacementPolicy)


@pytest.mark.parametrize(("label", "conf"), CONFIGURATIONS, ids=[label for label, _ in CONFIGURATIONS])
def test_the_membership_views_agree(label, conf):
    """`known` holds the writable bookies that joined; `known_location` is their placed location
    (None throughout for the default policy, which places without locations)."""
    policy, bookies = _build(conf)
    assert set(policy.known) == set(bookies)
    assert dict(policy.join_failures) == {}
    for bookie in bookies:
        located = policy.known_location(bookie)
        if policy.topology is None:
            assert located is None
        else:
            assert located == bookies[bookie]
            assert bookie in policy.topology
    assert policy.known_location("nobody:3181") is None
    policy.check_invariants()


@pytest.mark.parametrize(("label", "conf"), CONFIGURATIONS, ids=[label for label, _ in CONFIGURATIONS])
def test_rack_entries_have_the_effect_of_the_whole_rack_info(label, conf):
    """`update_rack_entries` gives the same resolver and placement as `update_rack_info` with the whole
    rack info so changed, whichever policy takes it."""
    by_entries, bookies = _build(conf)
    by_whole, _ = _build(conf)
    moved = sorted(bookies)[0]
    other = LOCATIONS[conf["ensemblePlacementPolicy"]][1]
    whole = by_whole.resolver.rack_info
    del whole["g1"][moved]
    whole.setdefault("g2", {})[moved] = {"rack": other, "hostname": None}
    by_whole.update_rack_info(whole)
    changed = by_entries.update_rack_entries({moved: {"g2": {"rack": other, "hostname": None}}})
    assert changed is True
    assert by_entries.resolver.rack_info == by_whole.resolver.rack_info
    assert by_entries.resolver.group_members() == by_whole.resolver.group_members()
    assert {b: by_entries.known_location(b) for b in bookies} == {b: by_whole.known_location(b) for b in bookies}
    assert by_entries.update_rack_entries({moved: {"g2": {"rack": other, "hostname": None}}}) is False
    by_entries.check_invariants()


@pytest.mark.parametrize(("label", "conf"), CONFIGURATIONS, ids=[label for label, _ in CONFIGURATIONS])
def test_restore_readonly_sets_the_read_only_set(label, conf):
    policy, bookies = _build(conf)
    policy.restore_readonly(["ro:3181"])
    assert policy.readonly == frozenset({"ro:3181"})
    secondary = getattr(policy, "secondary", None)
    if secondary is not None:
        assert secondary.readonly == frozenset({"ro:3181"})


@pytest.mark.parametrize(("label", "conf"), CONFIGURATIONS, ids=[label for label, _ in CONFIGURATIONS])
def test_regions_exist_only_under_the_region_aware_policy(label, conf):
    policy, bookies = _build(conf)
    assert policy.disallowed_regions() == []
    first = sorted(bookies)[0]
    if policy.name == "regionaware":
        assert policy.region_of_bookie(first) == "a"
    else:
        assert policy.region_of_bookie(first) is None


@pytest.mark.parametrize(("label", "conf"), CONFIGURATIONS, ids=[label for label, _ in CONFIGURATIONS])
def test_expected_shares_follow_the_scope_and_the_disk_weights(label, conf):
    """`placement_scope` is hashable and `()` except under isolation (the call's groups and ensemble
    size); `expected_shares` gives every bookie a call may use its share, sorted by bookie: by free disk
    when disk weighting is on (the disk reports the policy was given), else uniform."""
    policy, bookies = _build(conf)
    ordered = sorted(bookies)
    scope = policy.placement_scope(3, None)
    assert isinstance(scope, Hashable) and hash(scope) == hash(policy.placement_scope(3, None))
    if policy.name == "isolated":
        assert scope == (("g1",), (), "client", 3)
        assert policy.placement_scope(4, None) != scope, "the ensemble size selects the admitted groups"
    else:
        assert scope == ()
    assert policy.expected_shares(scope) == pytest.approx(dict.fromkeys(ordered, 1 / 6)), "no disk yet: uniform"
    policy.update_bookie_info({b: BookieInfo(total_disk=100, free_disk=i + 1) for i, b in enumerate(ordered)})
    shares = policy.expected_shares(scope)
    assert list(shares) == ordered
    if policy.settings.disk_weighted:
        # Free disk 1..6: the cap (3 x the median 3.5, of 21) binds no bookie.
        assert shares == pytest.approx({b: (i + 1) / 21 for i, b in enumerate(ordered)})
    else:
        assert shares == dict.fromkeys(ordered, 1 / 6)
    assert sum(shares.values()) == pytest.approx(1.0)
