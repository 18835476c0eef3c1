"""Hypothesis properties of stabilization (`networkTopologyStabilizePeriodSeconds`) in every policy that
has it: which departed bookies wait out the delay, and until when (spec bookkeeper-rackaware.md §2.4,
bookkeeper-region-zone-isolation.md §3.8).

Oracle: a known bookie that stops being writable (it leaves or turns read-only) waits `P` seconds from
its departure; a departure while it already waits keeps the first time; it stops waiting when it joins
the topology again (a writable bookie whose join fails keeps waiting, as the model's invariants allow)
or when its delay ends. Placements use only known or waiting bookies.
"""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from policies import NotEnoughBookiesError, create_policy

PERIOD = 10
NAMES = [f"b{i}:3181" for i in range(8)]
# Per policy: locations of its own shape, its default location, and one of another depth.
LOCATIONS = {
    "rackaware": ["/r0", "/r1", "/r2", "/default-rack", "/x/y"],
    "isolated": ["/r0", "/r1", "/r2", "/x/y"],
    "zoneaware": ["/z0/u0", "/z0/u1", "/z1/u0", "/z2/u1", "/default-zone/default-upgradedomain", "/z9"],
    "regionaware": ["/a/r0", "/a/r1", "/b/r0", "/c/r1", "/default-region/default-rack", "/q"],
}
EXTRA_CONF = {
    "isolated": {"bookkeeperClientIsolationGroups": "g1"},
    "zoneaware": {"minNumZonesPerWriteQuorum": 1, "desiredNumZonesPerWriteQuorum": 2},
}
steps = st.sampled_from(["view", "view", "move", "time", "place"])


@given(name=st.sampled_from(sorted(LOCATIONS)), data=st.data())
def test_pending_leaves_follow_departures_returns_and_the_clock(name, data):
    locations = LOCATIONS[name]
    mapping = {bookie: data.draw(st.sampled_from(locations)) for bookie in NAMES}
    now = [0.0]
    policy = create_policy({"ensemblePlacementPolicy": name, "networkTopologyStabilizePeriodSeconds": PERIOD,
                            **EXTRA_CONF.get(name, {})}, resolver=mapping, clock=lambda: now[0], features={})
    left: dict[str, float] = {}
    for kind in data.draw(st.lists(steps, min_size=1, max_size=25)):
        if kind == "view":
            writable = set(data.draw(st.lists(st.sampled_from(NAMES), unique=True)))
            others = sorted(set(NAMES) - writable)
            readonly = data.draw(st.lists(st.sampled_from(others), unique=True)) if others else []
            for bookie in set(policy.known) - writable:
                left.setdefault(bookie, now[0])
            policy.on_cluster_changed(sorted(writable), sorted(readonly))
            for bookie in writable & set(policy.known):
                left.pop(bookie, None)
        elif kind == "move":
            bookie = data.draw(st.sampled_from(NAMES))
            mapping[bookie] = data.draw(st.sampled_from(locations))
            policy.on_bookie_rack_change([bookie])
            if bookie in policy.known:
                left.pop(bookie, None)
        elif kind == "time":
            now[0] += data.draw(st.sampled_from([1.0, 5.0, 9.999, 10.0, 20.0]))
        else:
            size = data.draw(st.integers(1, 4))
            try:
                placed = policy.new_ensemble(size, size, 1, rng=random.Random(data.draw(st.integers(0, 99))))
            except (NotEnoughBookiesError, ValueError):
                placed = None
            if placed is not None:
                assert set(placed.ensemble) <= set(policy.known) | set(policy.pending_leaves())
        left = {bookie: at for bookie, at in left.items() if at + PERIOD > now[0]}
        pending = policy.pending_leaves()
        assert pending.keys() == left.keys()
        for bookie, expiry in pending.items():
            assert abs(expiry - (left[bookie] + PERIOD)) < 1e-9
        policy.check_invariants()
