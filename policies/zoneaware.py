"""The zone-aware policy (BookKeeper's `ZoneawareEnsemblePlacementPolicy` and its `...Impl`).

Spec: bookkeeper-region-zone-isolation.md §3 (this module), §0.2-§0.3 (locations, write sets),
§5 (keys); bookkeeper-rackaware.md §2 (membership), §7 (disk weights).

Bookies live at `/zone/upgradedomain`. A *zone* is the fault domain: every write quorum should span
`D = min(W, desiredNumZonesPerWriteQuorum)` zones and must span `minNumZonesPerWriteQuorum`. An
*upgrade domain* (UD) is a group of bookies of one zone that may be taken down together for
patching: two bookies of one zone inside a write quorum must not share their UD.

Two modes (`enforceStrictZoneawarePlacement`, default true):

* strict: bookies of the default fault domain are never chosen; each slot is filled by `fill(index)`
  (§3.4), which looks at the slot's neighbours in the ring of write sets;
* non-strict: E distinct bookies drawn at random (default fault domain included).

Either way the answer carries the §3.6 adherence (MEETS_STRICT / MEETS_SOFT / FAIL).

Cost: the candidates of a slot are unions of whole `/zone/ud` racks, read from an index built once
per membership change; a pick costs O(racks + excluded bookies), not O(bookies) (the disk-weighted
pick draws from `RackWeights` with the distribution of BookKeeper's selector over the candidates).

Stabilization (§3.8, `networkTopologyStabilizePeriodSeconds` > 0): a departed bookie stays usable
for that many seconds of the injected clock, but only as a second attempt when the live cluster
cannot satisfy a `new_ensemble` / `replace_bookie`. The departures are `stabilize.PendingDepartures`,
the rule the rack-aware policy's stabilized topology follows too.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Iterable, Mapping, MutableMapping, Sequence
from typing import Any

from .api import Adherence, HealthInfo, PlacementResult
from .base import Clock, TopologyAwarePolicy, distinct_per_write_set, write_set_moves
from .errors import InvalidLocationError, NotEnoughBookiesError
from .location import DEFAULT_ZONE_AND_UPGRADEDOMAIN
from .provenance import RULE_ZONES, failed, fixed, no_fix, retried, unavailable
from .rack_weights import RackWeights
from .read_order import add_missing_indices
from .resolver import LocationResolver
from .selection import WeightedSelector, pick_uniform, pick_weighted
from .settings import PlacementSettings
from .stabilize import PendingDepartures
from .topology import LeafView
from .zone_fill import Fill, fill_position
from .zone_index import UNRESOLVED, ZoneIndex, ZoneUD, parse_zone_location

# Weighted picks enumerate views up to this many bookies: a selector over so few candidates costs less
# than `RackWeights`' per-rack bookkeeping, and draws with the same distribution.
_ENUMERATE_BELOW = 64
# Cuts the policy's indexes keep (zone-level and upgrade-domain-level; each holds a byte per rack and
# its view), and separately first-attempt keys pointing at them. The bounds hold the working set of
# new_ensemble(3, 3, 2) on a 6000-bookie, 100-upgrade-domain cluster (about 3,500 cuts and 6,800 keys:
# a key tells the slots around a position apart), so that cluster does not keep starting afresh.
_CUT_CACHE_LIMIT = 4096
_FIRST_CUT_LIMIT = 8192
# Weighted selectors an index keeps for enumerated views (at most `_ENUMERATE_BELOW` bookies each).
_SELECTOR_CACHE_LIMIT = 1024
# From this write quorum up, adherence slides per-zone counts along the write sets (O(E)) instead of
# building each write set (O(E x W), which costs less for the small quorums of everyday ledgers).
_SLIDING_ADHERENCE_FROM = 8


class ZoneawarePolicy(TopologyAwarePolicy):
    """Zone- and upgrade-domain-aware placement (spec §3).

    Args:
        settings: parsed configuration (`minNumZonesPerWriteQuorum`, `desiredNumZonesPerWriteQuorum`,
            `enforceStrictZoneawarePlacement`, disk weights, `networkTopologyStabilizePeriodSeconds`).
        resolver: bookie -> `/zone/upgradedomain` (unmapped bookies: `/default-zone/default-upgradedomain`).
        clock: event-time seconds, read only by stabilization (departures and their expiry).
        features: unused by this policy.
    """

    name = "zoneaware"
    default_location = DEFAULT_ZONE_AND_UPGRADEDOMAIN

    def __init__(self, settings: PlacementSettings, resolver: LocationResolver, clock: Clock,
                 features: MutableMapping[str, int]) -> None:
        super().__init__(settings, resolver, clock, features)
        self.min_zones = settings.min_zones_per_write_quorum
        self.desired_zones = settings.desired_zones_per_write_quorum
        self.strict = settings.strict_zoneaware
        self.departures = PendingDepartures(settings.stabilize_period_s)
        self._index: ZoneIndex | None = None
        self._stabilized: tuple[tuple[str, ...], ZoneIndex] | None = None
        self._parsed: dict[str, ZoneUD] = {}

    # -- membership: keep the index and the pending departures current ----------------------------

    def _changed(self) -> None:
        self._index = None
        self._stabilized = None

    def on_cluster_changed(self, writable: Iterable[str], readonly: Iterable[str], *,
                           changed: Collection[str] | None = None) -> set[str]:
        """Apply a membership snapshot (rackaware spec §2.2) and return the dead bookies.

        With stabilization on, departed bookies are kept usable for the delay, and the dead set is
        always empty.
        """
        dead = super().on_cluster_changed(writable, readonly, changed=changed)
        if self.departures.period_s > 0:
            # BK quirk (spec region-zone-isolation.md §3.8, rackaware App. A #1): with stabilization
            # the wrapper answers the secondary's dead set, which is always empty; kept, documented.
            return set()
        return dead

    def handle_bookies_that_left(self, bookies: list[str]) -> None:
        if self.departures.period_s > 0:
            departing = [(b, self.known[b]) for b in bookies if b in self.known]
            if departing:
                now = self.clock()
                for bookie, location in departing:
                    self.departures.depart(bookie, location, now)
        super().handle_bookies_that_left(bookies)
        self._changed()

    def handle_bookies_that_joined(self, bookies: list[str]) -> None:
        super().handle_bookies_that_joined(bookies)
        for bookie in bookies:
            if bookie in self.known:
                self.departures.cancel(bookie)
        self._changed()

    def move_bookie(self, bookie: str, old: str, new: str) -> None:
        # BK bug fixed (spec region-zone-isolation.md App. A #6): Java caches (zone, UD) per bookie
        # forever, so a rack change is ignored by placement and adherence; here the index is rebuilt
        # and (zone, UD) always follows the bookie's current location.
        super().move_bookie(bookie, old, new)
        self._changed()

    def pending_leaves(self) -> dict[str, float]:
        """Departed bookies still usable as a second attempt: bookie -> expiry time (clock seconds)."""
        if self.departures.period_s <= 0 or not len(self.departures):
            return {}
        return self.departures.expiries(self.clock())

    def export_state(self) -> dict[str, Any]:
        state = super().export_state()
        if self.departures.period_s > 0 and len(self.departures):
            self.departures.expire(self.clock())
            state["pending_leaves"] = self.departures.to_json()
        return state

    def import_state(self, state: Mapping[str, Any]) -> None:
        super().import_state(state)
        self.departures.load_json(state.get("pending_leaves", {}))
        self._changed()

    # -- locations ----------------------------------------------------------------------------------

    def zone_of(self, bookie: str) -> ZoneUD:
        """(zone, upgrade domain) of any bookie: known, recently departed, or freshly resolved."""
        location = self.known.get(bookie)
        if location is None:
            location = self.departures.location_of(bookie)
        if location is None:
            try:
                location = self.resolve_location(bookie)
            except InvalidLocationError:
                # Java lets the IllegalArgumentException escape from adherence; an unusable
                # location is treated as unresolved here (adherence FAIL).
                return UNRESOLVED
        parsed = self._parsed.get(location)
        if parsed is None:
            parsed = parse_zone_location(location)
            self._parsed[location] = parsed
        return parsed

    def _live_index(self) -> ZoneIndex:
        if self._index is None:
            self._index = ZoneIndex.of(self.topology, cut_limit=_CUT_CACHE_LIMIT, first_cut_limit=_FIRST_CUT_LIMIT)
        return self._index

    def _stabilized_index(self, now: float) -> ZoneIndex | None:
        """The live cluster plus departures still within the delay; None when there are none."""
        self.departures.expire(now)
        active = self.departures.usable(now)
        if not active:
            return None
        key = tuple(active)
        if self._stabilized is None or self._stabilized[0] != key:
            self._stabilized = (key, ZoneIndex.of(self.topology, active, cut_limit=_CUT_CACHE_LIMIT,
                                                  first_cut_limit=_FIRST_CUT_LIMIT))
        return self._stabilized[1]

    # -- new_ensemble -----------------------------------------------------------------------------

    def new_ensemble(self, ensemble_size: int, write_quorum: int, ack_quorum: int,
                     custom_metadata: Mapping[str, bytes] | None = None, exclude: Iterable[str] | None = (), *,
                     rng: random.Random | None = None) -> PlacementResult:
        """Choose `ensemble_size` bookies (spec §3.3), retrying on the stabilized cluster (§3.8).

        Raises:
            ValueError: strict mode with `ensemble_size % write_quorum != 0` or
                `write_quorum <= minNumZonesPerWriteQuorum` (BookKeeper's IllegalArgumentException).
            NotEnoughBookiesError: no bookie can fill some position under the zone rules.
        """
        if exclude is None:
            exclude = ()
        _check_sizes(ensemble_size, write_quorum)
        if self.strict:
            if ensemble_size % write_quorum != 0:
                raise ValueError(
                    f"ensemble_size={ensemble_size} is not a multiple of write_quorum={write_quorum}: "
                    "enforceStrictZoneawarePlacement requires it (wrapped write quorums would fall back to "
                    "fewer zones); choose sizes with ensemble_size % write_quorum == 0 or disable strict mode")
            if write_quorum <= self.min_zones:
                raise ValueError(
                    f"write_quorum={write_quorum} must be greater than minNumZonesPerWriteQuorum="
                    f"{self.min_zones} with enforceStrictZoneawarePlacement (a lost zone could not be "
                    "replaced); raise write_quorum or lower minNumZonesPerWriteQuorum")
        rng = rng if rng is not None else random.Random(0)
        excluded = set(exclude)
        try:
            return self._new_ensemble_on(self._live_index(), ensemble_size, write_quorum, ack_quorum,
                                         excluded, rng, [])
        except NotEnoughBookiesError as exc:
            secondary = self._retry_index()
            if secondary is None:
                raise
            first = exc
        return self._on_retry(first, secondary, self._new_ensemble_on, secondary, ensemble_size, write_quorum,
                              ack_quorum, excluded, rng, [])

    def _on_retry(self, first: NotEnoughBookiesError, index: ZoneIndex, method: Any, *args: Any) -> PlacementResult:
        """Run `method` on the stabilized index after `first` failed on the live one; both attempts'
        steps go into the explanation (of the result, or of the error when the retry fails too)."""
        note = _retried_note(self.departures)
        try:
            result = method(*args)
        except NotEnoughBookiesError as exc:
            failed(exc, retried(first.explain, exc.explain, note, len(index), failed_too=True))
            raise
        explain = retried(first.explain, result.explain, note, len(index))
        return PlacementResult(result.ensemble, result.adherence, result.bookie, explain)

    def _retry_index(self) -> ZoneIndex | None:
        if self.departures.period_s <= 0 or not len(self.departures):
            return None
        return self._stabilized_index(self.clock())

    def _new_ensemble_on(self, index: ZoneIndex, ensemble_size: int, write_quorum: int, ack_quorum: int,
                         exclude: set[str], rng: random.Random, notes: list[str]) -> PlacementResult:
        if not self.strict:
            steps: list[dict[str, Any]] = []
            try:
                ensemble = self._draw_randomly(index, ensemble_size, exclude, rng, f"ensemble_size={ensemble_size}",
                                               steps, "ensemble")
            except NotEnoughBookiesError as exc:
                failed(exc, self._explain(notes, exclude, None, steps))
                raise
            explain = self._explain(notes, exclude, None, steps)
            return PlacementResult(ensemble, self.is_ensemble_adhering(ensemble, write_quorum, ack_quorum),
                                   explain=explain)
        desired = min(write_quorum, self.desired_zones)
        ensemble: list[str | None] = [None] * ensemble_size
        fill = Fill(index, ensemble, [None] * ensemble_size, set(exclude), rng, min_zones=self.min_zones,
                    pick=self._pick if self.settings.disk_weighted else None)
        try:
            for position in range(ensemble_size):
                fill_position(fill, position, write_quorum, desired)
        except NotEnoughBookiesError as exc:
            failed(exc, self._explain(notes + fill.fallbacks, exclude, index, fill.steps))
            raise
        chosen = [b for b in ensemble if b is not None]
        explain = self._explain(notes + fill.fallbacks, exclude, index, fill.steps)
        # The size rules of §3.6 were checked on entry; only the write quorums remain to be judged.
        adherence = self._adherence(fill.slots, write_quorum) if chosen else Adherence.FAIL
        if fill.zone_relaxed:
            explain["relaxed"] = [{"rule": RULE_ZONES}]
        return PlacementResult(chosen, adherence, explain=explain)

    def _draw_randomly(self, index: ZoneIndex, count: int, exclude: set[str], rng: random.Random,
                       what: str, steps: list[dict[str, Any]] | None = None, step: str = "") -> list[str]:
        """`count` distinct bookies of the whole index, none excluded (non-strict mode, spec §3.3/§3.5);
        with `steps`, records the one selection step."""
        excluded_here = sum(1 for b in exclude if b in index.rack_of)
        available = len(index) - excluded_here
        if steps is not None:
            steps.append({"step": step, "scope": "cluster (random)", "candidates": available})
        if available < count:
            if steps:
                steps[-1]["failed"] = True
            raise NotEnoughBookiesError(
                f"cannot place {what} (enforceStrictZoneawarePlacement=false): only {available} writable "
                f"bookie(s) remain after excluding {len(exclude)}; add bookies",
                explain={"constraint": f"{what} needs {count} eligible bookie(s); {available} eligible"})
        taken = set(exclude)
        chosen: list[str] = []
        view = LeafView(index.flat, ((0, len(index.flat)),))
        for _ in range(count):
            bookie = self._pick(rng, view, taken, index)
            chosen.append(bookie)
            taken.add(bookie)
        return chosen

    def _pick(self, rng: random.Random, view: Sequence[str], excluded: set[str],
              index: ZoneIndex | None = None, cut: Sequence[str] = (), whole: bool = False) -> str:
        """One bookie of `view` not in `excluded` (the caller checked one exists), uniform or by disk weight.

        `view` is `index`'s bookies outside the racks at the locations `cut` (in rack order) when
        `index` is given; `whole` says that no bookie of `view` is excluded. The disk-weighted
        pick is the one of a fresh selector over the candidates (view minus excluded; the median cap
        is computed over them, spec bookkeeper-rackaware.md §7.4), drawn by `RackWeights` in
        O(cut racks + excluded bookies) instead of enumerating the candidates (views of at most
        `_ENUMERATE_BELOW` bookies are enumerated: cheaper there, same probabilities).
        """
        if self.settings.disk_weighted:
            if index is None:
                candidates = tuple([b for b in view if b not in excluded])
                bookie = pick_weighted(rng, candidates, self.weights, self.settings.max_weight_multiple)
            elif len(view) <= _ENUMERATE_BELOW:
                # `pick_weighted`'s fresh selector, kept by the index (rebuilt on every membership change)
                # while the weights mapping stays the same object (replaced by `update_bookie_info` and
                # `import_state`; edited in place only by joins and departures): per candidates, or per
                # view (a cut's view is built once) when none of it is excluded.
                weights = self.weights
                known, selectors = index.selectors
                if known is not weights:
                    selectors = {}
                    index.selectors = (weights, selectors)
                key = view if whole else tuple([b for b in view if b not in excluded])
                selector = selectors.get(key)
                if selector is None:
                    if len(selectors) >= _SELECTOR_CACHE_LIMIT:
                        selectors.clear()
                    candidates = tuple(view) if whole else key
                    selector = selectors[key] = WeightedSelector(candidates, weights,  # type: ignore[arg-type]
                                                                 self.settings.max_weight_multiple)
                bookie = selector.pick(rng)
            else:
                sampler = self._weighted_sampler(index)
                scope = sampler.scope_without(cut, excluded)
                bookie = sampler.pick(scope, rng, lambda b: b not in excluded)
        else:
            bookie = pick_uniform(rng, view, (lambda b: b not in excluded) if excluded else None)
        assert bookie is not None  # the caller counted the acceptable candidates
        return bookie

    def _weighted_sampler(self, index: ZoneIndex) -> RackWeights:
        """`RackWeights` over `index`'s racks and the current weights, kept until either changes.

        `weights` is replaced (never edited in place) by `update_bookie_info`/`import_state`, and
        membership changes rebuild the index, so (index, weights) identity marks a valid sampler. The
        live and the stabilized index each keep one.
        """
        cache: list[tuple[ZoneIndex, dict[str, int], RackWeights]] = self.__dict__.setdefault(
            "_weighted_samplers", [])
        weights = self.weights
        for known_index, known_weights, sampler in cache:
            if known_index is index and known_weights is weights:
                return sampler
        ranges = {rack.location: (rack.start, rack.end) for rack in index.racks}
        sampler = RackWeights((index.flat, [], ranges), weights, self.settings.max_weight_multiple)
        cache.append((index, weights, sampler))
        del cache[:-2]
        return sampler


    # -- replace_bookie: spec §3.5 ----------------------------------------------------------------

    def replace_bookie(self, ensemble_size: int, write_quorum: int, ack_quorum: int,
                       custom_metadata: Mapping[str, bytes] | None, current_ensemble: Sequence[str],
                       bookie_to_replace: str, exclude: Iterable[str] | None = (), *,
                       rng: random.Random | None = None) -> PlacementResult:
        """Choose a replacement for `bookie_to_replace` (spec §3.5), retrying on the stabilized cluster.

        `.ensemble` is `current_ensemble` with the replacement in place ([replacement] when empty);
        `.adherence` is that ensemble's §3.6 adherence.

        Raises:
            ValueError: `bookie_to_replace` is not in a non-empty `current_ensemble`.
            NotEnoughBookiesError: no bookie may take the slot.
        """
        if exclude is None:
            exclude = ()
        _check_sizes(max(ensemble_size, 1), write_quorum)
        current = list(current_ensemble)
        if current:
            if bookie_to_replace not in current:
                raise ValueError(f"bookie_to_replace {bookie_to_replace!r} is not in current_ensemble {current}")
            position = current.index(bookie_to_replace)
        else:
            current = [bookie_to_replace]
            position = 0
        rng = rng if rng is not None else random.Random(0)
        excluded = set(exclude)
        try:
            return self._replace_on(self._live_index(), write_quorum, ack_quorum, current, position,
                                    excluded, rng, [], bool(current_ensemble))
        except NotEnoughBookiesError as exc:
            secondary = self._retry_index()
            if secondary is None:
                raise
            first = exc
        return self._on_retry(first, secondary, self._replace_on, secondary, write_quorum, ack_quorum, current,
                              position, excluded, rng, [], bool(current_ensemble))

    def _replace_on(self, index: ZoneIndex, write_quorum: int, ack_quorum: int, current: list[str],
                    position: int, exclude: set[str], rng: random.Random, notes: list[str],
                    had_ensemble: bool) -> PlacementResult:
        excluded = set(exclude)
        excluded.update(current)
        others = sorted({b for i, b in enumerate(current) if i != position}) if had_ensemble else []
        if not self.strict:
            steps: list[dict[str, Any]] = []
            try:
                bookie = self._draw_randomly(index, 1, excluded, rng, "a replacement", steps, "replacement")[0]
            except NotEnoughBookiesError as exc:
                failed(exc, self._explain(notes, exclude, None, steps, others))
                raise
            explain = self._explain(notes, exclude, None, steps, others)
        else:
            desired = min(write_quorum, self.desired_zones)
            slots: list[ZoneUD | None] = [self.zone_of(b) for b in current]
            slots[position] = None
            slotted: list[str | None] = list(current)
            fill = Fill(index, slotted, slots, excluded, rng, min_zones=self.min_zones,
                        pick=self._pick if self.settings.disk_weighted else None)
            try:
                bookie = fill_position(fill, position, write_quorum, desired)
            except NotEnoughBookiesError as exc:
                failed(exc, self._explain(notes + fill.fallbacks, exclude, index, fill.steps, others))
                raise
            fill.steps[-1]["step"] = "replacement"
            explain = self._explain(notes + fill.fallbacks, exclude, index, fill.steps, others)
        ensemble = list(current)
        ensemble[position] = bookie
        if self.strict and len(ensemble) % write_quorum == 0 and write_quorum > self.min_zones:
            # `is_ensemble_adhering` past its size checks, on the (zone, UD)s the fill already holds
            # (the replacement's is its index rack's, which is the one `zone_of` gives).
            adherence = self._adherence(fill.slots, write_quorum)
        else:
            adherence = self.is_ensemble_adhering(ensemble, write_quorum, ack_quorum)
        return PlacementResult(ensemble if had_ensemble else [bookie], adherence, bookie=bookie,
                               explain=explain)

    # -- adherence: spec §3.6 ---------------------------------------------------------------------

    def is_ensemble_adhering(self, ensemble: Sequence[str], write_quorum: int, ack_quorum: int) -> Adherence:
        """FAIL / MEETS_SOFT / MEETS_STRICT by the zone and UD rules of every write quorum (spec §3.6)."""
        size = len(ensemble)
        if size == 0 or write_quorum < 1 or size % write_quorum != 0 or write_quorum <= self.min_zones:
            return Adherence.FAIL
        return self._adherence([self.zone_of(b) for b in ensemble], write_quorum)

    def _adherence(self, located: Sequence[ZoneUD | None], write_quorum: int) -> Adherence:
        """§3.6 step 2 over the (zone, UD) of each position (the size checks are done).

        With W == E every write quorum holds the whole ensemble, so one window is judged. Cost: O(E) then
        and from `_SLIDING_ADHERENCE_FROM` on (`_slide_zone_adherence`), O(E x W) below.
        """
        size = len(located)
        if None in located or UNRESOLVED in located:
            return Adherence.FAIL
        desired = min(write_quorum, self.desired_zones)
        min_zones = self.min_zones
        result = Adherence.MEETS_STRICT
        if _SLIDING_ADHERENCE_FROM <= write_quorum < size:
            # Every slot is located (checked above).
            return _slide_zone_adherence(list(located), write_quorum, min_zones, desired)  # type: ignore[arg-type]
        if write_quorum == size:
            doubled = located
            zone_list = [pair[0] for pair in located]  # type: ignore[index]
            starts: Iterable[int] = (0,)
        else:
            doubled = list(located) * (write_quorum // size + 2)
            zone_list = [pair[0] for pair in doubled]  # type: ignore[index]
            starts = range(size)
        for start in starts:
            zones = len(set(zone_list[start:start + write_quorum]))
            if zones < min_zones:
                return Adherence.FAIL
            if zones < write_quorum:
                # UD rule: a zone with two or more members needs two or more upgrade domains.
                domains: dict[str, set[str]] = {}
                count: dict[str, int] = {}
                for zone, domain in doubled[start:start + write_quorum]:  # type: ignore[misc]
                    domains.setdefault(zone, set()).add(domain)
                    count[zone] = count.get(zone, 0) + 1
                if any(count[zone] > 1 and len(uds) < 2 for zone, uds in domains.items()):
                    return Adherence.FAIL
            if zones < desired:
                result = Adherence.MEETS_SOFT
        return result

    def are_acked_bookies_adhering(self, acked: Iterable[str], write_quorum: int, ack_quorum: int) -> bool:
        """Acked bookies span min(W, minNumZonesPerWriteQuorum) zones and number at least A (spec §3.6)."""
        bookies = set(acked)
        zones = {self.zone_of(b)[0] for b in bookies}
        return len(zones) >= min(write_quorum, self.min_zones) and len(bookies) >= ack_quorum

    # -- other hooks (spec §3.7) ------------------------------------------------------------------

    def register_slow_bookie(self, bookie: str, entry_id: int) -> None:
        """No-op: the zone-aware policy keeps no slow-bookie cache."""

    def reorder_read_sequence(self, ensemble: Sequence[str], health: HealthInfo,
                              write_set: Sequence[int]) -> list[int]:
        """The write set unchanged (a copy)."""
        return list(write_set)

    def reorder_read_lac_sequence(self, ensemble: Sequence[str], health: HealthInfo,
                                  write_set: Sequence[int]) -> list[int]:
        """The write set, then every missing ensemble index in ascending order."""
        return add_missing_indices(list(write_set), len(ensemble))

    # -- relaxation fixes ----------------------------------------------------------------------------

    def is_relaxed(self, ensemble: Sequence[str], write_quorum: int, ack_quorum: int,
                   rule: Mapping[str, Any]) -> bool:
        """Whether `ensemble` still depends on the relaxation `rule` (an `explain.relaxed` entry).

        `zones` (a slot got fewer zones than desiredNumZonesPerWriteQuorum): the ensemble is
        MEETS_SOFT. Cost: O(E x WQ).
        """
        if rule.get("rule") != RULE_ZONES:
            return False
        return self.is_ensemble_adhering(ensemble, write_quorum, ack_quorum) == Adherence.MEETS_SOFT

    def _soft_quorums(self, ensemble: Sequence[str], write_quorum: int) -> int:
        """Write quorums spanning fewer than min(W, desiredNumZonesPerWriteQuorum) zones.

        Cost: O(E x W) below `_SLIDING_ADHERENCE_FROM`, O(E) from there on (`_count_short_write_sets`).
        """
        size = len(ensemble)
        zones = [self.zone_of(b)[0] for b in ensemble]
        desired = min(write_quorum, self.desired_zones)
        if write_quorum >= _SLIDING_ADHERENCE_FROM:
            return _count_short_write_sets(zones, write_quorum, desired)
        return sum(1 for start in range(size)
                   if len({zones[(start + j) % size] for j in range(write_quorum)}) < desired)

    def relaxation_fix(self, ensemble_size: int, write_quorum: int, ack_quorum: int,
                       current_ensemble: Sequence[str], rule: Mapping[str, Any], exclude: Iterable[str] = (), *,
                       rng: random.Random | None = None) -> PlacementResult | None:
        """Bring a MEETS_SOFT ensemble to MEETS_STRICT with few replacements (`zones` rule).

        In rounds, every position not yet changed is tried with `replace_bookie` (which fills the
        slot with the desired zone spread when it can); the replacement that leaves the fewest write
        quorums short of the desired zones (and does not FAIL) is kept; rounds stop at MEETS_STRICT or
        when nothing improves. Cost: up to E rounds x E replacements.

        Returns:
            None when the ensemble is no longer MEETS_SOFT; the fixed ensemble with `explain.replaced`;
            or an empty FAIL result when no replacement improves it now.
        """
        if not self.is_relaxed(current_ensemble, write_quorum, ack_quorum, rule):
            return None
        rng = rng if rng is not None else random.Random(0)
        exclude = tuple(exclude)
        zones_now = {rack.zone for rack in self._live_index().racks if not rack.in_default}
        if len(zones_now) < min(write_quorum, self.desired_zones):
            return no_fix(self.name, f"only {len(zones_now)} zone(s) have bookies; "
                                     f"desiredNumZonesPerWriteQuorum={self.desired_zones}")
        current = list(current_ensemble)
        short = self._soft_quorums(current, write_quorum)
        replaced: dict[str, str] = {}
        for _ in range(len(current)):
            best: tuple[int, int, list[str]] | None = None
            for position, member in enumerate(current):
                if str(position) in replaced:
                    continue
                try:
                    placed = self.replace_bookie(ensemble_size, write_quorum, ack_quorum, None, current, member,
                                                 exclude, rng=rng)
                except NotEnoughBookiesError:
                    continue
                if placed.adherence == Adherence.FAIL:
                    continue
                left = self._soft_quorums(placed.ensemble, write_quorum)
                if left < short and (best is None or left < best[0]):
                    best = (left, position, list(placed.ensemble))
            if best is None:
                break
            short, position, current = best
            replaced[str(position)] = current[position]
            if short == 0:
                break
        if not replaced:
            return no_fix(self.name, "no replacement spreads the write quorums over more zones")
        return fixed(self.name, current, self.is_ensemble_adhering(current, write_quorum, ack_quorum), replaced,
                     exclude)

    # -- provenance and checks ----------------------------------------------------------------------

    def _explain(self, notes: list[str], exclude: set[str], index: ZoneIndex | None,
                 steps: list[dict[str, Any]] | None = None, others: list[str] | None = None) -> dict[str, Any]:
        excluded: dict[str, list[str]] = {}
        if exclude:
            excluded["caller"] = sorted(exclude)
        if index is not None and index.default_bookies:
            excluded["default_fault_domain"] = list(index.default_bookies)
        unavailable(self, excluded)
        if others:
            excluded["ensemble"] = others
        return {"policy": self.name, "steps": steps if steps is not None else [], "fallbacks": notes,
                "excluded": excluded}

    def check_invariants(self) -> None:
        """Assert internal consistency (tests only; never on the hot path)."""
        self.topology.check_invariants()
        assert set(self.known) == set(self.topology.bookies())
        for bookie, location in self.known.items():
            assert self.topology.rack_of(bookie) == location
        self.departures.check_invariants()
        assert not any(b in self.departures for b in self.known)
        index = self._live_index()
        assert sorted(index.flat) == sorted(self.known)
        for rack in index.racks:
            assert all(index.rack_of[b] == index.racks.index(rack) for b in index.flat[rack.start:rack.end])


def _slide_zone_adherence(located: list[ZoneUD], write_quorum: int, min_zones: int, desired: int) -> Adherence:
    """`ZoneawarePolicy._adherence`'s loop over the E write sets (1 <= W < E; every slot located) in O(E).

    A write set fails when it spans fewer than `min_zones` zones, or when some zone holds two or more
    of its members in a single upgrade domain (the UD rule, which cannot bite while all W members are
    in distinct zones); it is soft below `desired` zones. Counts of members per zone and per (zone, UD)
    and of the zones breaking the UD rule follow the write set as it slides (`write_set_moves`).
    """
    per_zone: dict[str, int] = {}
    per_pair: dict[ZoneUD, int] = {}
    domains: dict[str, int] = {}    # zone -> upgrade domains it has in the write set
    broken = 0                      # zones with two or more members, all in one upgrade domain

    def enter(pair: ZoneUD) -> int:
        """Count `pair` in; return the change in `broken`."""
        zone = pair[0]
        members = per_zone.get(zone, 0)
        uds = domains.get(zone, 0)
        was = members > 1 and uds == 1
        per_zone[zone] = members + 1
        copies = per_pair.get(pair, 0)
        per_pair[pair] = copies + 1
        if not copies:
            uds += 1
            domains[zone] = uds
        return (uds == 1 and members > 0) - was

    def leave(pair: ZoneUD) -> int:
        """Count `pair` out; return the change in `broken`."""
        zone = pair[0]
        members = per_zone[zone]
        uds = domains[zone]
        was = members > 1 and uds == 1
        if members == 1:
            del per_zone[zone]
        else:
            per_zone[zone] = members - 1
        copies = per_pair[pair]
        if copies == 1:
            del per_pair[pair]
            uds -= 1
            if uds:
                domains[zone] = uds
            else:
                del domains[zone]
        else:
            per_pair[pair] = copies - 1
        return (uds == 1 and members > 2) - was

    for pair in located[:write_quorum]:
        broken += enter(pair)
    zones = len(per_zone)
    if zones < min_zones or broken:
        return Adherence.FAIL
    soft = zones < desired
    for leaving, entering in write_set_moves(located, write_quorum):
        if leaving == entering:
            continue
        broken += enter(entering) + leave(leaving)
        zones = len(per_zone)
        if zones < min_zones or broken:
            return Adherence.FAIL
        soft = soft or zones < desired
    return Adherence.MEETS_SOFT if soft else Adherence.MEETS_STRICT


def _count_short_write_sets(zones: list[str], write_quorum: int, desired: int) -> int:
    """How many of the E write sets (W >= 1) span fewer than `desired` of `zones`, in O(E)
    (`distinct_per_write_set`)."""
    return sum(held < desired for held in distinct_per_write_set(zones, write_quorum))


def _check_sizes(ensemble_size: int, write_quorum: int) -> None:
    if write_quorum < 1:
        raise ValueError(f"write_quorum must be >= 1, got {write_quorum}")
    if ensemble_size < 0:
        raise ValueError(f"ensemble_size must be >= 0, got {ensemble_size}")


def _retried_note(departures: PendingDepartures) -> str:
    return (f"retried on the stabilized topology (departed bookies kept usable for "
            f"networkTopologyStabilizePeriodSeconds={departures.period_s:g})")
