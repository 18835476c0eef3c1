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
cannot satisfy a `new_ensemble` / `replace_bookie`. `PendingDepartures` below keeps those bookies.
# TODO(merge): the rack-aware developer's `policies/stabilize.py` implements the same idea for the
# rack-aware policy; the two may be merged later.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Iterable, Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any

from .api import Adherence, HealthInfo, PlacementResult
from .base import Clock, TopologyAwarePolicy, distinct_per_write_set, write_set_moves
from .read_order import add_missing_indices
from .errors import InvalidLocationError, NotEnoughBookiesError
from .provenance import (POSITIONS, RULE_ZONES, failed, fixed, no_fix, position as position_name, retried,
                         unavailable)
from .location import (DEFAULT_UPGRADEDOMAIN, DEFAULT_ZONE, DEFAULT_ZONE_AND_UPGRADEDOMAIN, components,
                       is_under, normalize)
from .rack_weights import RackWeights
from .resolver import LocationResolver
from .selection import WeightedSelector, pick_uniform, pick_uniform_view, pick_weighted
from .settings import PlacementSettings
from .topology import LeafView, NetworkTopology

ZoneUD = tuple[str, str]
# `scope` names of the provenance steps of a strict fill (issue 5): which zone rule the slot kept.
_SCOPE_DESIRED = "desired zones"
_SCOPE_FEWER = "fewer zones than desired"
_SCOPE_MINIMUM = "minimum zones"
_SHARED_UD = ", shared upgrade domain"
# Weighted picks enumerate views up to this many bookies (faster than `RackWeights` there; same distribution).
_ENUMERATE_BELOW = 64
# Cuts an index keeps (zone-level and upgrade-domain-level; about 0.6 KB each), and separately first-attempt
# keys pointing at them: more than one 6000-bookie, 100-upgrade-domain cluster's new_ensemble(3, 3, 2) walks
# through (about 3,500 cuts and 6,800 keys: a key tells the slots around a position apart).
_CUT_CACHE_LIMIT = 4096
_FIRST_CUT_LIMIT = 8192
# Weighted selectors an index keeps for enumerated views (at most `_ENUMERATE_BELOW` bookies each).
_SELECTOR_CACHE_LIMIT = 1024
# From this write quorum up, adherence slides per-zone counts along the write sets (O(E)) instead of
# building each write set (O(E x W), faster for the small quorums of everyday ledgers).
_SLIDING_ADHERENCE_FROM = 8
UNRESOLVED: ZoneUD = (DEFAULT_ZONE, DEFAULT_UPGRADEDOMAIN)


def parse_zone_location(location: str | None) -> ZoneUD:
    """(zone, upgrade domain) of a network location (spec §3.1), both with their leading `/`.

    The default fault domain, a location that is not exactly two components, or one that is not a
    valid path at all are *unresolved*: `("/default-zone", "/default-upgradedomain")`.
    """
    if location is None or location == DEFAULT_ZONE_AND_UPGRADEDOMAIN:
        return UNRESOLVED
    try:
        parts = components(normalize(location))
    except InvalidLocationError:
        return UNRESOLVED
    if len(parts) != 2:
        return UNRESOLVED
    return ("/" + parts[0], "/" + parts[1])


# -- the rack index -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Rack:
    """One `/zone/ud` location holding bookies: a contiguous range `[start, end)` of the flat list."""

    location: str
    top: str              # "/" + first component: what a zone scope "~/zone" cuts from the tree
    zone: str             # parsed zone (§3.1), UNRESOLVED for malformed or default locations
    upgrade_domain: str
    start: int
    end: int
    in_default: bool      # under the default fault domain (excluded in strict mode)


class _ZoneIndex:
    """Bookies grouped by location, flattened once so that a union of racks is a cheap `LeafView`.

    Placement describes a slot's candidates by the racks it must *avoid* (a few zones and upgrade
    domains around the slot); `gaps(cut)` turns that into ranges of the flat list, so the cost
    grows with the avoided racks, not with the cluster.
    """

    __slots__ = ("flat", "racks", "rack_of", "sizes", "default_bookies", "default_racks", "default_size",
                 "top_racks", "zone_ud_racks", "pairs", "_zone_cuts", "_cached", "first_cuts", "selectors")

    def __init__(self, members: Mapping[str, Sequence[str]]) -> None:
        flat: list[str] = []
        racks: list[_Rack] = []
        rack_of: dict[str, int] = {}
        default_bookies: list[str] = []
        top_racks: dict[str, list[int]] = {}
        zone_ud_racks: dict[ZoneUD, list[int]] = {}
        for location in sorted(members):
            bookies = sorted(members[location])
            if not bookies:
                continue
            parts = components(location)
            zone, upgrade_domain = parse_zone_location(location)
            in_default = is_under(location, DEFAULT_ZONE_AND_UPGRADEDOMAIN)
            top = "/" + parts[0] if parts else ""
            number = len(racks)
            start = len(flat)
            flat.extend(bookies)
            for bookie in bookies:
                rack_of[bookie] = number
            racks.append(_Rack(location, top, zone, upgrade_domain, start, len(flat), in_default))
            top_racks.setdefault(top, []).append(number)
            zone_ud_racks.setdefault((zone, upgrade_domain), []).append(number)
            if in_default:
                default_bookies.extend(bookies)
        self.flat = flat
        self.racks = racks
        self.rack_of = rack_of
        self.default_bookies = tuple(sorted(default_bookies))
        # Strict mode never chooses bookies of the default fault domain (spec §3.3).
        self.default_racks = frozenset(r for r, rack in enumerate(racks) if rack.in_default)
        self.sizes = [rack.end - rack.start for rack in racks]
        self.default_size = sum(self.sizes[r] for r in self.default_racks)
        self.top_racks = {top: tuple(numbers) for top, numbers in top_racks.items()}
        self.zone_ud_racks = {key: tuple(numbers) for key, numbers in zone_ud_racks.items()}
        self.pairs: list[ZoneUD] = [(rack.zone, rack.upgrade_domain) for rack in racks]
        # Cuts of `zone_cut`/`ud_cut`, kept for the life of the index (a membership change builds a new
        # index): zones avoided -> _Cut, whose `after` maps upgrade domains avoided -> _Cut.
        self._zone_cuts: dict[frozenset[str], _Cut] = {}
        self._cached = 0
        # (ensemble size, write quorum, desired zones, (zone, UD)s of the slots around a position in
        # `_rings` order) -> the cut of `_fill`'s first attempt (see `first_cut`).
        self.first_cuts: dict[tuple, _Cut] = {}
        # Disk-weighted selectors over enumerated candidates: (weights they were built with, candidates ->
        # selector); see `ZoneawarePolicy._pick`.
        self.selectors: tuple[Mapping[str, int] | None, dict[tuple[str, ...], WeightedSelector]] = (None, {})

    def gaps(self, cut: Iterable[int]) -> list[tuple[int, int]]:
        """Ranges of the flat list outside the racks `cut` (racks are contiguous and in order)."""
        ranges: list[tuple[int, int]] = []
        position = 0
        racks = self.racks
        for r in sorted(cut):
            start = racks[r].start
            if start > position:
                ranges.append((position, start))
            position = racks[r].end
        if position < len(self.flat):
            ranges.append((position, len(self.flat)))
        return ranges

    def zone_cut(self, zones: frozenset[str]) -> _Cut:
        """The default fault domain and every rack of `zones` (spec §3.4 `candidates`, first cut); cached."""
        cut = self._zone_cuts.get(zones)
        if cut is None:
            racks = set(self.default_racks)
            size = self.default_size
            sizes = self.sizes
            top_racks = self.top_racks
            for zone in zones:
                for r in top_racks.get(zone, ()):
                    if r not in racks:
                        racks.add(r)
                        size += sizes[r]
            cut = self._remember(zones, _Cut(frozenset(racks), frozenset(), size, len(self.racks)))
        return cut

    def ud_cut(self, base: _Cut, used: frozenset[ZoneUD]) -> _Cut:
        """`base` (a `zone_cut`) plus the racks of the (zone, UD) pairs `used`; cached in `base.after`."""
        cut = base.after.get(used)
        if cut is None:
            racks = base.racks
            extra: set[int] = set()
            size = base.size
            sizes = self.sizes
            zone_ud_racks = self.zone_ud_racks
            for pair in used:
                for r in zone_ud_racks.get(pair, ()):
                    if r not in racks and r not in extra:
                        extra.add(r)
                        size += sizes[r]
            cut = _Cut(racks, frozenset(extra), size, len(self.racks))
            if self._remember(None, cut) is cut:
                base.after[used] = cut
        return cut

    def first_cut(self, key: tuple, zones: frozenset[str], used: frozenset[ZoneUD]) -> _Cut:
        """`ud_cut(zone_cut(zones), used)`, remembered under `key` in `first_cuts`."""
        cut = self.ud_cut(self.zone_cut(zones), used)
        if len(self.first_cuts) >= _FIRST_CUT_LIMIT:
            self._forget()
        self.first_cuts[key] = cut
        return cut

    def _forget(self) -> None:
        self._zone_cuts = {}
        self.first_cuts = {}
        self._cached = 1

    def _remember(self, zones: frozenset[str] | None, cut: _Cut) -> _Cut:
        """Count a new cached cut (under `zones` when given); past `_CUT_CACHE_LIMIT`, start afresh."""
        self._cached += 1
        if self._cached > _CUT_CACHE_LIMIT:
            self._forget()
            if zones is None:
                return cut  # its base was dropped: not stored
        if zones is not None:
            self._zone_cuts[zones] = cut
        return cut

    def view(self, cut: _Cut) -> LeafView:
        """The bookies outside `cut`'s racks (excluded ones included), built once per cut."""
        view = cut.view
        if view is None:
            view = cut.view = LeafView(self.flat, self.gaps(cut.racks | cut.extra))
        return view

    def locations(self, cut: _Cut) -> tuple[str, ...]:
        """The locations of `cut`'s racks in rack order (what a weighted pick excludes), built once per cut."""
        locations = cut.locations
        if locations is None:
            racks = self.racks
            locations = cut.locations = tuple(racks[r].location for r in sorted(cut.racks | cut.extra))
        return locations

    @classmethod
    def of(cls, topology: NetworkTopology, extra: Mapping[str, str] | None = None) -> _ZoneIndex:
        """Index a topology, plus `extra` bookie -> location leaves (the stabilized departures)."""
        members: dict[str, list[str]] = {rack: list(topology.bookies_in(rack)) for rack in topology.racks()}
        for bookie, location in (extra or {}).items():
            if bookie not in topology:
                members.setdefault(location, []).append(bookie)
        return cls(members)

    def __len__(self) -> int:
        return len(self.flat)


class _Cut:
    """Racks a slot must avoid: `racks` (default fault domain and avoided zones) plus `extra` (racks of
    avoided upgrade domains, disjoint from `racks`), holding `size` bookies; the view of the bookies
    outside them and their locations are filled in on first use. Shared by every call on one index."""

    __slots__ = ("racks", "extra", "size", "mask", "view", "locations", "after")

    def __init__(self, racks: frozenset[int], extra: frozenset[int], size: int, count: int) -> None:
        self.racks = racks
        self.extra = extra
        self.size = size
        mask = bytearray(count)
        for r in racks:
            mask[r] = 1
        for r in extra:
            mask[r] = 1
        self.mask = bytes(mask)   # mask[r] == 1: rack r is cut (one index per excluded bookie to count them)
        self.view: LeafView | None = None
        self.locations: tuple[str, ...] | None = None
        self.after: dict[frozenset[ZoneUD], _Cut] = {}


# -- stabilization ------------------------------------------------------------------------------


class PendingDepartures:
    """Departed bookies that stay usable for `period_s` seconds (BookKeeper's StabilizeNetworkTopology).

    Java removes a departed leaf from the secondary tree `period` seconds after its *last*
    departure; a rejoin cancels the removal. Here a departure records (location, departed_at) and a
    rejoin forgets it; an entry is usable while `now < departed_at + period_s`. The snapshot shape
    (`{"location", "departed_at"}`) is the one of `policies/stabilize.py`.
    """

    __slots__ = ("period_s", "_entries")

    def __init__(self, period_s: float) -> None:
        self.period_s = period_s
        self._entries: dict[str, tuple[str, float]] = {}

    def depart(self, bookie: str, location: str, now: float) -> None:
        self._entries[bookie] = (location, now)

    def rejoin(self, bookie: str) -> None:
        self._entries.pop(bookie, None)

    def expire(self, now: float) -> None:
        """Forget every departure whose delay has run out at `now`."""
        period = self.period_s
        for bookie in [b for b, (_, left) in self._entries.items() if left + period <= now]:
            del self._entries[bookie]

    def active(self, now: float) -> dict[str, str]:
        """bookie -> location of the departures still usable at `now` (sorted by bookie)."""
        period = self.period_s
        return {b: loc for b, (loc, left) in sorted(self._entries.items()) if left + period > now}

    def location_of(self, bookie: str) -> str | None:
        entry = self._entries.get(bookie)
        return entry[0] if entry is not None else None

    def expiries(self, now: float) -> dict[str, float]:
        """bookie -> time (s) at which it stops being usable, for the departures still usable at `now`."""
        period = self.period_s
        return {b: left + period for b, (_, left) in sorted(self._entries.items()) if left + period > now}

    def to_json(self) -> dict[str, dict[str, Any]]:
        return {b: {"location": loc, "departed_at": left} for b, (loc, left) in sorted(self._entries.items())}

    def load_json(self, data: Mapping[str, Mapping[str, Any]]) -> None:
        self._entries = {str(b): (str(e["location"]), float(e["departed_at"])) for b, e in data.items()}

    def __contains__(self, bookie: object) -> bool:
        return bookie in self._entries

    def __len__(self) -> int:
        return len(self._entries)


# -- one placement call ---------------------------------------------------------------------------


class _Fill:
    """State of one strict placement call: the index used, exclusions, the slots' (zone, UD)s.

    Args:
        index: the rack index (live cluster, or the stabilized one).
        ensemble: the list being filled (None = empty slot); the slot being replaced is None here.
        slots: (zone, UD) of every filled slot, None for empty ones.
        excluded: bookies that must not be chosen (callers', chosen, current ensemble).
    """

    __slots__ = ("index", "ensemble", "slots", "excluded", "excluded_racks", "rng", "fallbacks", "steps",
                 "zone_relaxed", "available_last", "shared_ud")

    def __init__(self, index: _ZoneIndex, ensemble: list[str | None], slots: list[ZoneUD | None],
                 excluded: set[str], rng: random.Random) -> None:
        self.index = index
        self.rng = rng
        self.ensemble = ensemble
        self.slots = slots
        self.excluded = excluded
        rack_of = index.rack_of
        # The rack of every excluded bookie that the index holds (one entry per bookie).
        self.excluded_racks = [rack_of[b] for b in excluded if b in rack_of]
        self.fallbacks: list[str] = []
        self.steps: list[dict[str, Any]] = []   # provenance: one record per filled slot (issue 5)
        self.zone_relaxed = False               # some slot got fewer zones than desired
        self.available_last = 0                 # candidates of the last cut `_candidates` accepted
        self.shared_ud = False                  # ... and whether it had to allow a shared upgrade domain

    def available(self, cut: set[int], cut_size: int) -> int:
        """Bookies outside the racks `cut` (holding `cut_size` bookies) that are not excluded.

        Cost: O(excluded bookies).
        """
        outside = len(self.index.flat) - cut_size
        for r in self.excluded_racks:
            if r not in cut:
                outside -= 1
        return outside

    def outside(self, cut: _Cut) -> int:
        """`available` for a cached cut: bookies outside its racks that are not excluded (its byte mask
        answers each excluded bookie's rack). Cost: O(excluded bookies)."""
        outside = len(self.index.flat) - cut.size
        mask = cut.mask
        for r in self.excluded_racks:
            if not mask[r]:
                outside -= 1
        return outside

    def widen(self, cut: set[int], cut_size: int, racks: Iterable[int]) -> int:
        """Add `racks` to `cut` (in place); return the new number of bookies in it."""
        sizes = self.index.sizes
        for r in racks:
            if r not in cut:
                cut.add(r)
                cut_size += sizes[r]
        return cut_size

    def take(self, position: int, bookie: str) -> None:
        index = self.index
        rack = index.rack_of[bookie]
        self.ensemble[position] = bookie
        self.slots[position] = index.pairs[rack]
        self.excluded.add(bookie)
        self.excluded_racks.append(rack)


# -- the policy ---------------------------------------------------------------------------------


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
        self.pending = PendingDepartures(settings.stabilize_period_s)
        self._index: _ZoneIndex | None = None
        self._stabilized: tuple[tuple[str, ...], _ZoneIndex] | None = None
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
        if self.pending.period_s > 0:
            # BK quirk (spec region-zone-isolation.md §3.8, rackaware App. A #1): with stabilization
            # the wrapper answers the secondary's dead set, which is always empty; kept, documented.
            return set()
        return dead

    def handle_bookies_that_left(self, bookies: list[str]) -> None:
        if self.pending.period_s > 0:
            departing = [(b, self.known[b]) for b in bookies if b in self.known]
            if departing:
                now = self.clock()
                for bookie, location in departing:
                    self.pending.depart(bookie, location, now)
        super().handle_bookies_that_left(bookies)
        self._changed()

    def handle_bookies_that_joined(self, bookies: list[str]) -> None:
        super().handle_bookies_that_joined(bookies)
        for bookie in bookies:
            if bookie in self.known:
                self.pending.rejoin(bookie)
        self._changed()

    def move_bookie(self, bookie: str, old: str, new: str) -> None:
        # BK bug fixed (spec region-zone-isolation.md App. A #6): Java caches (zone, UD) per bookie
        # forever, so a rack change is ignored by placement and adherence; here the index is rebuilt
        # and (zone, UD) always follows the bookie's current location.
        super().move_bookie(bookie, old, new)
        self._changed()

    def pending_leaves(self) -> dict[str, float]:
        """Departed bookies still usable as a second attempt: bookie -> expiry time (clock seconds)."""
        if self.pending.period_s <= 0 or not len(self.pending):
            return {}
        return self.pending.expiries(self.clock())

    def export_state(self) -> dict[str, Any]:
        state = super().export_state()
        if self.pending.period_s > 0 and len(self.pending):
            self.pending.expire(self.clock())
            state["pending_leaves"] = self.pending.to_json()
        return state

    def import_state(self, state: Mapping[str, Any]) -> None:
        super().import_state(state)
        self.pending.load_json(state.get("pending_leaves", {}))
        self._changed()

    # -- locations ----------------------------------------------------------------------------------

    def zone_of(self, bookie: str) -> ZoneUD:
        """(zone, upgrade domain) of any bookie: known, recently departed, or freshly resolved."""
        location = self.known.get(bookie)
        if location is None:
            location = self.pending.location_of(bookie)
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

    def _live_index(self) -> _ZoneIndex:
        if self._index is None:
            self._index = _ZoneIndex.of(self.topology)
        return self._index

    def _stabilized_index(self, now: float) -> _ZoneIndex | None:
        """The live cluster plus departures still within the delay; None when there are none."""
        self.pending.expire(now)
        active = self.pending.active(now)
        if not active:
            return None
        key = tuple(active)
        if self._stabilized is None or self._stabilized[0] != key:
            self._stabilized = (key, _ZoneIndex.of(self.topology, active))
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

    def _on_retry(self, first: NotEnoughBookiesError, index: _ZoneIndex, method: Any, *args: Any) -> PlacementResult:
        """Run `method` on the stabilized index after `first` failed on the live one; both attempts'
        steps go into the explanation (of the result, or of the error when the retry fails too)."""
        note = _retried_note(self.pending)
        try:
            result = method(*args)
        except NotEnoughBookiesError as exc:
            failed(exc, retried(first.explain, exc.explain, note, len(index), failed_too=True))
            raise
        explain = retried(first.explain, result.explain, note, len(index))
        return PlacementResult(result.ensemble, result.adherence, result.bookie, explain)

    def _retry_index(self) -> _ZoneIndex | None:
        if self.pending.period_s <= 0 or not len(self.pending):
            return None
        return self._stabilized_index(self.clock())

    def _new_ensemble_on(self, index: _ZoneIndex, ensemble_size: int, write_quorum: int, ack_quorum: int,
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
        fill = _Fill(index, ensemble, [None] * ensemble_size, set(exclude), rng)
        try:
            for position in range(ensemble_size):
                self._fill(fill, position, write_quorum, desired)
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

    def _draw_randomly(self, index: _ZoneIndex, count: int, exclude: set[str], rng: random.Random,
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
              index: _ZoneIndex | None = None, cut: Sequence[str] = (), whole: bool = False) -> str:
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

    def _weighted_sampler(self, index: _ZoneIndex) -> RackWeights:
        """`RackWeights` over `index`'s racks and the current weights, kept until either changes.

        `weights` is replaced (never edited in place) by `update_bookie_info`/`import_state`, and
        membership changes rebuild the index, so (index, weights) identity marks a valid sampler. The
        live and the stabilized index each keep one.
        """
        cache: list[tuple[_ZoneIndex, dict[str, int], RackWeights]] = self.__dict__.setdefault(
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

    # -- fill(index): spec §3.4 -------------------------------------------------------------------

    def _fill(self, fill: _Fill, position: int, write_quorum: int, desired: int) -> str:
        """Choose the bookie for `position` (BookKeeper `setBookieInTheEnsemble`, spec §3.4)."""
        slots = fill.slots
        size = len(slots)
        rings = _rings(size, position, write_quorum)
        index = fill.index
        if desired >= self.min_zones:
            # The usual case, first: step 1 with all D-1 neighbours and an unused upgrade domain (the
            # first cut `_candidates` tries), cached per (zone, UD)s of the slots around `position`, in
            # `rings` order (the ring looks the same from every position: the key needs no position).
            around = tuple(map(slots.__getitem__, rings[-1]))
            cut = index.first_cuts.get((size, write_quorum, desired, around))
            if cut is None:
                neighbours = rings[desired - 1]
                cut = index.first_cut(
                    (size, write_quorum, desired, around),
                    frozenset([slots[s][0] for s in neighbours if slots[s] is not None]),  # type: ignore[index]
                    frozenset([located for located in around if located is not None]))
            outside = fill.outside(cut)
            if outside > 0:
                step = POSITIONS[position] if position < len(POSITIONS) else position_name(position)
                fill.steps.append({"step": step, "scope": _SCOPE_DESIRED, "candidates": outside})
                return self._take(fill, position, index, cut, outside)
        cut = None
        scope = _SCOPE_DESIRED
        # 1. keep the zones of the D-1 nearest neighbours on each side distinct, then fewer, down to
        #    minZones-1 neighbours.
        for neighbours in range(desired - 1, self.min_zones - 2, -1):
            zones = frozenset([located[0] for located in map(slots.__getitem__, rings[max(neighbours, 0)])
                               if located is not None])
            cut = self._candidates(fill, position, write_quorum, zones)
            if cut is not None:
                if neighbours < desired - 1:
                    scope = _SCOPE_FEWER
                    fill.zone_relaxed = True
                    fill.fallbacks.append(
                        f"position {position}: could not spread {desired} zones around it "
                        f"(desiredNumZonesPerWriteQuorum); kept zones distinct from {neighbours} neighbour(s) "
                        "on each side")
                break
        # BK bug fixed: with write_quorum < minNumZonesPerWriteQuorum (reachable only through strict
        # replace_bookie) the loop above never runs and Java dereferences null; here the
        # minimum-zones rule below decides.
        if cut is None:
            # 2. only keep each write quorum containing `position` at minNumZonesPerWriteQuorum zones.
            zones = frozenset(self._zones_to_keep_min(fill, position, write_quorum))
            cut = self._candidates(fill, position, write_quorum, zones)
            scope = _SCOPE_MINIMUM
            if cut is not None:
                fill.zone_relaxed = True
                fill.fallbacks.append(
                    f"position {position}: fell back to minNumZonesPerWriteQuorum={self.min_zones} zones "
                    "per write quorum")
        if cut is None:
            fill.steps.append({"step": position_name(position), "scope": scope, "candidates": 0, "failed": True})
            raise NotEnoughBookiesError(
                self._fill_failure(fill, position, write_quorum),
                explain={"constraint": f"enforceStrictZoneawarePlacement: position {position} needs a bookie that keeps "
                                       f"minNumZonesPerWriteQuorum={self.min_zones} zones and two upgrade domains per "
                                       "zone in every write quorum"})
        fill.steps.append({"step": position_name(position),
                           "scope": scope + _SHARED_UD if fill.shared_ud else scope,
                           "candidates": fill.available_last})
        return self._take(fill, position, index, cut, fill.available_last)

    def _take(self, fill: _Fill, position: int, index: _ZoneIndex, cut: _Cut, available: int) -> str:
        """Pick a bookie outside `cut` (not excluded; `available` of them) for `position` and put it there."""
        view = cut.view
        if view is None:
            view = index.view(cut)
        if self.settings.disk_weighted:
            bookie = self._pick(fill.rng, view, fill.excluded, index, index.locations(cut), available == len(view))
        else:
            bookie = pick_uniform_view(fill.rng, view, fill.excluded)
            assert bookie is not None  # `_candidates` counted the acceptable candidates
        fill.take(position, bookie)
        return bookie

    def _fill_failure(self, fill: _Fill, position: int, write_quorum: int) -> str:
        index = fill.index
        excluded_per_rack: dict[int, int] = {}
        for r in fill.excluded_racks:
            excluded_per_rack[r] = excluded_per_rack.get(r, 0) + 1
        zones = sorted({rack.zone for r, rack in enumerate(index.racks)
                        if r not in index.default_racks
                        and rack.end - rack.start > excluded_per_rack.get(r, 0)})
        size = len(fill.ensemble)
        return (f"cannot fill position {position} of ensemble_size={size} write_quorum={write_quorum} under "
                f"enforceStrictZoneawarePlacement: no eligible bookie keeps minNumZonesPerWriteQuorum="
                f"{self.min_zones} zones and two upgrade domains per zone in every write quorum "
                f"(eligible bookies are in {len(zones)} zone(s): {', '.join(zones) or 'none'}; "
                f"{len(fill.excluded)} bookie(s) excluded, default fault domain never used); add bookies "
                "in more zones or upgrade domains, or lower minNumZonesPerWriteQuorum")

    def _zones_to_keep_min(self, fill: _Fill, position: int, write_quorum: int) -> set[str]:
        """Zones to avoid so each write quorum containing `position` reaches minNumZones (spec §3.4 step 2):
        the zones of every such quorum (its other filled slots) that has fewer than minNumZones.

        Cost: O(W) (zone counts slide from one quorum to the next, `_quorum_moves`), not O(W x W).
        """
        slots = fill.slots
        short = self.min_zones - 1
        zones: set[str] = set()
        counts: dict[str, int] = {}
        first, moves = _quorum_moves(len(slots), position, write_quorum)
        for slot in first:
            located = slots[slot]
            if slot != position and located is not None:
                counts[located[0]] = counts.get(located[0], 0) + 1
        if len(counts) <= short:
            zones.update(counts)
        for leaving, entering in moves:
            located = slots[entering]
            if entering != position and located is not None:
                counts[located[0]] = counts.get(located[0], 0) + 1
            located = slots[leaving]
            if leaving != position and located is not None:
                zone = located[0]
                if counts[zone] == 1:
                    del counts[zone]
                else:
                    counts[zone] -= 1
            if len(counts) <= short:
                zones.update(counts)
        return zones

    @staticmethod
    def _candidates(fill: _Fill, position: int, write_quorum: int, zones: frozenset[str]) -> _Cut | None:
        """The racks to avoid for `position` when avoiding `zones`, or None when nothing is left
        (spec §3.4 `candidates`).

        First prefer an upgrade domain unused by any same-zone bookie that can share a write quorum
        with this slot; failing that, only refuse a UD that is the sole UD of its zone in some write
        quorum containing the slot (so two bookies of a zone in a quorum span two UDs). The cuts of
        the first rule are cached by the index (what they depend on: the zones and the (zone, UD)s
        avoided); only the exclusions are counted per call, in O(excluded bookies).
        """
        index = fill.index
        base = index.zone_cut(zones)
        racks = base.racks
        if fill.outside(base) == 0:
            return None
        fill.shared_ud = False
        slots = fill.slots
        used = frozenset([located for located in map(slots.__getitem__, _rings(len(slots), position, write_quorum)[-1])
                          if located is not None])
        cut = base.after.get(used)
        if cut is None:
            cut = index.ud_cut(base, used)
        outside = fill.outside(cut)
        if outside > 0:
            fill.available_last = outside
            return cut
        single = _single_domain_zones(slots, position, write_quorum)
        widened = set(racks)
        cut_size = base.size
        zone_ud_racks = index.zone_ud_racks
        for pair in single:
            cut_size = fill.widen(widened, cut_size, zone_ud_racks.get(pair, ()))
        available = fill.available(widened, cut_size)
        if available > 0:
            fill.available_last = available
            fill.shared_ud = True
            fill.fallbacks.append(
                f"position {position}: no bookie in an unused upgrade domain of its zone; allowed a shared "
                "upgrade domain while keeping two per zone in each write quorum")
            return _Cut(frozenset(widened), frozenset(), cut_size, len(index.racks))
        return None

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

    def _replace_on(self, index: _ZoneIndex, write_quorum: int, ack_quorum: int, current: list[str],
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
            fill = _Fill(index, slotted, slots, excluded, rng)
            try:
                bookie = self._fill(fill, position, write_quorum, desired)
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

    # -- relaxation fixes (issue 5) ----------------------------------------------------------------

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

    def _explain(self, notes: list[str], exclude: set[str], index: _ZoneIndex | None,
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
        assert not any(b in self.pending for b in self.known)
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


class _Rings:
    """The slots around `position` in a ring of `size`, nearest first: `rings[n]` is the tuple of the
    slots at offsets -n..-1, +1..+n (n < W), `position` itself left out, each once; `rings[-1]` all of
    them. One list with the end of each offset's prefix, so building costs O(W) (a tuple per n would
    cost O(W x W) per position, O(E x W x W) per ensemble) and `rings[n]` costs O(n)."""

    __slots__ = ("slots", "ends")

    def __init__(self, size: int, position: int, write_quorum: int) -> None:
        slots: list[int] = []
        ends = [0]
        seen = {position}
        for offset in range(1, write_quorum):
            for slot in ((position - offset) % size, (position + offset) % size):
                if slot not in seen:
                    seen.add(slot)
                    slots.append(slot)
            ends.append(len(slots))
        self.slots = tuple(slots)
        self.ends = tuple(ends)

    def __getitem__(self, n: int) -> tuple[int, ...]:
        return self.slots[:self.ends[n]]

    def __len__(self) -> int:
        return len(self.ends)


# Below this write quorum `_rings` keeps every ring as a tuple (at most 120 slots in all): indexing a tuple
# of tuples is cheaper than `_Rings.__getitem__` on the hot path of small ensembles.
_LAZY_RINGS_FROM = 16
_RINGS: dict[tuple[int, int, int], Sequence[tuple[int, ...]]] = {}


def _rings(size: int, position: int, write_quorum: int) -> Sequence[tuple[int, ...]]:
    """`rings[n]`: the slots at offsets -n..-1, +1..+n around `position` in a ring of `size` (n < W),
    `position` itself left out, each once. Cached per (size, position, W)."""
    key = (size, position, write_quorum)
    rings = _RINGS.get(key)
    if rings is None:
        lazy = _Rings(size, position, write_quorum)
        rings = lazy if write_quorum >= _LAZY_RINGS_FROM else tuple(lazy[n] for n in range(write_quorum))
        if len(_RINGS) >= 4096:
            _RINGS.clear()
        _RINGS[key] = rings
    return rings


def _quorum_moves(size: int, position: int, write_quorum: int) -> tuple[list[int], Iterator[tuple[int, int]]]:
    """The write quorums containing `position` (start offsets -(W-1)..0), one slot move at a time: the
    slots of the first, then (leaving, entering) as the start advances. Slots repeat when W > E;
    `position` is among them, and callers leave it out."""
    first = position - write_quorum + 1
    slots = [(first + j) % size for j in range(write_quorum)]
    moves = (((first + k) % size, (first + k + write_quorum) % size) for k in range(write_quorum - 1))
    return slots, moves


def _single_domain_zones(slots: Sequence[ZoneUD | None], position: int, write_quorum: int) -> set[ZoneUD]:
    """(zone, UD) of every zone whose filled slots, in some write quorum containing `position` (the
    slot itself left out), all sit in that one upgrade domain (spec §3.4 `candidates`, second rule).

    Cost: O(W). Per-zone upgrade-domain counts slide from one quorum to the next (`_quorum_moves`);
    only the zones of the two slots that moved can change, so only they are looked at again.
    """
    domains: dict[str, dict[str, int]] = {}
    single: set[ZoneUD] = set()

    def count(located: ZoneUD, step: int) -> None:
        zone, domain = located
        held = domains.setdefault(zone, {})
        copies = held.get(domain, 0) + step
        if copies:
            held[domain] = copies
        else:
            del held[domain]
            if not held:
                del domains[zone]

    def note(zone: str) -> None:
        held = domains.get(zone)
        if held is not None and len(held) == 1:
            single.add((zone, next(iter(held))))

    first, moves = _quorum_moves(len(slots), position, write_quorum)
    for slot in first:
        located = slots[slot]
        if slot != position and located is not None:
            count(located, 1)
    for zone in list(domains):
        note(zone)
    for leaving, entering in moves:
        came = slots[entering] if entering != position else None
        went = slots[leaving] if leaving != position else None
        if came is not None:
            count(came, 1)
        if went is not None:
            count(went, -1)
        if came is not None:
            note(came[0])
        if went is not None:
            note(went[0])
    return single


def _retried_note(pending: PendingDepartures) -> str:
    return (f"retried on the stabilized topology (departed bookies kept usable for "
            f"networkTopologyStabilizePeriodSeconds={pending.period_s:g})")
