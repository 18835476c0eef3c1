"""Write-quorum coverage: the ensemble under construction that is also the placement predicate.

Spec: bookkeeper-rackaware.md §4.6, bookkeeper-region-zone-isolation.md §0.5
(BookKeeper's `RRTopologyAwareCoverageEnsemble`).

Every position p of an ensemble of size E belongs to the write sets starting at p-W+1 .. p (mod E).
A candidate may take position p only if each of those write sets accepts it:

* rack-quorum rule: the first W - k + 1 members of a write set are free, every later member must keep
  k = min(W, minNumRacksPerWriteQuorum) distinct locations reachable;
* durability rule (region-aware with minimum regions M > 0): after adding, no M - 1 regions may hold
  `ack_quorum` or more copies of the write set, so every acknowledged entry spans M regions.

Locations are taken at a distance from the leaf: 1 = rack, 2 = region. The caller supplies `locate`,
which answers that location for a bookie id.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

Locate = Callable[[str], str]

# (E, W, one write set) -> for each position < E, the write sets holding it; shared, immutable, bounded.
# Shapes of more than `_MAX_WINDOW_CELLS` entries (E x W) get none: their positions are worked out as
# they are filled (`CoverageEnsemble._indices`). A request may ask for E = 1024, and the region-aware
# policy tries thousands of per-region shapes of it: precomputed, those took gigabytes and minutes.
_WINDOWS: dict[tuple[int, int, bool], tuple[tuple[int, ...], ...]] = {}
_MAX_WINDOW_CELLS = 4096


def _windows(ensemble_size: int, write_quorum: int, single: bool) -> tuple[tuple[int, ...], ...]:
    """Write sets (their first positions) holding each position 0..E-1: W - 1 .. 0 positions back, mod E;
    only set 0 when `single` (the durability rule with E == W keeps one set for the whole ensemble).
    Empty for a shape of more than `_MAX_WINDOW_CELLS` entries (the caller works positions out itself)."""
    key = (ensemble_size, write_quorum, single and ensemble_size == write_quorum)
    found = _WINDOWS.get(key)
    if found is None and ensemble_size * write_quorum > _MAX_WINDOW_CELLS:
        return ()
    if found is None:
        e = ensemble_size
        if key[2]:
            found = ((0,),) * e
        else:
            found = tuple(tuple((i + e) % e for i in range(p - write_quorum + 1, p + 1)) for p in range(e))
        if len(_WINDOWS) < 1024:
            _WINDOWS[key] = found
    return found


class RackQuorumCoverageSet:
    """Distinct locations of one write set (BookKeeper `RackQuorumCoverageSet`)."""

    __slots__ = ("write_quorum", "min_racks", "racks", "seen")

    def __init__(self, write_quorum: int, min_racks: int) -> None:
        self.write_quorum = write_quorum
        self.min_racks = min(write_quorum, min_racks)
        self.racks: set[str] = set()
        self.seen = 0

    def accepts(self, location: str) -> bool:
        if self.write_quorum < 2:
            return True
        k = self.min_racks
        if self.seen + k - 1 < self.write_quorum:
            return True
        n = len(self.racks) if location in self.racks else len(self.racks) + 1
        return n >= k or (self.write_quorum - self.seen - 1) >= (k - n)

    def add(self, location: str) -> None:
        self.seen += 1
        self.racks.add(location)

    def copy(self) -> RackQuorumCoverageSet:
        other = RackQuorumCoverageSet.__new__(RackQuorumCoverageSet)
        other.write_quorum = self.write_quorum
        other.min_racks = self.min_racks
        other.racks = set(self.racks)
        other.seen = self.seen
        return other


class DurabilityCoverageSet:
    """Copies per region of one write set (BookKeeper `RackOrRegionDurabilityCoverageSet`)."""

    __slots__ = ("ack_quorum", "min_durability", "alloc")

    def __init__(self, regions: Iterable[str], min_durability: int, ack_quorum: int) -> None:
        self.ack_quorum = ack_quorum
        self.min_durability = min_durability
        self.alloc: dict[str, int] = dict.fromkeys(regions, 0)

    @staticmethod
    def region_of(location: str) -> str:
        return location[1:] if location.startswith("/") else location

    def accepts(self, location: str) -> bool:
        if self.min_durability <= 1:
            return True
        region = self.region_of(location)
        # The worst group of M-2 other regions is the one holding the most copies.
        others = sorted((n for r, n in self.alloc.items() if r != region), reverse=True)
        worst = sum(others[: self.min_durability - 2])
        return self.alloc.get(region, 0) + 1 + worst <= self.ack_quorum - 1

    def add(self, location: str) -> None:
        region = self.region_of(location)
        self.alloc[region] = self.alloc.get(region, 0) + 1

    def copy(self) -> DurabilityCoverageSet:
        other = DurabilityCoverageSet.__new__(DurabilityCoverageSet)
        other.ack_quorum = self.ack_quorum
        other.min_durability = self.min_durability
        other.alloc = dict(self.alloc)
        return other


class CoverageEnsemble:
    """An ensemble under construction; `apply` is the coverage predicate, `add_node` records a pick.

    Args:
        ensemble_size, write_quorum, ack_quorum: the ledger's E, W, A.
        min_racks: `minNumRacksPerWriteQuorum` (the rack-quorum rule uses min(W, min_racks)).
        locate: bookie id -> location at this ensemble's distance (rack or region).
        parent, parent_predicate: an outer ensemble (region level) that must also accept and record.
        regions: every region name, for the durability rule.
        min_durability: M; > 0 selects the durability rule.
    """

    __slots__ = ("ensemble_size", "write_quorum", "ack_quorum", "min_racks", "locate", "parent",
                 "parent_predicate", "regions", "min_durability", "chosen", "_chosen_set", "_sets", "_windows")

    def __init__(self, ensemble_size: int, write_quorum: int, ack_quorum: int, min_racks: int,
                 locate: Locate, parent: CoverageEnsemble | None = None,
                 parent_predicate: CoverageEnsemble | None = None,
                 regions: Iterable[str] = (), min_durability: int = 0) -> None:
        self.ensemble_size = ensemble_size
        self.write_quorum = write_quorum
        self.ack_quorum = ack_quorum
        self.min_racks = min_racks
        self.locate = locate
        self.parent = parent
        self.parent_predicate = parent_predicate
        self.regions = regions if type(regions) is tuple else tuple(regions)
        self.min_durability = min_durability
        self.chosen: list[str] = []
        self._chosen_set: set[str] = set()
        self._sets: list[RackQuorumCoverageSet | DurabilityCoverageSet | None] = [None] * max(ensemble_size, 1)
        windows = _WINDOWS.get((ensemble_size, write_quorum, min_durability > 0 and ensemble_size == write_quorum))
        self._windows = windows if windows is not None else _windows(ensemble_size, write_quorum, min_durability > 0)

    def _indices(self, position: int) -> Iterable[int]:
        """The write sets (their first positions) that hold `position`."""
        windows = self._windows
        if position < len(windows):
            return windows[position]
        if self.ensemble_size == self.write_quorum and self.min_durability > 0:
            return (0,)
        e = self.ensemble_size
        return [(i + e) % e for i in range(position - self.write_quorum + 1, position + 1)]

    def _set(self, index: int) -> RackQuorumCoverageSet | DurabilityCoverageSet:
        found = self._sets[index]
        if found is None:
            if self.min_durability > 0:
                found = DurabilityCoverageSet(self.regions, self.min_durability, self.ack_quorum)
            else:
                found = RackQuorumCoverageSet(self.write_quorum, self.min_racks)
            self._sets[index] = found
        return found

    def apply(self, candidate: str, ensemble: object) -> bool:
        """Whether `candidate` may take the next position (BookKeeper `Predicate.apply`)."""
        if ensemble is not self or candidate in self._chosen_set:
            return False
        if self.refuses_location(self.locate(candidate)):
            return False
        if self.parent_predicate is not None:
            return self.parent_predicate.apply(candidate, self.parent)
        return True

    def accepts(self, candidate: str) -> bool:
        """`apply(candidate, self)`: the form selection primitives call."""
        return self.apply(candidate, self)

    def refuses_location(self, location: str) -> bool:
        """Whether the next position refuses every candidate at `location`, whichever bookie it is.

        The write sets judge locations only, so when one of them refuses `location` no candidate
        there can pass `apply`, whatever an outer predicate would say. False means "maybe".
        """
        position = len(self.chosen)
        sets = self._sets
        windows = self._windows
        for index in (windows[position] if position < len(windows) else self._indices(position)):
            found = sets[index]
            if found is None:
                found = self._set(index)
            if not found.accepts(location):
                return True
        return False

    def add_node(self, bookie: str) -> bool:
        """Record `bookie` at the next position; False if it is already chosen (or the parent refuses)."""
        chosen_set = self._chosen_set
        if bookie in chosen_set:
            return False
        location = self.locate(bookie)
        sets = self._sets
        chosen = self.chosen
        position = len(chosen)
        windows = self._windows
        for index in (windows[position] if position < len(windows) else self._indices(position)):
            found = sets[index]
            if found is None:
                found = self._set(index)
            found.add(location)
        chosen.append(bookie)
        chosen_set.add(bookie)
        if self.parent is not None:
            return self.parent.add_node(bookie)
        return True

    def __len__(self) -> int:
        return len(self.chosen)

    def __contains__(self, bookie: object) -> bool:
        return bookie in self._chosen_set

    def to_list(self) -> list[str]:
        return list(self.chosen)

    def copy(self) -> CoverageEnsemble:
        """A deep copy of the chosen list and coverage sets; parent links are shared (as in Java)."""
        other = CoverageEnsemble.__new__(CoverageEnsemble)
        other.ensemble_size = self.ensemble_size
        other.write_quorum = self.write_quorum
        other.ack_quorum = self.ack_quorum
        other.min_racks = self.min_racks
        other.locate = self.locate
        other.parent = self.parent
        other.parent_predicate = self.parent_predicate
        other.regions = self.regions
        other.min_durability = self.min_durability
        other._windows = self._windows
        other.chosen = list(self.chosen)
        other._chosen_set = set(self._chosen_set)
        other._sets = [s.copy() if s is not None else None for s in self._sets]
        return other

    def validate(self) -> bool:
        """No duplicates and, with a durability minimum M, at least M distinct locations."""
        if len(self._chosen_set) != len(self.chosen):
            return False
        if self.min_durability > 0:
            return len({self.locate(b) for b in self.chosen}) >= self.min_durability
        return True


class NoConstraintsEnsemble:
    """Accepts everything and records nothing (BookKeeper `EnsembleForReplacementWithNoConstraints`)."""

    __slots__ = ()

    def apply(self, candidate: str, ensemble: object) -> bool:
        return True

    def accepts(self, candidate: str) -> bool:
        return True

    def add_node(self, bookie: str) -> bool:
        return True

    def to_list(self) -> list[str]:
        return []

    def validate(self) -> bool:
        return True


NO_CONSTRAINTS = NoConstraintsEnsemble()
