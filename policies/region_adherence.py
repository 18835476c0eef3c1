"""The region-aware adherence rule and the repairs built on it (spec bookkeeper-region-zone-isolation.md
§2.2): `is_ensemble_adhering` (a real rule where BookKeeper has a stub, apache/bookkeeper#1898), the
per-write-set deficits it and `replace_to_adhere` share, `replace_to_adhere` (a search for few
replacements that make the ensemble adhere), and the relaxation fixes (`is_relaxed`,
`relaxation_fix`).

From a write quorum of `SLIDING_ADHERENCE_FROM` (shared with the rack-aware rule) the deficits slide
per-rack and per-region counts along the write sets (O(E x regions)) instead of building each write
set (O(E x W), faster for small quorums).

`RegionAdherence` is a mixin of `RegionawarePolicy`; the host provides the regions and membership
(`name`, `known`, `region_of`, `sub_policies`, `min_regions`, `durability_in_replace`, `_regions`,
`_region_keys`) and `_tick`, `_populated_regions`, `region_of_bookie`, `available_regions`,
`disallowed_regions`, `is_durability_enforced`, `is_durability_disabled` and `location_of`.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from .api import Adherence, PlacementResult
from .coverage import CoverageEnsemble
from .provenance import RULE_REGIONS, fixed, no_fix
from .rack_adherence import SLIDING_ADHERENCE_FROM
from .region_location import region_of_location
from .selection import lazy_shuffle, pick_uniform


class RegionAdherence:
    """Adherence (§2.2), replace-to-adhere and relaxation fixes over the host's regions."""

    def _write_set_deficit(self, members: set[str], write_quorum: int, ack_quorum: int, min_regions: int,
                           soft_regions: int) -> tuple[int, bool]:
        """How far one write set is from the hard rules (0: it meets them) and whether it misses the
        soft region spread; see `is_ensemble_adhering`. The deficit counts missing racks, default-rack
        members under enforcement, missing regions and surplus copies in the worst M-1 regions."""
        racks: set[str] = set()
        copies: dict[str, int] = {}
        at_default = 0
        for bookie in members:
            location = self.known.get(bookie)
            if location is None:
                continue
            racks.add(location)
            at_default += location == self.default_location
            region = self.region_of[bookie]
            copies[region] = copies.get(region, 0) + 1
        return self._deficit_of(len(racks), at_default, copies, write_quorum, ack_quorum, min_regions, soft_regions)

    def _deficit_of(self, racks: int, at_default: int, copies: Mapping[str, int], write_quorum: int,
                    ack_quorum: int, min_regions: int, soft_regions: int) -> tuple[int, bool]:
        """`_write_set_deficit` of a write set whose known members are in `racks` distinct racks, have
        `at_default` members at the default location and `copies` members per region (none zero)."""
        deficit = max(0, min(write_quorum, self.settings.min_racks_per_write_quorum) - racks)
        if self.settings.enforce_min_racks:
            deficit += at_default
        if min_regions > 0:
            deficit += max(0, min(min_regions, write_quorum) - len(copies))
            worst_group = sum(sorted(copies.values(), reverse=True)[:min_regions - 1])
            return deficit + max(0, worst_group - (ack_quorum - 1)), False
        return deficit, len(copies) < soft_regions

    def _deficits(self, ensemble: Sequence[str], write_quorum: int, ack_quorum: int) -> list[tuple[int, bool]]:
        """`_write_set_deficit` of every write set (W consecutive positions, wrapping).

        Cost: O(E x W) below `SLIDING_ADHERENCE_FROM`; from there on O(E) when W >= E (every write
        set holds every member) and O(E x regions) otherwise (`_sliding_deficits`).
        """
        size = len(ensemble)
        min_regions = self.min_regions if self.is_durability_enforced() else 0
        soft_regions = min(write_quorum, self.settings.min_racks_per_write_quorum, max(self._populated_regions(), 1))
        if write_quorum >= SLIDING_ADHERENCE_FROM:
            if write_quorum >= size:
                return [self._write_set_deficit(set(ensemble), write_quorum, ack_quorum, min_regions,
                                                soft_regions)] * size
            return self._sliding_deficits(ensemble, 0, size, write_quorum, ack_quorum, min_regions, soft_regions)
        return [self._write_set_deficit({ensemble[(i + j) % size] for j in range(write_quorum)},
                                        write_quorum, ack_quorum, min_regions, soft_regions)
                for i in range(size)]

    def _sliding_deficits(self, ensemble: Sequence[str], first: int, count: int, write_quorum: int, ack_quorum: int,
                          min_regions: int, soft_regions: int) -> list[tuple[int, bool]]:
        """`_write_set_deficit` of the `count` write sets starting at positions first, first+1, ... (mod E),
        for 1 <= W < E, in O(W + count x regions).

        The write set's distinct members are counted (a member may sit at several positions), and
        with them its racks, default-location members and copies per region, as it slides one
        position at a time; a member counts when it enters the set and stops when its last copy leaves.
        """
        size = len(ensemble)
        known = self.known
        region_of = self.region_of
        default = self.default_location
        inside: dict[str, int] = {}
        racks: dict[str, int] = {}
        copies: dict[str, int] = {}
        at_default = 0

        def count_in(bookie: str) -> None:
            nonlocal at_default
            held = inside.get(bookie, 0)
            inside[bookie] = held + 1
            if held:
                return
            location = known.get(bookie)
            if location is None:
                return
            racks[location] = racks.get(location, 0) + 1
            at_default += location == default
            region = region_of[bookie]
            copies[region] = copies.get(region, 0) + 1

        def count_out(bookie: str) -> None:
            nonlocal at_default
            held = inside[bookie] - 1
            if held:
                inside[bookie] = held
                return
            del inside[bookie]
            location = known.get(bookie)
            if location is None:
                return
            if racks[location] == 1:
                del racks[location]
            else:
                racks[location] -= 1
            at_default -= location == default
            region = region_of[bookie]
            if copies[region] == 1:
                del copies[region]
            else:
                copies[region] -= 1

        for j in range(write_quorum):
            count_in(ensemble[(first + j) % size])
        deficit = self._deficit_of(len(racks), at_default, copies, write_quorum, ack_quorum, min_regions,
                                   soft_regions)
        deficits = [deficit]
        for start in range(first, first + count - 1):
            leaving = ensemble[start % size]
            entering = ensemble[(start + write_quorum) % size]
            if leaving != entering:
                count_in(entering)
                count_out(leaving)
                deficit = self._deficit_of(len(racks), at_default, copies, write_quorum, ack_quorum, min_regions,
                                           soft_regions)
            deficits.append(deficit)
        return deficits

    @staticmethod
    def _adherence_of(deficits: list[tuple[int, bool]]) -> Adherence:
        if not deficits or any(deficit for deficit, _ in deficits):
            return Adherence.FAIL
        return Adherence.MEETS_SOFT if any(soft for _, soft in deficits) else Adherence.MEETS_STRICT

    def is_ensemble_adhering(self, ensemble: Sequence[str], write_quorum: int, ack_quorum: int) -> Adherence:
        """The real region-aware rule (BookKeeper has a stub, apache/bookkeeper#1898).

        For every write set (W consecutive positions, wrapping), over its members that are known
        (writable) bookies:

        (a) at least min(W, minNumRacksPerWriteQuorum) distinct racks (full locations), and no member at
            the default location when enforceMinNumRacksPerWriteQuorum; else FAIL;
        (b) durability enforced (reppMinimumRegionsForDurability = M > 0 and the disable feature off):
            at least min(M, W) regions, and no M-1 regions together hold ack_quorum or more copies
            (so every acknowledged entry spans M regions); else FAIL;
        (c) otherwise, fewer than min(W, minNumRacksPerWriteQuorum, regions holding known bookies)
            regions gives MEETS_SOFT.

        The answer is the worst over all write sets; an empty ensemble FAILs. Bookies at the default
        location count as region `UnknownRegion`, as placement counts them.

        BK bug fixed (apache/bookkeeper#1898): Java always answers MEETS_STRICT.

        Cost: O(E x W) below `SLIDING_ADHERENCE_FROM`, O(E x regions) from there on (`_deficits`);
        every member is looked up once (`_deficits` gives the amounts, for repairs).
        """
        size = len(ensemble)
        if size == 0:
            return Adherence.FAIL
        if write_quorum < 1 or len(set(ensemble)) != size or SLIDING_ADHERENCE_FROM <= write_quorum < size:
            # Repeated members, or wide write sets whose deficits slide along the ensemble (O(E x regions)).
            return self._adherence_of(self._deficits(ensemble, write_quorum, ack_quorum))
        settings = self.settings
        min_regions = self.min_regions if self.is_durability_enforced() else 0
        need_racks = min(write_quorum, settings.min_racks_per_write_quorum)
        need_regions = min(min_regions, write_quorum)
        default = self.default_location if settings.enforce_min_racks else None
        known = self.known
        region_of = self.region_of
        # Rack and region of each member; None for a member that is not known (it does not count).
        racks_at: list[str | None] = [known.get(bookie) for bookie in ensemble]
        if default is not None and default in racks_at:
            return Adherence.FAIL                        # some write set holds it (W >= 1)
        if None in racks_at:
            regions_at: list[str | None] = [None if rack is None else region_of[bookie]
                                            for bookie, rack in zip(ensemble, racks_at, strict=True)]
        else:
            regions_at = [region_of[bookie] for bookie in ensemble]
        # Distinct members: a write set is W consecutive positions, or the whole ensemble when W >= E
        # (then every write set holds the same members and one check answers for all).
        span = min(write_quorum, size)
        if span < size:
            racks_at += racks_at[:span - 1]
            regions_at += regions_at[:span - 1]
        soft = False
        soft_regions = 0
        for i in range(size if span < size else 1):
            racks = set(racks_at[i:i + span])
            racks.discard(None)
            if len(racks) < need_racks:
                return Adherence.FAIL
            if min_regions > 0:
                copies: dict[str, int] = {}
                for region in regions_at[i:i + span]:
                    if region is not None:
                        copies[region] = copies.get(region, 0) + 1
                if len(copies) < need_regions or (
                        sum(sorted(copies.values(), reverse=True)[:min_regions - 1]) > ack_quorum - 1):
                    return Adherence.FAIL
            elif not soft:
                if not soft_regions:
                    soft_regions = min(write_quorum, settings.min_racks_per_write_quorum,
                                       max(self._populated_regions(), 1))
                regions = set(regions_at[i:i + span])
                regions.discard(None)
                soft = len(regions) < soft_regions
        return Adherence.MEETS_SOFT if soft else Adherence.MEETS_STRICT

    def are_acked_bookies_adhering(self, acked: Iterable[str], write_quorum: int, ack_quorum: int) -> bool:
        """Distinct racks of the known acked bookies >= min(W, minNumRacksPerWriteQuorum) (spec §2.2, inherited)."""
        racks = {self.known[b] for b in set(acked) if b in self.known}
        return len(racks) >= min(write_quorum, self.settings.min_racks_per_write_quorum)

    def replace_to_adhere(self, ensemble_size: int, write_quorum: int, ack_quorum: int, exclude: Iterable[str] | None,
                          current_ensemble: Sequence[str], *, rng: random.Random | None = None) -> PlacementResult:
        """Repair a non-adhering ensemble with as few replacements as this search finds.

        An ensemble that does not FAIL is returned unchanged with its adherence. Otherwise, in rounds:
        every position not yet changed is tried with one candidate per rack, in the order
        `replace_bookie` looks (the member's rack, the other racks of its region, then the racks of the
        other allowed regions; see `_one_per_rack`): adherence depends only on the candidate's rack.
        The first round that makes the ensemble adhere wins (MEETS_STRICT before MEETS_SOFT, then the
        earliest position); otherwise the replacement that brings the ensemble closest to the hard rules
        (fewest missing racks, regions and surplus copies over all write sets) is kept and another round
        runs. No improvement: FAIL with an empty ensemble. Cost: up to E rounds x E positions x
        (bookies + racks x E x W).

        BK bug fixed (apache/bookkeeper#1898): Java returns the current ensemble unchanged as MEETS_STRICT.
        """
        if exclude is None:
            exclude = ()
        self._tick()
        rng = rng if rng is not None else random.Random(0)
        ensemble = list(current_ensemble)
        explain: dict[str, Any] = {"policy": self.name, "steps": [], "fallbacks": [], "excluded": {},
                                   "replaced": {}}
        deficits = self._deficits(ensemble, write_quorum, ack_quorum) if ensemble else []
        adherence = self._adherence_of(deficits)
        if adherence != Adherence.FAIL:
            return PlacementResult(ensemble, adherence, explain=explain)
        hopeless = self._cannot_adhere(ensemble, write_quorum, ack_quorum)
        if hopeless is not None:
            explain["fallbacks"].append(f"no replacement can make the ensemble adhere: {hopeless}")
            return PlacementResult([], Adherence.FAIL, explain=explain)
        excluded = set(exclude)
        if excluded:
            explain["excluded"]["caller"] = sorted(excluded)
        if self.settings.enforce_min_racks:
            excluded.update(self.topology.bookies_in(self.default_location))
        missing = sum(deficit for deficit, _ in deficits)
        changed: list[int] = []
        for _ in range(len(ensemble)):
            adhering: tuple[int, int, list[str]] | None = None  # (-adherence, position, ensemble)
            improving: tuple[int, int, list[str]] | None = None  # (total deficit, position, ensemble)
            for position in range(len(ensemble)):
                if position in changed:
                    continue
                for bookie in self._one_per_rack(ensemble, position, excluded, write_quorum, ack_quorum, rng):
                    trial = list(ensemble)
                    trial[position] = bookie
                    # A write set short of the hard rules is what makes an ensemble FAIL.
                    total = self._total_deficit(trial, position, deficits, missing, write_quorum, ack_quorum)
                    found = self.is_ensemble_adhering(trial, write_quorum, ack_quorum) if not total else Adherence.FAIL
                    if found != Adherence.FAIL:
                        key = (-int(found), position, trial)
                        if adhering is None or key[:2] < adhering[:2]:
                            adhering = key
                        if found == Adherence.MEETS_STRICT:
                            break
                    elif improving is None or total < improving[0]:
                        improving = (total, position, trial)
                if adhering is not None and adhering[0] == -int(Adherence.MEETS_STRICT):
                    break
            if adhering is not None:
                _, position, repaired = adhering
                changed.append(position)
                explain["replaced"] = {str(p): repaired[p] for p in sorted(changed)}
                return PlacementResult(repaired, Adherence(-adhering[0]), explain=explain)
            if improving is None or improving[0] >= missing:
                break
            missing, position, ensemble = improving
            deficits = self._deficits(ensemble, write_quorum, ack_quorum)
            changed.append(position)
            explain["fallbacks"].append(f"position {position}: replaced by {ensemble[position]}; "
                                        "the ensemble is closer to adhering but still fails")
        explain["fallbacks"].append("no replacement makes the ensemble adhere")
        return PlacementResult([], Adherence.FAIL, explain=explain)

    def _cannot_adhere(self, ensemble: list[str], write_quorum: int, ack_quorum: int) -> str | None:
        """Why no replacement of members can make `ensemble` adhere on this cluster, or None if one might.

        The search keeps the members distinct and offers known bookies only, so a write set holds at
        least min(W, E) known bookies less the members that are not known (which the search may keep),
        spread over at most the regions and racks that hold known bookies. With durability, the M - 1
        fullest regions of a write set hold at least what an even spread over those regions puts there;
        when that, the region count or the rack count already breaks the rules, every write set falls
        short whatever is replaced, and the search (E rounds of E positions x racks, seconds for
        ensembles of dozens) could only end in FAIL. Ensembles with repeated members are not judged.
        """
        write_set = min(write_quorum, len(ensemble))
        if write_set < 1 or len(set(ensemble)) != len(ensemble):
            return None
        racks = self.topology.num_racks
        wanted = min(write_quorum, self.settings.min_racks_per_write_quorum)
        if racks < wanted:
            return f"each write set needs {wanted} racks and the cluster has {racks}"
        min_regions = self.min_regions if self.is_durability_enforced() else 0
        if min_regions <= 0:
            return None
        regions = self._populated_regions()
        if regions < min(min_regions, write_quorum):
            return (f"each write set needs {min(min_regions, write_quorum)} regions (reppMinimumRegionsForDurability) "
                    f"and {regions} region(s) have bookies")
        known = self.known
        size = write_set - min(sum(1 for member in ensemble if member not in known), write_set)
        even, extra = divmod(size, regions)
        fullest = (min_regions - 1) * even + min(extra, min_regions - 1)
        if fullest > ack_quorum - 1:
            return (f"a write set of {size} bookies spread over the {regions} region(s) that have bookies puts at "
                    f"least {fullest} copies in its {min_regions - 1} fullest region(s); durability allows "
                    f"{ack_quorum - 1} (ack_quorum - 1, reppMinimumRegionsForDurability={min_regions})")
        return None

    def _total_deficit(self, trial: list[str], position: int, deficits: list[tuple[int, bool]], total: int,
                       write_quorum: int, ack_quorum: int) -> int:
        """The summed deficit of `trial`, an ensemble whose `deficits` (summing to `total`) changed at
        `position` only: the write sets holding that position are worked out again. Cost O(W x W) below
        `SLIDING_ADHERENCE_FROM`, O(W x regions) from there on."""
        size = len(trial)
        if write_quorum >= size:
            return sum(d for d, _ in self._deficits(trial, write_quorum, ack_quorum))
        min_regions = self.min_regions if self.is_durability_enforced() else 0
        if write_quorum >= SLIDING_ADHERENCE_FROM:
            first = position - write_quorum + 1
            again = self._sliding_deficits(trial, first, write_quorum, write_quorum, ack_quorum, min_regions, 0)
            return total + sum(deficit for deficit, _ in again) - sum(
                deficits[(first + k) % size][0] for k in range(write_quorum))
        for first in range(position - write_quorum + 1, position + 1):
            first %= size
            members = {trial[(first + j) % size] for j in range(write_quorum)}
            total += self._write_set_deficit(members, write_quorum, ack_quorum, min_regions, 0)[0] - deficits[first][0]
        return total

    def _one_per_rack(self, ensemble: list[str], position: int, excluded: set[str], write_quorum: int,
                      ack_quorum: int, rng: random.Random) -> Iterator[str]:
        """Replacements for `ensemble[position]`, one random eligible bookie per rack, racks in the order
        `replace_bookie` reaches them: the member's own rack, the other racks of its region (shuffled),
        then the racks of the other allowed regions (shuffled), these only when the region-level
        durability rule admits them while `replace_bookie` would enforce it (built as it builds it).

        Eligible: a writable bookie of an allowed region, not in `excluded` nor in the ensemble. Only
        live bookies are offered (`replace_bookie` may fall back to a departed one still in the
        stabilized view; a fix should not). Cost: O(bookies + racks), one draw per rack offered and
        per shuffled rack.
        """
        member = ensemble[position]
        taken = set(ensemble)
        enforce = self.durability_in_replace and not self.is_durability_disabled()
        coverage: CoverageEnsemble | None = None
        if enforce:
            coverage = CoverageEnsemble(len(ensemble), write_quorum, ack_quorum,
                                        self.settings.min_racks_per_write_quorum, self._region_keys.__getitem__,
                                        regions=self._regions, min_durability=self.min_regions)
            for other in ensemble:
                if other == member:
                    continue
                if not coverage.apply(other, coverage):
                    coverage = None            # an anomalous ensemble: replace_bookie stops enforcing too
                    break
                coverage.add_node(other)
        region = self.region_of_bookie(member)
        disallowed = set(self.disallowed_regions())
        by_region: dict[str, list[str]] = {}
        for rack in self.topology.racks():
            by_region.setdefault(region_of_location(rack), []).append(rack)
        order: list[str] = []
        if region in self._regions and region not in disallowed:
            own = self.location_of(member)
            order.extend(rack for rack in (own,) if rack in by_region.get(region, ()))
            order.extend(lazy_shuffle(rng, [rack for rack in by_region.get(region, ()) if rack != own]))
        crossing = len(order)
        others = [rack for name in self._regions if name != region and name not in disallowed
                  for rack in by_region.get(name, ())]
        order.extend(lazy_shuffle(rng, others))
        admitted: dict[str, bool] = {}
        for index, rack in enumerate(order):
            candidates = [b for b in self.topology.bookies_in(rack) if b not in excluded and b not in taken]
            if not candidates:
                continue
            if index >= crossing and coverage is not None:
                name = self.region_of[candidates[0]]
                if name not in admitted:
                    admitted[name] = coverage.apply(candidates[0], coverage)
                if not admitted[name]:
                    continue
            yield candidates[int(rng.random() * len(candidates))]

    # -- relaxation fixes ---------------------------------------------------------------------------

    def is_relaxed(self, ensemble: Sequence[str], write_quorum: int, ack_quorum: int,
                   rule: Mapping[str, Any]) -> bool:
        """Whether `ensemble` still depends on the relaxation `rule` (an `explain.relaxed` entry).

        `regions` (placed in fewer regions than bookies by a region-level fallback): the writable
        members span fewer regions than min(members, regions the policy knows). Cost: O(E).
        """
        if rule.get("rule") != RULE_REGIONS:
            return False
        region_of = self.region_of
        members = [region_of[b] for b in ensemble if b in region_of]
        return len(set(members)) < min(len(members), len(self.sub_policies))

    def relaxation_fix(self, ensemble_size: int, write_quorum: int, ack_quorum: int,
                       current_ensemble: Sequence[str], rule: Mapping[str, Any], exclude: Iterable[str] = (), *,
                       rng: random.Random | None = None) -> PlacementResult | None:
        """Spread `current_ensemble` over the available regions it does not use (`regions` rule).

        For each such region (in name order) one member of the most crowded region (the last such
        position first) moves to a uniformly chosen eligible bookie of it, when the ensemble does
        not then FAIL; until the ensemble spans min(E, available regions). Cost: O(regions x E x E x WQ).

        Returns:
            None when the ensemble no longer depends on the rule; the spread ensemble with
            `explain.replaced`; or an empty FAIL result saying why no region can take a member now.
        """
        if not self.is_relaxed(current_ensemble, write_quorum, ack_quorum, rule):
            return None
        self._tick()
        rng = rng if rng is not None else random.Random(0)
        exclude = tuple(exclude)
        current = list(current_ensemble)
        avoid = set(exclude)
        avoid.update(current)
        if self.settings.enforce_min_racks:
            avoid.update(self.topology.bookies_in(self.default_location))
        regions = [self.region_of_bookie(b) for b in current]
        available = self.available_regions()
        target = min(len(current), len(set(available) | set(regions)))
        spare = [r for r in available if r not in regions]
        if not spare or len(set(regions)) >= target:
            return no_fix(self.name, "no available region outside the ensemble's has an eligible bookie")
        adherence = self.is_ensemble_adhering(current, write_quorum, ack_quorum)
        replaced: dict[str, str] = {}
        for region in spare:
            members = [b for b in self.sub_policies[region].known_sorted() if b not in avoid]
            if not members:
                continue
            counts = {r: regions.count(r) for r in set(regions)}
            order = sorted((p for p in range(len(current)) if counts[regions[p]] > 1 and str(p) not in replaced),
                           key=lambda p: (-counts[regions[p]], -p))
            for position in order:
                trial = list(current)
                trial[position] = pick_uniform(rng, members)  # type: ignore[assignment]
                spread = self.is_ensemble_adhering(trial, write_quorum, ack_quorum)
                if spread != Adherence.FAIL and spread >= min(adherence, Adherence.MEETS_SOFT):
                    current, adherence = trial, spread
                    regions[position] = region
                    replaced[str(position)] = trial[position]
                    avoid.add(trial[position])
                    break
            if len(set(regions)) >= target:
                break
        if not replaced:
            return no_fix(self.name, "moving a member to another region would break the placement rules")
        return fixed(self.name, current, adherence, replaced, exclude)
