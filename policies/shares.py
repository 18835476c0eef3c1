"""Expected placement shares: the share of one placement each bookie should get.

Spec: bookkeeper-rackaware.md §4.5 (uniform picks) and §7.3 (`WeightedRandomSelectionImpl`).

`PlacementPolicy.expected_shares` answers with these over the bookies a call may place on (each policy
says which); the write-skew detector (`state.skew`) compares what racks and bookies took with them.
Uniform picks give every eligible bookie the same share; disk-weighted picks give each its free disk's
share with BookKeeper's cap (`selection.capped_probabilities`: zero weights get the smallest non-zero
one, none more than `bookieMaxMultipleForWeightBasedPlacement` x the median's).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .selection import capped_probabilities


def expected_shares(eligible: Sequence[str], weights: Mapping[str, int] | None,
                    max_multiple: int) -> dict[str, float]:
    """Each bookie's share of one placement over `eligible` (sorted; the result keeps its order).

    Args:
        eligible: the bookies a call may place on, sorted.
        weights: bookie -> free disk when disk-weighted placement is on (a bookie missing has 0); None
            for uniform picks.
        max_multiple: `bookieMaxMultipleForWeightBasedPlacement`.

    Returns:
        bookie -> share, summing to 1 (empty when nothing is eligible). Cost: O(n log n) weighted (the
        median), O(n) uniform.
    """
    if weights is not None and eligible:
        mass = capped_probabilities([weights.get(bookie, 0) for bookie in eligible], max_multiple)
        total = sum(mass)
        return {bookie: m / total for bookie, m in zip(eligible, mass)}
    share = 1.0 / len(eligible) if eligible else 0.0
    return dict.fromkeys(eligible, share)


__all__ = ["expected_shares"]
