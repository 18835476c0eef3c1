"""The rack-aware adherence rule and the repairs built on it (spec bookkeeper-rackaware.md §5.2, §6):
`is_ensemble_adhering` and `are_acked_bookies_adhering`, `replace_to_adhere` (the adhering ensemble
closest to the current one), and the relaxation fixes that spread an ensemble over racks it does
not use (`is_relaxed`, `relaxation_fix`).

`RackAdherence` is a mixin of `RackawarePolicyImpl`; the host provides `tick`, `_locate`,
`first_position_scope` and `name`.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .api import Adherence, PlacementResult
from .base import distinct_per_write_set
from .coverage import CoverageEnsemble
from .provenance import RULE_RACKS, fixed, no_fix
from .rack_selection import SCOPE_CLUSTER, STEP_RELOCATION, RackSelection, check_sizes
from .selection import pick_uniform

# From this write quorum up, adherence slides per-rack (and, region-aware, per-region) counts along the
# write sets instead of building each write set (O(E x WQ), faster for the small quorums of everyday
# ledgers). The region-aware policy uses the same threshold.
SLIDING_ADHERENCE_FROM = 8


def _differ(current: Sequence[str], proposed: Sequence[str]) -> float:
    """Positions whose bookie differs; infinite when either list is empty or the sizes differ."""
    if not current or not proposed or len(current) != len(proposed):
        return float("inf")
    return sum(1 for a, b in zip(current, proposed, strict=True) if a != b)


def _write_sets_span(racks: list[str | None], write_quorum: int, min_racks: int, default: str | None) -> bool:
    """Whether every write set of an ensemble whose members are in `racks` (None: unknown bookie, not
    counted) spans `min_racks` racks and holds no member of the `default` rack (None: no such rule).

    The answer of `RackawarePolicyImpl.is_ensemble_adhering`'s loop over write sets, for W >= 1, in
    O(E): every position lies in some write set, so the default rack is one membership test, and the
    racks of each write set are counted as it slides (`distinct_per_write_set`).
    """
    if default is not None and default in racks:
        return False
    return all(held >= min_racks for held in distinct_per_write_set(racks, write_quorum))


class RackAdherence(RackSelection):
    """Adherence (§6), replace-to-adhere (§5.2) and relaxation fixes over the host's topology."""

    def replace_to_adhere(self, ensemble_size: int, write_quorum: int, ack_quorum: int, exclude: Iterable[str] | None,
                          current_ensemble: Sequence[str], *, rng: random.Random | None = None) -> PlacementResult:
        """The adhering ensemble closest to `current_ensemble` (fewest positions changed), §5.2.

        Returns `current_ensemble` unchanged when it already adheres, and an empty ensemble with
        FAIL when no relocation adheres.

        Raises:
            ValueError: `current_ensemble` (not adhering) does not have `ensemble_size` members.
        """
        if exclude is None:
            exclude = ()
        self.tick()
        check_sizes(ensemble_size, write_quorum, ack_quorum)
        if rng is None:
            rng = random.Random(0)
        current = list(current_ensemble)
        explain: dict[str, Any] = {"policy": self.name, "steps": [], "fallbacks": [], "excluded": {}}
        adherence = self.is_ensemble_adhering(current, write_quorum, ack_quorum)
        if adherence != Adherence.FAIL:
            return PlacementResult(current, adherence, None, explain)
        if current and len(current) != ensemble_size:
            raise ValueError(f"current_ensemble: has {len(current)} bookies but ensemble_size is {ensemble_size}")
        # BK quirk not reproduced (spec App. A #7): Java adds the unknown members to the caller's set.
        excluded = set(exclude)
        if excluded:
            explain["excluded"]["caller"] = sorted(excluded)
        unknown = [b for b in current if b not in self.known]
        if unknown:
            explain["excluded"]["not_writable"] = sorted(set(unknown))
            excluded.update(unknown)
        min_racks = min(write_quorum, self.settings.min_racks_per_write_quorum)
        racks = self.topology.num_racks
        if racks < 2 or racks < min_racks:
            explain["fallbacks"].append(f"only {racks} rack(s): no relocation can adhere")
            return PlacementResult([], Adherence.FAIL, None, explain)
        if self.settings.enforce_min_racks:
            defaults = self.topology.leaves(self.default_location)
            if len(defaults):
                excluded.update(defaults)
                explain["excluded"]["default_rack"] = sorted(defaults)
        best: tuple[list[str], Adherence] | None = None
        best_differ = float("inf")
        known = self.known
        relocation = {"step": STEP_RELOCATION, "scope": SCOPE_CLUSTER,
                      "candidates": len(known) - sum(1 for b in excluded if b in known), "racks": racks,
                      "attempts": 0}
        explain["steps"].append(relocation)
        for start in range(len(current)):
            relocation["attempts"] += 1
            attempt = self._adhere_attempt(ensemble_size, write_quorum, ack_quorum, excluded, current, start,
                                           min_racks, rng)
            if attempt is None:
                continue
            differ = _differ(current, attempt[0])
            if differ < best_differ:
                best, best_differ = attempt, differ
                if differ == 1:
                    break
        if best is None:
            relocation["failed"] = True
            explain["fallbacks"].append("no relocation from any start position adheres")
            return PlacementResult([], Adherence.FAIL, None, explain)
        return PlacementResult(best[0], best[1], None, explain)

    def _adhere_attempt(self, ensemble_size: int, write_quorum: int, ack_quorum: int, excluded: set[str],
                        current: list[str], start: int, min_racks: int,
                        rng: random.Random) -> tuple[list[str], Adherence] | None:
        """`doReplaceToAdherePlacementPolicy` from one start index; None when it fails."""
        provisional = list(current)
        provisional_racks = [self._locate(b) for b in provisional]
        exclude = set(excluded)
        coverage = CoverageEnsemble(ensemble_size, write_quorum, ack_quorum, min_racks, self._locate)
        prev_rack: str | None = None
        first = provisional[start]
        if first not in exclude and coverage.apply(first, coverage) and coverage.add_node(first):
            exclude.add(first)
            prev_rack = provisional_racks[start]
        first_scope = self.first_position_scope()
        for k in range(0 if prev_rack is None else 1, ensemble_size):
            index = (start + k) % ensemble_size
            scope = first_scope if prev_rack is None else "~" + prev_rack
            candidate = self._adhere_candidate(scope, exclude, coverage, provisional, provisional_racks, index,
                                               ensemble_size, min_racks, rng)
            if candidate is None or not coverage.add_node(candidate):
                return None
            exclude.add(candidate)
            provisional[index] = candidate
            provisional_racks[index] = prev_rack = self._locate(candidate)
        chosen = coverage.to_list()
        if len(chosen) != ensemble_size:
            return None
        adherence = self.is_ensemble_adhering(chosen, write_quorum, ack_quorum)
        if adherence == Adherence.FAIL:
            return None
        rotated = [""] * ensemble_size
        for i, bookie in enumerate(chosen):
            rotated[(start + i) % ensemble_size] = bookie
        return rotated, adherence

    def _adhere_candidate(self, scope: str, exclude: set[str], coverage: CoverageEnsemble,
                          provisional: list[str], provisional_racks: list[str], index: int, ensemble_size: int,
                          min_racks: int, rng: random.Random) -> str | None:
        """`replaceToAdherePlacementPolicyInternal`: keep the current bookie, else try 3 conditions."""
        current = provisional[index]
        if current not in exclude and coverage.apply(current, coverage):
            return current
        near: set[str] = set()
        for i in range(min_racks - 1):
            near.add(provisional_racks[(index - i - 1) % ensemble_size])
            near.add(provisional_racks[(index + i + 1) % ensemble_size])
        members = set(provisional)
        conditions = (("~" + ",".join(sorted(near)), members), (scope, members), (scope, frozenset()))
        weighted = self.settings.disk_weighted
        for condition_scope, skip in conditions:
            leaves = self.topology.leaves(condition_scope)

            def accept(bookie: str, skip: Any = skip) -> bool:
                return bookie not in exclude and coverage.apply(bookie, coverage) and bookie not in skip
            if weighted:
                # BK bug fixed (spec bookkeeper-rackaware.md App. A #9): Java gives up when a condition's
                # leaves are all excluded; we move on to the next condition.
                if all(leaf in exclude for leaf in leaves):
                    continue
                chosen = self._weighted_pick(condition_scope, leaves, rng, accept)
            else:
                chosen = pick_uniform(rng, leaves, accept)
            if chosen is not None:
                return chosen
        return None

    # -- relaxation fixes -------------------------------------------------------------------------------

    def is_relaxed(self, ensemble: Sequence[str], write_quorum: int, ack_quorum: int,
                   rule: Mapping[str, Any]) -> bool:
        """Whether `ensemble` still depends on the relaxation `rule` (an `explain.relaxed` entry).

        `racks` (a position could not take a rack of its own): two writable members share a rack.
        Cost: O(E).
        """
        if rule.get("rule") != RULE_RACKS:
            return False
        known = self.known
        racks = {known[b] for b in ensemble if b in known}
        return len(racks) < sum(1 for b in ensemble if b in known)

    def relaxation_fix(self, ensemble_size: int, write_quorum: int, ack_quorum: int,
                       current_ensemble: Sequence[str], rule: Mapping[str, Any], exclude: Iterable[str] = (), *,
                       rng: random.Random | None = None) -> PlacementResult | None:
        """Spread `current_ensemble` over more racks when racks it does not use have eligible bookies.

        For each such rack (in name order) one member that shares its rack with an earlier member
        moves there (a uniformly chosen eligible bookie of the rack), provided the adherence does not
        get worse; a rack rule is never traded away (`exclude`, the other members and, under
        enforcement, the default rack are never chosen). Cost: O(racks x E x WQ).

        Returns:
            None when the members already use distinct racks (or `rule` is not `racks`); the spread
            ensemble with `explain.replaced`; or an empty FAIL result saying why nothing can move now.
        """
        if not self.is_relaxed(current_ensemble, write_quorum, ack_quorum, rule):
            return None
        return self.spread_over_racks(write_quorum, ack_quorum, current_ensemble, tuple(exclude), frozenset(), rng)

    def spread_over_racks(self, write_quorum: int, ack_quorum: int, current_ensemble: Sequence[str],
                          exclude: tuple[str, ...], never: frozenset[str] | set[str],
                          rng: random.Random | None) -> PlacementResult:
        """`relaxation_fix` of the `racks` rule without the `is_relaxed` check: a subclass whose own
        rules forbid more bookies (isolation groups) passes them as `never`."""
        rng = rng if rng is not None else random.Random(0)
        current = list(current_ensemble)
        avoid = set(exclude)
        avoid.update(current)
        avoid.update(never)
        topology = self.topology
        known = self.known
        default = self.default_location if self.settings.enforce_min_racks else None
        located = [known.get(b) for b in current]
        used = {rack for rack in located if rack is not None}
        spare: list[tuple[str, list[str]]] = []
        for rack in topology.racks():
            if rack in used or rack == default:
                continue
            members = [b for b in topology.bookies_in(rack) if b not in avoid and b in known]
            if members:
                spare.append((rack, members))
        if not spare:
            return no_fix(self.name, "no rack unused by the ensemble has an eligible bookie")
        seen: set[str] = set()
        movable: list[int] = []
        for position, rack in enumerate(located):
            if rack is None:
                continue
            if rack in seen:
                movable.append(position)
            else:
                seen.add(rack)
        adherence = self.is_ensemble_adhering(current, write_quorum, ack_quorum)
        replaced: dict[str, str] = {}
        for _rack, members in spare:
            for position in movable:
                trial = list(current)
                trial[position] = pick_uniform(rng, members)  # type: ignore[assignment]
                spread = self.is_ensemble_adhering(trial, write_quorum, ack_quorum)
                if spread >= adherence:
                    current, adherence = trial, spread
                    replaced[str(position)] = trial[position]
                    movable.remove(position)
                    break
            if not movable:
                break
        if not replaced:
            return no_fix(self.name, "moving a member to an unused rack would break the rack rule")
        return fixed(self.name, current, adherence, replaced, exclude)

    # -- adherence (§6) --------------------------------------------------------------------------------

    def is_ensemble_adhering(self, ensemble: Sequence[str], write_quorum: int, ack_quorum: int) -> Adherence:
        """FAIL when some write set spans fewer than min(WQ, minNumRacksPerWriteQuorum) racks of known
        bookies, or (under enforcement) contains a default-rack bookie; else MEETS_STRICT (§6.1).

        Cost: O(E x WQ) below `SLIDING_ADHERENCE_FROM`, O(E) from there on (`_write_sets_span`).
        """
        size = len(ensemble)
        if size == 0:
            return Adherence.FAIL
        settings = self.settings
        min_racks = min(write_quorum, settings.min_racks_per_write_quorum)
        known = self.known
        racks = [known.get(b) for b in ensemble]
        default = self.default_location if settings.enforce_min_racks else None
        distinct = set(racks)
        if write_quorum >= 1 and len(distinct) == size and None not in distinct:
            # Every member known and in a rack of its own: each write set spans min(WQ, E) racks and
            # some write set holds each member, so only the count and the default rack can fail.
            if min(write_quorum, size) < min_racks or (default is not None and default in distinct):
                return Adherence.FAIL
            return Adherence.MEETS_STRICT
        if write_quorum >= SLIDING_ADHERENCE_FROM:
            spans = _write_sets_span(racks, write_quorum, min_racks, default)
            return Adherence.MEETS_STRICT if spans else Adherence.FAIL
        if write_quorum > size:
            racks = racks * (write_quorum // size + 2)
        else:
            racks = racks + racks[:write_quorum]
        for i in range(size):
            window = set(racks[i:i + write_quorum])
            window.discard(None)
            if len(window) < min_racks or (default is not None and default in window):
                return Adherence.FAIL
        return Adherence.MEETS_STRICT

    def are_acked_bookies_adhering(self, acked: Iterable[str], write_quorum: int, ack_quorum: int) -> bool:
        """Whether the known acked bookies span min(WQ, minNumRacksPerWriteQuorum) racks (§6.2)."""
        known = self.known
        racks = {known[b] for b in acked if b in known}
        return len(racks) >= min(write_quorum, self.settings.min_racks_per_write_quorum)
