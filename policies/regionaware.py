"""BookKeeper's region-aware placement (`RegionAwareEnsemblePlacementPolicy`), in pure Python.

Spec: bookkeeper-region-zone-isolation.md §1 (new_ensemble), §2 (replace, adherence, read order), §5 (keys),
App. A; the per-region engine is the rack-aware one of bookkeeper-rackaware.md §4-§8.

A location is `/region/rack`. Every region has its own rack-aware sub-policy (the public rack-aware policy)
holding only that region's bookies; this class keeps the whole cluster, decides how many bookies
each region contributes, and lets the region's sub-policy choose them under a region-level coverage
ensemble (durability: every acknowledged entry spans `reppMinimumRegionsForDurability` regions).

Deliberate differences from BookKeeper (each tagged `BK quirk` or `BK bug fixed` where it is made, and listed in
docs/policies-regionaware.md):

* regions are visited in sorted name order (Java: `HashMap` order);
* adherence is a real rule (Java answers MEETS_STRICT for everything, apache/bookkeeper#1898) and
  `replace_to_adhere` really repairs (Java returns the ensemble unchanged);
* disk weights reach every layer (sub-policies and the cross-region random fallbacks).

This module keeps the policy class: its regions and sub-policies, membership, the entry of
`new_ensemble` (zero, one, or several available regions), read ordering and snapshots. The class
composes the parts that live in their own modules:

* `region_allocation.py`   the allocation of a new ensemble over two or more regions (§1.4);
* `region_replacement.py`  `replace_bookie` (§2.1);
* `region_adherence.py`    adherence, `replace_to_adhere` and relaxation fixes (§2.2);
* `region_location.py`     the region of a network location (§1.1).
"""

from __future__ import annotations

import random
from collections.abc import Collection, Iterable, Mapping, MutableMapping, Sequence
from typing import Any

from . import read_order
from .api import HealthInfo, PlacementResult
from .base import Clock, TopologyAwarePolicy
from .coverage import CoverageEnsemble
from .errors import InvalidLocationError, NotEnoughBookiesError
from .location import DEFAULT_REGION_AND_RACK, UNKNOWN_REGION
from .provenance import RULE_REGIONS, failed, unavailable
from .rackaware import RackawarePolicy
from .region_adherence import RegionAdherence
from .region_allocation import DirectPlan, RegionAllocation
from .region_location import region_of_location
from .region_replacement import RegionReplacement
from .resolver import LocationResolver
from .selection import WeightedSelector, pick_uniform
from .settings import PlacementSettings

POLICY_NAME = "regionaware"
_LOCAL_RACK_NOTE = "position 0: no eligible bookie in the local rack"


class _RegionKeys(dict):  # type: ignore[type-arg]
    """bookie -> `RegionawarePolicy._region_key(bookie)`, remembered for known bookies (whose region only
    changes through the membership handlers, which clear it); other bookies are resolved every time."""

    __slots__ = ("policy",)

    def __init__(self, policy: RegionawarePolicy) -> None:
        super().__init__()
        self.policy = policy

    def __missing__(self, bookie: str) -> str:
        region = self.policy.region_of.get(bookie)
        if region is None:
            return self.policy._region_key(bookie)
        key = self[bookie] = "/" + region
        return key


class RegionawarePolicy(RegionAllocation, RegionReplacement, RegionAdherence, TopologyAwarePolicy):
    """Region-aware placement over per-region rack-aware sub-policies (spec §1-§2).

    Args:
        settings: parsed configuration (`reppRegionsToWrite`, `reppMinimumRegionsForDurability`, ...).
        resolver: bookie -> `/region/rack` location.
        clock: event-time seconds (slow-bookie expiry); read at most once per public call.
        features: runtime switches read at call time: `settings.disable_durability_feature` and
            `<region>.<settings.disallow_region_feature>`.
        default_location: location of unmapped bookies (default `/default-region/default-rack`).

    Attributes:
        sub_policies: region name -> its rack-aware sub-policy; never deleted (a region may be empty).
        region_of: known bookie -> region name (BookKeeper's `address2Region`).
        local_region: the client's region (`UnknownRegion` without a local node).
        last_region_index: where the next multi-region allocation starts its round robin (persists).
    """

    name = POLICY_NAME
    default_location = DEFAULT_REGION_AND_RACK
    enforced_skips_default_rack = True      # its rack-aware sub-policies' (spec §4.3)

    def __init__(self, settings: PlacementSettings, resolver: LocationResolver, clock: Clock,
                 features: MutableMapping[str, int], default_location: str | None = None) -> None:
        super().__init__(settings, resolver, clock, features, default_location)
        self.min_regions = settings.effective_min_regions
        self.durability_in_replace = self.min_regions > 0 and settings.durability_in_replace
        self.configured_regions = frozenset(settings.regions_to_write or ())
        self.sub_policies: dict[str, RackawarePolicy] = {}
        self.region_of: dict[str, str] = {}
        self.last_region_index = 0
        self.slow_bookies = read_order.SlowBookieCache(settings.failure_history_expiration_ms / 1000.0)
        self._now: float | None = None
        # Sorted names of `sub_policies` (regions are only ever added).
        self._regions: tuple[str, ...] = ()
        # Regions holding a known bookie, in name order (None: recount); every membership change resets it.
        self._populated: tuple[str, ...] | None = None
        # bookie -> region key of the coverage ensembles (`_region_key`), filled on use; reset with `_populated`.
        self._region_keys = _RegionKeys(self)
        # (sizes, available regions, round-robin position) -> `DirectPlan` or None; reset with `_populated`.
        self._direct_plans: dict[tuple[Any, ...], DirectPlan | None] = {}
        # Allowed regions -> (their known bookies, the weights and weighted selector over them) for the
        # cross-region replacement; reset with `_populated`, the selector also when the weights are replaced.
        self._fallback_pools: dict[tuple[str, ...], list[Any]] = {}
        local = settings.local_node_location
        self.local_region = UNKNOWN_REGION if settings.ignore_local_node or not local else region_of_location(local)
        # `_allocate_direct` serves sub-policies whose position 0 draws from the whole region (no local rack).
        self._fast_allocation = local is None or settings.ignore_local_node or local == self.default_location
        for region in settings.regions_to_write or ():
            self._sub_policy(region)

    # -- regions --------------------------------------------------------------------------------

    def _tick(self) -> float:
        """Read the clock once for this public call; sub-policies see the same reading."""
        self._now = self.clock()
        return self._now

    def _sub_clock(self) -> float:
        return self._now if self._now is not None else self.clock()

    def _sub_policy(self, region: str) -> RackawarePolicy:
        """The region's sub-policy, created on first use (spec §1.1).

        It is the public rack-aware policy, as in Java (with a stabilized secondary when
        `networkTopologyStabilizePeriodSeconds` > 0). Configured regions enforce durability in their
        random fallbacks when a minimum number of regions is set; regions discovered at runtime never
        do (BookKeeper's `enforceDurability`).
        """
        sub = self.sub_policies.get(region)
        if sub is None:
            # BK quirk (spec region-zone-isolation.md §1.1, App. A #3): discovered regions never enforce
            # durability in their random fallbacks.
            # Differs from Java: configured regions enforce only when reppMinimumRegionsForDurability > 0
            # (Java: always; without a minimum the region rule is only a preference).
            enforce = region in self.configured_regions and self.min_regions > 0
            sub = RackawarePolicy(self.settings, self.resolver, self._sub_clock, self.features,
                                  default_location=self.default_location, enforce_durability=enforce)
            self.sub_policies[region] = sub
            self._regions = tuple(sorted(self.sub_policies))
            self._membership_changed()
        return sub

    def _membership_changed(self) -> None:
        """Forget what depends on the known bookies and their regions (called after every change)."""
        self._populated = None
        self._region_keys.clear()
        self._direct_plans.clear()
        self._fallback_pools.clear()

    def _populated_region_names(self) -> tuple[str, ...]:
        """Regions whose sub-policy knows at least one bookie, in name order (cached until membership changes)."""
        populated = self._populated
        if populated is None:
            subs = self.sub_policies
            populated = self._populated = tuple(region for region in self._regions if subs[region].known)
        return populated

    def _populated_regions(self) -> int:
        """How many regions hold at least one known bookie."""
        return len(self._populated_region_names())

    def region_of_bookie(self, bookie: str) -> str:
        """A known bookie's cached region, else the region of its freshly resolved location."""
        region = self.region_of.get(bookie)
        if region is not None:
            return region
        try:
            return region_of_location(self.location_of(bookie))
        except InvalidLocationError:
            return UNKNOWN_REGION

    def _region_key(self, bookie: str) -> str:
        """Region-level location used by the coverage ensembles: `/` + region name (spec §0.5).

        Differs from Java, which takes a node's distance-2 location: a default-location bookie counts
        as `UnknownRegion` (Java: `default-region`, a name not in the region list), and a bookie that is
        no longer known counts in its resolved region (Java: its full location, a region of its own).
        """
        region = self.region_of.get(bookie)
        return "/" + (region if region is not None else self.region_of_bookie(bookie))

    def is_region_disallowed(self, region: str) -> bool:
        """`<region>.<reppDisallowBookiePlacementInRegionFeatureName>` is on (spec §1.6)."""
        feature = self.settings.disallow_region_feature
        return feature is not None and self.is_feature_on(f"{region}.{feature}")

    def reads_feature(self, name: str) -> bool:
        """The disable-durability switch and the per-region disallow switches (`<region>.<name>`)."""
        disallow = self.settings.disallow_region_feature
        return name == self.settings.disable_durability_feature or (
            disallow is not None and name.endswith("." + disallow))

    def is_durability_disabled(self) -> bool:
        """The disable-durability feature (`reppDisableDurabilityFeatureName`) is on (spec §1.5)."""
        return self.is_feature_on(self.settings.disable_durability_feature)

    def is_durability_enforced(self) -> bool:
        """A minimum number of regions is configured and the disable feature is off."""
        return self.min_regions > 0 and not self.is_durability_disabled()

    def disallowed_regions(self) -> list[str]:
        """Regions switched off by their disallow feature right now, sorted (spec §1.6)."""
        if self.settings.disallow_region_feature is None:
            return []
        return [region for region in self._regions if self.is_region_disallowed(region)]

    def available_regions(self, disallowed: Iterable[str] | None = None) -> list[str]:
        """Regions with at least one known bookie that are not disallowed, in sorted order (spec §1.3).

        Empty regions are skipped (apache/bookkeeper#4106).
        """
        # BK bug fixed (spec region-zone-isolation.md App. A #10): Java visits regions in `HashMap` order;
        # sorted region names make the same input give the same ensemble everywhere.
        off = self.disallowed_regions() if disallowed is None else disallowed
        populated = self._populated_region_names()
        if not off:
            return list(populated)
        off = set(off)
        return [region for region in populated if region not in off]

    # -- membership (spec §1.1) ---------------------------------------------------------------------

    def _tick_sub_policies(self) -> None:
        """Give every stabilized sub-policy this call's clock reading before membership changes, so a
        departure is stamped with the current event time (Java's sub-policies use a wall-clock timer)."""
        if self.settings.stabilize_period_s > 0:
            for region in self._regions:
                self.sub_policies[region].tick()

    def on_cluster_changed(self, writable: Iterable[str], readonly: Iterable[str], *,
                           changed: Collection[str] | None = None) -> set[str]:
        """Spec §1.1: joins create sub-policies on demand; departures leave every sub-policy."""
        self._tick()
        self._tick_sub_policies()
        return super().on_cluster_changed(writable, readonly, changed=changed)

    def handle_bookies_that_left(self, bookies: list[str]) -> None:
        try:
            for bookie in bookies:
                self.region_of.pop(bookie, None)
            super().handle_bookies_that_left(bookies)
            for region in self._regions:
                self.sub_policies[region].handle_bookies_that_left(bookies)
        finally:
            self._membership_changed()

    def handle_bookies_that_joined(self, bookies: list[str]) -> None:
        # BK bug fixed (spec region-zone-isolation.md §1.1, §1.8): a location of the wrong depth fails
        # only that bookie's join (the base class records it); Java lets the error escape onClusterChanged.
        try:
            super().handle_bookies_that_joined(bookies)
            per_region: dict[str, list[str]] = {}
            for bookie in bookies:
                location = self.known.get(bookie)
                if location is None:  # the join failed; the base class kept the reason
                    continue
                region = region_of_location(location)
                self.region_of[bookie] = region
                self._sub_policy(region)
                per_region.setdefault(region, []).append(bookie)
            for region, joined in sorted(per_region.items()):
                self.sub_policies[region].handle_bookies_that_joined(joined)
                self._forget_departures_elsewhere(region, joined)
        finally:
            self._membership_changed()

    def _forget_departures_elsewhere(self, region: str, joined: list[str]) -> None:
        """Bookies that left another region and return in `region` leave that region's stabilized
        view at once: they are back, and a bookie is in one region (as for a move, `_move_regions`).
        Java's old region keeps such a bookie as a departure until its delay ends. O(regions) per joiner."""
        if self.settings.stabilize_period_s <= 0:
            return
        for other in self._regions:
            if other != region:
                sub = self.sub_policies[other]
                away = [bookie for bookie in joined if sub.is_departing(bookie)]
                if away:
                    sub.handle_bookies_that_moved_away(away)

    def on_bookie_rack_change(self, bookies: Iterable[str]) -> None:
        """Re-resolve known bookies; a bookie whose region changed moves to the new region's sub-policy."""
        self._tick()
        self._tick_sub_policies()
        ordered = sorted(set(bookies))
        try:
            self._move_regions(ordered)
        finally:
            self._membership_changed()

    def _move_regions(self, ordered: list[str]) -> None:
        """`on_bookie_rack_change` after the clock ticks: the base class's move, then the sub-policies'."""
        super().on_bookie_rack_change(ordered)
        for bookie in ordered:
            location = self.known.get(bookie)
            if location is None:
                continue
            old_region = self.region_of.get(bookie, UNKNOWN_REGION)
            new_region = region_of_location(location)
            if new_region == old_region:
                sub = self._sub_policy(old_region)
                # Only a move this policy accepted: a location it refused (another depth) leaves the
                # bookie where it was, and the sub-policy, re-resolving on its own, would take it.
                if sub.known.get(bookie) != location:
                    sub.on_bookie_rack_change([bookie])
                continue
            self.region_of[bookie] = new_region
            self._sub_policy(old_region).handle_bookies_that_moved_away([bookie])
            target = self._sub_policy(new_region)
            target.handle_bookies_that_joined([bookie])
            if self.settings.disk_weighted and bookie in self.weights and bookie in target.known:
                target.weights = {**target.weights, bookie: self.weights[bookie]}  # keep its disk space

    def update_bookie_info(self, infos: Mapping[str, Any]) -> None:
        """Weights for this policy and every sub-policy (spec §7.2).

        BK bug fixed (apache/bookkeeper#4522, #4159): before 4522 the sub-policies that actually choose
        bookies never received disk weights; we always forward them.
        """
        super().update_bookie_info(infos)
        for region in self._regions:
            self.sub_policies[region].update_bookie_info(infos)

    def pending_leaves(self) -> dict[str, float]:
        self._tick()
        pending: dict[str, float] = {}
        for region in self._regions:
            pending.update(self.sub_policies[region].pending_leaves())
        return pending

    # -- new_ensemble (spec §1.2-§1.4) ------------------------------------------------------------

    def validate_quorums(self, ensemble_size: int, write_quorum: int, ack_quorum: int, min_regions: int) -> None:
        """BookKeeper's parameter checks, in its order (spec §1.2).

        Raises:
            ValueError: the sizes cannot meet the durability constraint or are inconsistent.
        """
        if ack_quorum < min_regions:
            raise ValueError(f"ack_quorum={ack_quorum} is smaller than the {min_regions} regions required for "
                             "durability (reppMinimumRegionsForDurability); raise the ack quorum or lower the minimum")
        if ensemble_size < write_quorum:
            raise ValueError(f"write_quorum ({write_quorum}) cannot exceed ensemble_size ({ensemble_size})")
        if write_quorum < ack_quorum:
            raise ValueError(f"ack_quorum ({ack_quorum}) cannot exceed write_quorum ({write_quorum})")
        if min_regions > 0 and ack_quorum <= write_quorum - write_quorum // min_regions:
            floor = write_quorum - write_quorum // min_regions + 1
            raise ValueError(
                f"ack_quorum={ack_quorum} cannot keep acknowledged entries in {min_regions} regions with "
                f"write_quorum={write_quorum}: it must be at least {floor} "
                "(reppMinimumRegionsForDurability); raise the ack quorum or lower the minimum")

    def _region_coverage(self, ensemble_size: int, write_quorum: int, ack_quorum: int,
                         min_regions: int) -> CoverageEnsemble:
        """A fresh region-level coverage ensemble (distance 2, spec §0.5, §1.3).

        With a durability minimum it counts copies per region over every region known to the policy
        (configured, discovered, empty and disallowed alike); otherwise it applies the rack-quorum rule
        with `minNumRacksPerWriteQuorum` to regions.
        """
        regions = self._regions if min_regions > 0 else ()
        return CoverageEnsemble(ensemble_size, write_quorum, ack_quorum, self.settings.min_racks_per_write_quorum,
                                self._region_keys.__getitem__, regions=regions, min_durability=min_regions)

    def _exclusion(self, exclude: Iterable[str], explain: dict[str, Any]) -> set[str]:
        """Caller exclusions plus default-location bookies when `enforceMinNumRacksPerWriteQuorum` (spec §1.3)."""
        excluded = set(exclude)
        if excluded:
            explain["excluded"]["caller"] = sorted(excluded)
        if self.settings.enforce_min_racks:
            default_rack = self.topology.bookies_in(self.default_location)
            if default_rack:
                excluded.update(default_rack)
                explain["excluded"]["default_rack"] = list(default_rack)
        unavailable(self, explain["excluded"])
        return excluded

    def _region_candidates(self, region: str, excluded_per_region: Mapping[str, int]) -> tuple[int, int]:
        """(eligible bookies, racks) of one region for the `steps` (excluded bookies counted per region)."""
        sub = self.sub_policies[region]
        return len(sub.known) - excluded_per_region.get(region, 0), sub.topology.num_racks

    def _excluded_per_region(self, excluded: Iterable[str]) -> dict[str, int]:
        """region -> excluded known bookies in it. Cost: O(excluded), once per call."""
        counts: dict[str, int] = {}
        region_of = self.region_of
        for bookie in excluded:
            region = region_of.get(bookie)
            if region is not None:
                counts[region] = counts.get(region, 0) + 1
        return counts

    def _new_explain(self, durability_disabled: bool) -> dict[str, Any]:
        explain: dict[str, Any] = {"policy": POLICY_NAME, "steps": [], "fallbacks": [], "excluded": {}}
        if durability_disabled:
            explain["fallbacks"].append(f"durability disabled by feature {self.settings.disable_durability_feature}: "
                                        "one region is enough")
        return explain

    def _note_disallowed(self, explain: dict[str, Any]) -> list[str]:
        disallowed = self.disallowed_regions()
        if disallowed:
            explain["disallowed_regions"] = disallowed
            off = [b for region in disallowed for b in self.sub_policies[region].known_sorted()]
            if off:
                explain["excluded"]["disallowed_region"] = sorted(off)
        return disallowed

    def new_ensemble(self, ensemble_size: int, write_quorum: int, ack_quorum: int,
                     custom_metadata: Mapping[str, bytes] | None = None, exclude: Iterable[str] | None = (), *,
                     rng: random.Random | None = None) -> PlacementResult:
        """Choose `ensemble_size` bookies spread over regions (spec §1.2-§1.4).

        Zero available regions: uniformly random known bookies. One: that region's rack-aware placement
        under the region-level coverage. Two or more: the allocation loop (`_allocate`).

        Raises:
            ValueError: the quorum sizes fail BookKeeper's checks (§1.2).
            NotEnoughBookiesError: the bookies left after exclusions cannot form the ensemble.
        """
        if exclude is None:
            exclude = ()
        self._tick()
        rng = rng if rng is not None else random.Random(0)
        disabled = self.is_durability_disabled()
        min_regions = 1 if disabled else self.min_regions
        self.validate_quorums(ensemble_size, write_quorum, ack_quorum, min_regions)
        explain = self._new_explain(disabled and self.min_regions > 0)
        try:
            return self._new_ensemble(ensemble_size, write_quorum, ack_quorum, min_regions, exclude, explain, rng)
        except NotEnoughBookiesError as exc:
            failed(exc, explain)
            raise

    def _new_ensemble(self, ensemble_size: int, write_quorum: int, ack_quorum: int, min_regions: int,
                      exclude: Iterable[str], explain: dict[str, Any], rng: random.Random) -> PlacementResult:
        excluded = self._exclusion(exclude, explain)
        available = self.available_regions(self._note_disallowed(explain))
        explain["regions_available"] = available
        per_region = self._excluded_per_region(excluded) if excluded else {}
        steps = explain["steps"]
        subs = self.sub_policies
        candidates = sum([len(subs[region].known) for region in available])
        if per_region:
            candidates -= sum([per_region.get(region, 0) for region in available])
        steps.append({"step": "regions", "scope": "available regions", "candidates": candidates,
                      "regions": len(available)})

        if not available:
            reason = "every region is disallowed or empty" if self.sub_policies else "no region information"
            explain["fallbacks"].append(f"0 regions available ({reason}): random selection")
            leaves = self.topology.leaves()
            steps[-1]["failed"] = True
            steps.append({"step": "ensemble", "scope": "cluster (random)",
                          "candidates": len(leaves) - sum(per_region.values())})
            chosen = self._select_random(leaves, ensemble_size, excluded, None, None, rng)
            if len(chosen) < ensemble_size:
                steps[-1]["failed"] = True
                raise NotEnoughBookiesError(
                    f"cannot place ensemble_size={ensemble_size}: no region is available and only {len(chosen)} "
                    f"known bookies remain after excluding {len(excluded)}; add bookies or re-allow a region",
                    explain={"constraint": f"ensemble_size={ensemble_size} needs {ensemble_size} eligible bookies "
                                           f"(no region available); {len(chosen)} eligible"})
            return self._relaxed(self._result(chosen, write_quorum, ack_quorum, explain), True)

        if len(available) == 1:
            region = available[0]
            explain["fallbacks"].append(f"single region: rack-aware placement in {region}")
            coverage = self._region_coverage(ensemble_size, write_quorum, ack_quorum, min_regions)
            candidates, racks = self._region_candidates(region, per_region)
            steps.append({"step": f"region {region}", "scope": f"{ensemble_size} bookie(s)", "candidates": candidates,
                          "racks": racks})
            try:
                placed, _ = self._place_in_region(self.sub_policies[region], ensemble_size, write_quorum,
                                                  excluded, coverage, rng)
            except NotEnoughBookiesError as exc:
                steps[-1]["failed"] = True
                raise NotEnoughBookiesError(f"cannot place ensemble_size={ensemble_size} in {region}, the only "
                                            f"available region: {exc}",
                                            explain={"constraint": f"the only available region, {region}, must hold "
                                                                   f"all {ensemble_size} bookies: {exc}"}) from exc
            self._merge_notes(explain, region, placed.explain.get("fallbacks", ()))
            explain["allocation"] = {region: len(placed.ensemble)}
            return self._relaxed(self._result(list(placed.ensemble), write_quorum, ack_quorum, explain), True)

        shrunk: list[str] = []
        chosen, adherence = self._allocate(ensemble_size, write_quorum, ack_quorum, min_regions, excluded,
                                           available, explain, rng, per_region, shrunk)
        if adherence is not None:
            return PlacementResult(chosen, adherence, None, explain)
        return self._relaxed(self._result(chosen, write_quorum, ack_quorum, explain), bool(shrunk))

    def _relaxed(self, result: PlacementResult, fell_back: bool) -> PlacementResult:
        """Tag a placement whose region-level fallback (no region, one region, a region that could not
        take its share) left it in fewer regions than it has bookies (`relaxed`)."""
        if fell_back:
            spanned = len({self.region_of_bookie(b) for b in result.ensemble})
            if spanned < len(result.ensemble):
                result.explain["relaxed"] = [{"rule": RULE_REGIONS, "spanned": spanned}]  # type: ignore[index]
        return result

    def _merge_notes(self, explain: dict[str, Any], region: str, notes: Iterable[str]) -> None:
        """Add a sub-policy's fallback notes, naming the region.

        Every sub-policy starts position 0 in the client's rack, as in Java; outside the local region
        that rack is never there, so that expected fallback is left out of the explanation.
        """
        if not notes:
            return
        local = region == self.local_region
        explain["fallbacks"].extend(f"{region}: {note}" for note in notes
                                    if local or not note.startswith(_LOCAL_RACK_NOTE))

    def _result(self, ensemble: list[str], write_quorum: int, ack_quorum: int,
                explain: dict[str, Any], bookie: str | None = None) -> PlacementResult:
        # BK bug fixed (apache/bookkeeper#1898): every result carries the real adherence (Java: the stub's
        # MEETS_STRICT, or the rack-aware answer on the single-region path).
        return PlacementResult(ensemble, self.is_ensemble_adhering(ensemble, write_quorum, ack_quorum),
                               bookie=bookie, explain=explain)

    def _select_random(self, pool: Sequence[str], n: int, excluded: set[str], predicate: CoverageEnsemble | None,
                       ensemble: CoverageEnsemble | None, rng: random.Random,
                       selector: WeightedSelector | None = None) -> list[str]:
        """Up to `n` distinct members of `pool` (BookKeeper's `selectRandomInternal`, spec §0.4).

        Uniform, or by capped disk weight when weighted placement is on. A candidate must not be
        excluded and, when `predicate` is given, must be accepted by it; it counts only if `ensemble`
        (when given) records it. `selector`: the weighted selector over `pool` when the caller keeps one.
        """
        taken: set[str] = set()

        def accept(candidate: str) -> bool:
            if candidate in excluded or candidate in taken:
                return False
            return predicate is None or predicate.apply(candidate, ensemble)

        if selector is None and self.settings.disk_weighted:
            selector = WeightedSelector(pool, self.weights, self.settings.max_weight_multiple)
        chosen: list[str] = []
        while len(chosen) < n:
            candidate = selector.pick(rng, accept) if selector is not None else pick_uniform(rng, pool, accept)
            if candidate is None:
                break
            taken.add(candidate)
            if ensemble is None or ensemble.add_node(candidate):
                chosen.append(candidate)
        return chosen

    # -- reads (spec §2.3) ------------------------------------------------------------------------

    def register_slow_bookie(self, bookie: str, entry_id: int) -> None:
        """Remember a slow bookie for `bookieFailureHistoryExpirationMSec` (only without a pending threshold)."""
        if self.settings.read_reorder_threshold_pending <= 0:
            now = self._tick()
            self.slow_bookies.purge(now)
            self.slow_bookies.register(bookie, entry_id, now)

    def reorder_read_sequence(self, ensemble: Sequence[str], health: HealthInfo | None,
                              write_set: Sequence[int], *, rng: random.Random | None = None) -> list[int]:
        """Read order for one entry (spec §2.3): local replicas, then one remote after at most two locals.

        Without a local region (no `localNodeLocation`, or `ignoreLocalNodeInPlacementPolicy`) this is
        the rack-aware order, everything available counting as local.
        """
        now = self._tick()
        health = health if health is not None else HealthInfo()
        slow = self.slow_bookies
        is_local = None
        if self.local_region != UNKNOWN_REGION:
            local_region = self.local_region
            region_of = self.region_of
            is_local = lambda bookie: region_of.get(bookie) == local_region  # noqa: E731
        return read_order.reorder_read_sequence(
            ensemble, write_set,
            is_known=self.known.__contains__, is_readonly=self.readonly.__contains__,
            is_slow=lambda bookie: slow.contains(bookie, now), failure_of=health.failure_of,
            pending_of=health.pending_of, threshold_pending=self.settings.read_reorder_threshold_pending,
            random_reordering=self.settings.random_read_reordering, rng=rng, is_local=is_local,
            remote_insert_position=read_order.REMOTE_NODE_IN_REORDER_SEQUENCE)

    def reorder_read_lac_sequence(self, ensemble: Sequence[str], health: HealthInfo | None,
                                  write_set: Sequence[int], *, rng: random.Random | None = None) -> list[int]:
        """`reorder_read_sequence`, then every ensemble index not in the write set, ascending (spec §2.3)."""
        ordered = self.reorder_read_sequence(ensemble, health, write_set, rng=rng)
        return read_order.add_missing_indices(ordered, len(ensemble))

    # -- snapshots and checks ---------------------------------------------------------------------

    def export_state(self) -> dict[str, Any]:
        """Base state plus the round-robin position, slow bookies and every sub-policy's own state."""
        self._tick()
        state = super().export_state()
        state["last_region_index"] = self.last_region_index
        state["slow_bookies"] = self.slow_bookies.export()
        state["sub_policies"] = {region: self.sub_policies[region].export_state()
                                 for region in self._regions}
        return state

    def import_state(self, state: Mapping[str, Any]) -> None:
        """Restore `export_state` output into a freshly created policy."""
        try:
            super().import_state(state)
            self.region_of = {bookie: region_of_location(location) for bookie, location in self.known.items()}
            self.last_region_index = int(state.get("last_region_index", 0))
            self.slow_bookies.restore(state.get("slow_bookies", {}))
            for region, sub_state in sorted(state.get("sub_policies", {}).items()):
                self._sub_policy(region).import_state(sub_state)
        finally:
            self._membership_changed()

    def check_invariants(self) -> None:
        """Assert the region bookkeeping is consistent (tests only)."""
        self.topology.check_invariants()
        assert set(self.region_of) == set(self.known)
        for bookie, location in self.known.items():
            region = self.region_of[bookie]
            assert region == region_of_location(location), (bookie, location, region)
            assert self.sub_policies[region].known.get(bookie) == location, (bookie, region)
        for region, sub in self.sub_policies.items():
            sub.check_invariants()
            for bookie in sub.known:
                assert self.region_of.get(bookie) == region, (bookie, region)
