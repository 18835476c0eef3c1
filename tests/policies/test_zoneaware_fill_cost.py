"""Strict zone-aware placement with wide write quorums: the O(W)-per-slot helpers of `fill_position`
choose exactly what the O(W x W)-per-slot ones did (same bookies, same explanations, same draws).

The reference is the old code, kept here: `rings` built a tuple per ring, and `candidates` (its
shared-UD rule) and `zones_to_keep_min` built every write quorum around the slot
(`_quorums_around`), which made a strict `new_ensemble` cost O(E x W x W).
"""

from __future__ import annotations

import hashlib
import random

import pytest

from policies import NotEnoughBookiesError, create_policy, zone_fill
from policies.zone_fill import Fill, zones_to_keep_min
from policies.zone_rings import rings, single_domain_zones

DEFAULT_FD = "/default-zone/default-upgradedomain"


# -- the old helpers (reference) --------------------------------------------------------------------


def old_rings(size, position, write_quorum):
    built = []
    slots = []
    for offset in range(write_quorum):
        if offset:
            for slot in ((position - offset) % size, (position + offset) % size):
                if slot != position and slot not in slots:
                    slots.append(slot)
        built.append(tuple(slots))
    return tuple(built)


def old_quorums_around(size, position, write_quorum):
    quorums = []
    for start in range(-(write_quorum - 1), 1):
        quorums.append([(position + start + j) % size for j in range(write_quorum)
                        if (position + start + j) % size != position])
    return quorums


def old_single_domain_zones(slots, position, write_quorum):
    single = set()
    for quorum in old_quorums_around(len(slots), position, write_quorum):
        per_zone = {}
        for slot in quorum:
            located = slots[slot]
            if located is not None:
                per_zone.setdefault(located[0], set()).add(located[1])
        for zone, domains in per_zone.items():
            if len(domains) == 1:
                single.add((zone, next(iter(domains))))
    return single


def old_zones_to_keep_min(fill, position, write_quorum):
    zones = set()
    for quorum in old_quorums_around(len(fill.slots), position, write_quorum):
        in_quorum = {fill.slots[s][0] for s in quorum if fill.slots[s] is not None}
        if len(in_quorum) <= fill.min_zones - 1:
            zones |= in_quorum
    return zones


def with_old_helpers(call):
    """`call()` with the old helpers in place of the new ones."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(zone_fill, "rings", old_rings)
        patch.setattr(zone_fill, "single_domain_zones", old_single_domain_zones)
        patch.setattr(zone_fill, "zones_to_keep_min", old_zones_to_keep_min)
        return call()


# -- the helpers one by one -----------------------------------------------------------------------


def random_slots(rng, size):
    return [None if rng.random() < 0.2 else (rng.choice("abcd"), rng.choice("xyz")) for _ in range(size)]


def test_rings_are_the_old_tuples():
    """`rings(size, position, W)[n]` is the old n-th ring for every n, and `[-1]` the last one (tuples
    below `_LAZY_RINGS_FROM`, `_Rings` from there on)."""
    for size in range(1, 22):
        for write_quorum in range(1, size + 4):
            for position in range(size):
                old = old_rings(size, position, write_quorum)
                new = rings(size, position, write_quorum)
                assert len(new) == len(old)
                assert [new[n] for n in range(len(old))] == list(old)
                assert new[-1] == old[-1]


def test_single_domain_zones_are_the_old_ones():
    """`single_domain_zones` (O(W)) finds the (zone, UD)s the quorum-by-quorum scan found, W 1..E+3."""
    rng = random.Random(2718)
    for _ in range(400):
        size = rng.randint(1, 24)
        slots = random_slots(rng, size)
        position = rng.randrange(size)
        if rng.random() < 0.7:
            slots[position] = None   # the slot being filled
        for write_quorum in range(1, size + 4):
            assert single_domain_zones(slots, position, write_quorum) == old_single_domain_zones(
                slots, position, write_quorum), (slots, position, write_quorum)


def test_zones_to_keep_min_are_the_old_ones():
    """`zones_to_keep_min` (O(W)) avoids the zones the quorum-by-quorum scan avoided, W 1..E+3."""
    rng = random.Random(1414)
    for min_zones in (1, 2, 3, 4):
        policy = create_policy({"ensemblePlacementPolicy": "zoneaware", "minNumZonesPerWriteQuorum": min_zones,
                                "desiredNumZonesPerWriteQuorum": 4}, resolver={})
        for _ in range(150):
            size = rng.randint(1, 24)
            slots = random_slots(rng, size)
            position = rng.randrange(size)
            fill = Fill(policy._live_index(), [None] * size, slots, set(), rng, min_zones=policy.min_zones)
            for write_quorum in range(1, size + 4):
                assert zones_to_keep_min(fill, position, write_quorum) == old_zones_to_keep_min(
                    fill, position, write_quorum), (slots, position, write_quorum)


# -- whole placements -----------------------------------------------------------------------------


def random_cluster(rng):
    """2-8 zones of 1-3 upgrade domains of 1-4 bookies, maybe some default-domain bookies."""
    locations = {f"z{z}u{u}b{k}:3181": f"/zone{z}/ud{u}"
                 for z in range(rng.randint(2, 8)) for u in range(rng.randint(1, 3)) for k in range(rng.randint(1, 4))}
    for k in range(rng.choice([0, 0, 2])):
        locations[f"default{k}:3181"] = DEFAULT_FD
    return locations


def outcome(locations, conf, seed, place):
    """What `place(policy, rng)` returns on a fresh policy over `locations`, or the error it raises,
    with the state of its generator afterwards (the same state: the same draws)."""
    policy = create_policy(conf, resolver=locations)
    policy.on_cluster_changed(sorted(locations), [])
    rng = random.Random(seed)
    try:
        result = place(policy, rng)
    except NotEnoughBookiesError as exc:
        return ("error", str(exc), exc.explain, rng.getstate())
    return ("ok", result.ensemble, result.adherence, result.bookie, result.explain, rng.getstate())


def test_strict_placements_and_replacements_are_the_old_ones():
    """Over random clusters, settings and sizes (W up to 24, E up to 4W), strict `new_ensemble` and
    `replace_bookie` return what the old helpers returned, with the same draws; the shared-UD,
    fewer-zones and minimum-zones fallbacks are among the cases."""
    rng = random.Random(4096)
    fallbacks = set()
    for _ in range(250):
        locations = random_cluster(rng)
        min_zones = rng.randint(1, 3)
        conf = {"ensemblePlacementPolicy": "zoneaware", "minNumZonesPerWriteQuorum": min_zones,
                "desiredNumZonesPerWriteQuorum": rng.randint(min_zones, 5)}
        write_quorum = rng.randint(min_zones + 1, 24)
        ensemble_size = write_quorum * rng.randint(1, 4)
        exclude = set(rng.sample(sorted(locations), rng.randint(0, 2)))
        seed = rng.randrange(2**32)

        def place(policy, r):
            return policy.new_ensemble(ensemble_size, write_quorum, 2, None, exclude, rng=r)

        placed = outcome(locations, conf, seed, place)
        assert placed == with_old_helpers(lambda: outcome(locations, conf, seed, place))
        if placed[0] != "ok":
            continue
        for note in placed[4]["fallbacks"]:
            fallbacks.update(kind for kind in ("shared upgrade domain", "could not spread", "fell back")
                             if kind in note)
        current = placed[1]
        victim = rng.choice(current)

        def replace(policy, r):
            return policy.replace_bookie(ensemble_size, write_quorum, 2, None, current, victim, exclude, rng=r)

        replaced = outcome(locations, conf, seed, replace)
        assert replaced == with_old_helpers(lambda: outcome(locations, conf, seed, replace))
    assert fallbacks == {"shared upgrade domain", "could not spread", "fell back"}


def forty_zones():
    return {f"z{z}u{u}b{k}:3181": f"/zone{z}/ud{u}" for z in range(40) for u in range(4) for k in range(4)}


def test_a_256_wide_strict_ensemble_is_the_one_the_old_helpers_chose():
    """E = W = 256 on 40 zones of 4 upgrade domains (the shared-UD rule fills most slots): the
    ensemble the old helpers chose (digest taken with them), its adherence and its explanation."""
    locations = forty_zones()
    policy = create_policy({"ensemblePlacementPolicy": "zoneaware"}, resolver=locations)
    policy.on_cluster_changed(sorted(locations), [])
    rng = random.Random(1)
    result = policy.new_ensemble(256, 256, 2, rng=rng)
    digest = hashlib.sha256("\n".join(result.ensemble).encode()).hexdigest()
    assert len(set(result.ensemble)) == 256
    assert (digest, result.adherence.name, len(result.explain["fallbacks"]), rng.random()) == EXPECTED_256


# Taken with the old helpers (commit a8c366c): sha256 of the ensemble, one per line; its adherence; the
# number of slots that needed a fallback; the generator's next draw afterwards.
EXPECTED_256 = ("55d12eca0d6bf585bb35425f3ef79fb90c37afcba25a2becd14f2aaa3db1b3eb", "MEETS_STRICT", 96,
                0.6178068800115557)
