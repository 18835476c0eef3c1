"""Read ordering (spec bookkeeper-rackaware.md §8; region spec §2.3; upstream
TestRackawareEnsemblePlacementPolicy.testNode*, testPendingRequests*, testNodeWithFailures)."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from policies import HealthInfo, create_policy
from policies.read_order import ReadClass, SlowBookieCache, add_missing_indices, classify, reorder_read_sequence

D = "/default-region/default-rack"
A1, A2, A3, A4 = "127.0.0.2:3181", "127.0.0.3:3181", "127.0.0.4:3181", "127.0.0.5:3181"
ENSEMBLE = [A1, A2, A3, A4]
LAYOUT = {"/default-region/rack1": [A1], D: [A2, A3], "/default-region/rack2": [A4]}


@pytest.fixture
def policy(make_policy, clock):
    def build(**conf):
        return make_policy(LAYOUT, default_rack=D, clock=clock, **conf)
    return build


def test_all_available_keeps_the_write_set(policy):
    p = policy()
    assert p.reorder_read_sequence(ENSEMBLE, HealthInfo(), [0, 1, 2, 3]) == [0, 1, 2, 3]


def test_node_down_goes_last(policy):
    p = policy()
    p.on_cluster_changed([A2, A3, A4], [])
    assert p.reorder_read_sequence(ENSEMBLE, HealthInfo(), [0, 1, 2, 3]) == [1, 2, 3, 0]


def test_read_only_node_alone_does_not_reorder(policy):
    p = policy()
    p.on_cluster_changed([A2, A3, A4], [A1])
    assert p.reorder_read_sequence(ENSEMBLE, HealthInfo(), [0, 1, 2, 3]) == [0, 1, 2, 3]


def test_slow_nodes_go_last_in_write_set_order(policy):
    p = policy()
    p.register_slow_bookie(A1, 0)
    assert p.reorder_read_sequence(ENSEMBLE, HealthInfo(pending={A1: 1}), [0, 1, 2, 3]) == [1, 2, 3, 0]
    p.register_slow_bookie(A2, 0)
    assert p.reorder_read_sequence(ENSEMBLE, HealthInfo(pending={A1: 1, A2: 2}), [0, 1, 2, 3]) == [2, 3, 0, 1]


def test_two_nodes_down(policy):
    p = policy()
    p.on_cluster_changed([A3, A4], [])
    assert p.reorder_read_sequence(ENSEMBLE, HealthInfo(), [0, 1, 2, 3]) == [2, 3, 0, 1]


def test_down_and_read_only(policy):
    p = policy()
    p.on_cluster_changed([A3, A4], [A2])
    assert p.reorder_read_sequence(ENSEMBLE, HealthInfo(), [0, 1, 2, 3]) == [2, 3, 1, 0]


def test_down_and_slow(policy):
    p = policy()
    p.register_slow_bookie(A1, 0)
    p.on_cluster_changed([A1, A3, A4], [])
    assert p.reorder_read_sequence(ENSEMBLE, HealthInfo(pending={A1: 1}), [0, 1, 2, 3]) == [2, 3, 0, 1]


def test_down_read_only_and_slow(policy):
    p = policy()
    p.on_cluster_changed([A3, A4], [A2])
    p.register_slow_bookie(A3, 0)
    assert p.reorder_read_sequence(ENSEMBLE, HealthInfo(pending={A3: 1}), [0, 1, 2, 3]) == [3, 1, 2, 0]


@pytest.mark.parametrize("pending, write_set, expected", [
    ({A1: 20, A2: 7, A3: 1, A4: 5}, [0, 1, 2, 3], [2, 0, 1, 3]),   # testPendingRequestsReorder
    ({A1: 10, A2: 7, A3: 1, A4: 5}, [0, 1, 2, 3], [0, 1, 2, 3]),   # below the threshold
    ({A1: 1, A2: 7, A3: 1, A4: 5}, [0, 1, 2, 3], [0, 1, 2, 3]),    # first is already the best (ties keep it)
])
def test_pending_request_threshold(policy, pending, write_set, expected):
    p = policy(readReorderThresholdPendingRequests=10)
    assert p.reorder_read_sequence(ENSEMBLE, HealthInfo(pending=pending), write_set) == expected


def test_pending_request_threshold_large_ensemble(make_policy):
    """testPendingRequestsReorderLargeEnsemble: only write-set members are compared."""
    bookies = [f"127.0.0.{i}:3181" for i in range(2, 9)]
    p = make_policy({"/r1": bookies}, readReorderThresholdPendingRequests=10)
    pending = dict(zip(bookies, [1, 20, 0, 12, 9, 2, 10]))
    assert p.reorder_read_sequence(bookies, HealthInfo(pending=pending), [1, 3, 5, 6]) == [5, 1, 3, 6]


def test_slow_registration_is_ignored_with_a_threshold(policy):
    p = policy(readReorderThresholdPendingRequests=10)
    p.register_slow_bookie(A1, 0)
    assert len(p.slow_bookies) == 0


def test_failed_bookies_after_healthy_ones_in_write_set_order(policy):
    """testNodeWithFailures; within a class the write-set order wins (spec §8.1 note, quirk #4)."""
    p = policy()
    p.register_slow_bookie(A3, 0)  # forces the classification pass
    health = HealthInfo(failures={A1: 20, A2: 22})
    order = p.reorder_read_sequence(ENSEMBLE, health, [0, 1, 2, 3])
    assert order == [3, 0, 1, 2]
    # a later failure first in the write set stays first
    assert p.reorder_read_sequence(ENSEMBLE, HealthInfo(failures={A1: 22, A2: 20}), [0, 1, 2, 3]) == [3, 0, 1, 2]


def test_slow_bookie_outside_the_write_set_changes_nothing(policy):
    """testSlowBookieInEnsembleOnly."""
    p = policy()
    p.register_slow_bookie(A1, 0)
    assert p.reorder_read_sequence(ENSEMBLE, HealthInfo(pending={A1: 1}), [1, 2, 3]) == [1, 2, 3]


def test_large_failed_entry_ids_never_corrupt_indices(policy):
    """BK bug fixed (App. A #4): Java recovers index 1 instead of 0 for entry 1,000,000 with E=3."""
    p = policy()
    p.on_cluster_changed([A1, A2, A4], [])
    ensemble = [A1, A2, A3]
    order = p.reorder_read_sequence(ensemble, HealthInfo(failures={A1: 1_000_000}), [0, 1, 2])
    assert order == [1, 0, 2]
    assert sorted(order) == [0, 1, 2]


def test_write_set_is_not_mutated_and_lac_appends_missing(policy):
    p = policy()
    p.on_cluster_changed([A2, A3, A4], [])
    write_set = [0, 2]
    assert p.reorder_read_sequence(ENSEMBLE, None, write_set) == [2, 0]
    assert write_set == [0, 2]
    assert p.reorder_read_lac_sequence(ENSEMBLE, None, write_set) == [2, 0, 1, 3]


def test_bad_index_is_a_value_error(policy):
    with pytest.raises(ValueError, match="write_set"):
        policy().reorder_read_sequence(ENSEMBLE, None, [0, 4])


def test_slow_bookies_expire_on_the_injected_clock(policy, clock):
    p = policy(bookieFailureHistoryExpirationMSec=60000)
    p.register_slow_bookie(A1, 5)
    clock.advance(59.9)
    assert p.reorder_read_sequence(ENSEMBLE, None, [0, 1, 2, 3]) == [1, 2, 3, 0]
    clock.advance(0.1)
    assert p.reorder_read_sequence(ENSEMBLE, None, [0, 1, 2, 3]) == [0, 1, 2, 3]


def test_random_reordering_shuffles_only_inside_classes(policy):
    """BK bug fixed (App. A #5): groups keep their boundaries; LOCAL members are shuffled uniformly."""
    p = policy(ensembleRandomReadReordering=True)
    p.on_cluster_changed([A1, A2, A3], [])   # A4 (index 3) unavailable
    rng = random.Random(3)
    n = 6000
    counts = Counter()
    for _ in range(n):
        order = p.reorder_read_sequence(ENSEMBLE, None, [0, 1, 2, 3], rng=rng)
        assert order[3] == 3
        counts[tuple(order[:3])] += 1
    assert len(counts) == 6
    p_each, sigma = 1 / 6, (n * (1 / 6) * (5 / 6)) ** 0.5
    assert all(abs(c - n * p_each) < 5 * sigma for c in counts.values())


# -- the pure functions, incl. the region-aware variant ---------------------------------------------

def _order(ensemble, write_set, known, readonly=(), slow=(), failures=None, local=None, **kwargs):
    failures = failures or {}
    return reorder_read_sequence(
        ensemble, write_set, is_known=set(known).__contains__, is_readonly=set(readonly).__contains__,
        is_slow=set(slow).__contains__, failure_of=lambda b: failures.get(b, -1), pending_of=lambda b: 0,
        is_local=None if local is None else set(local).__contains__, **kwargs)


def test_classification_priorities():
    def cls(bookie, **kw):
        args = dict(is_known=lambda b: True, is_readonly=lambda b: False, is_slow=lambda b: False,
                    failure_of=lambda b: -1)
        args.update(kw)
        return classify(bookie, **args)
    assert cls("x") == ReadClass.LOCAL
    assert cls("x", failure_of=lambda b: 3) == ReadClass.LOCAL_FAIL
    assert cls("x", failure_of=lambda b: 3, is_slow=lambda b: True) == ReadClass.LOCAL_FAIL
    assert cls("x", is_slow=lambda b: True) == ReadClass.SLOW
    assert cls("x", is_local=lambda b: False) == ReadClass.REMOTE
    assert cls("x", is_local=lambda b: False, failure_of=lambda b: 1) == ReadClass.REMOTE_FAIL
    assert cls("x", is_known=lambda b: False) == ReadClass.UNAVAILABLE
    assert cls("x", is_known=lambda b: False, is_readonly=lambda b: True) == ReadClass.READ_ONLY
    assert cls("x", is_known=lambda b: False, is_readonly=lambda b: True, is_slow=lambda b: True) == ReadClass.SLOW


def test_region_aware_tries_two_locals_then_one_remote():
    ens = ["l1", "r1", "l2", "l3", "r2"]
    order = _order(ens, [0, 1, 2, 3, 4], known=ens, local={"l1", "l2", "l3"})
    assert order == [0, 2, 1, 3, 4]


def test_region_aware_failed_locals_count_as_local_for_the_insertion():
    ens = ["l1", "l2", "r1", "l3"]
    order = _order(ens, [0, 1, 2, 3], known=ens, local={"l1", "l2", "l3"}, failures={"l1": 5})
    # LOCAL: l2, l3; LOCAL_FAIL: l1 -> merged locals l2, l3, l1; remote r1 inserted at position 2
    assert order == [1, 3, 2, 0]


def test_region_aware_remote_first_when_no_local():
    ens = ["r1", "x", "r2"]
    order = _order(ens, [0, 1, 2], known={"r1", "r2"}, local=set())
    assert order == [0, 2, 1]


def test_region_aware_always_classifies():
    """With is_local given, the classification runs even when every replica is healthy."""
    ens = ["r1", "l1"]
    assert _order(ens, [0, 1], known=ens, local={"l1"}) == [1, 0]


def test_slow_cache_export_restore():
    cache = SlowBookieCache(60.0)
    cache.register("a", 7, 100.0)
    other = SlowBookieCache(60.0)
    other.restore(cache.export())
    assert other.contains("a", 159.0) and not other.contains("a", 160.0)
    cache.purge(200.0)
    assert len(cache) == 0


@pytest.mark.parametrize("name", ["default", "rackaware", "regionaware", "zoneaware", "isolated"])
@pytest.mark.parametrize(("size", "write_set", "expected"), [
    (10, [5, 6], [5, 6, 1, 2, 3, 4, 7, 8, 9, 0]),
    (3, [2], [2, 1, 0]),
    (4, [1, 2, 0], [1, 2, 0, 3]),
    (3, [0, 1, 2], [0, 1, 2]),
])
def test_lac_sequence_appends_missing_indices_as_bookkeeper_does(name, size, write_set, expected):
    """BK quirk (spec §8.3): a missing index 0 ends last, the other missing indices follow in ascending order."""
    conf = {"ensemblePlacementPolicy": name}
    if name == "isolated":
        conf["bookkeeperClientIsolationGroups"] = "g1"
    bookies = [f"10.0.0.{i}:3181" for i in range(size)]
    policy = create_policy(conf)
    policy.on_cluster_changed(bookies, [])
    assert policy.reorder_read_lac_sequence(bookies, HealthInfo(), write_set) == expected


@pytest.mark.parametrize(("size", "write_set", "expected"), [
    (10, [5, 6], [5, 6, 1, 2, 3, 4, 7, 8, 9, 0]), (3, [2], [2, 1, 0]), (1, [], [0]), (2, [1], [1, 0]),
])
def test_add_missing_indices_matches_bookkeeper(size, write_set, expected):
    assert add_missing_indices(write_set, size) == expected
