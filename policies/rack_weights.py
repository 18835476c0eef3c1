"""Exact disk-weighted draws over unions of racks (spec bookkeeper-rackaware.md §7.3-§7.4).

Used by the rack-aware policy for its per-scope weighted picks and by the zone-aware policy for its
candidate picks; `selection.WeightedSelector` is the reference they must agree with (tests compare
the two).
"""

from __future__ import annotations

import bisect
import random
from collections.abc import Callable, Container, Iterable, Iterator, Mapping, Sequence
from typing import Any

_INF = float("inf")
_bisect_right = bisect.bisect_right


def _kth_without(values: list[int], out: list[int], k: int) -> int:
    """The k-th smallest (0-based) of the multiset `values` minus its sub-multiset `out` (both sorted).

    The answer is `values[k + j]` for the least j with j == #(out <= values[k + j]); the count is
    monotone in j, so iterating j <- #(out <= values[k + j]) from 0 reaches that j from below
    (usually in one or two steps; at most len(out) + 1). Cost: O(steps x log len(out)).
    """
    j = 0
    while True:
        nxt = bisect.bisect_right(out, values[k + j])
        if nxt == j:
            return values[k + j]
        j = nxt


class _Layout:
    """Capped mass of every rack of the tree for one (cap, zero mass), with running sums."""

    __slots__ = ("masses", "starts", "ends", "total")

    def __init__(self, masses: list[float]) -> None:
        self.masses = masses
        starts: list[float] = []
        ends: list[float] = []
        running = 0.0
        for mass in masses:
            starts.append(running)
            running += mass
            ends.append(running)
        self.starts = starts
        self.ends = ends
        self.total = running


class _Scope(tuple):
    """(racks, cumulative capped masses, cap, zero-weight mass, number of leaves) of a scope.

    The first two members are built lazily (O(racks); draws never need them). The
    attributes carry what draws use: `layout` (masses over the racks in `names`), `skip` (ascending
    indices of `names` outside the scope), `mass` (the scope's total capped mass) and `removed`
    (single bookies outside the scope although their rack is in it; draws may return them and
    `RackWeights.pick` rejects them).
    """

    names: list[str]
    layout: _Layout
    skip: list[int]
    skipped: frozenset[int]
    mass: float
    removed: frozenset[str]
    data: tuple  # (per-rack rows, masses, starts, ends, skip, skipped, mass, cap, zero mass): for draws
    after: dict  # rack -> this scope minus that rack (`RackWeights.scope_after`)


class _LazyScope(_Scope):
    """A `_Scope` whose first two members (lists over the scope's racks) are built on first access."""

    def __getitem__(self, i):  # type: ignore[override]
        return self._materialised()[i]

    def __iter__(self):
        return iter(self._materialised())

    def _materialised(self) -> tuple:
        cached = self.__dict__.get("_tuple")
        if cached is None:
            _, _, cap, zero_mass, count = tuple.__iter__(self)
            racks: list[str] = []
            cumulative: list[float] = []
            running = 0.0
            for i, mass in enumerate(self.layout.masses):
                if i not in self.skipped:
                    running += mass
                    racks.append(self.names[i])
                    cumulative.append(running)
            cached = (racks, cumulative, cap, zero_mass, count)
            self.__dict__["_tuple"] = cached
        return cached


def _make_scope(names: list[str], rows: list[tuple], layout: _Layout, skip: list[int], mass: float,
                cap: float, zero_mass: float, count: int, removed: frozenset[str] = frozenset(),
                skipped: frozenset[int] | None = None, max_weight: float = _INF) -> _Scope:
    """A scope; `max_weight` (the tree's largest weight) lets draws treat a cap at or above it as no cap
    (it caps nothing: every rack's capped part is empty), which skips a bisection per draw."""
    scope = _LazyScope((None, None, cap, zero_mass, count))
    scope.names = names
    scope.layout = layout
    scope.skip = skip
    scope.skipped = frozenset(skip) if skipped is None else skipped
    scope.mass = mass
    scope.removed = removed
    scope.data = (rows, layout.masses, layout.starts, layout.ends, skip, scope.skipped, mass,
                  cap if cap < max_weight else _INF, zero_mass)
    scope.after = {}
    return scope


class RackWeights:
    """Exact disk-weighted draws over a union of racks (spec §7.3-§7.4).

    BookKeeper builds a selector over the scope's leaves for every pick (O(bookies)). The capped weight
    of a leaf only depends on three numbers of the scope: the median weight, the smallest non-zero
    weight and the total (zero: uniform). Racks keep their weights sorted with prefix sums, so for a
    scope "every rack but E" the leaf count, total weight and number of zero weights are the tree's
    minus E's, and the median and the smallest non-zero weight are order statistics of (all weights
    minus E's), found by bisection in O(|E| log² n). The racks' capped masses and their running sums
    depend only on (cap, zero-weight mass); they are computed once per distinct pair for the whole
    tree and shared by every scope with that pair. A draw takes u in [0, scope mass) and maps it onto
    the tree's running sums, stepping over E's intervals, then bisects inside one rack. The
    distribution is exactly the one of a fresh `WeightedRandomSelectionImpl` over the scope.

    Cost of a new scope: O(|E| log² n) plus, for a new (cap, zero mass) pair, O(racks log n); a cap
    above every weight counts as no cap, so with moderate weight spreads all scopes share one pair.
    """

    __slots__ = ("max_multiple", "racks", "members", "sorted_weights", "prefix", "zeros", "min_nonzero",
                 "totals", "all_sorted", "total", "_scopes", "_limit", "_rack_index", "_count", "_zeros",
                 "_max_weight", "_layouts", "_weight_of", "_rack_of", "_bases", "_base_size", "_rows",
                 "_weight_rows")

    def __init__(self, index: tuple[list[str], list[str], dict[str, tuple[int, int]]],
                 weights: Mapping[str, int], max_multiple: int) -> None:
        flat, _, ranges = index
        self.max_multiple = max_multiple
        self.racks = sorted(ranges)
        self.members: dict[str, list[str]] = {}
        self.sorted_weights: dict[str, list[int]] = {}
        self.prefix: dict[str, list[int]] = {}
        self.zeros: dict[str, int] = {}
        self.min_nonzero: dict[str, float] = {}
        self.totals: dict[str, int] = {}
        self._weight_of: dict[str, int] = {}
        self._rack_of: dict[str, str] = {}
        everything: list[int] = []
        for rack in self.racks:
            start, end = ranges[rack]
            pairs = sorted((max(0, weights.get(b, 0)), b) for b in flat[start:end])
            ordered = [w for w, _ in pairs]
            self.members[rack] = [b for _, b in pairs]
            for w, b in pairs:
                self._weight_of[b] = w
                self._rack_of[b] = rack
            self.sorted_weights[rack] = ordered
            running = [0]
            for w in ordered:
                running.append(running[-1] + w)
            self.prefix[rack] = running
            zeros = bisect.bisect_right(ordered, 0)
            self.zeros[rack] = zeros
            self.min_nonzero[rack] = ordered[zeros] if zeros < len(ordered) else _INF
            self.totals[rack] = running[-1]
            everything.extend(ordered)
        everything.sort()
        self.all_sorted = everything
        self.total = sum(everything)
        self._count = len(everything)
        self._zeros = bisect.bisect_right(everything, 0)
        self._max_weight = everything[-1] if everything else 0
        self._rack_index = {rack: i for i, rack in enumerate(self.racks)}
        self._rows = [(self.members[r], self.zeros[r], self.prefix[r], self.sorted_weights[r]) for r in self.racks]
        self._weight_rows = [self.sorted_weights[r] for r in self.racks]
        self._scopes: dict[Any, _Scope | None] = {}
        self._layouts: dict[tuple[float, float], _Layout] = {}
        self._bases: dict[tuple[int, ...], tuple[list[int], int, int, int]] = {}
        self._base_size = 0
        self._limit = max(256, 2_000_000 // max(1, len(self.racks)))

    # -- order statistics -------------------------------------------------------------------------

    def _kth(self, k: int, excluded: Sequence[str]) -> int:
        """The k-th smallest (0-based) weight of all leaves minus the excluded racks' leaves."""
        values = self.all_sorted
        if not excluded:
            return values[k]
        out = sorted(w for r in excluded for w in self.sorted_weights[r])
        return _kth_without(values, out, k)

    def _order_statistic(self, skip: Sequence[int], count: int) -> Callable[[int], int]:
        """`k -> k-th smallest weight` of every leaf outside the racks of indices `skip`, `count`
        of them: the remaining weights sorted when they are fewer than the excluded ones, else the
        excluded weights sorted and subtracted (`_kth_without`). Both give `_kth`'s values."""
        values = self.all_sorted
        if not skip:
            return values.__getitem__
        rows = self._weight_rows
        if count < len(values) - count:
            remaining: list[int] = []
            pos = 0
            for i in skip:
                for row in rows[pos:i]:
                    remaining += row
                pos = i + 1
            for row in rows[pos:]:
                remaining += row
            remaining.sort()
            return remaining.__getitem__
        out: list[int] = []
        for i in skip:
            out += rows[i]
        out.sort()
        return lambda k: _kth_without(values, out, k)

    def _cap_and_zero_mass(self, count: int, total: int, zeros: int,
                           kth: Callable[[int], float]) -> tuple[float, float]:
        """(cap, mass of a zero weight) of a scope with `count` leaves, `total` weight, `zeros` zeros."""
        if total == 0:
            return _INF, 1.0                                     # all zero: uniform
        zero_mass = kth(zeros)                                   # the smallest non-zero weight
        median = kth(count // 2) if count % 2 else (kth(count // 2 - 1) + kth(count // 2)) / 2.0
        cap = _INF
        if self.max_multiple > 0 and median > 0:
            cap = self.max_multiple * median
            zero_mass = min(zero_mass, cap)
        return cap, zero_mass

    def _layout(self, cap: float, zero_mass: float) -> _Layout:
        """Every rack's capped mass for (cap, zero_mass), shared by all scopes with the same pair."""
        # A cap at or above every weight caps nothing; without zero weights their mass is unused.
        key = (cap if cap < self._max_weight else _INF, zero_mass if self._zeros else 0.0)
        layout = self._layouts.get(key)
        if layout is None:
            if len(self._layouts) >= 1024:
                self._layouts = {}
            layout = self._layouts[key] = _Layout([self._rack_mass(r, key[0], key[1]) for r in self.racks])
        return layout

    # -- scopes -----------------------------------------------------------------------------------

    def scope_excluding(self, excluded: tuple[str, ...]) -> _Scope | None:
        """The scope "every rack but `excluded`" (sorted rack names of the tree); cached."""
        key = ("~",) + excluded
        found = self._scopes.get(key, False)
        if found is not False:
            return found  # type: ignore[return-value]
        index = self._rack_index
        skip = sorted({index[r] for r in excluded if r in index})
        names = [self.racks[i] for i in skip]
        count = self._count - sum(len(self.members[r]) for r in names)
        if count == 0:
            return self._remember(key, None)
        total = self.total - sum(self.totals[r] for r in names)
        zeros = self._zeros - sum(self.zeros[r] for r in names)
        cap, zero_mass = self._cap_and_zero_mass(count, total, zeros, self._order_statistic(skip, count))
        layout = self._layout(cap, zero_mass)
        return self._remember(key, _make_scope(self.racks, self._rows, layout, skip, self._mass(layout, skip),
                                               cap, zero_mass, count, max_weight=self._max_weight))

    def scope_after(self, scope: _Scope, rack: str, used: Sequence[str]) -> _Scope | None:
        """`scope_excluding(sorted(used))`, where `scope` is the whole tree, one rack or
        "every rack but `used` minus `rack`", found through `scope.after[rack]` (one dict lookup
        once known; placements walk the same few chains of scopes over and over)."""
        after = scope.after
        found = after.get(rack, False)
        if found is False:
            found = after[rack] = self.scope_excluding(tuple(sorted(used)))
        return found  # type: ignore[return-value]

    def scope_rack(self, rack: str) -> _Scope | None:
        """The scope of one rack of the tree; cached."""
        found = self._scopes.get(rack, False)
        if found is not False:
            return found  # type: ignore[return-value]
        ordered = self.sorted_weights.get(rack)
        if not ordered:
            return self._remember(rack, None)
        cap, zero_mass = self._cap_and_zero_mass(len(ordered), self.totals[rack], self.zeros[rack],
                                                 ordered.__getitem__)
        layout = _Layout([self._rack_mass(rack, cap, zero_mass)])
        row = [self._rows[self._rack_index[rack]]]
        scope = _make_scope([rack], row, layout, [], layout.total, cap, zero_mass, len(ordered),
                            max_weight=self._max_weight)
        return self._remember(rack, scope)

    def scope_without(self, excluded: Sequence[str], removed: Iterable[str]) -> _Scope | None:
        """The scope "every rack but `excluded`, minus the single bookies `removed`".

        The cap and the zero-weight mass are computed over the remaining leaves, as a fresh selector
        over exactly those leaves would; `pick` never returns a removed bookie (`_draw` may). What
        depends on `excluded` alone (its sorted remaining weights, its racks' mass per layout) is kept
        per distinct `excluded` sequence, so a scope then costs O(|removed| log n).
        """
        key = tuple(excluded)
        base = self._bases.get(key)
        if base is None:
            base = self._base(key)
        values, count, total, zeros, skip, skipped, skip_names, masses = base
        rack_of = self._rack_of
        gone = frozenset(b for b in removed if b in rack_of and rack_of[b] not in skip_names)
        if not gone:
            # Nothing removed inside the scope: the scope of `key` alone, built once (kept with `masses`).
            whole = masses.get(None)
            if whole is None:
                whole = masses[None] = self._scope_without(base, gone)
            return whole
        return self._scope_without(base, gone)

    def _scope_without(self, base: tuple, gone: frozenset[str]) -> _Scope | None:
        values, count, total, zeros, skip, skipped, skip_names, masses = base
        if gone:
            out = sorted(self._weight_of[b] for b in gone)
            count -= len(out)
            if count <= 0:
                return None
            total -= sum(out)
            zeros -= bisect.bisect_right(out, 0)

            def kth(k: int) -> int:
                return _kth_without(values, out, k)
        else:
            if count == 0:
                return None
            kth = values.__getitem__
        cap, zero_mass = self._cap_and_zero_mass(count, total, zeros, kth)
        layout = self._layout(cap, zero_mass)
        mass = masses.get(id(layout))
        if mass is None or mass[0] is not layout:
            if len(masses) >= 64:
                whole = masses.get(None)
                masses.clear()
                if whole is not None:
                    masses[None] = whole
            mass = masses[id(layout)] = (layout, self._mass(layout, skip))
        return _make_scope(self.racks, self._rows, layout, skip, mass[1], cap, zero_mass, count, gone, skipped,
                           self._max_weight)

    def _base(self, key: tuple[str, ...]) -> tuple:
        """What `scope_without` needs of "every rack but `key`", computed once per distinct `key`."""
        index = self._rack_index
        skip = sorted({index[r] for r in key if r in index})
        skipped = frozenset(skip)
        values = sorted(w for i, r in enumerate(self.racks) if i not in skipped for w in self.sorted_weights[r])
        if self._base_size + len(values) > 2_000_000:
            self._bases = {}
            self._base_size = 0
        base = self._bases[key] = (values, len(values), sum(values), bisect.bisect_right(values, 0), skip,
                                   skipped, frozenset(self.racks[i] for i in skip), {})
        self._base_size += len(values) + 1
        return base

    def _remember(self, key: Any, scope: _Scope | None) -> _Scope | None:
        if len(self._scopes) >= self._limit:
            self._scopes = {}
        self._scopes[key] = scope
        return scope

    @staticmethod
    def _mass(layout: _Layout, skip: Sequence[int]) -> float:
        """The layout's mass outside the racks `skip`, summed over the smaller side (fewer rounding errors)."""
        masses = layout.masses
        if 2 * len(skip) <= len(masses):
            return max(0.0, layout.total - sum(masses[i] for i in skip))
        skipped = set(skip)
        return sum(m for i, m in enumerate(masses) if i not in skipped)

    def _rack_mass(self, rack: str, cap: float, zero_mass: float) -> float:
        ordered = self.sorted_weights[rack]
        j = len(ordered) if cap == _INF else bisect.bisect_right(ordered, cap)
        capped = (len(ordered) - j) * cap if j < len(ordered) else 0.0
        return self.zeros[rack] * zero_mass + self.prefix[rack][j] + capped

    # -- draws ------------------------------------------------------------------------------------

    def _draw(self, scope: _Scope, rng: random.Random) -> str:
        """One leaf of the scope by capped mass (one `rng.random()`); may be one of `scope.removed`."""
        rows, masses, starts, ends, skip, skipped, total, cap, zero_mass = scope.data
        v = rng.random() * total
        for i in skip:                             # step over the excluded racks' intervals
            if v >= starts[i]:
                v += masses[i]
            else:
                break
        r = _bisect_right(ends, v)
        if r >= len(ends) or r in skipped:         # rounding at an interval's edge
            r, v = self._nearest(scope, r, v)
        u = v - starts[r]                          # >= 0: starts[r] == ends[r - 1] <= v
        members, zeros, prefix, ordered = rows[r]
        if zeros:                                  # (without zero weights the zero block is empty)
            zero_block = zeros * zero_mass
            if u < zero_block:
                return members[min(int(u / zero_mass), zeros - 1)]
            u -= zero_block
        n = len(ordered)
        if cap == _INF:                            # no weight above the cap: inside the uncapped part
            i = _bisect_right(prefix, u, zeros, n + 1) - 1
            return members[min(max(i, zeros), n - 1)]
        j = _bisect_right(ordered, cap)
        if j == n or u < prefix[j]:
            i = _bisect_right(prefix, u, zeros, j + 1) - 1
            return members[min(max(i, zeros), n - 1)]
        return members[min(j + int((u - prefix[j]) / cap), n - 1)]

    @staticmethod
    def _nearest(scope: _Scope, r: int, v: float) -> tuple[int, float]:
        """A rack of the scope next to layout position `r` and a point inside it (after rounding)."""
        _, masses, starts, ends, _, skipped, _, _, _ = scope.data
        last = len(ends) - 1
        if r <= last:
            forward = r
            while forward <= last and forward in skipped:
                forward += 1
            if forward <= last:
                return forward, starts[forward]
        back = min(r, last)
        while back in skipped:
            back -= 1
        return back, starts[back] + masses[back] * (1 - 1e-12)

    def _capped(self, scope: _Scope) -> Iterator[tuple[str, float]]:
        """(leaf, capped mass) of every leaf of the scope, removed bookies left out."""
        _, _, cap, zero_mass, _ = tuple.__iter__(scope)
        skipped = scope.skipped
        removed = scope.removed
        for i, rack in enumerate(scope.names):
            if i in skipped:
                continue
            for bookie, w in zip(self.members[rack], self.sorted_weights[rack]):
                if bookie not in removed:
                    yield bookie, (zero_mass if w == 0 else min(w, cap))

    def probabilities(self, scope: _Scope | None) -> dict[str, float]:
        """Normalised chance of every leaf of the scope in one draw (tests and explanations; O(leaves))."""
        if scope is None:
            return {}
        masses = dict(self._capped(scope))
        total = sum(masses.values())
        return {b: m / total for b, m in masses.items()}

    def pick(self, scope: _Scope | None, rng: random.Random,
             accept: Callable[[str], bool], tries: int = 32) -> str | None:
        """A leaf of `scope` drawn by capped weight among those `accept` allows, or None.

        A few independent draws first; then the acceptable leaves are enumerated and one is drawn from
        their masses (the same conditional distribution).
        """
        if scope is None:
            return None
        removed = scope.removed
        if removed:
            outer = accept

            def accept(b: str) -> bool:
                return b not in removed and outer(b)
        for _ in range(min(tries, 2 * tuple.__getitem__(scope, 4))):
            bookie = self._draw(scope, rng)
            if accept(bookie):
                return bookie
        return self._pick_enumerated(scope, rng, accept)

    def pick_excluding(self, scope: _Scope | None, rng: random.Random, excluded: Container[str],
                       tries: int = 32) -> str | None:
        """`pick(scope, rng, lambda b: b not in excluded, tries)`: the same draws, without the closure."""
        if scope is None:
            return None
        removed = scope.removed
        draw = self._draw
        for _ in range(min(tries, 2 * tuple.__getitem__(scope, 4))):
            bookie = draw(scope, rng)
            if bookie not in excluded and bookie not in removed:
                return bookie
        return self._pick_enumerated(scope, rng, lambda b: b not in removed and b not in excluded)

    def _pick_enumerated(self, scope: _Scope, rng: random.Random, accept: Callable[[str], bool]) -> str | None:
        """`pick`'s last resort: one draw from the masses of the acceptable leaves (`accept` also refuses
        the scope's removed bookies)."""
        acceptable = [(b, m) for b, m in self._capped(scope) if accept(b)]
        if not acceptable:
            return None
        u = rng.random() * sum(m for _, m in acceptable)
        for bookie, mass in acceptable:
            u -= mass
            if u < 0:
                return bookie
        return acceptable[-1][0]
