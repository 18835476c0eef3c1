"""The rack-aware policy's leaf and selector indexes: the topology's leaves laid out rack by rack, the
known bookies in id order, and the disk-weighted selectors over them, each built on first use and
dropped whenever membership, the topology or the weights change.

Spec: bookkeeper-rackaware.md §4.5 (selection scopes), §7.3-§7.4 (disk weights and the median cap).

`RackIndexes` is a mixin of `RackawarePolicyImpl`: it reads the host's `topology`, `known` and
`settings`, and owns the `weights` attribute so that replacing the weights drops the selectors.
`ExcludedPerRack` counts one call's excluded bookies per rack for the candidate counts of `steps`.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from .location import ROOT
from .rack_weights import RackWeights
from .selection import WeightedSelector
from .settings import PlacementSettings
from .topology import NetworkTopology

# Leaves in (rack, bookie) order, the rack of each leaf, and rack -> [start, end) in that list.
LeafIndex = tuple[list[str], list[str], dict[str, tuple[int, int]]]

_SCOPE_SELECTOR_CACHE_LIMIT = 256


class ExcludedPerRack:
    """Excluded bookies per rack during one placement call, for the candidate counts of its `steps`.

    Built once per call in O(excluded bookies) (at C speed, `NetworkTopology.rack_counts`); a step's
    count then costs O(racks cut + racks whose bookies are all excluded), not O(bookies).
    """

    __slots__ = ("per_rack", "total", "full", "ranges")

    def __init__(self, topology: NetworkTopology, ranges: Mapping[str, tuple[int, int]],
                 exclude: Iterable[str]) -> None:
        self.ranges = ranges
        self.per_rack = topology.rack_counts(exclude)
        self.total = sum(self.per_rack.values())
        self.full = {rack for rack, n in self.per_rack.items() if rack in ranges
                     and n >= ranges[rack][1] - ranges[rack][0]}

    def add(self, rack: str | None) -> None:
        """One more excluded bookie, of `rack` (a pick just recorded)."""
        if rack is None or rack not in self.ranges:
            return
        n = self.per_rack[rack] = self.per_rack.get(rack, 0) + 1
        self.total += 1
        start, end = self.ranges[rack]
        if n >= end - start:
            self.full.add(rack)

    def outside(self, racks: Iterable[str]) -> tuple[int, int]:
        """(excluded bookies, racks with every bookie excluded) outside `racks`."""
        cut = set(racks)
        per_rack = self.per_rack
        inside = sum(per_rack.get(rack, 0) for rack in cut)
        return self.total - inside, sum(1 for rack in self.full if rack not in cut)

    def within(self, rack: str) -> tuple[int, int]:
        """(excluded bookies, 1 if all are excluded else 0) inside one rack."""
        return self.per_rack.get(rack, 0), int(rack in self.full)


class RackIndexes:
    """Indexes over the host policy's topology and known bookies, rebuilt lazily after a change.

    The host calls `_invalidate` from every handler that changes its topology or membership.
    """

    settings: PlacementSettings
    topology: NetworkTopology
    known: dict[str, str]
    _weights: dict[str, int]
    _cluster_selector: WeightedSelector | None
    _scope_selectors: dict[Any, WeightedSelector]
    _leaf_index: LeafIndex | None
    _rack_weights: RackWeights | None
    _known_sorted: tuple[str, ...] | None

    @property
    def weights(self) -> dict[str, int]:
        """bookie -> free disk bytes (disk-weighted mode). Assign a new dict to change it."""
        return self._weights

    @weights.setter
    def weights(self, value: dict[str, int]) -> None:
        self._weights = value
        self._invalidate()

    def _invalidate(self) -> None:
        """Drop every index (the next use rebuilds it)."""
        self._known_sorted = None
        self._cluster_selector = None
        self._scope_selectors = {}
        self._leaf_index = None
        self._rack_weights = None

    def _index(self) -> LeafIndex:
        """(leaves, rack of each leaf, rack -> [start, end)) in (rack, bookie) order; rebuilt after a change.

        Every change of this instance's topology goes through a handler that calls `_invalidate`.
        """
        index = self._leaf_index
        if index is None:
            topology = self.topology
            flat: list[str] = []
            flat_racks: list[str] = []
            ranges: dict[str, tuple[int, int]] = {}
            for rack in topology.racks():
                start = len(flat)
                members = topology.bookies_in(rack)
                flat.extend(members)
                flat_racks.extend([rack] * len(members))
                ranges[rack] = (start, len(flat))
            index = self._leaf_index = (flat, flat_racks, ranges)
        return index

    def known_sorted(self) -> tuple[str, ...]:
        """Known (writable) bookies in id order: the population of whole-cluster selection."""
        cached = self._known_sorted
        if cached is None:
            cached = self._known_sorted = tuple(sorted(self.known))
        return cached

    def cluster_selector(self) -> WeightedSelector:
        """The disk-weighted selector over every known bookie (`known_sorted`), with the median cap
        computed over them (§7.4); built on first use after a change. Cost: O(bookies) to build."""
        selector = self._cluster_selector
        if selector is None:
            selector = self._cluster_selector = WeightedSelector(
                self.known_sorted(), self._weights, self.settings.max_weight_multiple)
        return selector

    def _scope_weighted(self, key: Any, leaves: Sequence[str]) -> WeightedSelector:
        """Selector over a scope's leaves; the cap is computed over the scope (§7.4). Cached per scope."""
        selector = self._scope_selectors.get(key)
        if selector is None:
            if len(self._scope_selectors) >= _SCOPE_SELECTOR_CACHE_LIMIT:
                self._scope_selectors = {}
            selector = self._scope_selectors[key] = WeightedSelector(
                leaves, self._weights, self.settings.max_weight_multiple)
        return selector

    def rack_sampler(self) -> RackWeights:
        """The disk-weighted sampler over the leaf index (`rack_weights.RackWeights`): draws from a rack,
        or from every rack but some, in O(racks); built on first use after a change."""
        sampler = self._rack_weights
        if sampler is None:
            sampler = self._rack_weights = RackWeights(self._index(), self._weights,
                                                        self.settings.max_weight_multiple)
        return sampler

    def _weighted_pick(self, key: Any, leaves: Sequence[str], rng: random.Random,
                       accept: Callable[[str], bool]) -> str | None:
        """A leaf of the scope `key` by capped weight among acceptable ones (§7.4).

        `key` is ROOT, a rack, a tuple of avoided racks, or a scope string; scopes that are not a union
        of whole racks (an inner node, a leaf path) use a selector built over `leaves`.
        """
        sampler = self.rack_sampler()
        ranges = self._index()[2]
        if isinstance(key, tuple):
            excluded: Sequence[str] = key
        elif key == ROOT:
            excluded = ()
        elif key in ranges:
            return sampler.pick(sampler.scope_rack(key), rng, accept)
        elif key.startswith("~") and all(part in ranges for part in key[1:].split(",")):
            excluded = key[1:].split(",")
        else:
            return self._scope_weighted(key, leaves).pick(rng, accept)
        return sampler.pick(sampler.scope_excluding(tuple(sorted(set(excluded)))), rng, accept)
