"""The placement core's fast paths give exactly what the plain algorithms give (issue 6).

Each shortcut taken for speed is checked against the straightforward computation it replaces: the
same values, the same answers and, for random picks, the same draws in the same order (the
generator's state afterwards is compared too), so decisions stay byte-identical.
"""

from __future__ import annotations

import itertools
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from policies.api import Adherence
from policies.coverage import CoverageEnsemble
from policies.rack_weights import RackWeights, _kth_without
from policies.selection import WeightedSelector, capped_probabilities, lazy_shuffle, pick_uniform
from policies.topology import NetworkTopology

from .conftest import build_policy
from .test_rack_weights import WEIGHTS, make_index
from .test_regionaware_support import make_policy as make_region_policy

# -- order statistics --------------------------------------------------------------------------------


@given(st.lists(st.integers(0, 6), min_size=1, max_size=30), st.data())
def test_kth_without_is_the_kth_of_the_difference(values, data):
    """The k-th smallest of a multiset minus a sub-multiset, for every k, duplicates included."""
    values.sort()
    removed = data.draw(st.lists(st.integers(0, len(values) - 1), unique=True, max_size=len(values) - 1))
    out = sorted(values[i] for i in removed)
    rest = sorted(v for i, v in enumerate(values) if i not in set(removed))
    assert [_kth_without(values, out, k) for k in range(len(rest))] == rest


@settings(max_examples=60)
@given(st.lists(st.integers(1, 6), min_size=2, max_size=9), st.data())
def test_scopes_excluding_racks_keep_the_plain_cap_and_zero_mass(sizes, data):
    """Cap and zero-weight mass of "every rack but E", from the sorted remaining weights."""
    flat, flat_racks, ranges = make_index(sizes)
    weights = {b: data.draw(st.sampled_from(WEIGHTS)) for b in flat}
    multiple = data.draw(st.sampled_from([0, 1, 3]))
    sampler = RackWeights((flat, flat_racks, ranges), weights, multiple)
    racks = sorted(ranges)
    excluded = tuple(sorted(data.draw(st.sets(st.sampled_from(racks), max_size=len(racks)))))
    scope = sampler.scope_excluding(excluded)
    rest = sorted(weights[b] for b, r in zip(flat, flat_racks) if r not in excluded)
    if not rest:
        assert scope is None
        return
    n = len(rest)
    _, _, cap, zero_mass, count = tuple.__iter__(scope)
    assert count == n
    if sum(rest) == 0:
        assert (cap, zero_mass) == (float("inf"), 1.0)
        return
    smallest = next(w for w in rest if w > 0)
    median = rest[n // 2] if n % 2 else (rest[n // 2 - 1] + rest[n // 2]) / 2.0
    expected_cap = multiple * median if multiple > 0 and median > 0 else float("inf")
    assert cap == expected_cap
    assert zero_mass == min(smallest, expected_cap)


def test_scope_chains_are_the_scopes_of_the_racks_used_so_far():
    """`scope_after` walks to the very scope `scope_excluding` builds for the racks used so far."""
    flat, flat_racks, ranges = make_index([3, 2, 4, 1, 3])
    rng = random.Random(7)
    sampler = RackWeights((flat, flat_racks, ranges), {b: rng.choice(WEIGHTS) for b in flat}, 3)
    for order in itertools.permutations(sorted(ranges), 3):
        scope = sampler.scope_excluding(())
        used: list[str] = []
        for rack in order:
            used.append(rack)
            scope = sampler.scope_after(scope, rack, used)
            assert scope is sampler.scope_excluding(tuple(sorted(used)))


# -- selection ---------------------------------------------------------------------------------------


def test_uniform_picks_walk_the_same_shuffle():
    """`pick_uniform` returns the first acceptable member of `lazy_shuffle` and leaves the generator in
    the same state, for every number of rejected members (0 to all)."""
    population = [f"b{i}" for i in range(13)]
    for seed in range(400):
        rejected = set(random.Random(seed + 10_000).sample(population, seed % 14))
        ours, theirs = random.Random(seed), random.Random(seed)
        picked = pick_uniform(ours, population, lambda b: b not in rejected)
        walked = next((b for b in lazy_shuffle(theirs, population) if b not in rejected), None)
        assert picked == walked
        assert ours.getstate() == theirs.getstate()


@given(st.lists(st.sampled_from(WEIGHTS), min_size=1, max_size=40), st.sampled_from([0, 1, 3]))
def test_selector_masses_and_running_sums_are_the_plain_loops(weights, multiple):
    """Capped masses and their running sums, compared with the explicit loops they replace."""
    total = sum(weights)
    masses = capped_probabilities(weights, multiple)
    if total:
        ordered = sorted(weights)
        n = len(ordered)
        median = float(ordered[n // 2]) if n % 2 else (ordered[n // 2 - 1] + ordered[n // 2]) / 2.0
        cap = multiple * (median / total)
        min_p = next(w for w in ordered if w > 0) / total
        expected = []
        for w in weights:
            p = w / total if w > 0 else min_p
            if cap > 0 and p > cap:
                p = cap
            expected.append(p)
        assert masses == expected
    population = [f"b{i}" for i in range(len(weights))]
    selector = WeightedSelector(population, dict(zip(population, weights)), multiple)
    running, sums = 0.0, []
    for p in masses:
        running += p
        sums.append(running)
    assert selector._cumulative == sums and selector._total == running


# -- topology and coverage ---------------------------------------------------------------------------


def test_leaf_views_iterate_as_they_index():
    topology = NetworkTopology()
    for i in range(20):
        topology.add(f"bk{i:02d}", f"/r{i % 4}")
    for scope in ("/", "/r1", "~/r1", "~/r0,/r2", "~/r3,/r1,/r2", "/r1/bk05", "/nowhere"):
        view = topology.leaves(scope)
        assert list(view) == [view[i] for i in range(len(view))]
        assert topology.leaves(scope) is view                      # kept until the tree changes
    view = topology.leaves("/r1")
    topology.add("bk99", "/r1")
    assert "bk99" not in view and "bk99" in topology.leaves("/r1")  # a change gives fresh views


@given(st.integers(1, 7), st.integers(1, 7), st.booleans())
def test_coverage_windows_are_the_write_sets_holding_each_position(size, write_quorum, durability):
    ensemble = CoverageEnsemble(size, write_quorum, 2, 2, lambda b: b, regions=("a", "b"),
                                min_durability=2 if durability else 0)
    for position in range(size + 2):
        if size == write_quorum and durability:
            expected = [0]
        else:
            expected = [(i + size) % size for i in range(position - write_quorum + 1, position + 1)]
        assert list(ensemble._indices(position)) == expected
        assert list(ensemble.copy()._indices(position)) == expected


# -- adherence ---------------------------------------------------------------------------------------


def windowed_rack_adherence(policy, ensemble, write_quorum):
    """§6.1 as written: every write set (wrapping) of known members spans min(WQ, m) racks and, under
    enforcement, holds no default-rack member."""
    size = len(ensemble)
    if size == 0:
        return Adherence.FAIL
    min_racks = min(write_quorum, policy.settings.min_racks_per_write_quorum)
    default = policy.default_location if policy.settings.enforce_min_racks else None
    for i in range(size):
        racks = {policy.known.get(ensemble[(i + j) % size]) for j in range(write_quorum)} - {None}
        if len(racks) < min_racks or (default is not None and default in racks):
            return Adherence.FAIL
    return Adherence.MEETS_STRICT


RACKS = {"/r1": ["a1", "a2"], "/r2": ["b1", "b2"], "/r3": ["c1"], "/default-rack": ["d1"]}
MEMBERS = ["a1", "a2", "b1", "b2", "c1", "d1", "gone"]


@settings(max_examples=300)
@given(st.lists(st.sampled_from(MEMBERS), max_size=6), st.integers(0, 8), st.integers(1, 4), st.booleans())
def test_rack_adherence_matches_the_windowed_rule(ensemble, write_quorum, min_racks, enforce):
    """Duplicates, unknown members, the default rack and WQ of 0 or above E included."""
    policy = build_policy(RACKS, minNumRacksPerWriteQuorum=min_racks,
                          enforceMinNumRacksPerWriteQuorum=str(enforce).lower())
    assert policy.is_ensemble_adhering(ensemble, write_quorum, 1) == \
        windowed_rack_adherence(policy, ensemble, write_quorum)


REGIONS = {"a-0:3181": "/a/r0", "a-1:3181": "/a/r1", "b-0:3181": "/b/r0", "b-1:3181": "/b/r0",
           "c-0:3181": "/c/r0", "u-0:3181": "/default-region/default-rack"}
REGION_MEMBERS = [*REGIONS, "gone:3181"]


@settings(max_examples=300)
@given(st.lists(st.sampled_from(REGION_MEMBERS), max_size=6), st.integers(0, 7), st.integers(1, 4),
       st.sampled_from([0, 2, 3]), st.booleans())
def test_region_adherence_matches_the_write_set_deficits(ensemble, write_quorum, ack_quorum, min_regions,
                                                         enforce):
    """The region-aware answer equals the one derived from `_deficits` (which repairs use)."""
    conf = {"enforceMinNumRacksPerWriteQuorum": str(enforce).lower()}
    if min_regions:
        conf.update(reppRegionsToWrite="a;b;c", reppMinimumRegionsForDurability=min_regions)
    policy, _ = make_region_policy(REGIONS, **conf)
    expected = policy._adherence_of(policy._deficits(ensemble, write_quorum, ack_quorum) if ensemble else [])
    assert policy.is_ensemble_adhering(ensemble, write_quorum, ack_quorum) == expected
