"""Adherence over sliding write sets equals the write-set-by-write-set definition.

The rack-aware, zone-aware and region-aware adherence checks keep per-location counts as the write set
slides along the ensemble (O(E)) from a write quorum of `_SLIDING_ADHERENCE_FROM` up. Each test below
compares a policy's answer with a reference written straight from the spec (build every write set
i .. i+W-1 mod E, judge it), over many random ensembles from fixed seeds: racks that repeat, unknown
bookies, default-rack members, repeated members, W from 1 to past E.
"""

from __future__ import annotations

import random

from policies import Adherence, create_policy
from policies.rackaware import _write_sets_span

from .conftest import build_policy

STRICT, FAIL = Adherence.MEETS_STRICT, Adherence.FAIL


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
    """`size` members of `pool`, distinct when the pool allows and a coin says so, else with repeats."""
    if size <= len(pool) and rng.random() < 0.5:
        return rng.sample(pool, size)
    return [rng.choice(pool) for _ in range(size)]


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
