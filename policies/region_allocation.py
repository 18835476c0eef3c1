"""How the region-aware policy splits a new ensemble over two or more regions (spec
bookkeeper-region-zone-isolation.md §1.3-§1.4): the allocation loop, its direct first round, and the
placement of one region's share by that region's rack-aware sub-policy.

The loop visits the local region first, then the others round robin from `last_region_index`; each
region not yet at its maximum tries to add its share, shrinking it by one on failure. The common
case (every region takes its share at the first try, in one pass) runs as `_allocate_direct` on a
plan worked out once per request shape; when that meets anything else it gives up, and the loop
runs from the start on a replay of the draws it made (`_RecordingRandom`, `_ReplayRandom`), so the
outcome and the explanation are the loop's.

`RegionAllocation` is a mixin of `RegionawarePolicy`; the host provides the regions and sub-policies
(`sub_policies`, `local_region`, `last_region_index`, `_regions`, `_direct_plans`, `_fast_allocation`)
and `_region_coverage`, `_region_candidates`, `_merge_notes`, `region_of_bookie`,
`is_durability_enforced` and `is_ensemble_adhering`.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping
from typing import Any

from .api import Adherence, PlacementResult
from .coverage import CoverageEnsemble
from .errors import NotEnoughBookiesError
from .location import ROOT, UNKNOWN_REGION
from .rackaware import RackawarePolicy
from .selection import pick_uniform

# The rack-aware engine's note for a region with fewer than two racks (its random path, spec rackaware §4.4).
_FEWER_RACKS_NOTE = "fewer than 2 racks: random selection"


def _local_region_index(available: list[str], local_region: str) -> int:
    """The index of the client's region in `available`, or -1 when no region is visited first.

    As in Java, `UnknownRegion` never counts as the client's region: it is the region of a client without
    a local node (or at the default location), and a populated `UnknownRegion` (unmapped bookies) takes
    its turn in the round robin like any other region.
    """
    if local_region == UNKNOWN_REGION or local_region not in available:
        return -1
    return available.index(local_region)


def _round_robin(available: list[str], start: int, local_index: int,
                 local_region: str) -> Iterator[tuple[str, int]]:
    """Regions in the order one allocation pass visits them (spec, region-aware `newEnsemble`): the
    local region first when it is available (`local_index` >= 0), then the others round robin from
    `start`, skipping the local one. Yields each region with the index after it (the next pass's
    `lastRegionIndex` when the region takes bookies)."""
    n = len(available)
    region = local_region
    for visit in range(n):
        if visit > 0 or local_index == -1:
            if start % n == local_index:
                start += 1
            region = available[start % n]
            start += 1
        yield region, start


def _round_half_up_ratio(numerator: int, denominator: int) -> int:
    """Java `Math.round(numerator / denominator)` for non-negative integers, exactly (floor(x + 0.5))."""
    return (2 * numerator + denominator) // (2 * denominator)


class _RecordingRandom:
    """A generator's `random()` that also remembers every value it returned.

    The fast allocation draws through it; when it has to give up, the general loop runs again on a
    `_ReplayRandom` of those values, so it sees exactly the draws the fast attempt consumed and the
    generator then continues where it stands. The placement code draws only with `random()`.
    """

    __slots__ = ("random", "draws")

    def __init__(self, rng: random.Random) -> None:
        draws: list[float] = []
        real = rng.random

        def recorded() -> float:
            value = real()
            draws.append(value)
            return value

        self.random = recorded
        self.draws = draws


class _ReplayRandom:
    """`random()` answers `draws` first, then the generator's own values (see `_RecordingRandom`)."""

    __slots__ = ("random",)

    def __init__(self, draws: list[float], rng: random.Random) -> None:
        pending = iter(draws)
        real = rng.random

        def replayed() -> float:
            value = next(pending, None)
            return real() if value is None else value

        self.random = replayed


class DirectPlan:
    """What one allocation pass does when every region simply takes its share (see `_allocate_direct`).

    Everything here follows from the request's sizes, the available regions, the round-robin position
    and the membership (the plans are dropped when membership changes), never from the draws.
    `shares` is one `(region, sub-policy, bookies, multi_rack, scope)` per region that takes bookies, in
    visiting order; `adherence` is filled by the first placement (durability enforced -> answer);
    `short` tells whether some region's share exceeds its writable bookies.
    """

    __slots__ = ("shares", "allocation", "fallbacks", "last_index", "adherence", "short")

    def __init__(self, shares: list[tuple[str, RackawarePolicy, int, bool, str]], allocation: dict[str, int],
                 fallbacks: list[str], last_index: int) -> None:
        self.shares = shares
        self.allocation = allocation
        self.fallbacks = fallbacks
        self.last_index = last_index
        self.adherence: dict[bool, Adherence] = {}
        self.short = any(size > len(sub.known) for _, sub, size, _, _ in shares)


class RegionAllocation:
    """The allocation loop of §1.4 and its direct first round, over the host's sub-policies."""

    def _allocate(self, ensemble_size: int, write_quorum: int, ack_quorum: int, min_regions: int,
                  excluded: set[str], available: list[str], explain: dict[str, Any],
                  rng: random.Random, per_region: Mapping[str, int] | None = None,
                  shrunk: list[str] | None = None) -> tuple[list[str], Adherence | None]:
        """Split the ensemble over two or more regions (the allocation loop, spec §1.4).

        Each pass rebuilds the coverage ensemble: the local region first, then the others round robin
        from `last_region_index`; each region not yet at its maximum tries to add its share
        (ceil(remaining / regions left)), shrinking it by one on failure; a maximal region re-places
        what it had. Passes repeat while bookies remain and the last pass made progress.

        Every attempt of a region is a step (`region <name>`, scope `<n> bookie(s)`, the region's eligible
        bookies and racks, failed when it could not take them); `shrunk` collects the regions that had
        to take fewer than their share.

        The common case (every region takes its share at the first try, in one pass) runs as
        `_allocate_direct`; when that meets anything else it gives up and this loop runs from the start
        on a replay of the draws it made, so the outcome and the explanation are the loop's. Returns
        the ensemble, with its adherence when the direct pass already knows it.
        """
        per_region = {} if per_region is None else per_region
        if self._fast_allocation and type(ensemble_size) is int and type(write_quorum) is int:
            recording = _RecordingRandom(rng)
            direct = self._allocate_direct(ensemble_size, write_quorum, ack_quorum, min_regions, excluded,
                                           available, explain, recording, per_region)
            if direct is not None:
                return direct
            if recording.draws:
                rng = _ReplayRandom(recording.draws, rng)  # type: ignore[assignment]
        coverage, allocation, notes = self._allocate_loop(ensemble_size, write_quorum, ack_quorum, min_regions,
                                                          excluded, available, explain, rng, per_region, shrunk)
        chosen = coverage.to_list()
        explain["allocation"] = {region: allocation[region] for region in available if allocation.get(region)}
        for region in sorted(notes):
            self._merge_notes(explain, region, notes[region])
        if len(chosen) != ensemble_size:
            raise NotEnoughBookiesError(
                f"cannot place ensemble_size={ensemble_size} across regions {', '.join(available)}: only "
                f"{len(chosen)} bookies could be placed (allocation {explain['allocation']}) after excluding "
                f"{len(excluded)}; add bookies or lower the ensemble size",
                explain={"constraint": f"ensemble_size={ensemble_size} bookies across the available regions under "
                                       f"the rack and region rules; only {len(chosen)} could be placed"})
        if self.settings.region_validation and not coverage.validate():
            spanned = sorted({self.region_of_bookie(b) for b in chosen})
            raise NotEnoughBookiesError(
                f"cannot place ensemble_size={ensemble_size} in {min_regions} regions as "
                f"reppMinimumRegionsForDurability requires: the ensemble would span only {', '.join(spanned)}; "
                "add bookies to other regions or lower the minimum (reppEnableValidation=false skips this check)",
                explain={"constraint": f"reppMinimumRegionsForDurability={min_regions}: the ensemble would span "
                                       f"{len(spanned)} region(s)"})
        return chosen, None

    def _allocate_loop(self, ensemble_size: int, write_quorum: int, ack_quorum: int, min_regions: int,
                       excluded: set[str], available: list[str], explain: dict[str, Any], rng: random.Random,
                       per_region: Mapping[str, int], shrunk: list[str] | None
                       ) -> tuple[CoverageEnsemble, dict[str, int], dict[str, list[str]]]:
        """The allocation passes of `_allocate`; returns the final coverage ensemble, the bookies each
        region took and each region's sub-policy notes."""
        steps = explain.setdefault("steps", [])
        n = len(available)
        allocation = dict.fromkeys(available, (0, 0))
        maxed: set[str] = set()
        remaining_e, remaining_w = ensemble_size, write_quorum
        local_index = _local_region_index(available, self.local_region)
        notes: dict[str, list[str]] = {}
        while True:
            coverage = self._region_coverage(ensemble_size, write_quorum, ack_quorum, min_regions)
            before = remaining_e
            to_allocate = n - len(maxed)
            for region, start in _round_robin(available, self.last_region_index % n, local_index, self.local_region):
                had_e, had_w = allocation[region]
                sub = self.sub_policies[region]
                if region not in maxed:
                    add = min(remaining_e, -(-remaining_e // to_allocate))
                    placed = False
                    candidates, racks = self._region_candidates(region, per_region)
                    limit = self._attempt_limit(region, sub, coverage, excluded, candidates, had_e + add)
                    while add > 0:
                        add_w = max(1, min(remaining_w, _round_half_up_ratio(write_quorum * add, ensemble_size)))
                        steps.append({"step": f"region {region}", "scope": f"{had_e + add} bookie(s)",
                                      "candidates": candidates, "racks": racks})
                        try:
                            if had_e + add > limit:
                                # The attempt fails whatever it draws, so it is not run (its draws and its
                                # cost, up to a placement of the whole region, are skipped). Java runs it
                                # and fails the same way.
                                sub.tick()
                                raise NotEnoughBookiesError(f"region {region} cannot take {had_e + add} bookies "
                                                            "in this pass")
                            result, trial = self._place_in_region(sub, had_e + add, had_w + add_w, excluded,
                                                                  coverage, rng)
                        except NotEnoughBookiesError:
                            steps[-1]["failed"] = True
                            explain["fallbacks"].append(f"region {region}: could not take {add} more "
                                                        f"bookie(s) ({had_e + add} in all)")
                            if shrunk is not None:
                                shrunk.append(region)
                            add -= 1
                            continue
                        coverage = trial
                        remaining_e -= add
                        remaining_w -= add_w
                        allocation[region] = (had_e + add, had_w + add_w)
                        to_allocate -= 1
                        self.last_region_index = start
                        notes[region] = list(result.explain.get("fallbacks", ()))
                        placed = True
                        break
                    if not placed:
                        maxed.add(region)
                if region in maxed and had_e > 0:
                    candidates, racks = self._region_candidates(region, per_region)
                    steps.append({"step": f"region {region}", "scope": f"{had_e} bookie(s) again",
                                  "candidates": candidates, "racks": racks})
                    try:
                        result, coverage = self._place_in_region(sub, had_e, had_w, excluded, coverage, rng)
                    except NotEnoughBookiesError as exc:
                        steps[-1]["failed"] = True
                        # Java lets this escape the loop too (spec §1.4 step 3).
                        raise NotEnoughBookiesError(
                            f"cannot place ensemble_size={ensemble_size}: region {region} could not re-place "
                            f"its {had_e} bookies in a later pass: {exc}",
                            explain={"constraint": f"region {region} must keep its {had_e} bookie(s) in every "
                                                   "allocation pass"}) from exc
                    notes[region] = list(result.explain.get("fallbacks", ()))
            if maxed.issuperset(available) or not (0 < remaining_e < before):
                break
        return coverage, {region: taken[0] for region, taken in allocation.items()}, notes

    def _direct_plan(self, ensemble_size: int, write_quorum: int, ack_quorum: int, min_regions: int,
                     available: list[str]) -> DirectPlan | None:
        """The `DirectPlan` of one request shape (cached until membership changes), or None where the
        direct pass does not apply: a region's pick would be refused by the region-level coverage or
        would need its fallback, or the result would fail the region validation."""
        key = (ensemble_size, write_quorum, ack_quorum, min_regions, tuple(available),
               self.last_region_index % len(available))
        plans = self._direct_plans
        try:
            return plans[key]
        except KeyError:
            pass
        if len(plans) >= 256:
            plans.clear()
        plan = plans[key] = self._build_direct_plan(ensemble_size, write_quorum, ack_quorum, min_regions,
                                                     available)
        return plan

    def _build_direct_plan(self, ensemble_size: int, write_quorum: int, ack_quorum: int, min_regions: int,
                           available: list[str]) -> DirectPlan | None:
        """The allocation loop's first round worked out ahead: each region's share, and whether the region-level
        coverage accepts every pick. That coverage sees regions only, and each region's picks take
        consecutive positions, so its answers are the same for any draws: they are checked here once,
        on stand-in bookies, instead of on every call."""
        n = len(available)
        settings = self.settings
        local_region = self.local_region
        local_index = _local_region_index(available, local_region)
        coverage = CoverageEnsemble(ensemble_size, write_quorum, ack_quorum, settings.min_racks_per_write_quorum,
                                    lambda stand_in: stand_in.partition("#")[0],
                                    regions=self._regions if min_regions > 0 else (), min_durability=min_regions)
        remaining_e, remaining_w = ensemble_size, write_quorum
        to_allocate = n
        shares: list[tuple[str, RackawarePolicy, int, bool, str]] = []
        allocation: dict[str, int] = {}
        notes: dict[str, list[str]] = {}
        last_index = -1
        for region, start in _round_robin(available, self.last_region_index % n, local_index, local_region):
            add = min(remaining_e, -(-remaining_e // to_allocate))
            if add <= 0:
                continue  # the loop marks the region maximal; it holds nothing, so nothing else happens
            add_w = max(1, min(remaining_w, _round_half_up_ratio(write_quorum * add, ensemble_size)))
            sub = self.sub_policies[region]
            multi_rack = sub.topology.num_racks >= 2
            if multi_rack and sub.first_position_scope() != ROOT:
                return None
            if not multi_rack and min(add_w, settings.min_racks_per_write_quorum) > 1 and settings.enforce_min_racks:
                return None
            for k in range(add):
                stand_in = f"/{region}#{k}"
                # The random selection of a region with fewer than two racks records without asking.
                if multi_rack and not coverage.apply(stand_in, coverage):
                    return None
                coverage.add_node(stand_in)
            shares.append((region, sub, add, multi_rack, f"{add} bookie(s)"))
            remaining_e -= add
            remaining_w -= add_w
            allocation[region] = add
            notes[region] = [] if multi_rack else [_FEWER_RACKS_NOTE]
            to_allocate -= 1
            last_index = start
        if len(coverage) != ensemble_size or (settings.region_validation and not coverage.validate()):
            return None
        scratch: dict[str, Any] = {"fallbacks": []}
        for region in sorted(notes):
            self._merge_notes(scratch, region, notes[region])
        ordered = {region: allocation[region] for region in available if allocation.get(region)}
        return DirectPlan(shares, ordered, scratch["fallbacks"], last_index)

    def _allocate_direct(self, ensemble_size: int, write_quorum: int, ack_quorum: int, min_regions: int,
                         excluded: set[str], available: list[str], explain: dict[str, Any],
                         rng: _RecordingRandom, per_region: Mapping[str, int]) -> tuple[list[str], Adherence] | None:
        """The allocation loop's first round when every region takes its share at once, without coverage
        bookkeeping, on a plan worked out ahead (`_direct_plan`).

        The plan has checked that the region-level coverage accepts every position's region, so a pick
        is refused only for being excluded: each region picks as its sub-policy would with no predicate
        (the same draws: over the region, then outside the racks already taken; or the random
        selection in a region of fewer than two racks), uniform or by disk weight. A region that runs
        out of acceptable bookies gives up (the caller replays the draws into the loop). The
        adherence is the same for every ensemble a plan produces (the regions of each write set, and
        where racks repeat, are fixed by the plan), so it is computed once per plan.

        What the loop's sub-policy call would add is left out because it cannot refuse anything here:
        its own rack coverage never refuses a pick when every position draws outside the racks of the
        earlier ones (a write set whose members all have distinct racks can still reach
        min(W, minNumRacksPerWriteQuorum) racks with any new one); its random selection, in a region
        of fewer than two racks, asks no predicate at all; and its private copy of the exclusions only
        gains the picks, which no later draw of the call can meet (they are in other racks or regions,
        or in a shuffle that visits each bookie once).
        """
        plan = self._direct_plan(ensemble_size, write_quorum, ack_quorum, min_regions, available)
        if plan is None:
            return None
        if per_region or plan.short:
            for region, sub, size, _, _ in plan.shares:
                if size > len(sub.known) - per_region.get(region, 0) and size > self._region_capacity(sub, excluded):
                    return None  # the loop skips that attempt without drawing; give up before drawing too
        chosen: list[str] = []
        steps: list[dict[str, Any]] = []
        uniform = not self.settings.disk_weighted

        def acceptable(bookie: str) -> bool:
            return bookie not in excluded

        for region, sub, size, multi_rack, scope in plan.shares:
            sub.tick()
            steps.append({"step": f"region {region}", "scope": scope,
                          "candidates": len(sub.known) - per_region.get(region, 0),
                          "racks": sub.topology.num_racks})
            if not multi_rack:
                if size == 1:
                    # The random selection's first pick, with the same draws: the first acceptable member
                    # of its lazy shuffle, or its weighted draw over the region once it has counted an
                    # acceptable member (it gives up before drawing otherwise).
                    if uniform:
                        bookie = pick_uniform(rng, sub.known_sorted(), acceptable)  # type: ignore[arg-type]
                    elif len(sub.known) > sum([b in sub.known for b in excluded]):
                        bookie = sub.cluster_selector().pick(rng, acceptable)  # type: ignore[arg-type]
                    else:
                        return None
                    if bookie is None:
                        return None
                    chosen.append(bookie)
                    continue
                try:
                    chosen.extend(sub.select_random(size, set(excluded), None, None, rng))  # type: ignore[arg-type]
                except NotEnoughBookiesError:
                    return None
                continue
            topology = sub.topology
            if not uniform:
                # The sub-policy's weighted pick of each position (its scope: the region, then outside
                # the racks taken), with the scopes chained as its own placement chains them.
                sampler = sub.rack_sampler()
                scope = sampler.scope_excluding(())
                used: list[str] = []
                for position in range(size):
                    if position:
                        rack = topology.rack_of(chosen[-1])
                        used.append(rack)
                        scope = sampler.scope_after(scope, rack, used)  # type: ignore[arg-type]
                    bookie = sampler.pick_excluding(scope, rng, excluded)  # type: ignore[arg-type]
                    if bookie is None:
                        return None
                    chosen.append(bookie)
                continue
            pick = sub.pick_leaf
            bookie = pick(ROOT, topology.leaves(ROOT), excluded, None, None, rng)  # type: ignore[arg-type]
            if bookie is None:
                return None
            chosen.append(bookie)
            if size > 1:
                avoid = [topology.rack_of(bookie)]
                for _ in range(1, size):
                    bookie = pick(tuple(avoid), topology.leaves_excluding(avoid), excluded, None, None,
                                  rng)  # type: ignore[arg-type]
                    if bookie is None:
                        return None
                    chosen.append(bookie)
                    avoid.append(topology.rack_of(bookie))
        enforced = self.is_durability_enforced()
        adherence = plan.adherence.get(enforced)
        if adherence is None:
            adherence = plan.adherence[enforced] = self.is_ensemble_adhering(chosen, write_quorum, ack_quorum)
        explain["steps"].extend(steps)
        if plan.last_index >= 0:
            self.last_region_index = plan.last_index
        explain["allocation"] = dict(plan.allocation)
        explain["fallbacks"].extend(plan.fallbacks)
        return chosen, adherence

    @staticmethod
    def _place_in_region(sub: RackawarePolicy, size: int, write_quorum: int, excluded: set[str],
                         coverage: CoverageEnsemble, rng: random.Random) -> tuple[PlacementResult, CoverageEnsemble]:
        """`size` bookies from one region on a copy of `coverage`; returns the result and the extended copy.

        The region's write quorum is passed as its ack quorum, as in Java (spec §1.3-§1.4).

        Raises:
            NotEnoughBookiesError: the region cannot provide them.
        """
        trial = coverage.copy()
        try:
            return sub.new_ensemble_internal(size, write_quorum, write_quorum, excluded, trial, trial, rng), trial
        except NotEnoughBookiesError:
            if sub.secondary is None:
                raise
        # BK bug fixed (spec bookkeeper-rackaware.md §2.4): the sub-policy's own retry on its stabilized
        # topology reuses the region-level ensemble, which still holds the picks of the failed first
        # attempt (Java too); retry once more from a clean copy.
        trial = coverage.copy()
        notes = ["retried on the stabilized topology"]
        result = sub.secondary.new_ensemble_internal(size, write_quorum, write_quorum, excluded, trial, trial, rng,
                                                     fallbacks=notes)
        return result, trial

    def _attempt_limit(self, region: str, sub: RackawarePolicy, coverage: CoverageEnsemble, excluded: set[str],
                       candidates: int, size: int) -> int:
        """The most bookies an attempt of `region` could place at this point of an allocation pass (at
        most `size`, the largest it will ask for): an attempt above it fails whatever it draws.

        Two things bound it. The bookies the region could give (`_region_capacity`). And, when the
        region's sub-policy enforces durability in every pick (a configured region, a minimum of two or
        more regions, two or more racks), the region-level coverage: it sees regions only, so the first
        position of the region's block that it refuses to a bookie of the region, it refuses to every
        one, and the sub-policy, whose picks and fallbacks all ask it, must fail there. A region of
        fewer than two racks picks at random without asking, and a sub-policy that does not enforce
        durability falls back to such picks, so neither is bounded by the coverage.
        """
        limit = size
        if size > candidates:
            limit = min(limit, self._region_capacity(sub, excluded))
        if sub.enforce_durability and coverage.min_durability > 1 and sub.topology.num_racks >= 2:
            trial = coverage.copy()
            key = "/" + region
            original = trial.locate
            trial.locate = lambda bookie: key if bookie.startswith("\0") else original(bookie)
            for position in range(limit):
                stand_in = f"\0{position}"
                if not trial.apply(stand_in, trial):
                    return position
                trial.add_node(stand_in)
        return limit

    @staticmethod
    def _region_capacity(sub: RackawarePolicy, excluded: set[str]) -> int:
        """The most bookies one attempt in the region could place: the bookies its sub-policy, or its
        stabilized retry, could pick (known or in the tree) that are not excluded. Cost: O(region)."""
        views = (sub,) if sub.secondary is None else (sub, sub.secondary)
        return max(len((view.known.keys() | view.topology.rack_map.keys()) - excluded) for view in views)
