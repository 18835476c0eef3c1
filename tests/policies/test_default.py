"""The default (random) policy (spec bookkeeper-rackaware.md §2.3, §3; GenericEnsemblePlacementPolicyTest)."""

from __future__ import annotations

import json
import random
from collections import Counter

import pytest

from policies import Adherence, BookieInfo, NotEnoughBookiesError
from policies.errors import UnsupportedOperationError

from .conftest import cluster


@pytest.fixture
def default_policy(make_policy):
    def build(racks=None, **conf):
        return make_policy(racks if racks is not None else cluster(2, 3), policy="default", **conf)
    return build


def within(count: int, n: int, p: float) -> bool:
    return abs(count - n * p) <= 5 * (n * p * (1 - p)) ** 0.5


@pytest.mark.parametrize("weighted", [False, True])
def test_new_ensemble_distinct_writable_strict(default_policy, weighted):
    policy = default_policy(diskWeightBasedPlacementEnabled=weighted)
    for seed in range(50):
        result = policy.new_ensemble(4, 2, 2, {"foo": b"bar"}, rng=random.Random(seed))
        assert len(set(result.ensemble)) == 4 and set(result.ensemble) <= policy.known
        assert result.adherence == Adherence.MEETS_STRICT
        assert result.explain["policy"] == "default"


@pytest.mark.parametrize("weighted", [False, True])
def test_not_enough_bookies(default_policy, weighted):
    policy = default_policy(diskWeightBasedPlacementEnabled=weighted)
    with pytest.raises(NotEnoughBookiesError, match=r"only 6 writable bookie\(s\)"):
        policy.new_ensemble(7, 2, 2)
    with pytest.raises(NotEnoughBookiesError, match="excluding 2"):
        policy.new_ensemble(5, 2, 2, exclude=["b0-0:3181", "b0-1:3181"])
    empty = default_policy({}, diskWeightBasedPlacementEnabled=weighted)
    with pytest.raises(NotEnoughBookiesError):
        empty.new_ensemble(1, 1, 1)


def test_non_positive_ensemble_size_is_an_empty_fail(default_policy):
    result = default_policy().new_ensemble(0, 0, 0)
    assert (result.ensemble, result.adherence) == ([], Adherence.FAIL)


def test_uniform_selection(default_policy):
    policy = default_policy()
    rng = random.Random(1)
    n = 12000
    counts = Counter(policy.new_ensemble(1, 1, 1, rng=rng).ensemble[0] for _ in range(n))
    assert len(counts) == 6 and all(within(c, n, 1 / 6) for c in counts.values())


def test_weighted_selection_with_the_median_cap(default_policy):
    policy = default_policy({"/r": ["a:1", "b:1", "c:1", "d:1", "e:1"]}, diskWeightBasedPlacementEnabled=True,
                            bookieMaxMultipleForWeightBasedPlacement=4)
    policy.update_bookie_info({b: BookieInfo(total_disk=w, free_disk=w) for b, w in
                               zip(["a:1", "b:1", "c:1", "d:1", "e:1"], [50, 100, 100, 200, 500])})
    rng = random.Random(2)
    n = 20000
    counts = Counter(policy.new_ensemble(1, 1, 1, rng=rng).ensemble[0] for _ in range(n))
    expected = {"a:1": 50, "b:1": 100, "c:1": 100, "d:1": 200, "e:1": 400}  # spec §7.3: cap 4 x 100
    total = sum(expected.values())
    assert all(within(counts[b], n, m / total) for b, m in expected.items()), counts


def test_weighted_draws_only_writable_bookies(default_policy):
    """BK bug fixed (App. A #6): a read-only bookie keeps its weight entry but is never drawn."""
    policy = default_policy({"/r": ["a:1", "b:1", "c:1"]}, diskWeightBasedPlacementEnabled=True)
    policy.update_bookie_info({"a:1": BookieInfo(total_disk=1, free_disk=10**9), "ghost:1":
                               BookieInfo(total_disk=1, free_disk=10**9)})
    assert policy.on_cluster_changed(["b:1", "c:1"], ["a:1"]) == set()
    assert "a:1" in policy.weights
    for seed in range(100):
        assert set(policy.new_ensemble(2, 2, 2, rng=random.Random(seed)).ensemble) == {"b:1", "c:1"}
    with pytest.raises(NotEnoughBookiesError):
        policy.new_ensemble(3, 2, 2)


def test_dead_set_and_weight_bookkeeping(default_policy):
    policy = default_policy({"/r": ["a:1", "b:1", "c:1"]}, diskWeightBasedPlacementEnabled=True)
    policy.update_bookie_info({"a:1": BookieInfo(total_disk=9, free_disk=9)})
    assert policy.on_cluster_changed(["b:1"], ["c:1"]) == {"a:1"}
    assert "a:1" not in policy.weights
    policy.update_bookie_info({"c:1": BookieInfo(total_disk=5, free_disk=5)})
    policy.on_cluster_changed(["b:1", "c:1"], [])     # c returns from read-only: fresh zero weight
    assert policy.weights["c:1"] == 0
    policy.check_invariants()


def test_update_bookie_info_is_ignored_when_not_weighted(default_policy):
    """BK bug fixed (App. A #11): Java fails with a null pointer here."""
    policy = default_policy()
    policy.update_bookie_info({"b0-0:3181": BookieInfo(total_disk=1, free_disk=1)})
    assert policy.weights == {}


def test_replace_bookie(default_policy):
    policy = default_policy({"/r": ["a:1", "b:1", "c:1", "d:1"]})
    exclude = {"c:1"}
    current = ["a:1", "b:1"]
    for seed in range(20):
        result = policy.replace_bookie(2, 2, 2, {"foo": b"bar"}, current, "a:1", exclude, rng=random.Random(seed))
        assert result.bookie == "d:1"
        assert result.ensemble == ["d:1", "b:1"]
        assert result.adherence == Adherence.MEETS_STRICT
    assert exclude == {"c:1"} and current == ["a:1", "b:1"]   # BK quirk App. A #7 not reproduced
    assert policy.replace_bookie(1, 1, 1, None, [], "a:1", {"b:1", "c:1"}).ensemble == ["d:1"]
    with pytest.raises(ValueError, match="not a member"):
        policy.replace_bookie(2, 2, 2, None, current, "d:1")
    with pytest.raises(NotEnoughBookiesError):
        policy.replace_bookie(2, 2, 2, None, current, "a:1", {"c:1", "d:1"})


def test_other_hooks(default_policy):
    policy = default_policy()
    assert policy.is_ensemble_adhering(["x:1", "x:1"], 2, 2) == Adherence.MEETS_STRICT
    assert policy.are_acked_bookies_adhering({"x"}, 3, 2) is True
    with pytest.raises(UnsupportedOperationError):
        policy.replace_to_adhere(3, 2, 2, set(), ["a", "b", "c"])
    policy.register_slow_bookie("b0-0:3181", 1)
    write_set = [2, 0]
    assert policy.reorder_read_sequence(["a", "b", "c"], None, write_set) == [2, 0]
    assert policy.reorder_read_lac_sequence(["a", "b", "c"], None, write_set) == [2, 0, 1]
    assert write_set == [2, 0]
    assert policy.pending_leaves() == {}


def test_state_round_trip(default_policy, make_policy):
    policy = default_policy(diskWeightBasedPlacementEnabled=True)
    policy.update_bookie_info({"b0-0:3181": BookieInfo(total_disk=10, free_disk=7)})
    policy.on_cluster_changed(sorted(policy.known - {"b1-2:3181"}), ["b1-2:3181"])
    restored = make_policy({}, policy="default", diskWeightBasedPlacementEnabled=True)
    restored.import_state(json.loads(json.dumps(policy.export_state())))
    assert restored.export_state() == policy.export_state()
    for seed in range(10):
        assert policy.new_ensemble(3, 2, 2, rng=random.Random(seed)).ensemble == \
            restored.new_ensemble(3, 2, 2, rng=random.Random(seed)).ensemble
