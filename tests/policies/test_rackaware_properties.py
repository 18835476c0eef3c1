"""Invariants of rack-aware placement over random clusters (Hypothesis), and exact distributions.

Properties: distinct known bookies of size E, exclusions honoured, adherence consistent with the
result, coverage under enforcement (an infeasible request always raises NotEnough; brute-force check),
NotEnough exactly when not enough bookies are eligible (without enforcement), the same seed gives the
same result, arguments are never mutated. Under enforcement Java's greedy placement can also give up on a
feasible request (e.g. racks of 1, 2 and 3 bookies, E=6, WQ=2); that is Java's behaviour and is kept.
"""

from __future__ import annotations

import itertools
import random
from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from policies import Adherence, NotEnoughBookiesError
from policies.base import write_sets

from .conftest import build_policy

D = "/default-rack"


@st.composite
def scenarios(draw):
    sizes = draw(st.lists(st.integers(1, 4), min_size=1, max_size=5))
    racks = {f"/r{r}": [f"b{r}-{i}:1" for i in range(n)] for r, n in enumerate(sizes)}
    if draw(st.booleans()):
        racks[D] = [f"d-{i}:1" for i in range(draw(st.integers(1, 3)))]
    bookies = sorted(b for members in racks.values() for b in members)
    conf = {
        "minNumRacksPerWriteQuorum": draw(st.integers(1, 4)),
        "enforceMinNumRacksPerWriteQuorum": draw(st.booleans()),
        "diskWeightBasedPlacementEnabled": draw(st.booleans()),
    }
    ensemble_size = draw(st.integers(1, 7))
    write_quorum = draw(st.integers(1, ensemble_size))
    ack_quorum = draw(st.integers(1, write_quorum))
    exclude = draw(st.sets(st.sampled_from(bookies), max_size=3))
    disk = draw(st.lists(st.integers(0, 1000), min_size=len(bookies), max_size=len(bookies)))
    seed = draw(st.integers(0, 2**32 - 1))
    return racks, conf, ensemble_size, write_quorum, ack_quorum, exclude, dict(zip(bookies, disk)), seed


def make(racks, conf, disk):
    from policies import BookieInfo
    policy = build_policy(racks, **conf)
    policy.update_bookie_info({b: BookieInfo(total_disk=w, free_disk=w) for b, w in disk.items()})
    return policy


def feasible(rack_counts: dict[str, int], ensemble_size: int, write_quorum: int, min_racks: int) -> bool:
    """Brute force: can E positions get racks (within their counts) so every write set spans k racks?"""
    need = min(write_quorum, min_racks)
    racks = sorted(rack_counts)
    for assignment in itertools.product(racks, repeat=ensemble_size):
        if any(assignment.count(r) > rack_counts[r] for r in racks):
            continue
        if all(len({assignment[i] for i in ws}) >= need for ws in write_sets(ensemble_size, write_quorum)):
            return True
    return False


@given(scenarios())
def test_new_ensemble_invariants(scenario):
    racks, conf, e, w, a, exclude, disk, seed = scenario
    policy = make(racks, conf, disk)
    enforce = conf["enforceMinNumRacksPerWriteQuorum"]
    ineligible = set(exclude) | (set(racks.get(D, ())) if enforce else set())
    eligible = [b for b in policy.known if b not in ineligible]
    exclude_before = set(exclude)
    k = min(w, conf["minNumRacksPerWriteQuorum"])
    try:
        result = policy.new_ensemble(e, w, a, None, exclude, rng=random.Random(seed))
    except NotEnoughBookiesError:
        # Without enforcement only a lack of bookies fails. With enforcement, Java's greedy placement
        # (no backtracking) may also give up on some feasible requests; that is kept, see the docs.
        assert len(eligible) < e or enforce
        return
    finally:
        assert exclude == exclude_before
    if enforce and k > 1:
        counts = Counter(policy.known[b] for b in eligible)
        assert feasible(dict(counts), e, w, k), "placed an ensemble the enforced rule cannot allow"
    ensemble = result.ensemble
    assert len(ensemble) == e and len(set(ensemble)) == e
    assert set(ensemble) <= set(eligible)
    if policy.topology.num_racks < 2:
        assert result.adherence == Adherence.FAIL
    else:
        assert result.adherence == policy.is_ensemble_adhering(ensemble, w, a)
    if enforce and result.adherence == Adherence.MEETS_STRICT:
        k = min(w, conf["minNumRacksPerWriteQuorum"])
        rack = [policy.known[b] for b in ensemble]
        assert all(len({rack[i] for i in ws}) >= k for ws in write_sets(e, w))
    again = policy.new_ensemble(e, w, a, None, exclude, rng=random.Random(seed))
    assert again.ensemble == ensemble
    policy.check_invariants()


@given(scenarios())
def test_replace_bookie_invariants(scenario):
    racks, conf, e, w, a, exclude, disk, seed = scenario
    policy = make(racks, {**conf, "enforceMinNumRacksPerWriteQuorum": False}, disk)
    try:
        current = policy.new_ensemble(e, w, a, rng=random.Random(seed)).ensemble
    except NotEnoughBookiesError:
        return
    victim = current[seed % e]
    snapshot = (list(current), set(exclude))
    try:
        result = policy.replace_bookie(e, w, a, None, current, victim, exclude, rng=random.Random(seed))
    except NotEnoughBookiesError:
        assert not (set(policy.known) - set(current) - set(exclude))
        return
    assert (current, exclude) == snapshot
    assert result.bookie in policy.known
    assert result.bookie not in current and result.bookie not in exclude
    assert result.ensemble == [result.bookie if b == victim else b for b in current]
    assert result.adherence == policy.is_ensemble_adhering(result.ensemble, w, a)


@given(scenarios())
def test_replace_to_adhere_invariants(scenario):
    racks, conf, e, w, a, exclude, disk, seed = scenario
    policy = make(racks, conf, disk)
    rng = random.Random(seed)
    known = sorted(policy.known)
    if len(known) < e:
        return
    current = rng.sample(known, e)
    result = policy.replace_to_adhere(e, w, a, exclude, current, rng=random.Random(seed))
    if result.adherence == Adherence.FAIL:
        assert result.ensemble == []
        return
    assert len(result.ensemble) == e and len(set(result.ensemble)) == e
    assert policy.is_ensemble_adhering(result.ensemble, w, a) == result.adherence
    if policy.is_ensemble_adhering(current, w, a) != Adherence.FAIL:
        assert result.ensemble == current


def _pair_counts(policy, n, exclude=()):
    rng = random.Random(12)
    return Counter(tuple(policy.new_ensemble(2, 2, 2, exclude=exclude, rng=rng).ensemble) for _ in range(n))


def test_uniform_among_acceptable_including_rejected_draws(make_policy):
    """Joint distribution of (position 0, position 1): uniform over eligible bookies, then uniform over
    eligible bookies outside the first rack. The excluded bookie makes some first draws fail, which
    exercises the hand-over from the fast path to the general loop. Tolerance: 5 binomial sigmas per cell."""
    layout = {"/r0": ["a0", "a1", "a2"], "/r1": ["b0", "b1"], "/r2": ["c0"]}
    policy = make_policy(layout)
    rack = policy.known
    for exclude in ((), ("a0",)):
        eligible = [b for b in sorted(rack) if b not in exclude]
        n = 30000
        counts = _pair_counts(policy, n, exclude)
        for first in eligible:
            outside = [b for b in eligible if rack[b] != rack[first]]
            for second in outside:
                p = 1 / len(eligible) / len(outside)
                sigma = (n * p * (1 - p)) ** 0.5
                assert abs(counts[(first, second)] - n * p) <= 5 * sigma, (exclude, first, second, counts)
        assert sum(counts.values()) == n
        assert all(rack[x] != rack[y] for x, y in counts)


@given(scenarios(), st.integers(0, 6))
def test_replacement_follows_the_rack_preference_order(scenario, position):
    """Spec §5.1 step 6: a bookie of the replaced bookie's rack when one is eligible; else one of a rack
    the rest of the ensemble does not use; else (enforcement off) any eligible bookie, (on) NotEnough.
    Eligible: known, not excluded, not in the ensemble, and under enforcement not in the default rack."""
    racks, conf, e, w, a, exclude, disk, seed = scenario
    policy = make(racks, conf, disk)
    enforce = conf["enforceMinNumRacksPerWriteQuorum"]
    known = sorted(policy.known)
    if len(known) < e:
        return
    current = random.Random(seed).sample(known, e)
    victim = current[position % e]
    rack = policy.known
    ineligible = set(exclude) | set(current) | (set(racks.get(D, ())) if enforce else set())
    eligible = [b for b in known if b not in ineligible]
    used = {rack[b] for b in current if b != victim}
    same = [b for b in eligible if rack[b] == rack[victim]]
    unused = [b for b in eligible if rack[b] not in used]
    try:
        result = policy.replace_bookie(e, w, a, None, current, victim, exclude, rng=random.Random(seed))
    except NotEnoughBookiesError:
        assert not same and not unused and (enforce or not eligible)
        return
    assert result.bookie in eligible
    if same:
        assert rack[result.bookie] == rack[victim]
    elif unused:
        assert rack[result.bookie] not in used
    else:
        assert not enforce
    assert result.ensemble == [result.bookie if b == victim else b for b in current]
    assert result.adherence == policy.is_ensemble_adhering(result.ensemble, w, a)
