"""Strict zone-aware placement of one slot: BookKeeper's `setBookieInTheEnsemble`.

Spec: bookkeeper-region-zone-isolation.md §3.4 (`fill(index)` and `candidates`); §3.3 and §3.5 (strict
`newEnsemble` and `replaceBookie` fill slot by slot and never use the default fault domain).

`fill_position` chooses the bookie of one slot: it keeps the zones of the slot's nearest
neighbours distinct (as many as desiredNumZonesPerWriteQuorum asks, then fewer), and at worst only
keeps minNumZonesPerWriteQuorum zones in each write quorum containing the slot; within the zones it
may use, it prefers an upgrade domain unused around the slot. `Fill` carries the state of one
`new_ensemble` or `replace_bookie` call across its slots: the index, the exclusions, the (zone,
upgrade domain) of every filled slot, and the explanation steps.

Cost: O(W + avoided racks + excluded bookies) per slot; the cuts are cached by the `ZoneIndex`, so
the usual slot costs a dictionary lookup and a count of the excluded bookies.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from .errors import NotEnoughBookiesError
from .provenance import POSITIONS
from .provenance import position as position_name
from .selection import pick_uniform_view
from .zone_index import Cut, ZoneIndex, ZoneUD
from .zone_rings import quorum_moves, rings, single_domain_zones

# `scope` names of the provenance steps of a strict fill: which zone rule the slot kept.
_SCOPE_DESIRED = "desired zones"
_SCOPE_FEWER = "fewer zones than desired"
_SCOPE_MINIMUM = "minimum zones"
_SHARED_UD = ", shared upgrade domain"

# A disk-weighted pick: (rng, candidates view, excluded, index, locations of the cut racks in rack order,
# whether no bookie of the view is excluded) -> one bookie of the view that is not excluded.
WeightedPick = Callable[[random.Random, Sequence[str], set[str], ZoneIndex, Sequence[str], bool], str]


class Fill:
    """State of one strict placement call: the index used, exclusions, the slots' (zone, UD)s.

    Args:
        index: the rack index (live cluster, or the stabilized one).
        ensemble: the list being filled (None = empty slot); the slot being replaced is None here.
        slots: (zone, UD) of every filled slot, None for empty ones.
        excluded: bookies that must not be chosen (callers', chosen, current ensemble); chosen
            bookies are added to it.
        rng: the request's generator.
        min_zones: minNumZonesPerWriteQuorum.
        pick: the disk-weighted pick, or None for a uniform one.
    """

    __slots__ = ("index", "ensemble", "slots", "excluded", "excluded_racks", "rng", "fallbacks", "steps",
                 "zone_relaxed", "available_last", "shared_ud", "min_zones", "pick")

    def __init__(self, index: ZoneIndex, ensemble: list[str | None], slots: list[ZoneUD | None],
                 excluded: set[str], rng: random.Random, *, min_zones: int, pick: WeightedPick | None = None) -> None:
        self.index = index
        self.rng = rng
        self.min_zones = min_zones
        self.pick = pick
        self.ensemble = ensemble
        self.slots = slots
        self.excluded = excluded
        rack_of = index.rack_of
        # The rack of every excluded bookie that the index holds (one entry per bookie).
        self.excluded_racks = [rack_of[b] for b in excluded if b in rack_of]
        self.fallbacks: list[str] = []
        self.steps: list[dict[str, Any]] = []   # provenance: one record per filled slot
        self.zone_relaxed = False               # some slot got fewer zones than desired
        self.available_last = 0                 # candidates of the last cut `candidates` accepted
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

    def outside(self, cut: Cut) -> int:
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
        """Put `bookie` (a bookie of the index) at `position` and exclude it from the later slots."""
        index = self.index
        rack = index.rack_of[bookie]
        self.ensemble[position] = bookie
        self.slots[position] = index.pairs[rack]
        self.excluded.add(bookie)
        self.excluded_racks.append(rack)


def fill_position(fill: Fill, position: int, write_quorum: int, desired: int) -> str:
    """Choose the bookie for `position` and put it there (BookKeeper `setBookieInTheEnsemble`, spec §3.4).

    Args:
        fill: the call's state; `fill.slots[position]` is None.
        position: the slot to fill.
        write_quorum: W.
        desired: min(W, desiredNumZonesPerWriteQuorum).

    Raises:
        NotEnoughBookiesError: no bookie keeps minNumZonesPerWriteQuorum zones and two upgrade
            domains per zone in every write quorum containing `position`; its message names the
            zones that still have eligible bookies.
    """
    slots = fill.slots
    size = len(slots)
    ring = rings(size, position, write_quorum)
    index = fill.index
    if desired >= fill.min_zones:
        # The usual case, first: step 1 with all D-1 neighbours and an unused upgrade domain (the
        # first cut `candidates` tries), cached per (zone, UD)s of the slots around `position`, in
        # `rings` order (the ring looks the same from every position: the key needs no position).
        around = tuple(map(slots.__getitem__, ring[-1]))
        cut = index.first_cuts.get((size, write_quorum, desired, around))
        if cut is None:
            neighbours = ring[desired - 1]
            cut = index.first_cut(
                (size, write_quorum, desired, around),
                frozenset([slots[s][0] for s in neighbours if slots[s] is not None]),  # type: ignore[index]
                frozenset([located for located in around if located is not None]))
        outside = fill.outside(cut)
        if outside > 0:
            step = POSITIONS[position] if position < len(POSITIONS) else position_name(position)
            fill.steps.append({"step": step, "scope": _SCOPE_DESIRED, "candidates": outside})
            return _take(fill, position, cut, outside)
    cut = None
    scope = _SCOPE_DESIRED
    # 1. keep the zones of the D-1 nearest neighbours on each side distinct, then fewer, down to
    #    minZones-1 neighbours.
    for neighbours in range(desired - 1, fill.min_zones - 2, -1):
        zones = frozenset([located[0] for located in map(slots.__getitem__, ring[max(neighbours, 0)])
                           if located is not None])
        cut = candidates(fill, position, write_quorum, zones)
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
        zones = frozenset(zones_to_keep_min(fill, position, write_quorum))
        cut = candidates(fill, position, write_quorum, zones)
        scope = _SCOPE_MINIMUM
        if cut is not None:
            fill.zone_relaxed = True
            fill.fallbacks.append(
                f"position {position}: fell back to minNumZonesPerWriteQuorum={fill.min_zones} zones "
                "per write quorum")
    if cut is None:
        fill.steps.append({"step": position_name(position), "scope": scope, "candidates": 0, "failed": True})
        raise NotEnoughBookiesError(
            _failure(fill, position, write_quorum),
            explain={"constraint": f"enforceStrictZoneawarePlacement: position {position} needs a bookie that keeps "
                                   f"minNumZonesPerWriteQuorum={fill.min_zones} zones and two upgrade domains per "
                                   "zone in every write quorum"})
    fill.steps.append({"step": position_name(position),
                       "scope": scope + _SHARED_UD if fill.shared_ud else scope,
                       "candidates": fill.available_last})
    return _take(fill, position, cut, fill.available_last)


def candidates(fill: Fill, position: int, write_quorum: int, zones: frozenset[str]) -> Cut | None:
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
    used = frozenset([located for located in map(slots.__getitem__, rings(len(slots), position, write_quorum)[-1])
                      if located is not None])
    cut = base.after.get(used)
    if cut is None:
        cut = index.ud_cut(base, used)
    outside = fill.outside(cut)
    if outside > 0:
        fill.available_last = outside
        return cut
    single = single_domain_zones(slots, position, write_quorum)
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
        return Cut(frozenset(widened), frozenset(), cut_size, len(index.racks))
    return None


def zones_to_keep_min(fill: Fill, position: int, write_quorum: int) -> set[str]:
    """Zones to avoid so each write quorum containing `position` reaches minNumZones (spec §3.4 step 2):
    the zones of every such quorum (its other filled slots) that has fewer than minNumZones.

    Cost: O(W) (zone counts slide from one quorum to the next, `quorum_moves`), not O(W x W).
    """
    slots = fill.slots
    short = fill.min_zones - 1
    zones: set[str] = set()
    counts: dict[str, int] = {}
    first, moves = quorum_moves(len(slots), position, write_quorum)
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


def _take(fill: Fill, position: int, cut: Cut, available: int) -> str:
    """Pick a bookie outside `cut` (not excluded; `available` of them) for `position` and put it there."""
    index = fill.index
    view = cut.view
    if view is None:
        view = index.view(cut)
    if fill.pick is not None:
        bookie = fill.pick(fill.rng, view, fill.excluded, index, index.locations(cut), available == len(view))
    else:
        bookie = pick_uniform_view(fill.rng, view, fill.excluded)
        assert bookie is not None  # `candidates` counted the acceptable candidates
    fill.take(position, bookie)
    return bookie


def _failure(fill: Fill, position: int, write_quorum: int) -> str:
    """The message of a fill that found no bookie for `position`: what was needed, where eligible
    bookies are, and what to change."""
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
            f"{fill.min_zones} zones and two upgrade domains per zone in every write quorum "
            f"(eligible bookies are in {len(zones)} zone(s): {', '.join(zones) or 'none'}; "
            f"{len(fill.excluded)} bookie(s) excluded, default fault domain never used); add bookies "
            "in more zones or upgrade domains, or lower minNumZonesPerWriteQuorum")
