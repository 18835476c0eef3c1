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


def _located(location):
    """(zone, UD) of `/zone/ud`; the default fault domain is (`/default-zone`, `/default-upgradedomain`)."""
    zone, ud = location.split("/")[1:]
    return "/" + zone, "/" + ud


def fill_candidates(locations, slots, index, excluded, write_quorum, desired, min_zones):
    """Spec §3.4 restated over plain sets: the bookies `fill(index)` may choose (empty: NotEnough).

    `slots[i]` is the bookie in slot i or None; slot `index` is ignored."""
    size = len(slots)
    where = {b: _located(loc) for b, loc in locations.items()}
    zone = {b: z for b, (z, _) in where.items()}

    def filled(offsets):
        return [slots[(index + o) % size] for o in offsets
                if (index + o) % size != index and slots[(index + o) % size] is not None]

    def around(n):
        return filled([o for k in range(1, n + 1) for o in (-k, k)])

    quorums = [filled(range(start, start + write_quorum)) for start in range(-(write_quorum - 1), 1)]

    def candidates(zones):
        base = {b for b in where if zone[b] not in zones and b not in excluded and locations[b] != DEFAULT_FD}
        if not base:
            return set()
        used = {where[b] for b in around(write_quorum - 1)}
        chosen = {b for b in base if where[b] not in used}
        if chosen:
            return chosen
        single = set()
        for members in quorums:
            for z in {zone[b] for b in members}:
                uds = {where[b][1] for b in members if zone[b] == z}
                if len(uds) == 1:
                    single.add((z, uds.pop()))
        return {b for b in base if where[b] not in single}

    for n in range(desired - 1, min_zones - 2, -1):
        found = candidates({zone[b] for b in around(max(n, 0))})
        if found:
            return found
    keep = set()
    for members in quorums:
        zones = {zone[b] for b in members}
        if len(zones) <= min_zones - 1:
            keep |= zones
    return candidates(keep)


@given(locations=clusters(), request=strict_requests(), seed=st.integers(0, 2**32 - 1),
       exclude_count=st.integers(0, 3), weighted=st.booleans())
def test_strict_new_ensemble_fills_each_slot_from_the_spec_candidates(locations, request, seed, exclude_count,
                                                                     weighted):
    """Each slot of a strict ensemble holds a bookie that `fill(index)` (§3.4) may choose given the
    slots before it; every bookie in the default fault domain is excluded."""
    min_zones, desired, ensemble_size, write_quorum = request
    policy = build(locations, minNumZonesPerWriteQuorum=min_zones, desiredNumZonesPerWriteQuorum=desired,
                   diskWeightBasedPlacementEnabled=str(weighted).lower())
    exclude = set(sorted(locations)[:exclude_count])
    try:
        result = policy.new_ensemble(ensemble_size, write_quorum, 2, None, exclude, rng=random.Random(seed))
    except NotEnoughBookiesError:
        return
    slots = [None] * ensemble_size
    for index, bookie in enumerate(result.ensemble):
        allowed = fill_candidates(locations, slots, index, exclude | set(result.ensemble[:index]), write_quorum,
                                  min(write_quorum, desired), min_zones)
        assert bookie in allowed, (index, bookie, sorted(allowed))
        slots[index] = bookie


@given(locations=clusters(), request=strict_requests(), seed=st.integers(0, 2**32 - 1),
       slot=st.integers(0, 9), exclude_count=st.integers(0, 3))
def test_strict_replacement_is_a_spec_candidate_and_fails_only_without_one(locations, request, seed, slot,
                                                                           exclude_count):
    """Strict `replace_bookie` (§3.5): `fill(index)` over the current ensemble, excluding the caller's
    exclusions, the default fault domain and the ensemble; NotEnough exactly when no candidate exists."""
    min_zones, desired, ensemble_size, write_quorum = request
    names = sorted(locations)
    assume(len(names) >= ensemble_size)
    policy = build(locations, minNumZonesPerWriteQuorum=min_zones, desiredNumZonesPerWriteQuorum=desired)
    current = random.Random(seed).sample(names, ensemble_size)
    position = slot % ensemble_size
    exclude = set(names[-exclude_count:]) if exclude_count else set()
    allowed = fill_candidates(locations, current, position, exclude | set(current), write_quorum,
                              min(write_quorum, desired), min_zones)
    try:
        result = policy.replace_bookie(ensemble_size, write_quorum, 2, None, current, current[position], exclude,
                                       rng=random.Random(seed))
    except NotEnoughBookiesError:
        assert not allowed
        return
    assert result.bookie in allowed, (result.bookie, sorted(allowed))
