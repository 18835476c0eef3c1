"""BookKeeper's region-aware placement (`RegionAwareEnsemblePlacementPolicy`), in pure Python.

Spec: bookkeeper-region-zone-isolation.md §1 (new_ensemble), §2 (replace, adherence, read order), §5 (keys),
App. A; the per-region engine is the rack-aware one of bookkeeper-rackaware.md §4-§8.

A location is `/region/rack`. Every region has its own rack-aware sub-policy (the public rack-aware policy)
holding only that region's bookies; this class keeps the whole cluster, decides how many bookies
each region contributes, and lets the region's sub-policy choose them under a region-level coverage
ensemble (durability: every acknowledged entry spans `reppMinimumRegionsForDurability` regions).

Deliberate differences from BookKeeper (each tagged `BK quirk` or `BK bug fixed` below, and listed in
docs/policies-regionaware.md):

* regions are visited in sorted name order (Java: `HashMap` order);
* adherence is a real rule (Java answers MEETS_STRICT for everything, apache/bookkeeper#1898) and
  `replace_to_adhere` really repairs (Java returns the ensemble unchanged);
* disk weights reach every layer (sub-policies and the cross-region random fallbacks).

The module is longer than most because the allocation loop, replacement, adherence and its repair
share the region bookkeeping; splitting them would only move private state across modules.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Iterable, Iterator, Mapping, MutableMapping, Sequence
from typing import Any

from . import read_order
from .api import Adherence, HealthInfo, PlacementResult
from .base import Clock, TopologyAwarePolicy
from .coverage import CoverageEnsemble
from .errors import InvalidLocationError, NotEnoughBookiesError
from .location import DEFAULT_REGION_AND_RACK, ROOT, UNKNOWN_REGION
from .provenance import RULE_REGIONS, failed, fixed, no_fix, unavailable
from .rackaware import RackawarePolicy
from .resolver import LocationResolver
from .selection import WeightedSelector, lazy_shuffle, pick_uniform
from .settings import PlacementSettings

POLICY_NAME = "regionaware"
_LOCAL_RACK_NOTE = "position 0: no eligible bookie in the local rack"
# The rack-aware engine's note for a region with fewer than two racks (its random path, spec rackaware §4.4).
_FEWER_RACKS_NOTE = "fewer than 2 racks: random selection"
# From this write quorum up, adherence and its deficits slide per-rack and per-region counts along the
# write sets (O(E x regions)) instead of building each write set (O(E x W), faster for small quorums).
_SLIDING_ADHERENCE_FROM = 8


def region_of_location(location: str) -> str:
    """The region of a network location (`parseBookieRegion`, spec §1.1).

    `/r1/rack1` -> `r1`; `/default-region/r3` -> `default-region`; `/region4` -> `region4`;
    the region-aware default location `/default-region/default-rack` and `""` -> `UnknownRegion`.
    """
    if location == DEFAULT_REGION_AND_RACK:
        return UNKNOWN_REGION
    parts = location.split("/")
    if len(parts) <= 1 or not parts[1]:
        return UNKNOWN_REGION
    return parts[1]


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


class _DirectPlan:
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


class RegionawarePolicy(TopologyAwarePolicy):
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
        # (sizes, available regions, round-robin position) -> `_DirectPlan` or None; reset with `_populated`.
        self._direct_plans: dict[tuple[Any, ...], _DirectPlan | None] = {}
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
                self.sub_policies[region]._tick()  # the rack-aware engine offers no public hook for this

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
        take its share) left it in fewer regions than it has bookies (`relaxed`, issue 5)."""
        if fell_back:
            spanned = len({self.region_of_bookie(b) for b in result.ensemble})
            if spanned < len(result.ensemble):
                result.explain["relaxed"] = [{"rule": RULE_REGIONS, "spanned": spanned}]  # type: ignore[index]
        return result

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
        allocation = {region: (0, 0) for region in available}
        maxed: set[str] = set()
        remaining_e, remaining_w = ensemble_size, write_quorum
        local_index = available.index(self.local_region) if self.local_region in available else -1
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
                                sub._tick()
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
                     available: list[str]) -> _DirectPlan | None:
        """The `_DirectPlan` of one request shape (cached until membership changes), or None where the
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
                           available: list[str]) -> _DirectPlan | None:
        """The allocation loop's first pass worked out ahead: each region's share, and whether the region-level
        coverage accepts every pick. That coverage sees regions only, and each region's picks take
        consecutive positions, so its answers are the same for any draws: they are checked here once,
        on stand-in bookies, instead of on every call."""
        n = len(available)
        settings = self.settings
        local_region = self.local_region
        local_index = available.index(local_region) if local_region in available else -1
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
            if multi_rack and sub._first_scope() != ROOT:
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
        return _DirectPlan(shares, ordered, scratch["fallbacks"], last_index)

    def _allocate_direct(self, ensemble_size: int, write_quorum: int, ack_quorum: int, min_regions: int,
                         excluded: set[str], available: list[str], explain: dict[str, Any],
                         rng: _RecordingRandom, per_region: Mapping[str, int]) -> tuple[list[str], Adherence] | None:
        """The allocation loop's first pass when every region takes its share at once, without coverage
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
            sub._tick()
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
                        bookie = sub._cluster_weighted().pick(rng, acceptable)  # type: ignore[arg-type]
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
                sampler = sub._sampler()
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
            pick = sub._pick_leaf
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

    def _fallback_pool(self, allowed: list[str]) -> tuple[list[str], WeightedSelector | None]:
        """The known bookies of the `allowed` regions (region by region, each in id order) and, with disk
        weights, the selector over them: a replacement's cross-region candidates. Kept until membership
        changes (the selector until the weights are replaced), so a run of replacements that all fall
        back, as during a region's outage, does not rebuild them per call (O(bookies log bookies))."""
        key = tuple(allowed)
        found = self._fallback_pools.get(key)
        if found is None:
            if len(self._fallback_pools) >= 64:
                self._fallback_pools.clear()
            pool = [b for r in allowed for b in self.sub_policies[r].known_sorted()]
            found = self._fallback_pools[key] = [pool, None, None]
        pool, weights, selector = found
        if self.settings.disk_weighted and weights is not self.weights:
            selector = found[2] = WeightedSelector(pool, self.weights, self.settings.max_weight_multiple)
            found[1] = self.weights
        return pool, selector

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

    @staticmethod
    def _refuses_every_region(coverage: CoverageEnsemble, regions: Iterable[str]) -> bool:
        """Whether the region-level `coverage` refuses its next position in each of `regions` (those of
        the fallback pool).

        It judges bookies by region only, so then no bookie of those regions can pass: a cross-region
        replacement under the durability rule would walk (and draw for) every bookie of the pool to
        find nothing, on every replacement while, for example, all but one region are down.
        """
        return all(coverage.refuses_location("/" + region) for region in regions)

    # -- replace_bookie (spec §2.1) ---------------------------------------------------------------

    def replace_bookie(self, ensemble_size: int, write_quorum: int, ack_quorum: int,
                       custom_metadata: Mapping[str, bytes] | None, current_ensemble: Sequence[str],
                       bookie_to_replace: str, exclude: Iterable[str] | None = (), *,
                       rng: random.Random | None = None) -> PlacementResult:
        """Replace one bookie: same rack, else same region, else any allowed region (spec §2.1).

        With durability enforced in replacement (`reppEnableDurabilityEnforcementInReplace`, feature off)
        the cross-region pick must keep every write set within the durability rule; a current ensemble
        that already breaks it turns enforcement off for this call ("anomalous ensemble").

        Raises:
            ValueError: `bookie_to_replace` is not in a non-empty `current_ensemble`.
            NotEnoughBookiesError: no eligible bookie in any allowed region.
        """
        if exclude is None:
            exclude = ()
        self._tick()
        rng = rng if rng is not None else random.Random(0)
        current = list(current_ensemble)
        if current and bookie_to_replace not in current:  # Java fails with an index error
            raise ValueError(f"bookie_to_replace {bookie_to_replace} is not a member of current_ensemble {current}")
        disabled = self.durability_in_replace and self.is_durability_disabled()
        enforce = self.durability_in_replace and not disabled
        min_regions = self.min_regions if enforce else 1
        explain = self._new_explain(disabled)
        excluded = self._exclusion(exclude, explain)
        disallowed = set(self._note_disallowed(explain))
        excluded.add(bookie_to_replace)
        # The region-level coverage of the other members matters only while durability is enforced (it is
        # the cross-region pick's predicate); without enforcement it is never built.
        coverage = CoverageEnsemble(ensemble_size, write_quorum, ack_quorum, self.settings.min_racks_per_write_quorum,
                                    self._region_keys.__getitem__, regions=self._regions,
                                    min_durability=min_regions) if enforce else None
        for member in current:
            if member == bookie_to_replace:
                continue
            excluded.add(member)
            if enforce:
                if not coverage.apply(member, coverage):  # type: ignore[union-attr]
                    enforce = False
                    explain["fallbacks"].append(f"anomalous ensemble: {member} already breaks the durability rule; "
                                                "durability not enforced for this replacement")
                else:
                    coverage.add_node(member)  # type: ignore[union-attr]
        others = sorted({b for b in current if b != bookie_to_replace})
        if others:
            explain["excluded"]["ensemble"] = others

        region = self.region_of_bookie(bookie_to_replace)
        allowed = [r for r in self._regions if r not in disallowed]
        per_region = self._excluded_per_region(excluded)
        steps = explain["steps"]
        candidate = None
        if region in allowed:
            notes: list[str] = []
            candidates, racks = self._region_candidates(region, per_region)
            steps.append({"step": "replacement", "scope": f"region {region}", "candidates": candidates,
                          "racks": racks})
            try:
                candidate = self.sub_policies[region].select_from_network_location(
                    self.location_of(bookie_to_replace), set(excluded), None, None, True, rng, fallbacks=notes)
                self._merge_notes(explain, region, notes)
            except NotEnoughBookiesError:
                steps[-1]["failed"] = True
                explain["fallbacks"].append(f"region {region}: no eligible bookie; chose from all allowed regions")
        else:
            explain["fallbacks"].append(f"region {region} of {bookie_to_replace} is not available; "
                                        "chose from all allowed regions")
        if candidate is None:
            pool, selector = self._fallback_pool(allowed)
            predicate = coverage if enforce else None
            steps.append({"step": "replacement", "scope": "allowed regions",
                          "candidates": len(pool) - sum(per_region.get(r, 0) for r in allowed),
                          "regions": len(allowed)})
            if predicate is not None and self._refuses_every_region(
                    predicate, [r for r in allowed if self.sub_policies[r].known]):
                picked = []
            else:
                picked = self._select_random(pool, 1, excluded, predicate, predicate, rng, selector)
            if not picked:
                steps[-1]["failed"] = True
                rule = (f" that keeps {self.min_regions} regions per acknowledged entry "
                        "(reppEnableDurabilityEnforcementInReplace)") if enforce else ""
                raise failed(NotEnoughBookiesError(
                    f"cannot replace {bookie_to_replace}: no bookie in the allowed regions ({', '.join(allowed)})"
                    f"{rule} remains after excluding {len(excluded)} (current ensemble and exclusions); add bookies"),
                    explain, f"the replacement must be an eligible bookie of an allowed region{rule}")
            candidate = picked[0]
        explain["region"] = self.region_of_bookie(candidate)
        replaced = list(current)
        if replaced:
            replaced[replaced.index(bookie_to_replace)] = candidate
        else:
            replaced = [candidate]
        return self._result(replaced, write_quorum, ack_quorum, explain, bookie=candidate)

    # -- adherence (spec §2.2, issue #1898) -------------------------------------------------------

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

        Cost: O(E x W) below `_SLIDING_ADHERENCE_FROM`; from there on O(E) when W >= E (every write
        set holds every member) and O(E x regions) otherwise (`_sliding_deficits`).
        """
        size = len(ensemble)
        min_regions = self.min_regions if self.is_durability_enforced() else 0
        soft_regions = min(write_quorum, self.settings.min_racks_per_write_quorum, max(self._populated_regions(), 1))
        if write_quorum >= _SLIDING_ADHERENCE_FROM:
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

        Cost: O(E x W) below `_SLIDING_ADHERENCE_FROM`, O(E x regions) from there on (`_deficits`);
        every member is looked up once (`_deficits` gives the amounts, for repairs).
        """
        size = len(ensemble)
        if size == 0:
            return Adherence.FAIL
        if write_quorum < 1 or len(set(ensemble)) != size or _SLIDING_ADHERENCE_FROM <= write_quorum < size:
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
                                            for bookie, rack in zip(ensemble, racks_at)]
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
        explain: dict[str, Any] = {"policy": POLICY_NAME, "steps": [], "fallbacks": [], "excluded": {},
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
        `_SLIDING_ADHERENCE_FROM`, O(W x regions) from there on."""
        size = len(trial)
        if write_quorum >= size:
            return sum(d for d, _ in self._deficits(trial, write_quorum, ack_quorum))
        min_regions = self.min_regions if self.is_durability_enforced() else 0
        if write_quorum >= _SLIDING_ADHERENCE_FROM:
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

    # -- relaxation fixes (issue 5) ----------------------------------------------------------------

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
