"""Zone-aware stabilization (spec region-zone-isolation.md §3.8) and disk weights (§3.7)."""

from __future__ import annotations

import math
import random

import pytest

from policies import Adherence, BookieInfo, NotEnoughBookiesError, create_policy

DEFAULT_FD = "/default-zone/default-upgradedomain"


def bk(n: int) -> str:
    return f"127.0.0.{n}:3181"


class ManualClock:
    """Event time that only moves when a test says so."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


FOUR_ZONES = {bk(2): "/zone1/ud1", bk(3): "/zone2/ud1", bk(4): "/zone3/ud1", bk(5): "/zone4/ud1"}


@pytest.fixture
def clock():
    return ManualClock()


def stabilized(clock, period=99999, **conf):
    conf = {"ensemblePlacementPolicy": "zoneaware", "networkTopologyStabilizePeriodSeconds": period, **conf}
    policy = create_policy(conf, resolver=dict(FOUR_ZONES), clock=clock)
    policy.on_cluster_changed(list(FOUR_ZONES), [])
    return policy


def test_a_departed_bookie_is_used_only_when_the_live_cluster_cannot_place(clock):
    policy = stabilized(clock)
    dead = policy.on_cluster_changed([bk(2), bk(3), bk(4)], [])
    assert dead == set()  # BK quirk kept: with stabilization the dead set is always empty
    for seed in range(5):
        result = policy.new_ensemble(3, 3, 2, rng=random.Random(seed))
        assert bk(5) not in result.ensemble
        assert result.adherence is Adherence.MEETS_STRICT
        assert result.explain["fallbacks"] == []
    result = policy.new_ensemble(4, 4, 2)
    assert bk(5) in result.ensemble
    assert result.adherence is Adherence.MEETS_STRICT
    assert any("stabilized" in note for note in result.explain["fallbacks"])
    assert policy.pending_leaves() == {bk(5): 1000.0 + 99999}


def test_without_stabilization_the_departed_bookie_is_dead_and_gone(clock):
    policy = stabilized(clock, period=0)
    assert policy.on_cluster_changed([bk(2), bk(3), bk(4)], []) == {bk(5)}
    with pytest.raises(NotEnoughBookiesError):
        policy.new_ensemble(4, 4, 2)
    assert policy.pending_leaves() == {}


def test_the_departed_bookie_stops_being_usable_when_the_period_ends(clock):
    policy = stabilized(clock, period=60)
    policy.on_cluster_changed([bk(2), bk(3), bk(4)], [])
    clock.advance(59.5)
    assert bk(5) in policy.new_ensemble(4, 4, 2).ensemble
    clock.advance(0.5)
    assert policy.pending_leaves() == {}
    with pytest.raises(NotEnoughBookiesError):
        policy.new_ensemble(4, 4, 2)


def test_replace_retries_on_the_stabilized_cluster(clock):
    policy = stabilized(clock, period=60)
    policy.on_cluster_changed([bk(2), bk(3), bk(4)], [])
    result = policy.replace_bookie(4, 4, 2, None, [bk(2), bk(3), bk(4), bk(6)], bk(6))
    assert result.bookie == bk(5)
    assert any("stabilized" in note for note in result.explain["fallbacks"])


def test_a_rejoin_cancels_the_pending_departure_and_a_second_departure_restarts_the_delay(clock):
    policy = stabilized(clock, period=60)
    policy.on_cluster_changed([bk(2), bk(3), bk(4)], [])
    clock.advance(30)
    policy.on_cluster_changed(list(FOUR_ZONES), [])
    assert policy.pending_leaves() == {}
    clock.advance(20)
    policy.on_cluster_changed([bk(2), bk(3), bk(4)], [])
    assert policy.pending_leaves() == {bk(5): clock.now + 60}
    clock.advance(45)  # 95 s after the first departure, 45 s after the second
    assert bk(5) in policy.new_ensemble(4, 4, 2).ensemble


def test_pending_departures_survive_export_and_import(clock):
    policy = stabilized(clock, period=60)
    policy.on_cluster_changed([bk(2), bk(3), bk(4)], [])
    state = policy.export_state()
    assert state["pending_leaves"] == {bk(5): {"location": "/zone4/ud1", "departed_at": 1000.0}}
    restored = create_policy({"ensemblePlacementPolicy": "zoneaware", "networkTopologyStabilizePeriodSeconds": 60},
                             resolver=dict(FOUR_ZONES), clock=clock)
    restored.import_state(state)
    assert restored.pending_leaves() == policy.pending_leaves()
    assert restored.new_ensemble(4, 4, 2, rng=random.Random(3)) == policy.new_ensemble(4, 4, 2, rng=random.Random(3))
    restored.check_invariants()


# -- disk weights (spec §3.7) -------------------------------------------------------------------


def weighted_policy(strict: bool):
    locations = {bk(2): "/zone1/ud1", bk(3): "/zone1/ud2", bk(4): "/zone2/ud1", bk(5): "/zone2/ud2",
                 bk(6): DEFAULT_FD}
    conf = {"ensemblePlacementPolicy": "zoneaware", "diskWeightBasedPlacementEnabled": "true",
            "bookieMaxMultipleForWeightBasedPlacement": -1, "minNumZonesPerWriteQuorum": 1,
            "enforceStrictZoneawarePlacement": str(strict).lower()}
    policy = create_policy(conf, resolver=locations)
    policy.on_cluster_changed(list(locations), [])
    policy.update_bookie_info({b: BookieInfo(total_disk=100, free_disk=100) for b in locations} |
                              {bk(5): BookieInfo(total_disk=1000, free_disk=1000)})
    return policy


def assert_binomial(count: int, trials: int, p: float) -> None:
    """count ~ Binomial(trials, p) within 5 sigma (false-failure odds below 1e-6)."""
    sigma = math.sqrt(trials * p * (1 - p))
    assert abs(count - trials * p) <= 5 * sigma, (count, trials * p, sigma)


def test_weighted_new_ensemble_draws_in_proportion_to_free_disk():
    policy = weighted_policy(strict=False)
    rng = random.Random(11)
    trials = 20000
    heavy = sum(policy.new_ensemble(1, 1, 1, rng=rng).ensemble[0] == bk(5) for _ in range(trials))
    assert_binomial(heavy, trials, 1000 / 1400)  # no cap: 1000 against four bookies of 100


def test_weighted_strict_replace_draws_in_proportion_to_free_disk():
    policy = weighted_policy(strict=True)
    rng = random.Random(12)
    trials = 20000
    picks = [policy.replace_bookie(1, 1, 1, None, [bk(3)], bk(3), {bk(2)}, rng=rng).bookie for _ in range(trials)]
    assert set(picks) == {bk(4), bk(5)}  # default fault domain and exclusions never chosen
    assert_binomial(picks.count(bk(5)), trials, 1000 / 1100)


def test_weight_cap_limits_a_large_bookie_to_the_multiple_of_the_median():
    locations = {bk(n): f"/zone{n}/ud1" for n in range(2, 7)}
    conf = {"ensemblePlacementPolicy": "zoneaware", "diskWeightBasedPlacementEnabled": "true",
            "bookieMaxMultipleForWeightBasedPlacement": 2, "enforceStrictZoneawarePlacement": "false"}
    policy = create_policy(conf, resolver=locations)
    policy.on_cluster_changed(list(locations), [])
    policy.update_bookie_info({b: BookieInfo(100, 100) for b in locations} | {bk(6): BookieInfo(10000, 10000)})
    rng = random.Random(13)
    trials = 20000
    heavy = sum(policy.new_ensemble(1, 1, 1, rng=rng).ensemble[0] == bk(6) for _ in range(trials))
    assert_binomial(heavy, trials, 200 / 600)  # capped at 2 x median (100): 200 against 4 x 100


def zoned_weighted_policy(multiple: int):
    """Three zones of two upgrade domains with two bookies each (bk(10)..bk(21)), strict mode."""
    locations = {bk(10 + i): f"/zone{i // 4 + 1}/ud{i // 2 % 2 + 1}" for i in range(12)}
    conf = {"ensemblePlacementPolicy": "zoneaware", "diskWeightBasedPlacementEnabled": "true",
            "bookieMaxMultipleForWeightBasedPlacement": multiple}
    policy = create_policy(conf, resolver=locations)
    policy.on_cluster_changed(list(locations), [])
    return policy


@pytest.fixture(params=["enumerated", "rack-weights"])
def pick_path(request, monkeypatch):
    """Run a test through both weighted pick paths (small views are enumerated, larger ones use RackWeights)."""
    import policies.zoneaware as zoneaware

    if request.param == "rack-weights":
        monkeypatch.setattr(zoneaware, "_ENUMERATE_BELOW", 0)
    return request.param


def test_weighted_strict_pick_has_the_distribution_of_a_selector_over_its_candidates(pick_path):
    """Replacing the zone3 bookie of a 3-zone ensemble: candidates are zone3 minus the ensemble, and the
    median cap is computed over those candidates (spec §3.7; rackaware.md §7.4), not over the cluster."""
    from policies.selection import WeightedSelector

    policy = zoned_weighted_policy(multiple=2)
    free = dict(zip([bk(10 + i) for i in range(12)], [5, 5, 5, 5, 9, 9, 9, 9, 0, 40, 100, 3000]))
    policy.update_bookie_info({b: BookieInfo(total_disk=10**4, free_disk=f) for b, f in free.items()})
    current = [bk(10), bk(14), bk(21)]
    candidates = [bk(18), bk(19), bk(20)]   # zone3 minus bk(21): median 40 -> cap 80; bk(18) gets 40
    reference = WeightedSelector(candidates, policy.weights, 2)
    rng = random.Random(14)
    trials = 30000
    picks = [policy.replace_bookie(3, 3, 2, None, current, bk(21), rng=rng).bookie for _ in range(trials)]
    assert set(picks) <= set(candidates)
    for bookie in candidates:
        assert_binomial(picks.count(bookie), trials, reference.probability(bookie))  # 40/160, 40/160, 80/160


def test_weighted_picks_follow_new_weights_after_a_disk_update(pick_path):
    """The cached sampler is dropped when `update_bookie_info` brings new weights."""
    policy = weighted_policy(strict=False)
    rng = random.Random(15)
    trials = 20000
    policy.new_ensemble(1, 1, 1, rng=rng)     # warm the sampler on the first weights
    policy.update_bookie_info({b: BookieInfo(total_disk=100, free_disk=100) for b in policy.known} |
                              {bk(2): BookieInfo(total_disk=400, free_disk=400)})
    heavy = sum(policy.new_ensemble(1, 1, 1, rng=rng).ensemble[0] == bk(2) for _ in range(trials))
    assert_binomial(heavy, trials, 400 / 800)


def test_a_selector_kept_per_whole_view_draws_as_one_built_over_its_candidates(monkeypatch):
    """Strict weighted picks over a view none of whose bookies is excluded use a selector kept per
    view; with that shortcut taken away (every pick lists its candidates) every call, exclusions and
    weight updates included, decides the same and leaves the generator in the same state."""
    from policies.zoneaware import ZoneawarePolicy

    outcomes = {}
    for shortcut in (True, False):
        if not shortcut:
            original = ZoneawarePolicy._pick

            def listing(self, rng, view, excluded, index=None, cut=(), whole=False):
                return original(self, rng, view, excluded, index, cut, False)

            monkeypatch.setattr(ZoneawarePolicy, "_pick", listing)
        policy = zoned_weighted_policy(multiple=2)
        g = random.Random(21)
        seen = []
        for call in range(600):
            if call % 100 == 0:
                policy.update_bookie_info({b: BookieInfo(10**4, g.randrange(0, 10**4)) for b in sorted(policy.known)})
            exclude = g.sample(sorted(policy.known), g.choice([0, 0, 1, 2]))
            rng = random.Random(call)
            try:
                result = policy.new_ensemble(g.choice([3, 3, 6]), 3, 2, None, exclude, rng=rng)
                seen.append((result.ensemble, str(result.adherence), rng.random()))
            except NotEnoughBookiesError as exc:
                seen.append((str(exc), rng.random()))
        outcomes[shortcut] = seen
    assert outcomes[True] == outcomes[False]
    assert len({tuple(s[0]) for s in outcomes[True] if isinstance(s[0], list)}) > 50   # many distinct ensembles
