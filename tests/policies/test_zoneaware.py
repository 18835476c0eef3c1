"""Zone-aware placement (spec bookkeeper-region-zone-isolation.md §3), ported from the behaviours of
BookKeeper's TestZoneawareEnsemblePlacementPolicy, plus the decisions this port made."""

from __future__ import annotations

import random

import pytest

from policies import Adherence, HealthInfo, NotEnoughBookiesError, create_policy
from policies.errors import UnsupportedOperationError
from policies.zone_index import UNRESOLVED, parse_zone_location

DEFAULT_FD = "/default-zone/default-upgradedomain"


def bk(n: int) -> str:
    return f"127.0.0.{n}:3181"


def make_policy(locations: dict[str, str], writable=None, readonly=(), **conf):
    """A zone-aware policy over `locations` (bookie -> /zone/ud) with `writable` bookies joined."""
    conf.setdefault("ensemblePlacementPolicy", "zoneaware")
    policy = create_policy(conf, resolver=dict(locations))
    policy.on_cluster_changed(list(locations) if writable is None else list(writable), list(readonly))
    return policy


def zones_of(policy, ensemble):
    return [policy.zone_of(b)[0] for b in ensemble]


# -- locations ----------------------------------------------------------------------------------


@pytest.mark.parametrize("location, expected", [
    ("/zone1/ud1", ("/zone1", "/ud1")),
    ("/zone1/ud1/", ("/zone1", "/ud1")),
    ("/default-zone/ud1", ("/default-zone", "/ud1")),
    (DEFAULT_FD, UNRESOLVED),
    ("/zone1", UNRESOLVED),
    ("/a/b/c", UNRESOLVED),
    ("zone1/ud1", UNRESOLVED),
    ("", UNRESOLVED),
    (None, UNRESOLVED),
])
def test_zone_and_upgrade_domain_are_parsed_from_two_component_locations(location, expected):
    assert parse_zone_location(location) == expected


def test_unmapped_bookies_join_in_the_default_fault_domain():
    policy = make_policy({bk(2): "/zone1/ud1"}, writable=[bk(2), bk(3)])
    assert policy.known[bk(3)] == DEFAULT_FD
    assert policy.zone_of(bk(3)) == UNRESOLVED


def test_min_zones_greater_than_desired_is_rejected_by_create_policy():
    with pytest.raises(ValueError, match="minNumZonesPerWriteQuorum"):
        create_policy({"ensemblePlacementPolicy": "zoneaware", "minNumZonesPerWriteQuorum": 4,
                       "desiredNumZonesPerWriteQuorum": 3})


# -- new_ensemble, strict -------------------------------------------------------------------------


def six_single_ud_zones():
    return {bk(n): f"/zone{n - 1}/ud1" for n in range(2, 8)}


def test_not_enough_writable_bookies_raises_and_readonly_bookies_do_not_count():
    locations = six_single_ud_zones()
    policy = make_policy(locations, writable=[bk(2), bk(3), bk(4)], minNumZonesPerWriteQuorum=1,
                         desiredNumZonesPerWriteQuorum=1)
    with pytest.raises(NotEnoughBookiesError):
        policy.new_ensemble(6, 3, 2)
    policy.on_cluster_changed([bk(2), bk(3), bk(4)], [bk(5), bk(6), bk(7)])
    with pytest.raises(NotEnoughBookiesError):
        policy.new_ensemble(6, 3, 2)
    policy.on_cluster_changed([], [bk(n) for n in range(2, 8)])
    with pytest.raises(NotEnoughBookiesError, match="position 0"):
        policy.new_ensemble(6, 3, 2)


def test_enough_writable_bookies_in_distinct_zones_meets_strict():
    locations = six_single_ud_zones()
    policy = make_policy(locations, desiredNumZonesPerWriteQuorum=4, minNumZonesPerWriteQuorum=2)
    result = policy.new_ensemble(6, 3, 2)
    assert set(result.ensemble) == set(locations)
    assert result.adherence is Adherence.MEETS_STRICT
    result = policy.new_ensemble(3, 3, 2)
    assert len(set(result.ensemble)) == 3 and set(result.ensemble) <= set(locations)
    assert result.adherence is Adherence.MEETS_STRICT


@pytest.mark.parametrize("seed", range(5))
def test_strict_placement_never_uses_the_default_fault_domain(seed):
    locations = {bk(2): "/zone1/ud1", bk(3): "/zone2/ud1", bk(4): "/zone3/ud1", bk(5): "/zone4/ud1"}
    default = {bk(6), bk(7), bk(8)}
    policy = make_policy(locations, writable=list(locations) + sorted(default), desiredNumZonesPerWriteQuorum=4)
    rng = random.Random(seed)
    result = policy.new_ensemble(4, 4, 2, rng=rng)
    assert not default & set(result.ensemble)
    assert result.explain["excluded"]["default_fault_domain"] == sorted(default)
    result = policy.new_ensemble(3, 3, 2, rng=rng)
    assert not default & set(result.ensemble)
    assert result.adherence is Adherence.MEETS_STRICT


def three_zones_two_uds():
    """addr1..addr8 of upstream's min-zones test: zone1-3 with ud1/ud2 (+ud3 in zone1, zone2)."""
    return {bk(2): "/zone1/ud1", bk(3): "/zone2/ud1", bk(4): "/zone3/ud1", bk(5): "/zone1/ud2",
            bk(6): "/zone2/ud2", bk(7): "/zone3/ud2", bk(8): "/zone1/ud3", bk(9): "/zone2/ud3",
            bk(10): DEFAULT_FD, bk(11): DEFAULT_FD}


def test_min_zones_per_write_quorum_gives_soft_adherence_and_strict_mode_checks_sizes():
    locations = three_zones_two_uds()
    writable = [bk(n) for n in (2, 3, 4, 5, 6, 7, 10, 11)]
    readonly = [bk(8), bk(9)]
    policy = make_policy(locations, writable, readonly, desiredNumZonesPerWriteQuorum=4,
                         minNumZonesPerWriteQuorum=3)
    result = policy.new_ensemble(4, 4, 2)
    assert len(set(result.ensemble)) == 4 and set(result.ensemble) <= set(writable) - {bk(10), bk(11)}
    assert result.adherence is Adherence.MEETS_SOFT
    with pytest.raises(ValueError, match="multiple of write_quorum"):
        policy.new_ensemble(4, 3, 2)

    relaxed = make_policy(locations, writable, readonly, desiredNumZonesPerWriteQuorum=4,
                          minNumZonesPerWriteQuorum=3, enforceStrictZoneawarePlacement="false")
    result = relaxed.new_ensemble(4, 3, 2)
    assert len(set(result.ensemble)) == 4
    assert result.adherence is Adherence.FAIL


def test_strict_mode_rejects_write_quorum_not_above_min_zones():
    policy = make_policy(six_single_ud_zones())
    with pytest.raises(ValueError, match="minNumZonesPerWriteQuorum=2"):
        policy.new_ensemble(4, 2, 2)


def test_without_enough_upgrade_domains_wide_quorums_fail_but_narrow_ones_span_all_zones():
    locations = {bk(2): "/zone1/ud1", bk(3): "/zone2/ud1", bk(4): "/zone3/ud1", bk(5): "/zone1/ud1",
                 bk(6): "/zone2/ud1", bk(7): "/zone3/ud1", bk(8): "/zone1/ud3", bk(9): "/zone2/ud3",
                 bk(10): DEFAULT_FD, bk(11): DEFAULT_FD}
    writable = [bk(n) for n in (2, 3, 4, 5, 6, 7, 10, 11)]
    policy = make_policy(locations, writable, [bk(8), bk(9)], desiredNumZonesPerWriteQuorum=4,
                         minNumZonesPerWriteQuorum=2)
    with pytest.raises(NotEnoughBookiesError):
        policy.new_ensemble(6, 6, 2)
    result = policy.new_ensemble(6, 3, 2)
    assert result.adherence is Adherence.MEETS_STRICT
    assert set(result.ensemble) == {bk(n) for n in range(2, 8)}
    zones = zones_of(policy, result.ensemble)
    for start in range(6):
        assert len({zones[(start + j) % 6] for j in range(3)}) == 3


def test_bookies_of_one_zone_in_a_write_quorum_get_distinct_upgrade_domains():
    locations = {}
    for n in range(2, 14):
        zone = 1 if n < 8 else 2
        locations[bk(n)] = f"/zone{zone}/ud{(n - 2) % 6 // 2 + 1}"
    policy = make_policy(locations, desiredNumZonesPerWriteQuorum=4, minNumZonesPerWriteQuorum=2)
    result = policy.new_ensemble(6, 6, 2)
    assert result.adherence is Adherence.MEETS_SOFT
    assert len({policy.known[b] for b in result.ensemble}) == 6
    zones = zones_of(policy, result.ensemble)
    assert all(zones[i] != zones[i + 1] for i in range(5))


def three_zones_two_uds_two_each():
    """addr1..addr14 of upstream's uniform-distribution and replace tests."""
    locations = {}
    n = 2
    for zone in (1, 2, 3):
        for ud in (1, 2):
            for _ in range(2):
                locations[bk(n)] = f"/zone{zone}/ud{ud}"
                n += 1
    locations[bk(14)] = DEFAULT_FD
    locations[bk(15)] = DEFAULT_FD
    return locations


def test_minimum_zones_first_then_a_second_upgrade_domain_per_zone():
    policy = make_policy(three_zones_two_uds_two_each(), desiredNumZonesPerWriteQuorum=5,
                         minNumZonesPerWriteQuorum=3)
    result = policy.new_ensemble(6, 6, 4)
    assert result.adherence is Adherence.MEETS_SOFT
    located = [policy.zone_of(b) for b in result.ensemble]
    assert len(set(located)) == 6
    assert len({zone for zone, _ in located[:3]}) == 3
    for i in range(3):
        assert located[i][0] == located[i + 3][0]
        assert located[i][1] != located[i + 3][1]


# -- replace_bookie -------------------------------------------------------------------------------


def test_replace_prefers_the_zone_and_upgrade_domain_the_quorum_needs():
    policy = make_policy(three_zones_two_uds_two_each(), desiredNumZonesPerWriteQuorum=3,
                         minNumZonesPerWriteQuorum=3)
    # bk(2),bk(3): z1/ud1  bk(4),bk(5): z1/ud2  bk(6),bk(7): z2/ud1  bk(8),bk(9): z2/ud2 ...
    ensemble = [bk(2), bk(6), bk(10), bk(4), bk(8), bk(12)]
    result = policy.replace_bookie(6, 6, 2, None, ensemble, bk(8))
    assert result.bookie == bk(9)
    assert result.ensemble == [bk(2), bk(6), bk(10), bk(4), bk(9), bk(12)]
    assert result.adherence is Adherence.MEETS_STRICT

    result = policy.replace_bookie(6, 3, 2, None, ensemble, bk(8), exclude={bk(9)})
    assert result.bookie == bk(7)

    with pytest.raises(NotEnoughBookiesError, match="position 4"):
        policy.replace_bookie(6, 3, 2, None, ensemble, bk(8), exclude={bk(9), bk(7)})


def test_replace_falls_back_to_two_upgrade_domains_per_zone():
    locations = {bk(2): "/zone1/ud1", bk(3): "/zone2/ud1", bk(4): "/zone3/ud1"}
    locations.update({bk(n): "/zone3/ud2" for n in range(5, 11)})
    locations.update({bk(11): DEFAULT_FD, bk(12): DEFAULT_FD})
    policy = make_policy(locations, desiredNumZonesPerWriteQuorum=4, minNumZonesPerWriteQuorum=3)
    ensemble = [bk(n) for n in range(2, 8)]
    result = policy.replace_bookie(6, 6, 2, None, ensemble, bk(5))
    assert policy.known[result.bookie] == "/zone3/ud2"
    assert result.bookie not in ensemble
    assert result.adherence is Adherence.MEETS_SOFT
    assert any("upgrade domain" in note for note in result.explain["fallbacks"])


def test_replace_with_empty_current_ensemble_returns_the_replacement_alone():
    policy = make_policy(six_single_ud_zones())
    result = policy.replace_bookie(3, 3, 2, None, [], bk(2))
    assert result.ensemble == [result.bookie]
    assert result.bookie != bk(2)


def test_replace_of_a_bookie_not_in_the_ensemble_is_rejected():
    policy = make_policy(six_single_ud_zones())
    with pytest.raises(ValueError, match="not in current_ensemble"):
        policy.replace_bookie(3, 3, 2, None, [bk(2), bk(3), bk(4)], bk(7))


# -- non-strict mode ------------------------------------------------------------------------------


def test_non_strict_new_ensemble_is_random_and_may_use_the_default_fault_domain():
    locations = {bk(2): "/zone1/ud1", bk(3): "/zone1/ud1", bk(4): "/zone1/ud1", bk(5): DEFAULT_FD,
                 bk(6): "/zone1/ud1"}
    conf = {"enforceStrictZoneawarePlacement": "false", "minNumZonesPerWriteQuorum": 3,
            "desiredNumZonesPerWriteQuorum": 4}
    policy = make_policy(locations, **conf)
    result = policy.new_ensemble(4, 3, 2, exclude={bk(6)})
    assert set(result.ensemble) == {bk(2), bk(3), bk(4), bk(5)}
    assert result.adherence is Adherence.FAIL

    policy.on_cluster_changed([bk(2), bk(3), bk(4), bk(6)], [bk(5)])
    with pytest.raises(NotEnoughBookiesError, match="only 3"):
        policy.new_ensemble(4, 3, 2, exclude={bk(6)})


def test_non_strict_replace_may_pick_the_default_fault_domain():
    locations = {bk(n): "/zone1/ud1" for n in range(2, 8)}
    locations[bk(8)] = DEFAULT_FD
    conf = {"enforceStrictZoneawarePlacement": "false", "minNumZonesPerWriteQuorum": 3,
            "desiredNumZonesPerWriteQuorum": 4}
    writable = [bk(n) for n in (2, 3, 4, 5, 6, 8)]
    policy = make_policy(locations, writable, [bk(7)], **conf)
    ensemble = [bk(2), bk(3), bk(4), bk(5)]
    result = policy.replace_bookie(4, 3, 2, None, ensemble, bk(4), exclude={bk(6)})
    assert result.bookie == bk(8)
    assert result.adherence is Adherence.FAIL

    policy.on_cluster_changed([bk(n) for n in (2, 3, 4, 5, 6)], [bk(7)])
    with pytest.raises(NotEnoughBookiesError):
        policy.replace_bookie(4, 3, 2, None, ensemble, bk(4), exclude={bk(6), bk(8)})


# -- adherence ------------------------------------------------------------------------------------


@pytest.fixture
def adherence_policy():
    locations = {bk(2): "/zone1/ud1", bk(3): "/zone1/ud2", bk(4): "/zone1/ud2", bk(5): "/zone2/ud1",
                 bk(6): "/zone2/ud2", bk(7): "/zone2/ud2", bk(8): "/zone3/ud1", bk(9): "/zone3/ud2",
                 bk(10): "/zone3/ud2", bk(11): DEFAULT_FD}
    # Upstream never joins these bookies: adherence resolves unknown bookies too.
    return make_policy(locations, writable=[], minNumZonesPerWriteQuorum=2, desiredNumZonesPerWriteQuorum=3)


@pytest.mark.parametrize("members, write_quorum, expected", [
    ((2, 3, 4), 3, Adherence.FAIL),                 # one zone only
    ((2, 3, 5), 3, Adherence.MEETS_SOFT),           # minimum zones, not desired
    ((2, 5, 8), 3, Adherence.MEETS_STRICT),         # desired zones
    ((2, 5), 2, Adherence.FAIL),                    # write quorum must exceed minimum zones
    ((3, 4, 5), 3, Adherence.FAIL),                 # two zone1 bookies in the same UD
    ((2, 5, 8, 11), 4, Adherence.FAIL),             # default fault domain
    ((2, 5, 8, 9, 10), 5, Adherence.MEETS_STRICT),  # zone3 x3 over two UDs is enough
    ((2, 5, 8, 3, 9, 10), 3, Adherence.FAIL),       # write set (3, 9, 10): 9 and 10 share z3/ud2
    ((2, 5, 10, 3, 9, 8), 3, Adherence.FAIL),       # write set (10, 3, 9)
    ((2, 5, 10, 3, 8, 9), 3, Adherence.MEETS_SOFT),  # write set (3, 8, 9) just meets soft
    ((2, 5, 8, 3), 3, Adherence.FAIL),              # ensemble size not a multiple of write quorum
    ((), 3, Adherence.FAIL),                        # empty ensemble
])
def test_ensemble_adherence(adherence_policy, members, write_quorum, expected):
    assert adherence_policy.is_ensemble_adhering([bk(n) for n in members], write_quorum, 2) is expected


def test_adherence_does_not_depend_on_strict_mode():
    locations = {bk(2): "/zone1/ud1", bk(3): "/zone2/ud1", bk(4): "/zone3/ud1"}
    relaxed = make_policy(locations, enforceStrictZoneawarePlacement="false")
    strict = make_policy(locations)
    for members in ([bk(2), bk(3), bk(4)], [bk(2), bk(3)]):
        assert relaxed.is_ensemble_adhering(members, 3, 2) is strict.is_ensemble_adhering(members, 3, 2)


def test_acked_bookies_need_min_zones_and_ack_quorum():
    locations = {bk(n): f"/zone{(n - 2) % 3 + 1}/ud{(n - 2) // 3 + 1}" for n in range(2, 11)}
    policy = make_policy(locations, desiredNumZonesPerWriteQuorum=4, minNumZonesPerWriteQuorum=2)
    assert not policy.are_acked_bookies_adhering({bk(2), bk(5)}, 10, 2)   # same zone
    assert not policy.are_acked_bookies_adhering({bk(2), bk(3)}, 10, 3)   # fewer than ack quorum
    assert policy.are_acked_bookies_adhering({bk(2), bk(3)}, 10, 2)

    policy = make_policy(locations, desiredNumZonesPerWriteQuorum=4, minNumZonesPerWriteQuorum=4)
    assert not policy.are_acked_bookies_adhering({bk(2), bk(3), bk(4)}, 4, 3)
    assert policy.are_acked_bookies_adhering({bk(2), bk(3), bk(4)}, 3, 3)
    assert not policy.are_acked_bookies_adhering({bk(2), bk(3), bk(5)}, 3, 3)


# -- rack changes (BK bug fixed: the (zone, UD) cache) --------------------------------------------


def test_a_rack_change_moves_the_bookie_for_placement_and_adherence():
    mapping = {bk(2): "/zone1/ud1", bk(3): "/zone2/ud1", bk(4): "/zone3/ud1", bk(5): "/zone1/ud2"}
    policy = create_policy({"ensemblePlacementPolicy": "zoneaware"}, resolver=mapping)
    policy.on_cluster_changed(list(mapping), [])
    assert policy.is_ensemble_adhering([bk(2), bk(3), bk(4)], 3, 2) is Adherence.MEETS_STRICT
    mapping[bk(4)] = "/zone1/ud3"
    policy.on_bookie_rack_change([bk(4)])
    # Java would still see zone3 (cached forever): the ensemble now has two zones only.
    assert policy.is_ensemble_adhering([bk(2), bk(3), bk(4)], 3, 2) is Adherence.MEETS_SOFT
    for seed in range(10):
        result = policy.new_ensemble(3, 3, 2, rng=random.Random(seed))
        assert result.adherence is Adherence.MEETS_SOFT
    policy.check_invariants()


def test_a_bookie_moved_into_the_default_fault_domain_is_no_longer_chosen():
    mapping = {bk(n): f"/zone{n}/ud1" for n in range(2, 6)}
    policy = create_policy({"ensemblePlacementPolicy": "zoneaware"}, resolver=mapping)
    policy.on_cluster_changed(list(mapping), [])
    mapping[bk(5)] = DEFAULT_FD
    policy.on_bookie_rack_change([bk(5)])
    for seed in range(10):
        assert bk(5) not in policy.new_ensemble(3, 3, 2, rng=random.Random(seed)).ensemble
    with pytest.raises(NotEnoughBookiesError):
        policy.new_ensemble(4, 4, 2)


# -- other hooks ----------------------------------------------------------------------------------


def test_read_order_hooks_and_unsupported_operations():
    policy = make_policy(six_single_ud_zones())
    ensemble = [bk(2), bk(3), bk(4), bk(5)]
    write_set = [2, 0]
    assert policy.reorder_read_sequence(ensemble, HealthInfo(), write_set) == [2, 0]
    assert policy.reorder_read_lac_sequence(ensemble, HealthInfo(), write_set) == [2, 0, 1, 3]
    assert write_set == [2, 0]
    policy.register_slow_bookie(bk(2), 7)
    with pytest.raises(UnsupportedOperationError):
        policy.replace_to_adhere(4, 2, 2, set(), ensemble)


def test_same_seed_same_result_and_arguments_untouched():
    policy = make_policy(three_zones_two_uds_two_each(), desiredNumZonesPerWriteQuorum=3)
    exclude = {bk(2)}
    first = policy.new_ensemble(6, 3, 2, None, exclude, rng=random.Random(42))
    second = policy.new_ensemble(6, 3, 2, None, exclude, rng=random.Random(42))
    assert first == second
    assert exclude == {bk(2)}
    ensemble = list(first.ensemble)
    replaced = policy.replace_bookie(6, 3, 2, None, ensemble, ensemble[1], exclude, rng=random.Random(7))
    assert ensemble == first.ensemble and exclude == {bk(2)}
    assert replaced == policy.replace_bookie(6, 3, 2, None, ensemble, ensemble[1], exclude, rng=random.Random(7))


def test_explain_names_caller_exclusions():
    policy = make_policy(six_single_ud_zones())
    result = policy.new_ensemble(3, 3, 2, exclude=[bk(3), bk(2)])
    assert result.explain["policy"] == "zoneaware"
    assert result.explain["excluded"]["caller"] == [bk(2), bk(3)]
    assert result.explain["fallbacks"] == []
