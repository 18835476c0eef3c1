"""`placement.search=complete`: the exact search behind the rack-aware policy under enforcement
(policies.complete_search, policies.rack_complete; docs/policies-rackaware.md "Complete search").

Properties: with `complete`, `new_ensemble` raises NotEnoughBookiesError exactly when brute force over
every E-permutation of the eligible bookies finds no valid ensemble, and a placed ensemble is valid;
a replacement likewise against every single candidate; with the default `bookkeeper` (and with
`complete` wherever BookKeeper's search succeeds) outputs do not change; the search stays within its
node budget on the hardest shapes we know of.
"""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from policies import Adherence, NotEnoughBookiesError
from policies.complete_search import (
    SEARCH_BUDGET,
    CompleteSearch,
    complete_replacement,
    node_budget,
    rack_pattern,
)
from policies.conf_lint import POLICY_KEYS
from policies.settings import PlacementSettings

from .conftest import build_policy

D = "/default-rack"
COMPLETE = {"placement.search": "complete", "enforceMinNumRacksPerWriteQuorum": True}


def is_valid(ensemble, location, eligible, write_quorum, min_racks) -> bool:
    """The rule, brute force: distinct eligible bookies and every write set (wrapping) spans k racks."""
    size = len(ensemble)
    if len(set(ensemble)) != size or not all(b in eligible for b in ensemble):
        return False
    need = min(write_quorum, min_racks)
    return all(len({location[ensemble[(i + j) % size]] for j in range(write_quorum)}) >= need for i in range(size))


def exists_valid(eligible, location, ensemble_size, write_quorum, min_racks) -> bool:
    return any(is_valid(list(perm), location, eligible, write_quorum, min_racks)
               for perm in itertools.permutations(sorted(eligible), ensemble_size))


@st.composite
def small_clusters(draw):
    """At most 8 bookies in at most 4 racks (one may be the default rack), E <= 5, random exclusions."""
    sizes = draw(st.lists(st.integers(1, 3), min_size=1, max_size=4))
    racks = {f"/r{r}": [f"b{r}-{i}:1" for i in range(n)] for r, n in enumerate(sizes)}
    if draw(st.booleans()):
        first = sorted(racks)[0]
        racks[D] = racks.pop(first)
    bookies = sorted(b for members in racks.values() for b in members)
    while len(bookies) > 8:
        bookies.pop()
    racks = {rack: [b for b in members if b in bookies] for rack, members in racks.items()}
    racks = {rack: members for rack, members in racks.items() if members}
    ensemble_size = draw(st.integers(1, 5))
    write_quorum = draw(st.integers(1, ensemble_size))
    min_racks = draw(st.integers(1, 4))
    exclude = draw(st.sets(st.sampled_from(bookies), max_size=3))
    seed = draw(st.integers(0, 2**32 - 1))
    return racks, ensemble_size, write_quorum, min_racks, exclude, seed


@given(small_clusters())
def test_complete_new_ensemble_fails_exactly_when_no_valid_ensemble_exists(case):
    """With `complete`, NotEnough iff brute force finds no valid ensemble; a placement is valid."""
    racks, e, w, k, exclude, seed = case
    policy = build_policy(racks, minNumRacksPerWriteQuorum=k, **COMPLETE)
    location = {b: rack for rack, members in racks.items() for b in members}
    eligible = {b for b, rack in location.items() if rack != D and b not in exclude}
    possible = exists_valid(eligible, location, e, w, k)
    try:
        result = policy.new_ensemble(e, w, min(2, w), None, exclude, rng=random.Random(seed))
    except NotEnoughBookiesError:
        assert not possible
    else:
        assert possible
        assert is_valid(result.ensemble, location, eligible, w, k)
        if result.explain["steps"][-1]["scope"] == "cluster (complete search)":
            assert result.adherence == Adherence.MEETS_STRICT


@given(small_clusters(), st.data())
def test_complete_replacement_fails_exactly_when_no_candidate_keeps_the_ensemble_valid(case, data):
    """From a valid ensemble, a replacement with `complete` fails iff no single eligible bookie makes
    the ensemble valid again; a replacement made keeps it valid."""
    racks, e, w, k, exclude, seed = case
    location = {b: rack for rack, members in racks.items() for b in members}
    full = build_policy(racks, minNumRacksPerWriteQuorum=k, **COMPLETE)
    try:
        current = full.new_ensemble(e, w, 1, rng=random.Random(seed)).ensemble
    except NotEnoughBookiesError:
        return
    replaced = data.draw(st.sampled_from(current))
    policy = build_policy(racks, minNumRacksPerWriteQuorum=k, **COMPLETE)
    eligible = {b for b, rack in location.items() if rack != D and b not in exclude}
    position = current.index(replaced)
    options = [b for b in sorted(eligible - set(current) - {replaced})
               if is_valid(current[:position] + [b] + current[position + 1:], location, eligible | set(current), w, k)]
    try:
        result = policy.replace_bookie(e, w, 1, None, current, replaced, exclude, rng=random.Random(seed))
    except NotEnoughBookiesError:
        assert not options
    else:
        assert result.bookie in eligible and result.bookie not in current
        assert result.ensemble == current[:position] + [result.bookie] + current[position + 1:]
        assert options
        assert result.adherence == Adherence.MEETS_STRICT


@given(small_clusters())
def test_complete_changes_nothing_where_the_bookkeeper_search_succeeds(case):
    """The complete search runs only after BookKeeper's failed: every other outcome is the same, and
    `placement.search=bookkeeper` is the default."""
    racks, e, w, k, exclude, seed = case
    outcomes = []
    for extra in ({}, {"placement.search": "bookkeeper"}, {"placement.search": "complete"}):
        policy = build_policy(racks, minNumRacksPerWriteQuorum=k, enforceMinNumRacksPerWriteQuorum=True, **extra)
        try:
            result = policy.new_ensemble(e, w, 1, None, exclude, rng=random.Random(seed))
        except NotEnoughBookiesError as exc:
            outcomes.append(("failed", str(exc), exc.explain))
        else:
            outcomes.append((result.ensemble, result.adherence, result.explain))
    assert outcomes[0] == outcomes[1]
    if outcomes[0][0] != "failed":
        assert outcomes[2] == outcomes[0]


def test_every_small_shape_is_placed_exactly_when_possible():
    """A sweep over every cluster of up to 4 racks of 1 to 3 bookies (at most 8), E <= 5, k >= 2, four
    seeds each: NotEnough iff no rack arrangement within the racks' sizes is valid (bookies of a rack
    are interchangeable, so this equals the permutation brute force), and the complete search places
    every request BookKeeper's search misses."""
    rescued = 0
    for sizes in itertools.chain.from_iterable(
            itertools.combinations_with_replacement((1, 2, 3), n) for n in range(1, 5)):
        if sum(sizes) > 8:
            continue
        racks = {f"/r{r}": [f"b{r}-{i}:1" for i in range(n)] for r, n in enumerate(sizes)}
        for e in range(2, 6):
            for w in range(2, e + 1):
                for k in range(2, w + 1):
                    policy = build_policy(racks, minNumRacksPerWriteQuorum=k, **COMPLETE)
                    possible = any(
                        all(pattern.count(r) <= n for r, n in enumerate(sizes)) and
                        all(len({pattern[(i + j) % e] for j in range(w)}) >= k for i in range(e))
                        for pattern in itertools.product(range(len(sizes)), repeat=e))
                    for seed in range(4):
                        try:
                            result = policy.new_ensemble(e, w, 2, rng=random.Random(seed))
                        except NotEnoughBookiesError:
                            assert not possible, (sizes, e, w, k, seed)
                            continue
                        assert possible and result.adherence == Adherence.MEETS_STRICT
                        rescued += result.explain["steps"][-1]["scope"] == "cluster (complete search)"
    assert rescued > 0


# -- the policy: explain, isolation, keys -----------------------------------------------------------

RACKS_1_2_3 = {"/r1": ["a:1"], "/r2": ["b1:1", "b2:1"], "/r3": ["c1:1", "c2:1", "c3:1"]}


def test_the_greedy_miss_is_placed_and_the_explain_says_so():
    """Racks of 1, 2 and 3 bookies, E=6, WQ=2 under enforcement: BookKeeper's search fails for seed 0
    although A-B-C-B-C-C... arrangements exist; the complete search places it and says why."""
    greedy = build_policy(RACKS_1_2_3, enforceMinNumRacksPerWriteQuorum=True)
    with pytest.raises(NotEnoughBookiesError):
        greedy.new_ensemble(6, 2, 2, rng=random.Random(0))
    policy = build_policy(RACKS_1_2_3, **COMPLETE)
    result = policy.new_ensemble(6, 2, 2, rng=random.Random(0))
    assert sorted(result.ensemble) == sorted(b for members in RACKS_1_2_3.values() for b in members)
    assert result.adherence == Adherence.MEETS_STRICT
    step = result.explain["steps"][-1]
    assert step["step"] == "ensemble" and step["scope"] == "cluster (complete search)"
    assert step["candidates"] == 6 and step["racks"] == 3 and 0 < step["nodes"] <= SEARCH_BUDGET
    assert result.explain["fallbacks"][-1].startswith(
        "complete search: placed after the BookKeeper search failed (minNumRacksPerWriteQuorum=2 enforced")
    assert result.explain["relaxed"] == [{"rule": "racks", "spanned": 3}]
    # the same rng gives the same ensemble
    again = build_policy(RACKS_1_2_3, **COMPLETE).new_ensemble(6, 2, 2, rng=random.Random(0))
    assert again.ensemble == result.ensemble


def test_an_impossible_request_still_fails_and_names_both_searches():
    policy = build_policy({"/r1": ["a:1", "a2:1"], "/r2": ["b:1"]}, minNumRacksPerWriteQuorum=2, **COMPLETE)
    with pytest.raises(NotEnoughBookiesError, match="proved that no valid ensemble exists") as error:
        policy.new_ensemble(3, 2, 2, rng=random.Random(0))
    assert "minNumRacksPerWriteQuorum=2 enforced" in str(error.value)
    assert error.value.explain["steps"][-1]["failed"] is True
    assert error.value.explain["fallbacks"][-1].startswith("complete search: ")


def test_the_bound_is_named_when_the_search_stops(monkeypatch):
    import policies.rack_complete as glue

    def bounded(*args, **kwargs):
        return CompleteSearch(None, node_budget(6, 2), bounded=True)
    monkeypatch.setattr(glue, "complete_ensemble", bounded)
    policy = build_policy(RACKS_1_2_3, **COMPLETE)
    with pytest.raises(NotEnoughBookiesError, match=f"stopped at its bound of {SEARCH_BUDGET} nodes"):
        policy.new_ensemble(6, 2, 2, rng=random.Random(0))


def test_replacement_in_a_rack_the_rest_of_the_ensemble_uses():
    """BookKeeper replaces only within the rack or in an unused rack; the write sets through the
    position may allow a rack used elsewhere, and the complete search takes it."""
    racks = {"/a": ["a:1"], "/b": ["b1:1", "b2:1"], "/c": ["c1:1", "c2:1"], "/d": ["d:1"]}
    current = ["a:1", "b1:1", "c1:1", "d:1", "b2:1"]     # a rack per write set of 2 positions
    greedy = build_policy(racks, enforceMinNumRacksPerWriteQuorum=True)
    greedy.on_cluster_changed([b for members in racks.values() for b in members if b != "a:1"], [])
    with pytest.raises(NotEnoughBookiesError):
        greedy.replace_bookie(5, 2, 2, None, current, "a:1", rng=random.Random(0))
    policy = build_policy(racks, **COMPLETE)
    policy.on_cluster_changed([b for members in racks.values() for b in members if b != "a:1"], [])
    result = policy.replace_bookie(5, 2, 2, None, current, "a:1", rng=random.Random(0))
    assert result.bookie == "c2:1"            # neighbours are /b (position 1) and /b (position 4)
    assert result.ensemble == ["c2:1", "b1:1", "c1:1", "d:1", "b2:1"]
    assert result.adherence == Adherence.MEETS_STRICT
    assert result.explain["steps"][-1]["scope"] == "cluster (complete search)"
    assert result.explain["fallbacks"][-1].startswith("complete search: placed after the BookKeeper search failed")


def test_the_isolated_policy_uses_it_inside_its_groups():
    rack_info = {"g1": {b: {"rack": rack} for rack, members in RACKS_1_2_3.items() for b in members},
                 "g2": {"x:1": {"rack": "/r4"}}}
    racks = {**RACKS_1_2_3, "/r4": ["x:1"]}
    policy = build_policy(racks, policy="isolated", rack_info=rack_info, bookkeeperClientIsolationGroups="g1",
                          **COMPLETE)
    result = policy.new_ensemble(6, 2, 2, rng=random.Random(0))
    assert "x:1" not in result.ensemble
    assert result.explain["policy"] == "isolated"
    assert result.explain["steps"][0]["step"] == "isolation groups"
    assert result.explain["steps"][-1]["scope"] == "cluster (complete search)"


def test_without_enforcement_the_key_changes_nothing():
    racks = {"/r1": ["a:1", "a2:1"], "/r2": ["b:1"]}
    plain = build_policy(racks).new_ensemble(3, 2, 2, rng=random.Random(3))
    complete = build_policy(racks, **{"placement.search": "complete"}).new_ensemble(3, 2, 2, rng=random.Random(3))
    assert (plain.ensemble, plain.explain) == (complete.ensemble, complete.explain)


def test_the_key():
    assert PlacementSettings.from_conf({}).search == "bookkeeper"
    assert PlacementSettings.from_conf({"placement.search": " Complete "}).search == "complete"
    with pytest.raises(ValueError, match="placement.search: expected one of bookkeeper, complete, got 'exact'"):
        PlacementSettings.from_conf({"placement.search": "exact"})
    assert {name for name, keys in POLICY_KEYS.items() if "placement.search" in keys} == {"rackaware", "isolated"}


# -- the search itself ------------------------------------------------------------------------------

def test_rack_pattern_agrees_with_brute_force_on_small_shapes():
    rnd = random.Random(1)
    for _ in range(400):
        size, write_quorum = rnd.randint(1, 6), rnd.randint(1, 7)
        min_racks = min(write_quorum, rnd.randint(1, 4))
        caps = [rnd.randint(0, 3) for _ in range(rnd.randint(1, 4))]
        found = rack_pattern(caps, size, write_quorum, min_racks)
        span = min(write_quorum, size)

        def ok(pattern):
            return (all(pattern.count(r) <= c for r, c in enumerate(caps)) and
                    all(len({pattern[(s + j) % size] for j in range(span)}) >= min_racks for s in range(size)))
        brute = any(ok(p) for p in itertools.product(range(len(caps)), repeat=size))
        assert (found.pattern is not None) == brute, (caps, size, write_quorum, min_racks)
        assert found.pattern is None or ok(found.pattern)
        assert not found.bounded


def test_worst_shapes_finish_within_the_budget():
    """Ensembles of 10 to 16, every write quorum, k = WQ-1 or WQ, racks of 1 to 3 bookies whose total is
    within one or two of E (the hardest region: many racks, little slack, most instances impossible
    and searched to the end). Every instance is decided without reaching the bound; the most nodes
    any of them needs is far below it."""
    most = 0
    for size in range(10, 17):
        for write_quorum in range(2, size + 1):
            for min_racks in (write_quorum - 1, write_quorum):
                for ones, twos, threes in itertools.product(range(size + 2), range(size // 2 + 2), range(3)):
                    if not size - 1 <= ones + 2 * twos + 3 * threes <= size + 1:
                        continue
                    found = rack_pattern([1] * ones + [2] * twos + [3] * threes, size, write_quorum, min_racks)
                    assert not found.bounded
                    most = max(most, found.nodes)
    assert most < SEARCH_BUDGET // 20


@pytest.mark.parametrize(("size", "write_quorum", "min_racks", "caps"), [
    (16, 7, 6, (1, 2, 2, 2, 3, 3, 3)),
    (15, 12, 9, (1, 2, 2, 2, 2, 2, 2, 2, 3, 3)),
    (15, 12, 8, (1, 1, 1, 1, 1, 2, 2, 3, 3)),
    (15, 13, 10, (1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3)),
    (16, 16, 16, (2,) * 15),                    # E = W = k: one rack per position; 15 racks are too few
    (16, 16, 16, (1, 2) * 8),
])
def test_the_hardest_shapes_found_by_sampling(size, write_quorum, min_racks, caps):
    """The slowest instances random sampling found (E <= 16, racks of 1 to 3 bookies) and E = W = k."""
    found = rack_pattern(list(caps), size, write_quorum, min_racks)
    assert not found.bounded and found.nodes < SEARCH_BUDGET // 10


def test_the_budget_shrinks_with_the_ensemble_and_stops_the_search():
    assert node_budget(16, 16) == SEARCH_BUDGET
    assert node_budget(64, 64) == SEARCH_BUDGET // 4
    assert node_budget(1024, 1024) >= 1024
    assert node_budget(16, 7, budget=10) == 16                 # never fewer than one straight descent
    found = rack_pattern([1, 2, 2, 2, 3, 3, 3], 16, 7, 6, budget=10)
    assert found.bounded and found.pattern is None and found.nodes == 16


def test_complete_replacement_counts_unknown_members_for_no_rack():
    racks = ["/a", "/b", None, "/c"]
    assert complete_replacement(racks, 0, {"/b": ["b2:1"], "/d": ["d:1"]}, 2, 2, None, random.Random(0)) == "d:1"
    assert complete_replacement(racks, 0, {"/c": ["c2:1"]}, 2, 2, None, random.Random(0)) is None
    # an unknown neighbour leaves a write set of 2 with one rack whatever is chosen
    assert complete_replacement(["/a", None, "/b"], 0, {"/c": ["c:1"]}, 2, 2, None, random.Random(0)) is None
    assert complete_replacement(["/a", D, "/b"], 0, {"/c": ["c:1"]}, 2, 2, D, random.Random(0)) is None
