"""The location tree of one policy instance: bookies indexed by rack (BookKeeper's `NetworkTopologyImpl`).

Spec: bookkeeper-rackaware.md §1.5-§1.6. Only "who is where" lives here; no placement rule does.

Leaves are kept in one flat list sorted by (rack, bookie), with each rack owning a contiguous range,
so every scope placement asks for (the whole tree, one rack, one inner node such as a region, or the
tree minus a few racks) is a `LeafView`: a few ranges of that list. Building a view costs
O(number of excluded racks) and indexing it O(log ranges), so a random pick costs what the scope's
shape costs, not what the number of bookies costs. The flat list is rebuilt lazily after a change.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence

from .errors import InvalidLocationError, InvalidTopologyError
from .location import ROOT, leaf_depth, normalize


class LeafView(Sequence[str]):
    """A read-only, ordered view of some ranges of the topology's flat leaf list."""

    __slots__ = ("_flat", "_starts", "_offsets", "_len")

    def __init__(self, flat: list[str], ranges: Sequence[tuple[int, int]]) -> None:
        self._flat = flat
        starts: list[int] = []
        offsets: list[int] = []
        total = 0
        for start, end in ranges:
            if end > start:
                starts.append(start)
                offsets.append(total)
                total += end - start
        self._starts = starts
        self._offsets = offsets
        self._len = total

    def __len__(self) -> int:
        return self._len

    def __getitem__(self, index):  # type: ignore[override]
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self._len))]
        if index < 0:
            index += self._len
        if not 0 <= index < self._len:
            raise IndexError(index)
        if len(self._starts) == 1:
            return self._flat[self._starts[0] + index]
        k = bisect.bisect_right(self._offsets, index) - 1
        return self._flat[self._starts[k] + index - self._offsets[k]]

    def at(self, index: int) -> str:
        """The leaf at `index`, for `0 <= index < len(self)` (unchecked: the hot path's `self[index]`)."""
        starts = self._starts
        if len(starts) == 1:
            return self._flat[starts[0] + index]
        k = bisect.bisect_right(self._offsets, index) - 1
        return self._flat[starts[k] + index - self._offsets[k]]

    def __iter__(self) -> Iterator[str]:
        # Slices copied at C speed, then iterated at C speed (a generator resumes once per leaf).
        flat = self._flat
        starts = self._starts
        if len(starts) == 1:
            return iter(flat[starts[0]:starts[0] + self._len])
        leaves: list[str] = []
        for start, offset, nxt in zip(starts, self._offsets, self._offsets[1:] + [self._len]):
            leaves += flat[start:start + (nxt - offset)]
        return iter(leaves)

    def __repr__(self) -> str:
        return f"LeafView({list(self)!r})"


_EMPTY: list[str] = []

# Distinct scope strings whose views `NetworkTopology.leaves` keeps between two changes of the tree.
_VIEW_CACHE_LIMIT = 1024


class NetworkTopology:
    """Bookies (leaves) under racks (their locations); every leaf has the same depth.

    Invariants (see `check_invariants`): every bookie is under exactly one rack; racks are never
    empty; all racks have the same depth, recorded while the tree has leaves (spec §1.5).
    """

    __slots__ = ("_members", "_rack_of", "_depth", "_flat", "_rack_ranges", "_sorted_racks", "_views")

    def __init__(self) -> None:
        self._members: dict[str, list[str]] = {}
        self._rack_of: dict[str, str] = {}
        self._depth: int | None = None
        self._flat: list[str] | None = None
        self._rack_ranges: dict[str, tuple[int, int]] = {}
        self._sorted_racks: list[str] = []
        self._views: dict[str, LeafView] = {}

    # -- changes -------------------------------------------------------------------------------

    def add(self, bookie: str, location: str) -> None:
        """Add a leaf (BookKeeper `add`); re-adding a bookie under another rack moves it.

        Raises:
            InvalidLocationError: the location is ROOT, does not start with `/`, names an existing
                leaf, or the bookie id contains `/`.
            InvalidTopologyError: the leaf's depth differs from the leaves already present (the
                bookie's own leaf does not count when it is the only one: the move resets the depth).
        """
        rack = normalize(location)
        if rack == ROOT:
            raise InvalidLocationError(
                f"bookie {bookie} is located at {location!r}, which is not a descendant of '/'")
        if "/" in bookie:
            raise InvalidLocationError(f"bookie id {bookie!r} contains '/'")
        depth = leaf_depth(rack)
        if self._depth is not None and depth != self._depth and not self._only_leaf(bookie):
            raise InvalidTopologyError(
                f"bookie {bookie} at {rack} has depth {depth} but the cluster's leaves have depth "
                f"{self._depth}: every bookie location must have the same number of levels")
        parent, _, name = rack.rpartition("/")
        if name in self._members.get(parent, _EMPTY):
            raise InvalidLocationError(f"bookie {bookie} is placed under {rack}, which is a bookie, not a rack")
        old = self._rack_of.get(bookie)
        if old == rack:
            return
        if old is not None:
            # BK bug fixed (spec bookkeeper-rackaware.md App. A #10): a same-id leaf added under another
            # rack replaces the old leaf instead of leaving a stale copy behind.
            self._detach(bookie, old)
        members = self._members.get(rack)
        if members is None:
            self._members[rack] = [bookie]
            bisect.insort(self._sorted_racks, rack)
        else:
            bisect.insort(members, bookie)
        self._rack_of[bookie] = rack
        self._depth = depth
        self._flat = None

    def _only_leaf(self, bookie: str) -> bool:
        """Whether `bookie` holds the tree's only leaf: moving it is a remove then an add, and the
        remove leaves the tree empty, which resets the recorded depth (spec §1.5)."""
        return len(self._rack_of) == 1 and bookie in self._rack_of

    def remove(self, bookie: str) -> None:
        """Remove a leaf; removing an absent bookie is a no-op."""
        rack = self._rack_of.get(bookie)
        if rack is not None:
            self._detach(bookie, rack)
            self._flat = None
            if not self._rack_of:
                self._depth = None

    def _detach(self, bookie: str, rack: str) -> None:
        members = self._members[rack]
        members.pop(bisect.bisect_left(members, bookie))
        if not members:
            del self._members[rack]
            self._sorted_racks.pop(bisect.bisect_left(self._sorted_racks, rack))
        del self._rack_of[bookie]

    def copy(self) -> NetworkTopology:
        other = NetworkTopology()
        other._members = {rack: list(members) for rack, members in self._members.items()}
        other._rack_of = dict(self._rack_of)
        other._depth = self._depth
        other._sorted_racks = list(self._sorted_racks)
        return other

    # -- queries -------------------------------------------------------------------------------

    def __contains__(self, bookie: object) -> bool:
        return bookie in self._rack_of

    def __len__(self) -> int:
        return len(self._rack_of)

    def rack_of(self, bookie: str) -> str | None:
        return self._rack_of.get(bookie)

    @property
    def rack_map(self) -> Mapping[str, str]:
        """bookie -> rack of every leaf, live (not a copy: read it, never change it). For hot loops
        that would otherwise call `rack_of` once per bookie."""
        return self._rack_of

    @property
    def depth(self) -> int | None:
        """Depth shared by all leaves, or None while the tree is empty."""
        return self._depth

    @property
    def num_racks(self) -> int:
        """Distinct racks holding at least one bookie (`getNumOfRacks`)."""
        return len(self._members)

    def racks(self) -> list[str]:
        """Racks in sorted order."""
        return list(self._sorted_racks)

    def bookies_in(self, rack: str) -> Sequence[str]:
        """Bookies of one rack, sorted (empty if the rack has none)."""
        return self._members.get(rack, _EMPTY)

    def bookies(self) -> dict[str, str]:
        """A copy of bookie -> rack."""
        return dict(self._rack_of)

    def _build(self) -> list[str]:
        flat: list[str] = []
        ranges: dict[str, tuple[int, int]] = {}
        for rack in self._sorted_racks:
            start = len(flat)
            flat.extend(self._members[rack])
            ranges[rack] = (start, len(flat))
        self._flat = flat
        self._rack_ranges = ranges
        self._views = {}
        return flat

    def _scope_range(self, scope: str, flat: list[str]) -> tuple[int, int] | None:
        """Range of the flat list under a normalised scope (ROOT, a rack or an inner node)."""
        if scope == ROOT:
            return (0, len(flat))
        hit = self._rack_ranges.get(scope)
        if hit is not None:
            return hit
        racks = self._sorted_racks
        lo = bisect.bisect_left(racks, scope + "/")
        hi = bisect.bisect_left(racks, scope + "0")  # '0' sorts right after '/'
        if lo < hi:
            return (self._rack_ranges[racks[lo]][0], self._rack_ranges[racks[hi - 1]][1])
        return None

    def leaves(self, scope: str = ROOT) -> LeafView:
        """Leaves under `scope` (BookKeeper `getLeaves`), in (rack, bookie) order.

        `scope` is ROOT, a rack, an inner node, or a leaf path (`/rack/bookie`, giving that leaf).
        A scope starting with `~` is "everything but": `~/r1,/r2` is the tree minus those subtrees;
        `~` alone (or with an empty member) is empty. Unknown scopes give an empty view.

        Views are kept per scope string until the tree changes (a view is immutable and shares the
        flat list it was built on), so asking again for the same scope costs one dict lookup.
        """
        flat = self._flat
        if flat is None:
            flat = self._build()
        else:
            view = self._views.get(scope)
            if view is not None:
                return view
        view = self._leaves(scope, flat)
        views = self._views
        if len(views) >= _VIEW_CACHE_LIMIT:
            views.clear()
        views[scope] = view
        return view

    def _leaves(self, scope: str, flat: list[str]) -> LeafView:
        if scope.startswith("~"):
            return self.leaves_excluding(scope[1:].split(","))
        scope = normalize(scope)
        hit = self._scope_range(scope, flat)
        if hit is not None:
            return LeafView(flat, (hit,))
        parent, _, name = scope.rpartition("/")
        members = self._members.get(parent, _EMPTY)
        i = bisect.bisect_left(members, name)
        if i < len(members) and members[i] == name:
            start = self._rack_ranges[parent][0] + i
            return LeafView(flat, ((start, start + 1),))
        return LeafView(flat, ())

    def leaves_excluding(self, scopes: Iterable[str]) -> LeafView:
        """All leaves except those under any of `scopes` (racks or inner nodes; "" excludes all)."""
        flat = self._flat if self._flat is not None else self._build()
        cut: list[tuple[int, int]] = []
        for scope in scopes:
            hit = self._scope_range(normalize(scope), flat)
            if hit is not None:
                cut.append(hit)
        if not cut:
            return LeafView(flat, ((0, len(flat)),))
        cut.sort()
        ranges: list[tuple[int, int]] = []
        pos = 0
        for start, end in cut:
            if start > pos:
                ranges.append((pos, start))
            pos = max(pos, end)
        if pos < len(flat):
            ranges.append((pos, len(flat)))
        return LeafView(flat, ranges)

    def rack_counts(self, bookies: Iterable[str]) -> dict[str, int]:
        """rack -> how many of `bookies` are leaves of it (bookies not in the tree are ignored).

        Cost: O(len(bookies)) at C speed (used once per placement call for the candidate counts).
        """
        counts = Counter(map(self._rack_of.get, bookies))
        counts.pop(None, None)
        return counts  # type: ignore[return-value]

    def count_available(self, scope: str, excluded: Iterable[str] = ()) -> int:
        """Leaves under `scope` that are not in `excluded` (`countNumOfAvailableNodes`)."""
        view = self.leaves(scope)
        skip = set(excluded)
        return sum(1 for leaf in view if leaf not in skip) if skip else len(view)

    def check_invariants(self) -> None:
        """Assert the structure is consistent (tests only; never on the hot path)."""
        assert set(self._members) == set(self._sorted_racks)
        assert self._sorted_racks == sorted(self._sorted_racks)
        seen = {}
        for rack, members in self._members.items():
            assert members and members == sorted(members) and len(set(members)) == len(members)
            assert leaf_depth(rack) == self._depth
            for bookie in members:
                seen[bookie] = rack
        assert seen == self._rack_of
        assert (self._depth is None) == (not self._rack_of)
