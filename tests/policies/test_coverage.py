"""The write-quorum rack coverage rule (spec bookkeeper-rackaware.md §4.6)."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from policies.base import write_sets
from policies.coverage import CoverageEnsemble

RACK = {f"b{r}{i}": f"/r{r}" for r in range(4) for i in range(4)}


def ensemble(e: int, w: int, m: int) -> CoverageEnsemble:
    return CoverageEnsemble(e, w, w, m, RACK.__getitem__)


def test_first_members_of_a_write_set_are_free():
    """WQ=3, m=2: the first WQ-m+1 = 2 members of a write set may share a rack."""
    cov = ensemble(3, 3, 2)
    assert cov.accepts("b00") and cov.add_node("b00")
    assert cov.accepts("b01") and cov.add_node("b01")
    assert not cov.accepts("b02")          # a third copy in /r0 would leave the write set on 1 rack
    assert cov.accepts("b10")


def test_min_racks_equal_to_write_quorum_needs_distinct_racks_after_the_first():
    cov = ensemble(3, 3, 3)
    cov.add_node("b00")
    assert not cov.accepts("b01")
    assert cov.accepts("b10")


def test_write_quorum_one_accepts_anything():
    cov = ensemble(3, 1, 2)
    for bookie in ("b00", "b01", "b02"):
        assert cov.accepts(bookie)
        cov.add_node(bookie)


def test_duplicates_and_foreign_ensembles_are_refused():
    cov = ensemble(3, 2, 2)
    cov.add_node("b00")
    assert not cov.accepts("b00")
    assert not cov.add_node("b00")
    assert not cov.apply("b10", ensemble(3, 2, 2))   # Java checks the ensemble's identity


def test_wrap_around_write_sets_are_checked():
    """E=4, WQ=2: the last position shares write set 3 with position 0."""
    cov = ensemble(4, 2, 2)
    for bookie in ("b00", "b10", "b00x" if False else "b01", "b11"):
        assert cov.accepts(bookie)
        cov.add_node(bookie)
    # positions: /r0 /r1 /r0 /r1 -> every write set has 2 racks
    racks = [RACK[b] for b in cov.to_list()]
    assert all(len({racks[i] for i in ws}) == 2 for ws in write_sets(4, 2))


def test_parent_predicate_and_parent_ensemble():
    parent = ensemble(6, 6, 1)
    child = CoverageEnsemble(3, 2, 2, 2, RACK.__getitem__, parent=parent, parent_predicate=parent)
    parent.add_node("b30")
    assert not child.accepts("b30")        # the parent already holds it
    assert child.add_node("b00")
    assert parent.to_list() == ["b30", "b00"]


@given(st.integers(1, 6), st.integers(1, 4), st.integers(1, 4), st.randoms(use_true_random=False))
def test_greedy_placement_with_enough_racks_covers_every_write_set(e, w, m, rnd):
    """Picking only accepted bookies from 4 racks of 4 always yields full coverage when E >= WQ and
    greedy picks cannot corner themselves: a position's write sets hold at most 2 x (WQ - 1) other
    members, so 2 x WQ - 1 racks always leave one (E = WQ: one write set). With E = 5, WQ = 3 and 3 racks
    per write set, 4 racks can run out (r0 r1 r2 r3, then no rack fits the fifth position), in Java too."""
    if w > e or (2 * w - 1 > 4 and e != w):
        return
    cov = ensemble(e, w, m)
    pool = sorted(RACK)
    for _ in range(e):
        candidates = [b for b in pool if cov.accepts(b)]
        assert candidates, "with 4 racks an acceptable bookie always exists"
        cov.add_node(rnd.choice(candidates))
    racks = [RACK[b] for b in cov.to_list()]
    need = min(w, m)
    assert all(len({racks[i] for i in ws}) >= need for ws in write_sets(e, w))


def test_rule_matches_the_definition_exhaustively():
    """For WQ=3, m=2 the rule accepts exactly the racks that keep 2 racks reachable."""
    for placed in itertools.product(["/r0", "/r1"], repeat=2):
        cov = CoverageEnsemble(3, 3, 3, 2, lambda b: b.split("#")[0])
        for k, rack in enumerate(placed):
            cov.add_node(f"{rack}#{k}")
        for rack in ("/r0", "/r1", "/r2"):
            distinct = len(set(placed) | {rack})
            assert cov.accepts(f"{rack}#x") == (distinct >= 2)


def test_shapes_too_large_to_precompute_judge_each_position_the_same(monkeypatch):
    """A request may ask for E = 1024: such shapes get no precomputed windows (the region-aware policy
    tries thousands of per-region shapes; precomputed, they took gigabytes). Their positions are worked
    out as they are filled, with the same answers."""
    import random

    import policies.coverage as coverage

    assert coverage._windows(1024, 735, False) == ()
    rng = random.Random(3)
    for e, w, m, durability in [(9, 3, 2, 0), (12, 5, 3, 0), (8, 8, 2, 2), (10, 4, 4, 2)]:
        racks = [f"/r{i % 4}" for i in range(40)]
        bookies = [f"b{i}:1" for i in range(40)]
        where = dict(zip(bookies, racks))
        candidates = [rng.choice(bookies) for _ in range(200)]

        def run(cells):
            monkeypatch.setattr(coverage, "_MAX_WINDOW_CELLS", cells)
            coverage._WINDOWS.clear()
            cov = CoverageEnsemble(e, w, 2, m, where.__getitem__, regions=("/r0", "/r1", "/r2", "/r3"),
                                   min_durability=durability)
            answers = []
            for bookie in candidates:
                answers.append(cov.accepts(bookie))
                if answers[-1] and len(cov.chosen) < e:
                    cov.add_node(bookie)
            return answers, list(cov.chosen)

        assert run(4096) == run(0)
    coverage._WINDOWS.clear()
