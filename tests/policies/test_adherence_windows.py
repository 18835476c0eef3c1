"""Adherence over sliding write sets equals the write-set-by-write-set definition.

The rack-aware, zone-aware and region-aware adherence checks keep per-location counts as the write set
slides along the ensemble (O(E)) from a write quorum of `SLIDING_ADHERENCE_FROM` up. Each test below
compares a policy's answer with a reference written straight from the spec (build every write set
i .. i+W-1 mod E, judge it), over many random ensembles from fixed seeds: racks that repeat, unknown
bookies, default-rack members, repeated members, W from 1 to past E.
"""

from __future__ import annotations

import random
from collections import Counter

from policies import Adherence, create_policy
from policies.rack_adherence import _write_sets_span
from policies.zoneaware import UNRESOLVED, _count_short_write_sets, _slide_zone_adherence

from .conftest import ManualClock, build_policy

STRICT, SOFT, FAIL = Adherence.MEETS_STRICT, Adherence.MEETS_SOFT, Adherence.FAIL


def write_set(values, start, write_quorum):
    """Members of write set `start`: positions start .. start+W-1, wrapping (repeats when W > E)."""
    return [values[(start + j) % len(values)] for j in range(write_quorum)]


# -- rack-aware (spec bookkeeper-rackaware.md §6.1) -----------------------------------------------


def reference_rack_adherence(policy, ensemble, write_quorum):
    if not ensemble:
        return FAIL
    min_racks = min(write_quorum, policy.settings.min_racks_per_write_quorum)
    default = policy.default_location if policy.settings.enforce_min_racks else None
    for start in range(len(ensemble)):
        racks = {policy.known.get(b) for b in write_set(ensemble, start, write_quorum)}
        racks.discard(None)
        if len(racks) < min_racks or (default is not None and default in racks):
            return FAIL
    return STRICT


def rack_policy(rng):
    """2-5 racks of 1-4 bookies, a few unmapped bookies (default rack), random rack settings."""
    racks = {f"/r{r}": [f"b{r}-{i}:3181" for i in range(rng.randint(1, 4))] for r in range(rng.randint(2, 5))}
    unmapped = [f"u{i}:3181" for i in range(rng.randint(0, 2))]
    policy = build_policy(racks, unmapped=unmapped, minNumRacksPerWriteQuorum=rng.randint(1, 4),
                          enforceMinNumRacksPerWriteQuorum=rng.random() < 0.5)
    pool = sorted(b for members in racks.values() for b in members) + unmapped + ["ghost:3181"]
    return policy, pool


def random_ensemble(rng, pool, size):
    """`size` members of `pool`, distinct when the pool allows and a coin says so, else with repeats;
    sometimes sorted, so that members of one location sit together (write sets short of locations)."""
    if size <= len(pool) and rng.random() < 0.5:
        ensemble = rng.sample(pool, size)
    else:
        ensemble = [rng.choice(pool) for _ in range(size)]
    return sorted(ensemble) if rng.random() < 0.3 else ensemble


def test_rack_adherence_equals_the_write_set_definition():
    """RackawarePolicyImpl.is_ensemble_adhering answers what judging every write set answers."""
    rng = random.Random(20240611)
    answers = set()
    for _ in range(600):
        policy, pool = rack_policy(rng)
        size = rng.randint(1, 40)
        ensemble = random_ensemble(rng, pool, size)
        for write_quorum in {1, 2, 3, rng.randint(1, size + 3), rng.randint(8, 48), size, size + 1}:
            got = policy.is_ensemble_adhering(ensemble, write_quorum, 1)
            assert got == reference_rack_adherence(policy, ensemble, write_quorum), (ensemble, write_quorum)
            answers.add(got)
    assert answers == {STRICT, FAIL}


def test_rack_write_sets_span_equals_the_write_set_definition_for_every_write_quorum():
    """`_write_sets_span` (the O(E) path) judges like building every write set, for 1 <= W <= E + 3."""
    rng = random.Random(7)
    for _ in range(800):
        size = rng.randint(1, 30)
        racks = [rng.choice(["/a", "/b", "/c", "/d", "/default-rack", None]) for _ in range(size)]
        if rng.random() < 0.5:
            racks = [rack if rack != "/default-rack" else "/a" for rack in racks]
        default = rng.choice([None, "/default-rack"])
        for write_quorum in range(1, size + 4):
            min_racks = rng.randint(0, min(write_quorum, 4))
            expected = True
            for start in range(size):
                members = set(write_set(racks, start, write_quorum))
                members.discard(None)
                if len(members) < min_racks or (default is not None and default in members):
                    expected = False
                    break
            assert _write_sets_span(racks, write_quorum, min_racks, default) == expected, (racks, write_quorum)


def test_rack_adherence_of_a_1024_member_ensemble_with_shared_racks():
    """E = W = 1024 over 10 racks adheres, and one write set of W = 512 missing a rack fails."""
    racks = {f"/r{r}": [f"b{r}-{i}:3181" for i in range(103)] for r in range(10)}
    policy = build_policy(racks, minNumRacksPerWriteQuorum=3)
    ensemble = sorted(b for members in racks.values() for b in members)[:1024]
    assert policy.is_ensemble_adhering(ensemble, 1024, 2) == STRICT
    assert policy.is_ensemble_adhering(ensemble, 512, 2) == STRICT
    assert policy.is_ensemble_adhering(ensemble, 200, 2) == FAIL  # 103 members per rack: 2 racks in some
    assert reference_rack_adherence(policy, ensemble, 200) == FAIL


# -- zone-aware (spec bookkeeper-region-zone-isolation.md §3.6) --------------------------------------


def reference_zone_adherence(policy, ensemble, write_quorum):
    size = len(ensemble)
    if size == 0 or write_quorum < 1 or size % write_quorum or write_quorum <= policy.min_zones:
        return FAIL
    located = [policy.zone_of(b) for b in ensemble]
    if UNRESOLVED in located:
        return FAIL
    result = STRICT
    for start in range(size):
        quorum = write_set(located, start, write_quorum)
        zones = Counter(zone for zone, _ in quorum)
        domains = Counter(zone for zone, _ in set(quorum))
        if len(zones) < policy.min_zones or any(zones[z] > 1 and domains[z] < 2 for z in zones):
            return FAIL
        if len(zones) < min(write_quorum, policy.desired_zones):
            result = SOFT
    return result


def zone_policy(rng):
    """2-6 zones of 1-3 upgrade domains of 1-3 bookies, some unmapped; random zone settings."""
    locations = {f"z{z}u{u}b{k}:3181": f"/zone{z}/ud{u}"
                 for z in range(rng.randint(2, 6)) for u in range(rng.randint(1, 3)) for k in range(rng.randint(1, 3))}
    min_zones = rng.randint(1, 3)
    policy = create_policy({"ensemblePlacementPolicy": "zoneaware", "minNumZonesPerWriteQuorum": min_zones,
                            "desiredNumZonesPerWriteQuorum": rng.randint(min_zones, 6)}, resolver=locations)
    policy.on_cluster_changed(sorted(locations) + ["unmapped:3181"], [])
    pool = sorted(locations)
    if rng.random() < 0.2:
        pool.append("unmapped:3181")
    return policy, pool


def test_zone_adherence_equals_the_write_set_definition():
    """ZoneawarePolicy.is_ensemble_adhering answers what judging every write quorum answers."""
    rng = random.Random(31337)
    answers = set()
    for _ in range(600):
        policy, pool = zone_policy(rng)
        write_quorum = rng.choice([rng.randint(2, 7), rng.randint(8, 24)])
        size = write_quorum * rng.randint(1, 4)
        ensemble = random_ensemble(rng, pool, size)
        for quorum in (write_quorum, rng.randint(1, size + 2)):
            got = policy.is_ensemble_adhering(ensemble, quorum, 1)
            assert got == reference_zone_adherence(policy, ensemble, quorum), (ensemble, quorum)
            answers.add(got)
    assert answers == {STRICT, SOFT, FAIL}


def test_zone_sliding_adherence_equals_the_write_set_definition_for_every_write_quorum():
    """`_slide_zone_adherence` (the O(E) path) judges like building every write set, for 1 <= W < E."""
    rng = random.Random(99)
    answers = set()
    for _ in range(500):
        size = rng.randint(2, 30)
        located = [(rng.choice("abcd"), rng.choice("xyz")) for _ in range(size)]
        for write_quorum in range(1, size):
            min_zones = rng.randint(0, 3)
            desired = rng.randint(min_zones, 5)
            expected = STRICT
            for start in range(size):
                quorum = write_set(located, start, write_quorum)
                zones = Counter(zone for zone, _ in quorum)
                domains = Counter(zone for zone, _ in set(quorum))
                if len(zones) < min_zones or any(zones[z] > 1 and domains[z] < 2 for z in zones):
                    expected = FAIL
                    break
                if len(zones) < desired:
                    expected = SOFT
            got = _slide_zone_adherence(located, write_quorum, min_zones, desired)
            assert got == expected, (located, write_quorum, min_zones, desired)
            answers.add(got)
    assert answers == {STRICT, SOFT, FAIL}


def test_zone_count_of_short_write_sets_equals_the_write_set_definition():
    """`_count_short_write_sets` (relaxation_fix's measure, O(E)) counts like building every write set,
    for 1 <= W <= E + 2, and `_soft_quorums` agrees with it on a policy's ensembles."""
    rng = random.Random(4242)
    for _ in range(500):
        size = rng.randint(1, 30)
        zones = [rng.choice(["/z1", "/z2", "/z3", "/z4", "/default-zone"]) for _ in range(size)]
        for write_quorum in range(1, size + 3):
            desired = rng.randint(1, 5)
            expected = sum(1 for start in range(size) if len(set(write_set(zones, start, write_quorum))) < desired)
            assert _count_short_write_sets(zones, write_quorum, desired) == expected, (zones, write_quorum)
    for _ in range(200):
        policy, pool = zone_policy(rng)
        size = rng.randint(1, 40)
        ensemble = random_ensemble(rng, pool, size)
        write_quorum = rng.randint(1, size + 2)
        zones = [policy.zone_of(b)[0] for b in ensemble]
        desired = min(write_quorum, policy.desired_zones)
        expected = sum(1 for start in range(size) if len(set(write_set(zones, start, write_quorum))) < desired)
        assert policy._soft_quorums(ensemble, write_quorum) == expected


def test_zone_adherence_of_a_1024_member_ensemble():
    """E = 1024 over 40 zones of 4 upgrade domains: W = 512 and W = 64 judged as write set by write set."""
    locations = {f"z{z}u{u}b{k}:3181": f"/zone{z}/ud{u}" for z in range(40) for u in range(4) for k in range(8)}
    policy = create_policy({"ensemblePlacementPolicy": "zoneaware"}, resolver=locations)
    policy.on_cluster_changed(sorted(locations), [])
    ensemble = random.Random(5).sample(sorted(locations), 1024)
    for write_quorum in (512, 64, 1024):
        got = policy.is_ensemble_adhering(ensemble, write_quorum, 2)
        assert got == reference_zone_adherence(policy, ensemble, write_quorum)
    assert policy.is_ensemble_adhering(ensemble, 512, 2) == STRICT


# -- region-aware (spec bookkeeper-region-zone-isolation.md §2.2, `RegionawarePolicy.is_ensemble_adhering`) --


def reference_region_adherence(policy, ensemble, write_quorum, ack_quorum):
    """Rules (a)-(c) of the docstring, judged on the distinct known members of every write set."""
    if not ensemble:
        return FAIL
    settings = policy.settings
    min_regions = policy.min_regions if policy.is_durability_enforced() else 0
    populated = len({policy.region_of[b] for b in policy.known})
    result = STRICT
    for start in range(len(ensemble)):
        members = {b for b in write_set(ensemble, start, write_quorum) if b in policy.known}
        racks = {policy.known[b] for b in members}
        copies = Counter(policy.region_of[b] for b in members)
        if len(racks) < min(write_quorum, settings.min_racks_per_write_quorum):
            return FAIL
        if settings.enforce_min_racks and policy.default_location in racks:
            return FAIL
        if min_regions > 0:
            worst = sum(sorted(copies.values(), reverse=True)[:min_regions - 1])
            if len(copies) < min(min_regions, write_quorum) or worst >= ack_quorum:
                return FAIL
        elif len(copies) < min(write_quorum, settings.min_racks_per_write_quorum, max(populated, 1)):
            result = SOFT
    return result


def reference_deficits(policy, ensemble, write_quorum, ack_quorum):
    """The deficit of each write set, one set of members at a time (what `_deficits` did in O(E x W))."""
    min_regions = policy.min_regions if policy.is_durability_enforced() else 0
    soft_regions = min(write_quorum, policy.settings.min_racks_per_write_quorum,
                       max(policy._populated_regions(), 1))
    return [policy._write_set_deficit(set(write_set(ensemble, start, write_quorum)), write_quorum, ack_quorum,
                                      min_regions, soft_regions)
            for start in range(len(ensemble))]


def region_policy(rng):
    """1-4 regions of 1-3 racks of 1-3 bookies, maybe default-location bookies; random rack and
    durability settings."""
    names = ["a", "b", "c", "d"][:rng.randint(1, 4)]
    locations = {f"{g}-{r}-{k}:3181": f"/{g}/r{r}"
                 for g in names for r in range(rng.randint(1, 3)) for k in range(rng.randint(1, 3))}
    for k in range(rng.choice([0, 0, 1, 2])):
        locations[f"d{k}:3181"] = "/default-region/default-rack"
    conf = {"ensemblePlacementPolicy": "regionaware", "minNumRacksPerWriteQuorum": rng.randint(1, 4),
            "enforceMinNumRacksPerWriteQuorum": rng.random() < 0.5}
    if rng.random() < 0.5:
        conf.update(reppRegionsToWrite=";".join(names), reppMinimumRegionsForDurability=rng.randint(1, len(names)))
    policy = create_policy(conf, resolver=locations, clock=ManualClock(), features={})
    policy.on_cluster_changed(sorted(locations), [])
    return policy, sorted(locations) + ["ghost:3181"]


def test_region_adherence_and_deficits_equal_the_write_set_definition():
    """RegionawarePolicy.is_ensemble_adhering and `_deficits` answer what judging every write set
    answers, for distinct and repeated members, unknown and default-location bookies, W 1..E+3."""
    rng = random.Random(1898)
    answers = set()
    for _ in range(400):
        policy, pool = region_policy(rng)
        size = rng.randint(1, 40)
        ensemble = random_ensemble(rng, pool, size)
        for write_quorum in {1, 2, rng.randint(1, size + 3), rng.randint(8, 44), size, size + 1}:
            ack_quorum = rng.randint(1, max(write_quorum, 1))
            got = policy.is_ensemble_adhering(ensemble, write_quorum, ack_quorum)
            assert got == reference_region_adherence(policy, ensemble, write_quorum, ack_quorum), (
                ensemble, write_quorum, ack_quorum)
            answers.add(got)
            deficits = reference_deficits(policy, ensemble, write_quorum, ack_quorum)
            assert policy._deficits(ensemble, write_quorum, ack_quorum) == deficits
            position = rng.randrange(size)
            trial = list(ensemble)
            trial[position] = rng.choice(pool)
            assert policy._total_deficit(trial, position, deficits, sum(d for d, _ in deficits), write_quorum,
                                         ack_quorum) == sum(d for d, _ in reference_deficits(
                                             policy, trial, write_quorum, ack_quorum))
    assert answers == {STRICT, SOFT, FAIL}


def test_region_adherence_of_a_1024_member_ensemble():
    """E = 1024 over 4 regions of 5 racks, distinct and repeated members, W = 64, 512, 1024, with the
    durability rule on."""
    locations = {f"{g}-{r}-{k}:3181": f"/{g}/r{r}" for g in "abcd" for r in range(5) for k in range(60)}
    policy = create_policy({"ensemblePlacementPolicy": "regionaware", "reppRegionsToWrite": "a;b;c;d",
                            "reppMinimumRegionsForDurability": 2}, resolver=locations, clock=ManualClock(),
                           features={})
    policy.on_cluster_changed(sorted(locations), [])
    members = random.Random(11).sample(sorted(locations), 1024)
    for ensemble in (members, members[:512] * 2):
        for write_quorum in (64, 512, 1024):
            got = policy.is_ensemble_adhering(ensemble, write_quorum, write_quorum // 2 + 1)
            assert got == STRICT
            assert got == reference_region_adherence(policy, ensemble, write_quorum, write_quorum // 2 + 1)
