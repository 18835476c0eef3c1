"""The placement core's fast paths give exactly what the plain algorithms give.

Each shortcut taken for speed is checked against the straightforward computation it replaces: the
same values, the same answers and, for random picks, the same draws in the same order (the
generator's state afterwards is compared too), so decisions stay byte-identical.
"""

from __future__ import annotations

import bisect
import itertools
import json
import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies import BookieInfo, NotEnoughBookiesError, create_policy
from policies.api import Adherence
from policies.coverage import CoverageEnsemble
from policies.rack_weights import RackWeights, _kth_without
from policies.selection import (
    WeightedSelector,
    capped_probabilities,
    lazy_shuffle,
    pick_uniform,
    pick_uniform_view,
    pick_weighted,
)
from policies.topology import NetworkTopology
from policies.zoneaware import UNRESOLVED

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


# -- uniform picks over leaf views --------------------------------------------


def test_leaf_view_at_is_indexing():
    topology = NetworkTopology()
    for i in range(23):
        topology.add(f"bk{i:02d}", f"/r{i % 5}")
    for scope in ("/", "/r2", "~/r1", "~/r0,/r3", "~/r4,/r1,/r2"):
        view = topology.leaves(scope)
        assert [view.at(i) for i in range(len(view))] == [view[i] for i in range(len(view))]


def test_uniform_view_picks_are_the_uniform_picks_with_an_exclusion_set():
    """`pick_uniform_view(rng, view, excluded)` == `pick_uniform(rng, view, lambda b: b not in excluded)`:
    same member, same generator state, for 0 to all members excluded and views of one or more ranges."""
    topology = NetworkTopology()
    for i in range(17):
        topology.add(f"bk{i:02d}", f"/r{i % 4}")
    for scope in ("/", "/r1", "~/r2", "~/r0,/r3"):
        view = topology.leaves(scope)
        members = list(view)
        for seed in range(300):
            excluded = set(random.Random(seed + 5_000).sample(members, seed % (len(members) + 1)))
            ours, theirs = random.Random(seed), random.Random(seed)
            assert pick_uniform_view(ours, view, excluded) == pick_uniform(theirs, view, lambda b: b not in excluded)
            assert ours.getstate() == theirs.getstate()


# -- weighted draws ----------------------------------------------------------------------------------


def plain_draw(sampler, scope, rng):
    """`RackWeights._draw` as first written: the cap bisection and the zero block on every draw."""
    rows, masses, starts, ends, skip, skipped, total, _, zero_mass = scope.data
    cap = tuple.__getitem__(scope, 2)  # the scope's own cap (draws may have replaced it by "no cap")
    v = rng.random() * total
    for i in skip:
        if v >= starts[i]:
            v += masses[i]
        else:
            break
    r = bisect.bisect_right(ends, v)
    if r >= len(ends) or r in skipped:
        r, v = sampler._nearest(scope, r, v)
    u = v - starts[r]
    members, zeros, prefix, ordered = rows[r]
    zero_block = zeros * zero_mass
    if u < zero_block:
        return members[min(int(u / zero_mass), zeros - 1)]
    u -= zero_block
    n = len(ordered)
    j = n if cap == float("inf") else bisect.bisect_right(ordered, cap)
    if j == n or u < prefix[j]:
        i = bisect.bisect_right(prefix, u, zeros, j + 1) - 1
        return members[min(max(i, zeros), n - 1)]
    return members[min(j + int((u - prefix[j]) / cap), n - 1)]


@settings(max_examples=150)
@given(st.lists(st.integers(1, 5), min_size=2, max_size=7), st.data())
def test_draws_skipping_the_cap_and_the_zero_block_are_the_plain_draws(sizes, data):
    """Caps above every weight (no cap for draws), caps below some, zero weights or none: the same leaf
    for the same random numbers, in every kind of scope (whole tree, racks excluded, one rack, removed)."""
    flat, flat_racks, ranges = make_index(sizes)
    pool = data.draw(st.sampled_from([st.sampled_from(WEIGHTS), st.sampled_from(WEIGHTS[2:]), st.integers(0, 12),
                                      st.integers(5, 9)]))
    weights = {b: data.draw(pool) for b in flat}
    sampler = RackWeights((flat, flat_racks, ranges), weights, data.draw(st.sampled_from([0, 1, 2, 3, 50])))
    racks = sorted(ranges)
    excluded = tuple(sorted(data.draw(st.sets(st.sampled_from(racks), max_size=len(racks) - 1))))
    scopes = [sampler.scope_excluding(()), sampler.scope_excluding(excluded), sampler.scope_rack(racks[0]),
              sampler.scope_without(list(excluded), flat[:2])]
    for scope in scopes:
        if scope is None:
            continue
        ours, theirs = random.Random(3), random.Random(3)
        assert [sampler._draw(scope, ours) for _ in range(200)] == [plain_draw(sampler, scope, theirs)
                                                                     for _ in range(200)]


# -- zone-aware placement: cached cuts and the first-attempt fast path ----------------------------------


def zone_layout(zones: int, domains: int, per_domain: int, defaults: int = 0) -> dict[str, str]:
    """bookie -> /zone<z>/ud<u> for `zones` x `domains` upgrade domains of `per_domain` bookies, plus
    `defaults` bookies of the default fault domain."""
    layout = {f"z{z}-u{u}-{i}:3181": f"/zone{z}/ud{u}"
              for z in range(zones) for u in range(domains) for i in range(per_domain)}
    layout.update({f"d{i}:3181": "/default-zone/default-upgradedomain" for i in range(defaults)})
    return layout


def zone_policy(layout: dict[str, str], **conf):
    policy = create_policy({"ensemblePlacementPolicy": "zoneaware", **conf}, resolver=layout)
    policy.on_cluster_changed(sorted(layout), [])
    return policy


def plain_first_rule(policy, ensemble_size, write_quorum, rng, exclude=()):
    """Spec §3.4's first rule written out (the zones of the D-1 neighbours on each side avoided, an upgrade
    domain no same-zone bookie within W-1 slots uses, no default fault domain): candidates in (location,
    bookie) order, one uniform pick each (a disk-weighted one with weights). None when some position has no
    candidate (the policy then falls back to weaker rules, which this does not model)."""
    weighted = policy.settings.disk_weighted
    desired = min(write_quorum, policy.desired_zones)
    population = sorted(policy.known, key=lambda b: (policy.known[b], b))
    slots = [None] * ensemble_size
    chosen, excluded = [], set(exclude)

    def around(position, reach):
        return [slots[(position + o) % ensemble_size] for o in range(-reach, reach + 1)
                if o and (position + o) % ensemble_size != position]

    for position in range(ensemble_size):
        zones = {s[0] for s in around(position, desired - 1) if s}
        pairs = {s for s in around(position, write_quorum - 1) if s}
        view = [b for b in population if policy.known[b] != "/default-zone/default-upgradedomain"
                and policy.zone_of(b)[0] not in zones and policy.zone_of(b) not in pairs]
        if not any(b not in excluded for b in view):
            return None
        if weighted:
            bookie = pick_weighted(rng, [b for b in view if b not in excluded], policy.weights,
                                   policy.settings.max_weight_multiple)
        else:
            bookie = pick_uniform(rng, view, lambda b: b not in excluded)
        slots[position] = policy.zone_of(bookie)
        excluded.add(bookie)
        chosen.append(bookie)
    return chosen


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("ensemble_size, write_quorum", [(3, 3), (6, 3), (4, 2), (6, 2), (4, 4)])
def test_zone_fills_are_the_plain_first_rule(ensemble_size, write_quorum, weighted):
    """Wherever the first rule has candidates, the cached cuts pick what the plain rule picks, with the
    same draws (weighted: views small enough to be enumerated, as the plain rule does)."""
    layout = zone_layout(zones=4, domains=3, per_domain=2, defaults=2)
    conf = {"diskWeightBasedPlacementEnabled": "true"} if weighted else {}
    policy = zone_policy(layout, minNumZonesPerWriteQuorum=1, **conf)
    if weighted:
        rng = random.Random(9)
        policy.update_bookie_info({b: BookieInfo(10**6, rng.randrange(1, 10**6)) for b in layout})
    compared = 0
    for seed in range(150):
        exclude = random.Random(seed).sample(sorted(layout), seed % 4)
        expected = plain_first_rule(policy, ensemble_size, write_quorum, random.Random(seed), exclude)
        if expected is None:
            continue
        ours, theirs = random.Random(seed), random.Random(seed)
        plain_first_rule(policy, ensemble_size, write_quorum, theirs, exclude)
        result = policy.new_ensemble(ensemble_size, write_quorum, 1, exclude=exclude, rng=ours)
        assert result.ensemble == expected
        assert ours.getstate() == theirs.getstate()
        assert not result.explain["fallbacks"]
        compared += 1
    assert compared >= 50


def zone_calls(policy, seeds=range(40)):
    """Decisions of a batch of calls (ensembles, adherence, explanations), failures included."""
    out = []
    for seed in seeds:
        for call in (lambda rng: policy.new_ensemble(3, 3, 2, rng=rng),
                     lambda rng: policy.new_ensemble(6, 3, 2, exclude=["z0-u0-0:3181"], rng=rng),
                     lambda rng: policy.new_ensemble(4, 2, 2, rng=rng)):
            try:
                result = call(random.Random(seed))
                out.append((result.ensemble, result.adherence, result.explain))
            except NotEnoughBookiesError as exc:
                out.append(("failed", exc.explain))
        members = sorted(policy.known)[:3]
        for size, quorum, current in ((3, 3, members), (6, 3, sorted(policy.known)[-6:]), (4, 2, members[:2] * 2)):
            try:
                result = policy.replace_bookie(size, quorum, 2, None, current, current[1], rng=random.Random(seed))
                # the replacement's adherence (judged on the fill's zones) is the ensemble's
                assert result.adherence == policy.is_ensemble_adhering(result.ensemble, quorum, 2)
                out.append((result.ensemble, result.adherence, result.explain))
            except NotEnoughBookiesError as exc:
                out.append(("failed", exc.explain))
    return out


@pytest.mark.parametrize("weighted", [False, True])
def test_zone_caches_follow_membership_rack_and_weight_changes(weighted):
    """A policy whose cut caches are warm decides exactly as a freshly built one, after bookies join and
    leave, move to another upgrade domain or zone, and (weighted) after new disk weights."""
    layout = zone_layout(zones=3, domains=3, per_domain=2)
    conf = {"minNumZonesPerWriteQuorum": 1}
    if weighted:
        conf.update(diskWeightBasedPlacementEnabled="true", bookieMaxMultipleForWeightBasedPlacement=2)
    free = {b: 1000 + 37 * i for i, b in enumerate(sorted(layout))}

    def fresh(mapping, writable, free_disk):
        policy = create_policy({"ensemblePlacementPolicy": "zoneaware", **conf}, resolver=dict(mapping))
        policy.on_cluster_changed(sorted(writable), [])
        if weighted:
            policy.update_bookie_info({b: BookieInfo(10**6, free_disk[b]) for b in writable})
        return policy

    mapping = dict(layout)
    writable = set(layout)
    warm = create_policy({"ensemblePlacementPolicy": "zoneaware", **conf}, resolver=mapping)
    warm.on_cluster_changed(sorted(writable), [])
    if weighted:
        warm.update_bookie_info({b: BookieInfo(10**6, free[b]) for b in writable})
    assert zone_calls(warm) == zone_calls(fresh(mapping, writable, free))

    # leaves: a whole upgrade domain and one more bookie
    writable -= {"z1-u1-0:3181", "z1-u1-1:3181", "z2-u0-1:3181"}
    warm.on_cluster_changed(sorted(writable), [])
    if weighted:
        warm.update_bookie_info({b: BookieInfo(10**6, free[b]) for b in writable})
    assert zone_calls(warm) == zone_calls(fresh(mapping, writable, free))

    # joins: a new upgrade domain and a new zone
    for bookie, location in {"n1:3181": "/zone1/ud7", "n2:3181": "/zone1/ud7", "n3:3181": "/zone9/ud1"}.items():
        mapping[bookie] = location
        writable.add(bookie)
        free[bookie] = 5000
    warm.on_cluster_changed(sorted(writable), [])
    if weighted:
        warm.update_bookie_info({b: BookieInfo(10**6, free[b]) for b in writable})
    assert zone_calls(warm) == zone_calls(fresh(mapping, writable, free))

    # rack changes: one bookie to another upgrade domain, one to another zone
    mapping["z0-u0-0:3181"] = "/zone0/ud2"
    mapping["z2-u2-0:3181"] = "/zone1/ud0"
    warm.on_bookie_rack_change(["z0-u0-0:3181", "z2-u2-0:3181"])
    assert zone_calls(warm) == zone_calls(fresh(mapping, writable, free))

    if weighted:  # new disk weights only
        free = {b: 100 + (17 * i) % 900 for i, b in enumerate(sorted(writable))}
        warm.update_bookie_info({b: BookieInfo(10**6, free[b]) for b in writable})
        assert zone_calls(warm) == zone_calls(fresh(mapping, writable, free))


def test_zone_cut_cache_is_bounded_and_starting_afresh_changes_nothing(monkeypatch):
    """Past its limit the index drops its cuts; decisions are those of a policy that never dropped any."""
    import policies.zoneaware as zoneaware

    layout = zone_layout(zones=3, domains=4, per_domain=2)
    expected = zone_calls(zone_policy(layout, minNumZonesPerWriteQuorum=1))
    monkeypatch.setattr(zoneaware, "_CUT_CACHE_LIMIT", 3)
    monkeypatch.setattr(zoneaware, "_FIRST_CUT_LIMIT", 2)
    small = zone_policy(layout, minNumZonesPerWriteQuorum=1)
    assert zone_calls(small) == expected
    index = small._live_index()
    assert len(index.first_cuts) <= 2 and len(index._zone_cuts) <= 3


def plain_zone_adherence(policy, located, write_quorum):
    """§3.6 step 2 over every write set (wrapping), as written."""
    size = len(located)
    if None in located or UNRESOLVED in located:
        return Adherence.FAIL
    desired = min(write_quorum, policy.desired_zones)
    result = Adherence.MEETS_STRICT
    for start in range(size):
        window = [located[(start + j) % size] for j in range(write_quorum)]
        zones = {zone for zone, _ in window}
        if len(zones) < policy.min_zones:
            return Adherence.FAIL
        for zone in zones:
            members = [ud for z, ud in window if z == zone]
            if len(members) > 1 and len(set(members)) < 2:
                return Adherence.FAIL
        if len(zones) < desired:
            result = Adherence.MEETS_SOFT
    return result


ZONE_UDS = [("/z1", "/u1"), ("/z1", "/u2"), ("/z2", "/u1"), ("/z2", "/u2"), ("/z3", "/u1"), UNRESOLVED]


@settings(max_examples=400)
@given(st.lists(st.sampled_from(ZONE_UDS), min_size=1, max_size=8), st.integers(1, 8), st.integers(0, 3),
       st.integers(1, 4))
def test_zone_adherence_matches_the_windowed_rule(located, write_quorum, min_zones, desired):
    """One window when W == E, every window otherwise: the verdict of every write set judged."""
    assert_zone_adherence_is_windowed(located, write_quorum, min_zones, desired)


def assert_zone_adherence_is_windowed(located, write_quorum, min_zones, desired):
    """The zone-aware verdict equals `plain_zone_adherence` (zone counts drawn in either order)."""
    if min_zones > desired:
        min_zones, desired = desired, min_zones
    policy = zone_policy(zone_layout(1, 1, 1), minNumZonesPerWriteQuorum=min_zones,
                         desiredNumZonesPerWriteQuorum=desired)
    assert policy._adherence(located, write_quorum) == plain_zone_adherence(policy, located, write_quorum)


# -- rack-aware: the fast paths after changes ---------------------------------------------------------


def rack_calls(policy, seeds=range(60)):
    out = []
    for seed in seeds:
        result = policy.new_ensemble(3, 3, 2, rng=random.Random(seed))
        out.append((result.ensemble, result.adherence, result.explain))
        members = result.ensemble
        result = policy.replace_bookie(3, 3, 2, None, members, members[seed % 3], exclude=members[:1],
                                       rng=random.Random(seed))
        out.append((result.ensemble, result.adherence, result.explain))
    return out


@pytest.mark.parametrize("weighted", [False, True])
def test_rack_fast_paths_follow_membership_rack_and_weight_changes(weighted):
    """Warm samplers and tree lookups decide exactly as a freshly built policy after joins, departures,
    rack changes and (weighted) new disk weights."""
    mapping = {f"b{i:02d}:3181": f"/r{i % 5}" for i in range(20)}
    conf = {"diskWeightBasedPlacementEnabled": "true"} if weighted else {}
    free = {b: 1000 + 71 * i for i, b in enumerate(sorted(mapping))}

    def fresh(writable):
        policy = create_policy({"ensemblePlacementPolicy": "rackaware", **conf}, resolver=dict(mapping))
        policy.on_cluster_changed(sorted(writable), [])
        policy.update_bookie_info({b: BookieInfo(10**6, free.get(b, 0)) for b in writable})
        return policy

    writable = set(mapping)
    warm = create_policy({"ensemblePlacementPolicy": "rackaware", **conf}, resolver=mapping)
    warm.on_cluster_changed(sorted(writable), [])
    warm.update_bookie_info({b: BookieInfo(10**6, free.get(b, 0)) for b in writable})
    assert rack_calls(warm) == rack_calls(fresh(writable))

    writable -= {"b03:3181", "b08:3181", "b13:3181", "b18:3181"}   # rack /r3 empties
    mapping["b30:3181"] = "/r9"
    writable.add("b30:3181")
    warm.on_cluster_changed(sorted(writable), [])
    warm.update_bookie_info({b: BookieInfo(10**6, free.get(b, 0)) for b in writable})
    assert rack_calls(warm) == rack_calls(fresh(writable))

    mapping["b00:3181"] = "/r2"
    mapping["b01:3181"] = "/r7"
    warm.on_bookie_rack_change(["b00:3181", "b01:3181"])
    assert rack_calls(warm) == rack_calls(fresh(writable))

    free = {b: 10 + (13 * i) % 700 for i, b in enumerate(sorted(mapping))}
    warm.update_bookie_info({b: BookieInfo(10**6, free.get(b, 0)) for b in writable})
    assert rack_calls(warm) == rack_calls(fresh(writable))


def test_scopes_without_removed_bookies_are_built_once_and_draw_as_fresh_ones():
    """`scope_without` with nothing removed inside the scope returns one kept scope per excluded racks,
    which draws exactly as the scope of a freshly built sampler (removals inside the scope in between
    do not disturb it)."""
    flat, flat_racks, ranges = make_index([3, 2, 4, 1, 2])
    rng = random.Random(21)
    weights = {b: rng.choice(WEIGHTS) for b in flat}
    sampler = RackWeights((flat, flat_racks, ranges), weights, 2)
    racks = sorted(ranges)
    for size in range(len(racks) + 1):
        for excluded in itertools.combinations(racks, size):
            inside_cut = [b for b, r in zip(flat, flat_racks) if r in excluded]
            kept = sampler.scope_without(list(excluded), inside_cut)
            outside = [b for b, r in zip(flat, flat_racks) if r not in excluded]
            sampler.scope_without(list(excluded), outside[:1])
            assert sampler.scope_without(list(excluded), ()) is kept
            fresh = RackWeights((flat, flat_racks, ranges), weights, 2).scope_without(list(excluded), ())
            if fresh is None:
                assert kept is None
                continue
            ours, theirs = random.Random(size), random.Random(size)
            assert [sampler._draw(kept, ours) for _ in range(100)] == [sampler._draw(fresh, theirs)
                                                                       for _ in range(100)]
            assert sampler.probabilities(kept) == sampler.probabilities(fresh)


def test_weighted_picks_with_an_exclusion_set_are_the_picks_with_a_predicate():
    """`pick_excluding(scope, rng, excluded)` == `pick(scope, rng, lambda b: b not in excluded)`: same leaf,
    same generator state, from no exclusion to every leaf excluded (the enumerated last resort), in scopes
    with and without removed bookies."""
    flat, flat_racks, ranges = make_index([3, 2, 4, 1])
    rng = random.Random(33)
    sampler = RackWeights((flat, flat_racks, ranges), {b: rng.choice(WEIGHTS) for b in flat}, 2)
    scopes = [sampler.scope_excluding(()), sampler.scope_rack("/r02"), sampler.scope_without(["/r01"], flat[:2])]
    for seed in range(300):
        excluded = set(random.Random(seed + 1).sample(flat, seed % (len(flat) + 1)))
        for scope in scopes:
            ours, theirs = random.Random(seed), random.Random(seed)
            assert sampler.pick_excluding(scope, ours, excluded) == sampler.pick(scope, theirs,
                                                                                 lambda b: b not in excluded)
            assert ours.getstate() == theirs.getstate()


def _placement(call):
    """A comparable record of one placement: its result, or its error's type, message and explanation."""
    try:
        result = call()
    except (NotEnoughBookiesError, ValueError) as exc:
        return ("error", type(exc).__name__, str(exc), json.dumps(getattr(exc, "explain", None)))
    return ("ok", result.ensemble, int(result.adherence), json.dumps(result.explain))


def test_the_position_beyond_the_racks_is_the_general_loops(monkeypatch):
    """With every rack taken and one position left (5/3/2 on 4 racks), the rack-aware policy places it
    without the general loop's coverage bookkeeping. Random clusters (some bookies unmapped, in the
    default rack), settings (racks per write quorum, enforcement, weights, stabilization, a local
    rack), exclusions, departures and sizes: every call decides as the loop does, steps and notes
    included, and leaves the generator in the same state."""
    from policies.rackaware import RackawarePolicyImpl

    calls = {"placed": 0}
    original = RackawarePolicyImpl._place_beyond_racks

    def counting(self, *args):
        placed = original(self, *args)
        calls["placed"] += placed is not None
        return placed

    monkeypatch.setattr(RackawarePolicyImpl, "_place_beyond_racks", counting)
    for seed in range(150):
        g = random.Random(seed)
        racks = g.randint(2, 5)
        mapping = {f"b{r}-{n}:3181": f"/rack{r}" for r in range(racks) for n in range(g.randint(1, 4))}
        unmapped = [f"u{n}:3181" for n in range(g.choice([0, 0, 1, 2]))]
        conf = {"ensemblePlacementPolicy": "rackaware", "minNumRacksPerWriteQuorum": str(g.choice([1, 2, 2, 3])),
                "enforceMinNumRacksPerWriteQuorum": g.choice(["true", "false"]),
                "diskWeightBasedPlacementEnabled": g.choice(["true", "false"]),
                "networkTopologyStabilizePeriodSeconds": g.choice(["0", "30"])}
        if g.random() < 0.2:
            conf["localNodeLocation"] = "/rack0"
        clock = [0.0]
        policies = []
        for _ in range(2):
            policy = create_policy(conf, resolver=dict(mapping), clock=lambda: clock[0])
            policy.on_cluster_changed([*mapping, *unmapped], [])
            disk = random.Random(seed)
            policy.update_bookie_info({b: BookieInfo(1 << 40, disk.randrange(0, 1 << 40))
                                       for b in [*mapping, *unmapped]})
            policies.append(policy)
        plain = policies[1]
        plain._place_beyond_racks = lambda *args: None
        for secondary in ([plain.secondary] if getattr(plain, "secondary", None) is not None else []):
            secondary._place_beyond_racks = lambda *args: None
        everyone = sorted([*mapping, *unmapped])
        for step in range(25):
            if step % 10 == 9:
                writable = [b for b in everyone if g.random() > 0.2]
                clock[0] += g.choice([0, 10, 40])
                for policy in policies:
                    policy.on_cluster_changed(writable, [])
            size = g.choice([racks - 1, racks, racks + 1, racks + 1, racks + 2])
            if size < 1:
                continue
            write_quorum = g.randint(1, size)
            ack_quorum = g.randint(1, write_quorum)
            exclude = g.sample(everyone, g.choice([0, 0, 1, 2]))
            seed_call = g.randrange(1 << 30)
            rngs = random.Random(seed_call), random.Random(seed_call)
            got = _placement(lambda: policies[0].new_ensemble(size, write_quorum, ack_quorum, None, exclude,
                                                              rng=rngs[0]))
            expected = _placement(lambda: plain.new_ensemble(size, write_quorum, ack_quorum, None, exclude,
                                                             rng=rngs[1]))
            assert got == expected, (seed, step)
            assert rngs[0].random() == rngs[1].random(), (seed, step)
    assert calls["placed"] > 300


# -- adherence of wide write sets (the sliding paths from write quorum 8) ----------------------------

WIDE_RACKS = {**{f"/r{r}": [f"b{r}-{i}" for i in range(3)] for r in range(6)}, "/default-rack": ["d1", "d2"]}
WIDE_RACK_MEMBERS = [b for members in WIDE_RACKS.values() for b in members] + ["gone1", "gone2"]
WIDE_ZONE_UDS = [(f"/z{z}", f"/u{u}") for z in range(5) for u in range(3)] + [UNRESOLVED]
WIDE_REGIONS = {**{f"{g}-{r}-{n}:3181": f"/{g}/r{r}" for g in "abcd" for r in range(3) for n in range(2)},
                "u-0:3181": "/default-region/default-rack", "u-1:3181": "/default-region/default-rack"}


@given(st.lists(st.sampled_from(WIDE_RACK_MEMBERS), min_size=1, max_size=24), st.integers(1, 26),
       st.integers(1, 10), st.booleans())
def test_wide_rack_adherence_matches_the_windowed_rule(ensemble, write_quorum, min_racks, enforce):
    """The tests above never reach W >= 8 with E > W: ensembles of up to 24 bookies do."""
    policy = build_policy(WIDE_RACKS, minNumRacksPerWriteQuorum=min_racks,
                          enforceMinNumRacksPerWriteQuorum=str(enforce).lower())
    assert policy.is_ensemble_adhering(ensemble, write_quorum, 1) == \
        windowed_rack_adherence(policy, ensemble, write_quorum)


@given(st.lists(st.sampled_from(WIDE_ZONE_UDS), min_size=1, max_size=24), st.integers(1, 26), st.integers(0, 6),
       st.integers(1, 8))
def test_wide_zone_adherence_matches_the_windowed_rule(located, write_quorum, min_zones, desired):
    """Ensembles of up to 24 bookies, so W >= 8 with E > W is reached."""
    assert_zone_adherence_is_windowed(located, write_quorum, min_zones, desired)


def windowed_region_adherence(policy, ensemble, write_quorum, ack_quorum):
    """`RegionawarePolicy.is_ensemble_adhering`'s rule (a)-(c) as written, over every write set
    (wrapping) of distinct known members."""
    settings = policy.settings
    min_regions = policy.min_regions if policy.is_durability_enforced() else 0
    default = policy.default_location if settings.enforce_min_racks else None
    soft_regions = min(write_quorum, settings.min_racks_per_write_quorum, max(policy._populated_regions(), 1))
    result = Adherence.MEETS_STRICT
    for start in range(len(ensemble)):
        members = {ensemble[(start + j) % len(ensemble)] for j in range(write_quorum)} & policy.known.keys()
        racks = {policy.known[b] for b in members}
        if len(racks) < min(write_quorum, settings.min_racks_per_write_quorum) or default in racks:
            return Adherence.FAIL
        copies = sorted(Counter(policy.region_of[b] for b in members).values(), reverse=True)
        if min_regions > 0:
            if len(copies) < min(min_regions, write_quorum) or sum(copies[:min_regions - 1]) >= ack_quorum:
                return Adherence.FAIL
        elif len(copies) < soft_regions:
            result = Adherence.MEETS_SOFT
    return result


@given(st.lists(st.sampled_from([*sorted(WIDE_REGIONS), "gone:3181"]), min_size=1, max_size=20, unique=True),
       st.integers(1, 22), st.integers(1, 22), st.sampled_from([0, 2, 3]), st.booleans(), st.integers(1, 5))
def test_wide_region_adherence_matches_the_windowed_rule(ensemble, write_quorum, ack_quorum, min_regions, enforce,
                                                         min_racks):
    conf = {"enforceMinNumRacksPerWriteQuorum": str(enforce).lower(), "minNumRacksPerWriteQuorum": min_racks}
    if min_regions:
        conf.update(reppRegionsToWrite="a;b;c", reppMinimumRegionsForDurability=min_regions)
    policy, _ = make_region_policy(WIDE_REGIONS, **conf)
    ack_quorum = min(ack_quorum, write_quorum)
    assert policy.is_ensemble_adhering(ensemble, write_quorum, ack_quorum) == \
        windowed_region_adherence(policy, ensemble, write_quorum, ack_quorum)
