"""Hypothesis invariants of the zone-aware policy (spec region-zone-isolation.md §3)."""

from __future__ import annotations

import random

from hypothesis import assume, given
from hypothesis import strategies as st

from policies import Adherence, NotEnoughBookiesError, create_policy

DEFAULT_FD = "/default-zone/default-upgradedomain"


@st.composite
def clusters(draw):
    """bookie -> location: up to 6 zones x 3 UDs x 3 bookies, plus up to 2 default-domain bookies."""
    locations = {}
    for zone in range(1, draw(st.integers(1, 6)) + 1):
        for ud in range(1, draw(st.integers(1, 3)) + 1):
            for k in range(draw(st.integers(0, 3))):
                locations[f"z{zone}u{ud}b{k}:3181"] = f"/zone{zone}/ud{ud}"
    for k in range(draw(st.integers(0, 2))):
        locations[f"default{k}:3181"] = DEFAULT_FD
    assume(locations)
    return locations


@st.composite
def strict_requests(draw):
    min_zones = draw(st.integers(1, 3))
    desired = draw(st.integers(min_zones, 4))
    write_quorum = draw(st.integers(min_zones + 1, 5))
    ensemble_size = write_quorum * draw(st.integers(1, 2))
    return min_zones, desired, ensemble_size, write_quorum


def build(locations, **conf):
    policy = create_policy({"ensemblePlacementPolicy": "zoneaware", **conf}, resolver=locations)
    policy.on_cluster_changed(sorted(locations), [])
    return policy


@given(locations=clusters(), request=strict_requests(), seed=st.integers(0, 2**32 - 1),
       exclude_count=st.integers(0, 3))
def test_strict_new_ensemble_invariants(locations, request, seed, exclude_count):
    """A strict ensemble is E distinct writable bookies, none excluded or in the default fault
    domain, and its adherence is the policy's own verdict on it."""
    min_zones, desired, ensemble_size, write_quorum = request
    policy = build(locations, minNumZonesPerWriteQuorum=min_zones, desiredNumZonesPerWriteQuorum=desired)
    exclude = set(sorted(locations)[:exclude_count])
    try:
        result = policy.new_ensemble(ensemble_size, write_quorum, 2, None, exclude, rng=random.Random(seed))
    except NotEnoughBookiesError:
        return
    assert len(result.ensemble) == ensemble_size == len(set(result.ensemble))
    for bookie in result.ensemble:
        assert bookie in policy.known and bookie not in exclude
        assert policy.known[bookie] != DEFAULT_FD
    assert result.adherence is policy.is_ensemble_adhering(result.ensemble, write_quorum, 2)
    again = policy.new_ensemble(ensemble_size, write_quorum, 2, None, exclude, rng=random.Random(seed))
    assert again == result


@given(zones=st.integers(1, 4), request=strict_requests(), seed=st.integers(0, 2**32 - 1))
def test_enough_zones_and_upgrade_domains_always_meet_strict(zones, request, seed):
    """With 2D-1 zones that each hold E upgrade domains, strict placement always meets strict."""
    min_zones, desired, ensemble_size, write_quorum = request
    d = min(write_quorum, desired)
    locations = {f"z{z}u{u}:3181": f"/zone{z}/ud{u}"
                 for z in range(2 * d - 1 + zones) for u in range(ensemble_size)}
    policy = build(locations, minNumZonesPerWriteQuorum=min_zones, desiredNumZonesPerWriteQuorum=desired)
    result = policy.new_ensemble(ensemble_size, write_quorum, 2, rng=random.Random(seed))
    assert result.adherence is Adherence.MEETS_STRICT
    assert result.explain["fallbacks"] == []


@given(locations=clusters(), ensemble_size=st.integers(0, 8), seed=st.integers(0, 2**32 - 1),
       exclude_count=st.integers(0, 4))
def test_non_strict_fails_exactly_when_too_few_bookies(locations, ensemble_size, seed, exclude_count):
    """Non-strict placement succeeds iff E writable bookies remain after exclusions."""
    policy = build(locations, enforceStrictZoneawarePlacement="false")
    exclude = set(sorted(locations)[-exclude_count:]) if exclude_count else set()
    write_quorum = max(1, ensemble_size)
    available = len(set(locations) - exclude)
    if available < ensemble_size:
        try:
            policy.new_ensemble(ensemble_size, write_quorum, 1, None, exclude, rng=random.Random(seed))
        except NotEnoughBookiesError:
            return
        raise AssertionError("expected NotEnoughBookiesError")
    result = policy.new_ensemble(ensemble_size, write_quorum, 1, None, exclude, rng=random.Random(seed))
    assert len(result.ensemble) == ensemble_size == len(set(result.ensemble))
    assert not set(result.ensemble) & exclude


@given(locations=clusters(), request=strict_requests(), seed=st.integers(0, 2**32 - 1),
       strict=st.booleans(), slot=st.integers(0, 9))
def test_replace_keeps_the_rest_of_the_ensemble(locations, request, seed, strict, slot):
    """A replacement is a writable bookie outside the current ensemble, put in the replaced slot."""
    min_zones, desired, ensemble_size, write_quorum = request
    assume(len(locations) > ensemble_size)
    conf = {"minNumZonesPerWriteQuorum": min_zones, "desiredNumZonesPerWriteQuorum": desired,
            "enforceStrictZoneawarePlacement": str(strict).lower()}
    policy = build(locations, **conf)
    current = sorted(locations)[:ensemble_size]
    victim = current[slot % ensemble_size]
    try:
        result = policy.replace_bookie(ensemble_size, write_quorum, 2, None, current, victim,
                                       rng=random.Random(seed))
    except NotEnoughBookiesError:
        return
    assert result.bookie in policy.known and result.bookie not in current
    if strict:
        assert policy.known[result.bookie] != DEFAULT_FD
    expected = list(current)
    expected[current.index(victim)] = result.bookie
    assert result.ensemble == expected
    assert result.adherence is policy.is_ensemble_adhering(expected, write_quorum, 2)


membership_steps = st.lists(
    st.tuples(st.sampled_from(["change", "move"]), st.sets(st.integers(0, 9)), st.integers(0, 4)),
    max_size=8)


@given(steps=membership_steps, seed=st.integers(0, 2**32 - 1))
def test_membership_changes_keep_the_index_consistent(steps, seed):
    """After any sequence of joins, departures and rack moves the zone index matches the cluster."""
    mapping = {f"b{i}:3181": f"/zone{i % 3}/ud{i % 2}" for i in range(10)}
    clock_now = [0.0]
    policy = create_policy({"ensemblePlacementPolicy": "zoneaware", "networkTopologyStabilizePeriodSeconds": 5},
                           resolver=mapping, clock=lambda: clock_now[0])
    for kind, members, value in steps:
        clock_now[0] += 1
        if kind == "change":
            policy.on_cluster_changed([f"b{i}:3181" for i in sorted(members)], [])
        else:
            moved = [f"b{i}:3181" for i in sorted(members)]
            for bookie in moved:
                mapping[bookie] = f"/zone{value}/ud{value % 2}"
            policy.on_bookie_rack_change(moved)
        policy.check_invariants()
        assert set(policy.pending_leaves()).isdisjoint(policy.known)
        try:
            result = policy.new_ensemble(3, 3, 2, rng=random.Random(seed))
        except NotEnoughBookiesError:
            continue
        usable = set(policy.known) | set(policy.pending_leaves())
        assert set(result.ensemble) <= usable
