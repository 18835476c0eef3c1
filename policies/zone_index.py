"""The zone index: bookies grouped by `/zone/upgradedomain` location, and the cuts a strict fill avoids.

Spec: bookkeeper-region-zone-isolation.md §3.1 (zone locations), §3.3 (the default fault domain),
§3.4 (`candidates`: the zones and upgrade domains a slot must avoid).

`parse_zone_location` reads a location as (zone, upgrade domain). `ZoneIndex` flattens the bookies
once per membership change, rack after rack, so that the bookies outside a set of racks are a few
ranges of one list (a `LeafView`). A `Cut` names the racks a slot must avoid; the index caches the
cuts, their views and the first-attempt cut of each slot shape, within bounds its owner chooses.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from .errors import InvalidLocationError
from .location import (
    DEFAULT_UPGRADEDOMAIN,
    DEFAULT_ZONE,
    DEFAULT_ZONE_AND_UPGRADEDOMAIN,
    components,
    is_under,
    normalize,
)
from .selection import WeightedSelector
from .topology import LeafView, NetworkTopology

ZoneUD = tuple[str, str]
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


class ZoneIndex:
    """Bookies grouped by location, flattened once so that a union of racks is a cheap `LeafView`.

    Placement describes a slot's candidates by the racks it must *avoid* (a few zones and upgrade
    domains around the slot); `gaps(cut)` turns that into ranges of the flat list, so the cost
    grows with the avoided racks, not with the cluster.

    Args:
        members: location -> its bookies (empty locations are skipped).
        cut_limit: cuts kept (zone-level and upgrade-domain-level together); past it the cache
            starts afresh.
        first_cut_limit: first-attempt keys kept in `first_cuts`; past it the cache starts afresh.
    """

    __slots__ = ("flat", "racks", "rack_of", "sizes", "default_bookies", "default_racks", "default_size",
                 "top_racks", "zone_ud_racks", "pairs", "_zone_cuts", "_cached", "first_cuts", "selectors",
                 "cut_limit", "first_cut_limit")

    def __init__(self, members: Mapping[str, Sequence[str]], *, cut_limit: int, first_cut_limit: int) -> None:
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
        self.cut_limit = cut_limit
        self.first_cut_limit = first_cut_limit
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
        # index): zones avoided -> Cut, whose `after` maps upgrade domains avoided -> Cut.
        self._zone_cuts: dict[frozenset[str], Cut] = {}
        self._cached = 0
        # (ensemble size, write quorum, desired zones, (zone, UD)s of the slots around a position in
        # `zone_rings.rings` order) -> the cut of a strict fill's first attempt (see `first_cut`).
        self.first_cuts: dict[tuple, Cut] = {}
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

    def zone_cut(self, zones: frozenset[str]) -> Cut:
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
            cut = self._remember(zones, Cut(frozenset(racks), frozenset(), size, len(self.racks)))
        return cut

    def ud_cut(self, base: Cut, used: frozenset[ZoneUD]) -> Cut:
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
            cut = Cut(racks, frozenset(extra), size, len(self.racks))
            if self._remember(None, cut) is cut:
                base.after[used] = cut
        return cut

    def first_cut(self, key: tuple, zones: frozenset[str], used: frozenset[ZoneUD]) -> Cut:
        """`ud_cut(zone_cut(zones), used)`, remembered under `key` in `first_cuts`."""
        cut = self.ud_cut(self.zone_cut(zones), used)
        if len(self.first_cuts) >= self.first_cut_limit:
            self._forget()
        self.first_cuts[key] = cut
        return cut

    def _forget(self) -> None:
        self._zone_cuts = {}
        self.first_cuts = {}
        self._cached = 1

    def _remember(self, zones: frozenset[str] | None, cut: Cut) -> Cut:
        """Count a new cached cut (under `zones` when given); past `cut_limit`, start afresh."""
        self._cached += 1
        if self._cached > self.cut_limit:
            self._forget()
            if zones is None:
                return cut  # its base was dropped: not stored
        if zones is not None:
            self._zone_cuts[zones] = cut
        return cut

    def view(self, cut: Cut) -> LeafView:
        """The bookies outside `cut`'s racks (excluded ones included), built once per cut."""
        view = cut.view
        if view is None:
            view = cut.view = LeafView(self.flat, self.gaps(cut.racks | cut.extra))
        return view

    def locations(self, cut: Cut) -> tuple[str, ...]:
        """The locations of `cut`'s racks in rack order (what a weighted pick excludes), built once per cut."""
        locations = cut.locations
        if locations is None:
            racks = self.racks
            locations = cut.locations = tuple(racks[r].location for r in sorted(cut.racks | cut.extra))
        return locations

    @classmethod
    def of(cls, topology: NetworkTopology, extra: Mapping[str, str] | None = None, *, cut_limit: int,
           first_cut_limit: int) -> ZoneIndex:
        """Index a topology, plus `extra` bookie -> location leaves (the stabilized departures).

        Cost: O(bookies log bookies), once per membership change; dominated by sorting each location.
        """
        members: dict[str, list[str]] = {rack: list(topology.bookies_in(rack)) for rack in topology.racks()}
        for bookie, location in (extra or {}).items():
            if bookie not in topology:
                members.setdefault(location, []).append(bookie)
        return cls(members, cut_limit=cut_limit, first_cut_limit=first_cut_limit)

    def __len__(self) -> int:
        return len(self.flat)


class Cut:
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
        self.after: dict[frozenset[ZoneUD], Cut] = {}

