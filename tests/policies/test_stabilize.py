"""Stabilization: departed bookies stay usable by a secondary instance for a grace period
(spec bookkeeper-rackaware.md §2.4; upstream testPlacementOnStabilizeNetworkTopology)."""

from __future__ import annotations

import json
import random

import pytest

from policies import Adherence, BookieInfo, NotEnoughBookiesError
from policies.errors import InvalidTopologyError
from policies.stabilize import PendingDepartures, StabilizedTopology

D = "/default-region/default-rack"
A1, A2, A3, A4 = "127.0.0.2:3181", "127.0.0.3:3181", "127.0.0.4:3181", "127.0.0.5:3181"
LAYOUT = {"/default-region/rack1": [A1], D: [A2, A3], "/default-region/rack2": [A4]}
P = 60


@pytest.fixture
def stabilized(make_policy, clock):
    def build(**conf):
        return make_policy(LAYOUT, default_rack=D, clock=clock, networkTopologyStabilizePeriodSeconds=P, **conf)
    return build


def test_flapping_bookie_is_used_only_when_needed(stabilized, clock):
    """testPlacementOnStabilizeNetworkTopology."""
    policy = stabilized()
    clock.advance(5)
    dead = policy.on_cluster_changed([A1, A2, A3], [])
    assert dead == set()     # BK quirk kept (App. A #1): empty with stabilization on
    for seed in range(20):
        result = policy.new_ensemble(3, 2, 2, rng=random.Random(seed))
        assert A4 not in result.ensemble
        assert result.adherence == Adherence.FAIL
        assert "retried on the stabilized topology" not in result.explain["fallbacks"]
    result = policy.new_ensemble(4, 2, 2, rng=random.Random(0))
    assert A4 in result.ensemble
    assert result.adherence == Adherence.FAIL
    assert result.explain["fallbacks"][-1] == "retried on the stabilized topology"
    policy.check_invariants()


def test_departed_bookie_unusable_after_the_period(stabilized, clock):
    policy = stabilized()
    policy.on_cluster_changed([A1, A2, A3], [])
    left_at = clock.now
    assert policy.pending_leaves() == {A4: left_at + P}
    clock.advance(P - 0.001)
    assert A4 in policy.new_ensemble(4, 2, 2, rng=random.Random(0)).ensemble
    clock.advance(0.001)
    assert policy.pending_leaves() == {}
    with pytest.raises(NotEnoughBookiesError, match="stabilized topology"):
        policy.new_ensemble(4, 2, 2, rng=random.Random(0))
    policy.check_invariants()


def test_rejoin_cancels_and_a_new_departure_restarts_the_delay(stabilized, clock):
    policy = stabilized()
    start = clock.now
    policy.on_cluster_changed([A1, A2, A3], [])         # leaves at start
    clock.advance(10)
    policy.on_cluster_changed([A1, A2, A3, A4], [])     # back
    assert policy.pending_leaves() == {}
    clock.advance(10)
    policy.on_cluster_changed([A1, A2, A3], [])         # leaves again at start + 20
    assert policy.pending_leaves() == {A4: start + 20 + P}
    clock.now = start + P + 1                            # the first departure's delay is over
    assert A4 in policy.new_ensemble(4, 2, 2, rng=random.Random(0)).ensemble
    clock.now = start + 20 + P
    with pytest.raises(NotEnoughBookiesError):
        policy.new_ensemble(4, 2, 2)


def test_rejoin_under_another_rack_moves_the_leaf(stabilized, clock):
    """BK bug fixed (App. A #10): no stale copy of the bookie stays under its old rack."""
    policy = stabilized()
    policy.on_cluster_changed([A1, A2, A3], [])
    policy.resolver.mapping[A4] = "/default-region/rack9"
    clock.advance(1)
    policy.on_cluster_changed([A1, A2, A3, A4], [])
    secondary = policy.secondary
    assert list(secondary.topology.leaves("/default-region/rack2")) == []
    assert list(secondary.topology.leaves("/default-region/rack9")) == [A4]
    policy.check_invariants()


def test_without_stabilization_dead_bookies_are_reported(make_policy):
    policy = make_policy(LAYOUT, default_rack=D)
    assert policy.on_cluster_changed([A1, A3], [A2]) == {A4}
    assert policy.pending_leaves() == {}
    assert policy.secondary is None


def test_secondary_gets_weights_rack_changes_and_default_rack(stabilized):
    """BK bug fixed (App. A #8): Java's secondary keeps uniform weights, old racks, /default-rack."""
    policy = stabilized(diskWeightBasedPlacementEnabled=True)
    secondary = policy.secondary
    assert secondary.default_location == D
    policy.update_bookie_info({A1: BookieInfo(total_disk=10, free_disk=7)})
    assert secondary.weights == {A1: 7, A2: 0, A3: 0, A4: 0}
    policy.resolver.mapping[A2] = "/default-region/rack3"
    policy.on_bookie_rack_change([A2])
    assert secondary.known[A2] == "/default-region/rack3"
    assert secondary.topology.rack_of(A2) == "/default-region/rack3"
    policy.with_default_rack("/default-region/other")
    assert secondary.default_location == "/default-region/other"
    policy.check_invariants()


def test_replace_bookie_retries_on_the_secondary(stabilized, clock):
    """Only the same-rack step walks the tree, so only a rack-mate of the departed bookie can get it."""
    policy = stabilized()
    policy.resolver.mapping["x:1"] = "/default-region/rack2"
    policy.on_cluster_changed([A1, A2, A3], [])
    result = policy.replace_bookie(4, 2, 2, None, [A1, A2, A3, "x:1"], "x:1", rng=random.Random(0))
    assert result.bookie == A4
    assert result.explain["fallbacks"][-1] == "retried on the stabilized topology"


def test_state_round_trip_decides_like_the_original(stabilized, make_policy, clock):
    """export_state -> JSON -> import_state into a fresh policy: same pending departures, same decisions."""
    policy = stabilized(diskWeightBasedPlacementEnabled=True)
    policy.update_bookie_info({A1: BookieInfo(total_disk=100, free_disk=50), A3: BookieInfo(total_disk=100,
                                                                                            free_disk=90)})
    policy.register_slow_bookie(A2, 3)
    clock.advance(7)
    policy.on_cluster_changed([A1, A2, A3], [A4])
    state = json.loads(json.dumps(policy.export_state()))
    restored = make_policy({}, default_rack=D, clock=clock, networkTopologyStabilizePeriodSeconds=P,
                           diskWeightBasedPlacementEnabled=True, resolver_extra=policy.resolver.mapping)
    restored.import_state(state)
    restored.check_invariants()
    assert restored.export_state() == policy.export_state()
    assert restored.pending_leaves() == policy.pending_leaves() == {A4: clock.now + P}
    policy.resolver.mapping["x:1"] = restored.resolver.mapping["x:1"] = "/default-region/rack2"
    for seed in range(10):
        for method, args in (("new_ensemble", (4, 2, 2)), ("new_ensemble", (3, 2, 2)),
                             ("replace_bookie", (3, 2, 2, None, [A1, A2, "x:1"], "x:1")),
                             ("replace_bookie", (3, 2, 2, None, [A1, A2, A3], A1))):
            assert outcome(policy, method, args, seed) == outcome(restored, method, args, seed)
    assert policy.reorder_read_sequence([A1, A2, A3], None, [0, 1, 2]) == \
        restored.reorder_read_sequence([A1, A2, A3], None, [0, 1, 2])
    clock.advance(P)
    assert restored.pending_leaves() == policy.pending_leaves() == {}


def outcome(policy, method, args, seed):
    try:
        result = getattr(policy, method)(*args, rng=random.Random(seed))
    except NotEnoughBookiesError as exc:
        return ("NotEnough", str(exc))
    return (result.ensemble, result.adherence, result.bookie, result.explain)


def test_stabilized_topology_unit():
    topology = StabilizedTopology(10)
    topology.advance(0.0)
    topology.add("a", "/r1")
    topology.add("b", "/r2")
    topology.remove("a")
    topology.remove("zz")                    # not in the tree: ignored
    assert sorted(topology.leaves("")) == ["a", "b"] and topology.pending == {"a": 0.0}
    assert topology.advance(9.99) == frozenset()
    assert topology.advance(10.0) == frozenset({"a"})
    assert list(topology.leaves("")) == ["b"] and topology.num_racks == 1
    topology.remove("b")
    topology.advance(11.0)
    topology.remove("b")                     # already pending: keeps the first departure time
    assert topology.expiries() == {"b": 20.0}
    copy = topology.copy()
    copy.check_invariants()
    assert copy.expiries() == {"b": 20.0}
    with pytest.raises(ValueError, match="networkTopologyStabilizePeriodSeconds"):
        StabilizedTopology(0)


def test_departures_expire_at_their_own_times_whatever_the_order_of_changes():
    """`advance` walks the departures only once the earliest is due (every public call of a policy
    advances it); against a plain record of departure times, over random joins, departures, rejoins,
    restores, copies and clock readings, the same leaves expire at the same readings."""
    for seed in range(60):
        g = random.Random(seed)
        topology = StabilizedTopology(10)
        reference: dict[str, float] = {}
        now = 0.0
        bookies = [f"b{i}" for i in range(8)]
        for _ in range(120):
            now += g.choice([0.0, 0.5, 3.0, 7.0])
            expected = {b for b, left in reference.items() if left + 10 <= now}
            for bookie in expected:
                del reference[bookie]
            assert topology.advance(now) == frozenset(expected), (seed, now)
            bookie = g.choice(bookies)
            op = g.random()
            if op < 0.4:
                topology.add(bookie, f"/r{g.randrange(3)}")
                reference.pop(bookie, None)
            elif op < 0.8:
                if bookie in topology and bookie not in reference:
                    reference[bookie] = now
                topology.remove(bookie)
            elif op < 0.9 and bookie not in topology:
                left = now - g.choice([0.0, 4.0, 9.0])
                topology.add_pending(bookie, f"/r{g.randrange(3)}", left)
                reference[bookie] = left
            else:
                topology = topology.copy()
            topology.check_invariants()
            assert topology.pending == reference


def test_pending_departures_follow_a_plain_record_of_departures():
    """`PendingDepartures` (the one mechanism of the rack- and zone-aware policies) against a plain
    bookie -> (location, departed_at) record: over random departures, restarts, cancellations,
    snapshots, copies and clock readings, the same departures expire at the same readings and the
    queries answer the same."""
    period = 10
    for seed in range(60):
        g = random.Random(seed)
        departures = PendingDepartures(period)
        reference: dict[str, tuple[str, float]] = {}
        now = 0.0
        bookies = [f"b{i}" for i in range(8)]
        for _ in range(120):
            now += g.choice([0.0, 0.5, 3.0, 7.0])
            if g.random() < 0.7:
                expected = sorted(b for b, (_, left) in reference.items() if left + period <= now)
                for bookie in expected:
                    del reference[bookie]
                assert sorted(departures.expire(now)) == expected, (seed, now)
            assert departures.usable(now) == {b: loc for b, (loc, left) in sorted(reference.items())
                                              if left + period > now}
            assert departures.expiries(now) == {b: left + period for b, (_, left) in sorted(reference.items())
                                                if left + period > now}
            assert departures.expiries() == {b: left + period for b, (_, left) in sorted(reference.items())}
            bookie = g.choice(bookies)
            op = g.random()
            if op < 0.5:
                location = f"/z{g.randrange(3)}/u{g.randrange(2)}"
                left = now - g.choice([0.0, 0.0, 4.0, 9.0])
                departures.depart(bookie, location, left)
                reference[bookie] = (location, left)
            elif op < 0.8:
                departures.cancel(bookie)
                reference.pop(bookie, None)
            elif op < 0.9:
                departures.load_json(json.loads(json.dumps(departures.to_json())))
            else:
                departures = departures.copy()
            departures.check_invariants()
            assert set(departures.departed_at) == set(reference) and len(departures) == len(reference)
            assert all(departures.location_of(b) == loc for b, (loc, _) in reference.items())
            assert departures.to_json() == {b: {"location": loc, "departed_at": left}
                                            for b, (loc, left) in sorted(reference.items())}


def test_pending_departures_read_both_snapshot_shapes():
    """The zone-aware shape (`location`, `departed_at`) and the stabilized topology's (plus
    `"set_aside": true`) load into the one class and are written back unchanged."""
    zone = {"b:3181": {"location": "/z1/u1", "departed_at": 12.5}, "a:3181": {"location": "/z2/u1", "departed_at": 3}}
    departures = PendingDepartures(60)
    departures.load_json(zone)
    assert departures.to_json() == {"a:3181": {"location": "/z2/u1", "departed_at": 3.0},
                                    "b:3181": {"location": "/z1/u1", "departed_at": 12.5}}
    assert departures.expiries() == {"a:3181": 63.0, "b:3181": 72.5}
    rack = {"a:3181": {"location": "/r1", "departed_at": 1.0, "set_aside": True},
            "b:3181": {"location": "/x/r2", "departed_at": 2.0}}
    assert PendingDepartures.entries_from_json(rack) == [("a:3181", "/r1", 1.0, True), ("b:3181", "/x/r2", 2.0, False)]
    departures.load_json(rack)
    assert departures.to_json({"a:3181"}) == rack


# -- locations of another depth (regression: the secondary refused them while departed leaves of the
#    old depth, or the moving bookie's own delayed leaf, were still in its tree) -------------------------

B1, B2 = "b1:3181", "b2:3181"


def test_the_only_bookie_moves_to_another_depth_on_both_instances(make_policy, clock):
    """A rack change is a move, not a departure: the secondary follows the primary at once."""
    policy = make_policy({"/r1": [B1]}, clock=clock, networkTopologyStabilizePeriodSeconds=P)
    policy.resolver.mapping[B1] = "/region/r9"
    policy.on_bookie_rack_change([B1])
    assert policy.known == policy.secondary.known == {B1: "/region/r9"}
    assert policy.secondary.topology.rack_of(B1) == "/region/r9"
    assert policy.join_failures == policy.secondary.join_failures == {}
    assert policy.pending_leaves() == {}, "a move starts no stabilization delay"
    assert policy.new_ensemble(1, 1, 1, rng=random.Random(0)).ensemble == [B1]
    policy.check_invariants()


def test_a_live_bookie_of_another_depth_sets_departed_leaves_aside(make_policy, clock):
    """The only bookie at /r1 left; B2 joins at /region/r9: both instances know B2. The departed leaf
    cannot share the tree with it, so it is set aside (never placed) while its delay still runs."""
    policy = make_policy({"/r1": [B1]}, clock=clock, networkTopologyStabilizePeriodSeconds=P)
    left_at = clock.now
    policy.on_cluster_changed([], [])
    clock.advance(1)
    policy.resolver.mapping[B2] = "/region/r9"
    policy.on_cluster_changed([B2], [])
    assert policy.known == policy.secondary.known == {B2: "/region/r9"}
    assert policy.pending_leaves() == {B1: left_at + P}, "the departure is still reported until its delay ends"
    secondary = policy.secondary.topology
    assert secondary.set_aside == {B1: "/r1"} and B1 not in secondary
    for seed in range(5):
        with pytest.raises(NotEnoughBookiesError):
            policy.new_ensemble(2, 2, 2, rng=random.Random(seed))     # the set-aside leaf is never used
    policy.check_invariants()
    clock.advance(P)
    assert policy.pending_leaves() == {}
    assert secondary.set_aside == {}
    policy.check_invariants()


def test_a_move_to_another_depth_sets_aside_the_departed_leaves_of_the_old_depth(make_policy, clock):
    policy = make_policy({"/r1": [B1], "/r2": [B2]}, clock=clock, networkTopologyStabilizePeriodSeconds=P)
    policy.on_cluster_changed([B1], [])                               # B2 leaves: pending on the secondary
    policy.resolver.mapping[B1] = "/region/r9"
    policy.on_bookie_rack_change([B1])
    assert policy.known == policy.secondary.known == {B1: "/region/r9"}
    assert policy.secondary.topology.set_aside == {B2: "/r2"}
    assert set(policy.pending_leaves()) == {B2}
    policy.check_invariants()


def test_a_live_bookie_of_the_old_depth_still_blocks_a_move_on_both_instances(make_policy, clock):
    """Only departed leaves give way: with another live bookie at /r2 the move fails everywhere alike."""
    policy = make_policy({"/r1": [B1], "/r2": [B2]}, clock=clock, networkTopologyStabilizePeriodSeconds=P)
    policy.resolver.mapping[B1] = "/region/r9"
    policy.on_bookie_rack_change([B1])
    assert policy.known == policy.secondary.known == {B1: "/r1", B2: "/r2"}
    assert "depth" in policy.join_failures[B1] and "depth" in policy.secondary.join_failures[B1]
    assert policy.secondary.topology.set_aside == {} and policy.pending_leaves() == {}
    policy.check_invariants()


def test_a_set_aside_departure_survives_a_snapshot(make_policy, clock):
    policy = make_policy({"/r1": [B1]}, clock=clock, networkTopologyStabilizePeriodSeconds=P)
    policy.on_cluster_changed([], [])
    policy.resolver.mapping[B2] = "/region/r9"
    policy.on_cluster_changed([B2], [])
    state = json.loads(json.dumps(policy.export_state()))
    assert state["pending_leaves"][B1] == {"location": "/r1", "departed_at": clock.now, "set_aside": True}
    restored = make_policy({}, clock=clock, networkTopologyStabilizePeriodSeconds=P,
                           resolver_extra=policy.resolver.mapping)
    restored.import_state(state)
    restored.check_invariants()
    assert restored.export_state() == policy.export_state()
    assert restored.secondary.topology.set_aside == {B1: "/r1"}


def test_stabilized_topology_sets_aside_only_departed_leaves():
    topology = StabilizedTopology(10)
    topology.advance(0.0)
    topology.add("a", "/r1")
    topology.add("b", "/r2")
    topology.remove("b")
    topology.remove("a")
    topology.advance(1.0)
    topology.add("a", "/x/r1")                # a returns at depth 3: b's departed leaf is set aside
    assert topology.set_aside == {"b": "/r2"} and topology.pending == {"b": 0.0}
    assert list(topology.leaves("")) == ["a"] and topology.depth == 3
    topology.check_invariants()
    copy = topology.copy()
    assert copy.set_aside == {"b": "/r2"}
    with pytest.raises(InvalidTopologyError):
        topology.add("c", "/r3")              # a live leaf holds depth 3
    assert topology.advance(10.0) == frozenset({"b"})
    assert topology.set_aside == {} and list(topology.leaves("")) == ["a"]
    topology.check_invariants()
