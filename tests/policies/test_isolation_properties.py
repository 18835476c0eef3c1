"""Hypothesis invariants of the isolation policy (spec region-zone-isolation.md §4.5, §4.7)."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from policies import NotEnoughBookiesError, create_policy

BOOKIES = [f"10.0.0.{i}:3181" for i in range(10)]
GROUPS = ["g0", "g1", "g2", "g3"]


@st.composite
def scenarios(draw):
    """Rack info (each bookie in 0-2 groups), writable bookies, primary/secondary groups, E, seed."""
    rack_info: dict[str, dict[str, dict[str, str]]] = {g: {} for g in GROUPS}
    for i, bookie in enumerate(BOOKIES):
        for group in draw(st.sets(st.sampled_from(GROUPS), max_size=2)):
            rack_info[group][bookie] = {"rack": f"rack{i % 3}"}
    writable = sorted(draw(st.sets(st.sampled_from(BOOKIES), min_size=1)))
    primary = draw(st.sets(st.sampled_from(GROUPS), max_size=2))
    secondary = draw(st.sets(st.sampled_from(GROUPS), max_size=2))
    size = draw(st.integers(1, 5))
    return rack_info, writable, primary, secondary, size, draw(st.integers(0, 2**32 - 1))


def eligible_bookies(rack_info, writable, primary, secondary, size) -> set[str]:
    """Spec §4.7 restated: primary; then secondary; then writable bookies of no group."""
    def members(groups):
        return {b for g in groups for b in rack_info[g]}
    known = set(writable)
    in_primary = members(primary)
    grouped = members(GROUPS)
    eligible = in_primary & known
    total = len(eligible)
    if total < size:
        admitted = members(secondary) - in_primary
        eligible |= admitted & known
        total += len(admitted)
    if total < size:
        eligible |= known - grouped
    return eligible


def build(rack_info, writable, primary, secondary):
    # BookKeeper's own key: present-but-empty primary groups still select isolation (a blank broker.conf
    # `bookkeeperClientIsolationGroups=` line means unset).
    conf = {"isolationBookieGroups": ",".join(sorted(primary)),
            "secondaryIsolationBookieGroups": ",".join(sorted(secondary))}
    policy = create_policy(conf, rack_info=rack_info)
    policy.on_cluster_changed(writable, [])
    return policy


@given(scenario=scenarios())
def test_new_ensemble_uses_only_eligible_bookies_and_fails_only_when_too_few(scenario):
    """E distinct bookies, all eligible by §4.7; NotEnough exactly when fewer than E are eligible."""
    rack_info, writable, primary, secondary, size, seed = scenario
    policy = build(rack_info, writable, primary, secondary)
    eligible = eligible_bookies(rack_info, writable, primary, secondary, size)
    try:
        result = policy.new_ensemble(size, size, 1, {}, rng=random.Random(seed))
    except NotEnoughBookiesError:
        assert len(eligible) < size
        return
    assert len(result.ensemble) == size == len(set(result.ensemble))
    assert set(result.ensemble) <= eligible
    excluded = set(result.explain["excluded"].get("isolation_group", ()))
    assert not excluded & set(result.ensemble)


@given(scenario=scenarios(), victim=st.integers(0, 4))
def test_replacement_is_eligible_and_outside_the_ensemble(scenario, victim):
    """A replacement is an eligible bookie (threshold E) that is not in the current ensemble."""
    rack_info, writable, primary, secondary, size, seed = scenario
    policy = build(rack_info, writable, primary, secondary)
    current = BOOKIES[:size]
    target = current[victim % size]
    snapshot = list(current)
    eligible = eligible_bookies(rack_info, writable, primary, secondary, size)
    try:
        result = policy.replace_bookie(size, size, 1, {}, current, target, rng=random.Random(seed))
    except NotEnoughBookiesError:
        assert not eligible - set(current)
        return
    assert current == snapshot
    assert result.bookie in eligible and result.bookie not in current
    assert result.ensemble == [result.bookie if b == target else b for b in current]
