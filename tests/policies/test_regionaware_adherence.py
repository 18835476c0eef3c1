"""The region-aware adherence rule and its repair (apache/bookkeeper#1898: BookKeeper's check is a stub
that always answers MEETS_STRICT; this project implements the rule documented in
docs/policies-regionaware.md)."""

from __future__ import annotations

import random

import pytest

from policies import Adherence

from .test_regionaware_support import grid, make_policy

# Regions a, b, c with racks r0..r2 and two bookies per rack: "a-1-0:3181" is region a, rack /a/r1.
CLUSTER = grid({"a": 3, "b": 3, "c": 3}, bookies_per_rack=2)
DURABLE = {"reppRegionsToWrite": "a;b;c", "reppMinimumRegionsForDurability": 2}


def b(name: str) -> str:
    """`a10` -> `a-1-0:3181` (region a, rack 1, bookie 0)."""
    return f"{name[0]}-{name[1]}-{name[2]}:3181"


def ids(*names: str) -> list[str]:
    return [b(n) for n in names]


def test_an_empty_ensemble_fails():
    policy, _ = make_policy(CLUSTER)
    assert policy.is_ensemble_adhering([], 2, 2) == Adherence.FAIL


def test_bookkeeper_would_say_strict_where_a_write_set_sits_in_one_rack():
    """(a) racks: two replicas in one rack fail, whatever the regions (Java's stub says MEETS_STRICT)."""
    policy, _ = make_policy(CLUSTER)
    assert policy.is_ensemble_adhering(ids("a00", "a01", "b00"), 2, 2) == Adherence.FAIL
    assert policy.is_ensemble_adhering(ids("a00", "b00", "c00"), 2, 2) == Adherence.MEETS_STRICT


def test_members_that_are_not_writable_do_not_count():
    policy, _ = make_policy(CLUSTER)
    ensemble = ids("a00", "b00")
    assert policy.is_ensemble_adhering(ensemble, 2, 2) == Adherence.MEETS_STRICT
    policy.on_cluster_changed(sorted(set(CLUSTER) - {b("b00")}), [b("b00")])
    assert policy.is_ensemble_adhering(ensemble, 2, 2) == Adherence.FAIL


def test_default_location_member_fails_only_when_racks_are_enforced():
    bookies = dict(CLUSTER, **{"d1:3181": "/default-region/default-rack"})
    ensemble = [b("a00"), "d1:3181", b("b00")]
    relaxed, _ = make_policy(bookies)
    assert relaxed.is_ensemble_adhering(ensemble, 3, 2) == Adherence.MEETS_STRICT  # UnknownRegion is a region
    enforced, _ = make_policy(bookies, enforceMinNumRacksPerWriteQuorum="true")
    assert enforced.is_ensemble_adhering(ensemble, 3, 2) == Adherence.FAIL


@pytest.mark.parametrize("names, ack, expected", [
    (("a00", "a10", "b00"), 3, Adherence.MEETS_STRICT),  # 2 copies in a: losing a leaves 1, an ack needs 3
    (("a00", "a10", "b00"), 2, Adherence.FAIL),          # region a alone could acknowledge
    (("a00", "a10", "a20"), 3, Adherence.FAIL),          # one region
    (("a00", "b00", "c00"), 2, Adherence.MEETS_STRICT),
])
def test_durability_every_acknowledged_entry_spans_the_minimum_regions(names, ack, expected):
    policy, _ = make_policy(CLUSTER, **DURABLE)
    assert policy.is_ensemble_adhering(ids(*names), 3, ack) == expected


def test_durability_with_three_regions_counts_the_worst_two():
    policy, _ = make_policy(CLUSTER, reppRegionsToWrite="a;b;c", reppMinimumRegionsForDurability=3)
    ensemble = ids("a00", "a10", "b00", "b10", "c00")
    assert policy.is_ensemble_adhering(ensemble, 5, 5) == Adherence.MEETS_STRICT  # a+b hold 4 < 5
    assert policy.is_ensemble_adhering(ensemble, 5, 4) == Adherence.FAIL


def test_disabled_durability_leaves_only_the_soft_region_spread():
    features = {"repp_disable_durability_enforcement": 1}
    policy, _ = make_policy(CLUSTER, features=features, **DURABLE)
    assert policy.is_ensemble_adhering(ids("a00", "a10", "a20"), 3, 3) == Adherence.MEETS_SOFT
    features["repp_disable_durability_enforcement"] = 0
    assert policy.is_ensemble_adhering(ids("a00", "a10", "a20"), 3, 3) == Adherence.FAIL


def test_write_sets_in_one_region_are_soft_without_durability():
    policy, _ = make_policy(CLUSTER)
    ensemble = ids("a00", "a10", "b00", "b10")  # write sets [a, a] and [b, b] stay in one region
    assert policy.is_ensemble_adhering(ensemble, 2, 2) == Adherence.MEETS_SOFT
    assert policy.is_ensemble_adhering(ids("a00", "b00", "a10", "b10"), 2, 2) == Adherence.MEETS_STRICT


def test_one_populated_region_or_one_rack_per_quorum_asks_for_no_spread():
    single, _ = make_policy(grid({"a": 3}))
    assert single.is_ensemble_adhering(ids("a00", "a10", "a20"), 2, 2) == Adherence.MEETS_STRICT
    lenient, _ = make_policy(CLUSTER, minNumRacksPerWriteQuorum=1)
    assert lenient.is_ensemble_adhering(ids("a00", "a01", "a10"), 2, 2) == Adherence.MEETS_STRICT


def test_new_ensemble_reports_the_same_adherence_as_the_check():
    for conf in ({}, DURABLE):
        policy, _ = make_policy(CLUSTER, **conf)
        for seed in range(20):
            for sizes in ((3, 3, 3), (6, 6, 4), (5, 3, 3)):
                placed = policy.new_ensemble(*sizes, rng=random.Random(seed))
                assert placed.adherence == policy.is_ensemble_adhering(placed.ensemble, sizes[1], sizes[2])


def test_acknowledgements_need_enough_racks():
    policy, _ = make_policy(CLUSTER)
    assert policy.are_acked_bookies_adhering(ids("a00", "a10"), 3, 2)
    assert not policy.are_acked_bookies_adhering(ids("a00", "a01"), 3, 2)
    assert not policy.are_acked_bookies_adhering(ids("a00") + ["gone:3181"], 3, 2)


# -- replace_to_adhere -------------------------------------------------------------------------------

def changed_positions(before: list[str], after: list[str]) -> list[int]:
    return [i for i, (x, y) in enumerate(zip(before, after)) if x != y]


@pytest.mark.parametrize("ensemble, expected", [
    (ids("a00", "b00", "c00"), Adherence.MEETS_STRICT),
    (ids("a00", "a10", "b00", "b10"), Adherence.MEETS_SOFT),
])
def test_an_adhering_ensemble_is_returned_unchanged(ensemble, expected):
    policy, _ = make_policy(CLUSTER)
    result = policy.replace_to_adhere(len(ensemble), 2, 2, (), ensemble)
    assert (result.ensemble, result.adherence) == (ensemble, expected)


def test_one_replacement_repairs_a_shared_rack():
    policy, mapping = make_policy(CLUSTER)
    broken = ids("a00", "a01", "b00", "c00")
    result = policy.replace_to_adhere(4, 2, 2, (), broken, rng=random.Random(1))
    assert result.adherence == Adherence.MEETS_STRICT
    assert changed_positions(broken, result.ensemble) in ([0], [1])
    assert policy.is_ensemble_adhering(result.ensemble, 2, 2) == Adherence.MEETS_STRICT


def test_durability_is_repaired_across_regions():
    policy, mapping = make_policy(CLUSTER, **DURABLE)
    broken = ids("a00", "a10", "a20")
    result = policy.replace_to_adhere(3, 3, 3, (), broken, rng=random.Random(2))
    assert result.adherence == Adherence.MEETS_STRICT
    assert len(changed_positions(broken, result.ensemble)) == 1
    assert result.explain["replaced"]


def test_several_replacements_when_one_is_not_enough():
    policy, _ = make_policy(grid({"a": 3, "b": 3}, bookies_per_rack=3), minNumRacksPerWriteQuorum=3)
    broken = ids("a00", "a01", "a02")  # one rack; three racks are needed
    result = policy.replace_to_adhere(3, 3, 3, (), broken, rng=random.Random(3))
    assert result.adherence != Adherence.FAIL
    assert len(changed_positions(broken, result.ensemble)) == 2
    assert len({policy.known[x] for x in result.ensemble}) == 3


def test_exclusions_are_respected_while_repairing():
    policy, _ = make_policy(CLUSTER)
    broken = ids("a00", "a01", "b00", "c00")
    banned = set(CLUSTER) - set(broken) - {b("c10")}
    result = policy.replace_to_adhere(4, 2, 2, banned, broken, rng=random.Random(4))
    assert b("c10") in result.ensemble
    assert result.adherence != Adherence.FAIL


def test_an_ensemble_that_cannot_be_repaired_fails_with_no_ensemble():
    policy, _ = make_policy(grid({"a": 1}, bookies_per_rack=3))
    result = policy.replace_to_adhere(2, 2, 2, (), ids("a00", "a01"))
    assert (result.ensemble, result.adherence) == ([], Adherence.FAIL)
    assert result.explain["fallbacks"][-1] == ("no replacement can make the ensemble adhere: each write set "
                                               "needs 2 racks and the cluster has 1")


def _random_policy(seed: int):
    """A random region-aware cluster and configuration (durability, enforcement, racks per quorum),
    with some bookies not writable; returns the policy and every bookie id it may be asked about."""
    g = random.Random(seed)
    layout = {f"r{r}-{k}-{n}:3181": f"/region{r}/rack{k}" for r in range(g.choice([1, 2, 3, 4]))
              for k in range(g.choice([1, 2, 3])) for n in range(g.choice([1, 2, 3]))}
    conf = {"minNumRacksPerWriteQuorum": g.choice([1, 2, 3])}
    if g.random() < 0.5:
        conf.update(reppRegionsToWrite="region0;region1;region2;region3",
                    reppMinimumRegionsForDurability=g.choice([1, 2, 3]))
    if g.random() < 0.3:
        conf["enforceMinNumRacksPerWriteQuorum"] = "true"
    bookies = [*sorted(layout), "unmapped:3181", "gone:3181"]
    policy, _ = make_policy(layout, writable=[x for x in bookies[:-1] if g.random() > 0.1], **conf)
    return policy, bookies, g


def _random_cases(smallest: int):
    """(policy, bookies, generator, ensemble, W, A): 40 random ensembles of `smallest`-9 members on each
    of 150 random clusters."""
    for seed in range(150):
        policy, bookies, g = _random_policy(seed)
        for _ in range(40):
            size = g.randint(smallest, min(9, len(bookies)))
            write_quorum = g.randint(1, size)
            yield policy, bookies, g, g.sample(bookies, size), write_quorum, g.randint(1, write_quorum)


def test_a_write_set_short_of_the_hard_rules_is_exactly_what_makes_an_ensemble_fail():
    """The repair judges a candidate by its deficits (cheap to update for one changed position) and asks
    `is_ensemble_adhering` only when none is left: the two must agree on FAIL, over random clusters,
    configurations and ensembles (unknown and non-writable members included)."""
    for policy, _, _, ensemble, write_quorum, ack_quorum in _random_cases(1):
        deficit = sum(d for d, _ in policy._deficits(ensemble, write_quorum, ack_quorum))
        failing = policy.is_ensemble_adhering(ensemble, write_quorum, ack_quorum) == Adherence.FAIL
        assert failing == (deficit > 0), (ensemble, write_quorum, ack_quorum)


def test_the_deficit_of_a_one_position_change_is_updated_exactly():
    for policy, bookies, g, ensemble, write_quorum, ack_quorum in _random_cases(2):
        deficits = policy._deficits(ensemble, write_quorum, ack_quorum)
        position = g.randrange(len(ensemble))
        trial = list(ensemble)
        trial[position] = g.choice([x for x in bookies if x not in ensemble] or [ensemble[position]])
        expected = sum(d for d, _ in policy._deficits(trial, write_quorum, ack_quorum))
        got = policy._total_deficit(trial, position, deficits, sum(d for d, _ in deficits), write_quorum,
                                    ack_quorum)
        assert got == expected, (ensemble, trial, write_quorum, ack_quorum)


def test_repairs_offer_only_live_eligible_bookies_of_allowed_regions():
    """The repair offers what `replace_bookie` could return: writable bookies, not excluded, not already
    in the ensemble, in a region not switched off."""
    features: dict[str, int] = {"c.disallow": 1}
    cluster = grid({"a": 3, "b": 3, "c": 3}, bookies_per_rack=2)
    policy, _ = make_policy(cluster, features=features, reppDisallowBookiePlacementInRegionFeatureName="disallow",
                            writable=[x for x in cluster if x != b("b10")])
    broken = ids("a00", "a01", "b00")                 # a00 and a01 share rack /a/r0
    for seed in range(30):
        result = policy.replace_to_adhere(3, 2, 2, [b("a10")], broken, rng=random.Random(seed))
        assert result.adherence != Adherence.FAIL
        new = set(result.ensemble) - set(broken)
        assert new and not new & {b("a10"), b("b10")}
        assert not any(x.startswith("c-") for x in new)
        assert len(set(result.ensemble)) == 3


def test_the_repair_of_a_large_cluster_tries_each_rack_once_per_position(monkeypatch):
    """2,000 bookies on 120 racks, an ensemble whose neighbours share a rack (only MEETS_SOFT is
    reachable without durability, so every rack is tried): the search no longer calls `replace_bookie`,
    which walked every excluded bookie of the region once per rack tried (about a second per ledger,
    for every ledger the audit re-examines after a join)."""
    layout = {f"bk{i}:3181": f"/reg{i % 3}/rack{i % 40}" for i in range(2000)}
    policy, _ = make_policy(layout)
    ensemble = sorted((x for x, where in layout.items() if where.startswith("/reg0/")),
                      key=lambda x: (layout[x], x))[:4]
    offered = []
    original = type(policy)._one_per_rack

    def counting(self, *args):
        for bookie in original(self, *args):
            offered.append(bookie)
            yield bookie

    monkeypatch.setattr(type(policy), "_one_per_rack", counting)
    monkeypatch.setattr(type(policy), "replace_bookie", None)
    result = policy.replace_to_adhere(4, 2, 2, (), ensemble, rng=random.Random(1))
    assert result.adherence == Adherence.MEETS_SOFT
    assert len(offered) <= 4 * 4 * 120       # rounds x positions x racks


def test_an_ensemble_judged_beyond_repair_is_one_the_search_cannot_repair(monkeypatch):
    """Soundness of `_cannot_adhere`: over random clusters, configurations and ensembles, every FAIL
    ensemble it judges beyond repair is searched anyway, and the search ends without an ensemble."""
    judged = 0
    for policy, _bookies, _g, ensemble, write_quorum, ack_quorum in _random_cases(2):
        if policy.is_ensemble_adhering(ensemble, write_quorum, ack_quorum) != Adherence.FAIL:
            continue
        if policy._cannot_adhere(ensemble, write_quorum, ack_quorum) is None:
            continue
        judged += 1
        with monkeypatch.context() as searching:
            searching.setattr(type(policy), "_cannot_adhere", lambda self, *args: None)
            result = policy.replace_to_adhere(len(ensemble), write_quorum, ack_quorum, (), ensemble,
                                              rng=random.Random(judged))
        assert (result.ensemble, result.adherence) == ([], Adherence.FAIL), (ensemble, write_quorum, ack_quorum)
    assert judged > 200, judged


def test_a_wide_ensemble_that_durability_rules_out_is_not_searched(monkeypatch):
    """W = 32 copies with ack_quorum 2 over 4 regions: each region may hold one copy of a write set and
    holds at least 8, whatever is replaced. The search ran E rounds of E positions x racks to find no
    repair (1.4 s for E = 64, 6 s for E = 128, for every improving event while the audit waits for a
    fix); it now answers at once, saying why."""
    layout = {f"g{r}-{k}-{n}:3181": f"/g{r}/r{k}" for r in range(4) for k in range(5) for n in range(10)}
    policy, _ = make_policy(layout, reppRegionsToWrite="g0;g1;g2;g3", reppMinimumRegionsForDurability="2")
    ensemble = random.Random(3).sample(sorted(layout), 64)
    calls = []
    monkeypatch.setattr(type(policy), "_one_per_rack", lambda self, *args: calls.append(args) or iter(()))
    result = policy.replace_to_adhere(64, 32, 2, (), ensemble, rng=random.Random(1))
    assert (result.ensemble, result.adherence, calls) == ([], Adherence.FAIL, [])
    assert "puts at least 8 copies in its 1 fullest region(s); durability allows 1" in result.explain["fallbacks"][-1]
