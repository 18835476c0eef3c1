"""Hypothesis properties of the region-aware policy: what every placement must satisfy, whatever the
cluster (spec bookkeeper-region-zone-isolation.md §1-§2)."""

from __future__ import annotations

import json
import random
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from policies import Adherence, NotEnoughBookiesError

from .test_regionaware_support import make_policy, region_of, write_set_members


@st.composite
def clusters(draw, min_regions: int = 1, min_racks: int = 1, default_bookies: bool = True) -> dict[str, str]:
    """bookie -> location: 1-4 regions, 1-3 racks each, 1-3 bookies per rack, maybe default-location bookies."""
    bookies: dict[str, str] = {}
    for region in range(draw(st.integers(min_regions, 4))):
        for rack in range(draw(st.integers(min_racks, 3))):
            for n in range(draw(st.integers(1, 3))):
                bookies[f"g{region}-{rack}-{n}:3181"] = f"/g{region}/rack{rack}"
    if default_bookies:
        for n in range(draw(st.integers(0, 2))):
            bookies[f"d{n}:3181"] = "/default-region/default-rack"
    return bookies


@st.composite
def quorums(draw, max_ensemble: int = 8) -> tuple[int, int, int]:
    """E >= W >= A >= 1."""
    ensemble = draw(st.integers(1, max_ensemble))
    write = draw(st.integers(1, ensemble))
    return ensemble, write, draw(st.integers(1, write))


def regions_in(bookies: dict[str, str]) -> list[str]:
    return sorted({region_of(loc) for loc in bookies.values() if not loc.startswith("/default-region/")})


def durability_violated(ack_quorum: int, write_quorum: int, minimum: int) -> bool:
    """BookKeeper's quorum check (spec §1.2)."""
    return ack_quorum < minimum or (minimum > 0 and ack_quorum <= write_quorum - write_quorum // minimum)


@given(bookies=clusters(), sizes=quorums(), seed=st.integers(0, 2**32 - 1), durable=st.booleans(),
       excluded=st.sets(st.integers(0, 40), max_size=4), enforce=st.booleans())
def test_placement_is_distinct_known_and_not_excluded(bookies, sizes, seed, durable, excluded, enforce):
    """A placement has E distinct writable, non-excluded bookies and reports its own adherence."""
    names = sorted(bookies)
    exclude = {names[i % len(names)] for i in excluded}
    durable = durable and len(regions_in(bookies)) >= 2
    conf = {"reppRegionsToWrite": ";".join(regions_in(bookies)), "reppMinimumRegionsForDurability": 2} \
        if durable else {}
    policy, _ = make_policy(bookies, enforceMinNumRacksPerWriteQuorum=str(enforce).lower(), **conf)
    ensemble_size, write_quorum, ack_quorum = sizes
    if durability_violated(ack_quorum, write_quorum, 2 if durable else 0):
        with pytest.raises(ValueError):
            policy.new_ensemble(*sizes, exclude=exclude, rng=random.Random(seed))
        return
    eligible = len(set(bookies) - exclude)
    try:
        placed = policy.new_ensemble(*sizes, exclude=exclude, rng=random.Random(seed))
    except NotEnoughBookiesError:
        # Without durability or rack enforcement the only reason is a cluster that is too small.
        assert durable or enforce or eligible < ensemble_size
        return
    assert len(placed.ensemble) == ensemble_size == len(set(placed.ensemble))
    assert set(placed.ensemble) <= set(policy.known) - exclude
    assert placed.adherence == policy.is_ensemble_adhering(placed.ensemble, write_quorum, ack_quorum)
    policy.check_invariants()


@st.composite
def durable_cases(draw) -> tuple[int, dict[str, str], tuple[int, int, int]]:
    """A durability minimum M, a cluster of >= M regions with >= 2 racks each, and quorums that pass §1.2."""
    minimum = draw(st.integers(2, 3))
    bookies = draw(clusters(min_regions=minimum, min_racks=2, default_bookies=False))
    write = draw(st.integers(minimum, 7))
    ack = draw(st.integers(write - write // minimum + 1, write))
    return minimum, bookies, (draw(st.integers(write, 8)), write, ack)


@given(case=durable_cases(), seed=st.integers(0, 2**32 - 1))
def test_durability_holds_whenever_enforced_placement_succeeds(case, seed):
    """Every region configured with two or more racks: each acknowledged entry spans `minimum` regions."""
    minimum, bookies, sizes = case
    all_regions = regions_in(bookies)
    _, write_quorum, ack_quorum = sizes
    policy, mapping = make_policy(bookies, reppRegionsToWrite=";".join(all_regions),
                                  reppMinimumRegionsForDurability=minimum)
    try:
        placed = policy.new_ensemble(*sizes, rng=random.Random(seed))
    except NotEnoughBookiesError:
        return
    for members in write_set_members(placed.ensemble, write_quorum):
        copies = Counter(region_of(mapping[x]) for x in set(members))
        assert len(copies) >= min(minimum, write_quorum)
        assert sum(sorted(copies.values(), reverse=True)[:minimum - 1]) < ack_quorum
    assert len({region_of(mapping[x]) for x in placed.ensemble}) >= minimum


@given(bookies=clusters(), sizes=quorums(), seed=st.integers(0, 2**32 - 1), local=st.booleans())
def test_same_state_and_seed_give_the_same_decision(bookies, sizes, seed, local):
    conf = {"localNodeLocation": "/g0/rack0"} if local else {}
    policy, mapping = make_policy(bookies, **conf)
    policy.new_ensemble(1, 1, 1, rng=random.Random(seed ^ 1))  # move the round robin somewhere
    clone, _ = make_policy(mapping, writable=[], **conf)
    clone.import_state(json.loads(json.dumps(policy.export_state())))

    def decide(p):
        try:
            placed = p.new_ensemble(*sizes, rng=random.Random(seed))
        except NotEnoughBookiesError as exc:
            return str(exc)
        replaced = p.replace_bookie(*sizes, None, placed.ensemble, placed.ensemble[0], rng=random.Random(seed)) \
            if len(bookies) > sizes[0] else None
        return placed.ensemble, placed.adherence, replaced and replaced.ensemble, p.last_region_index

    assert decide(policy) == decide(clone)


@given(bookies=clusters(), steps=st.lists(st.tuples(st.sampled_from(["view", "move"]), st.integers(0, 10**6)),
                                          max_size=12))
def test_membership_and_rack_changes_keep_regions_consistent(bookies, steps):
    """Joins, departures, read-only turns and rack moves keep every bookie in exactly its region's sub-policy."""
    policy, mapping = make_policy(bookies)
    names = sorted(bookies)
    locations = sorted(set(bookies.values())) + ["/g9/rack0"]
    for kind, draw in steps:
        rng = random.Random(draw)
        if kind == "view":
            writable = [b for b in names if rng.random() < 0.7]
            readonly = [b for b in names if b not in writable and rng.random() < 0.5]
            policy.on_cluster_changed(writable, readonly)
        else:
            moved = rng.sample(names, k=min(2, len(names)))
            for bookie in moved:
                mapping[bookie] = rng.choice(locations)
            policy.on_bookie_rack_change(moved)
        policy.check_invariants()
        for region, sub in policy.sub_policies.items():
            assert all(region_of(loc) == region or loc == "/default-region/default-rack" for loc in sub.known.values())


@st.composite
def ensembles(draw, max_ensemble: int = 6):
    """A cluster, an ensemble drawn from it (any placement, good or bad), quorums and exclusions."""
    bookies = draw(clusters())
    names = sorted(bookies)
    size = draw(st.integers(1, min(max_ensemble, len(names))))
    ensemble = draw(st.permutations(names).map(lambda p: list(p[:size])))
    write = draw(st.integers(1, size))
    exclude = set(draw(st.lists(st.sampled_from(names), max_size=3)))
    return bookies, ensemble, (size, write, draw(st.integers(1, write))), exclude


@given(case=ensembles(), seed=st.integers(0, 2**32 - 1))
def test_replacement_is_a_new_eligible_bookie_in_the_same_position(case, seed):
    bookies, ensemble, sizes, exclude = case
    policy, _ = make_policy(bookies)
    position = seed % len(ensemble)
    try:
        result = policy.replace_bookie(*sizes, None, ensemble, ensemble[position], exclude, rng=random.Random(seed))
    except NotEnoughBookiesError:
        assert not set(policy.known) - set(ensemble) - exclude
        return
    assert result.bookie in policy.known and result.bookie not in set(ensemble) | exclude
    assert result.ensemble == ensemble[:position] + [result.bookie] + ensemble[position + 1:]
    assert result.adherence == policy.is_ensemble_adhering(result.ensemble, sizes[1], sizes[2])


@given(case=ensembles(), seed=st.integers(0, 2**32 - 1), durable=st.booleans())
def test_replace_to_adhere_returns_an_adhering_ensemble_or_nothing(case, seed, durable):
    """The repair keeps the size, only brings in eligible bookies, and its answer is the check's answer."""
    bookies, ensemble, sizes, exclude = case
    durable = durable and len(regions_in(bookies)) >= 2
    conf = {"reppRegionsToWrite": ";".join(regions_in(bookies)), "reppMinimumRegionsForDurability": 2} \
        if durable else {}
    policy, _ = make_policy(bookies, **conf)
    result = policy.replace_to_adhere(*sizes, exclude, ensemble, rng=random.Random(seed))
    if not result.ensemble:
        assert result.adherence == Adherence.FAIL
        return
    assert result.adherence == policy.is_ensemble_adhering(result.ensemble, sizes[1], sizes[2]) != Adherence.FAIL
    assert len(result.ensemble) == len(ensemble) == len(set(result.ensemble))
    assert not (set(result.ensemble) - set(ensemble)) & exclude


@given(case=ensembles(), seed=st.integers(0, 2**32 - 1), enforce=st.booleans(), durable=st.booleans())
def test_replacement_prefers_the_replaced_bookies_rack_then_its_region(case, seed, enforce, durable):
    """Spec §2.1 step 5: the replaced bookie's region asks its sub-policy for its rack first, then any
    bookie of the region, before step 6 looks at other regions. Eligible: not excluded, not in the
    ensemble, and under rack enforcement not at the default location."""
    bookies, ensemble, sizes, exclude = case
    durable = durable and len(regions_in(bookies)) >= 2
    conf = {"reppRegionsToWrite": ";".join(regions_in(bookies)), "reppMinimumRegionsForDurability": 2} \
        if durable else {}
    policy, _ = make_policy(bookies, enforceMinNumRacksPerWriteQuorum=str(enforce).lower(), **conf)
    victim = ensemble[seed % len(ensemble)]
    default = {b for b, loc in bookies.items() if loc == "/default-region/default-rack"} if enforce else set()
    eligible = [b for b in sorted(bookies) if b not in exclude | set(ensemble) | default]
    same_rack = [b for b in eligible if bookies[b] == bookies[victim]]
    same_region = [b for b in eligible if region_of(bookies[b]) == region_of(bookies[victim])]
    try:
        result = policy.replace_bookie(*sizes, None, ensemble, victim, exclude, rng=random.Random(seed))
    except NotEnoughBookiesError:
        assert not same_region
        return
    assert result.bookie in eligible
    if same_rack:
        assert bookies[result.bookie] == bookies[victim]
    elif same_region:
        assert region_of(bookies[result.bookie]) == region_of(bookies[victim])
