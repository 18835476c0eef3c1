"""Exact disk-weighted draws over unions of racks in O(racks) per draw (spec bookkeeper-rackaware.md §7.3-§7.4).

Used by the rack-aware policy for its per-scope weighted picks; `selection.WeightedSelector` is the
reference it must agree with (tests compare the two).
"""

from __future__ import annotations

import bisect
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

_Scope = tuple  # (racks, cumulative capped masses, cap, zero-weight mass, number of leaves)


class RackWeights:
    """Exact disk-weighted draws over a union of racks, in O(racks) per draw (spec §7.3-§7.4).

    BookKeeper builds a selector over the scope's leaves for every pick (O(bookies)). The capped weight
    of a leaf only depends on three numbers of the scope: the median weight, the smallest non-zero
    weight and the total (zero: uniform). Racks keep their weights sorted with prefix sums, so a scope's
    median is an order statistic of (all weights minus the excluded racks' weights), a rack's capped mass
    is a bisection, and a draw walks the racks then bisects inside one. The distribution is exactly the
    one of a fresh `WeightedRandomSelectionImpl` over the scope.
    """

    __slots__ = ("max_multiple", "racks", "members", "sorted_weights", "prefix", "zeros", "min_nonzero",
                 "totals", "all_sorted", "total", "_scopes", "_limit")

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
        everything: list[int] = []
        for rack in self.racks:
            start, end = ranges[rack]
            pairs = sorted((max(0, weights.get(b, 0)), b) for b in flat[start:end])
            ordered = [w for w, _ in pairs]
            self.members[rack] = [b for _, b in pairs]
            self.sorted_weights[rack] = ordered
            running = [0]
            for w in ordered:
                running.append(running[-1] + w)
            self.prefix[rack] = running
            zeros = bisect.bisect_right(ordered, 0)
            self.zeros[rack] = zeros
            self.min_nonzero[rack] = ordered[zeros] if zeros < len(ordered) else float("inf")
            self.totals[rack] = running[-1]
            everything.extend(ordered)
        everything.sort()
        self.all_sorted = everything
        self.total = sum(everything)
        self._scopes: dict[Any, _Scope | None] = {}
        self._limit = max(256, 2_000_000 // max(1, len(self.racks)))

    def _kth(self, k: int, excluded: Sequence[str]) -> int:
        """The k-th smallest (0-based) weight of all leaves minus the excluded racks' leaves."""
        values = self.all_sorted
        if not excluded:
            return values[k]
        lists = [self.sorted_weights[r] for r in excluded]
        lo, hi = 0, len(values) - 1
        while lo < hi:
            mid = (lo + hi) // 2
            v = values[mid]
            remaining = bisect.bisect_right(values, v) - sum(bisect.bisect_right(x, v) for x in lists)
            if remaining >= k + 1:
                hi = mid
            else:
                lo = mid + 1
        return values[lo]

    def scope_excluding(self, excluded: tuple[str, ...]) -> _Scope | None:
        """The scope "every rack but `excluded`" (sorted rack names of the tree); cached."""
        key = ("~",) + excluded
        found = self._scopes.get(key, False)
        if found is not False:
            return found  # type: ignore[return-value]
        skip = set(excluded)
        return self._scope(key, [r for r in self.racks if r not in skip], excluded)

    def scope_rack(self, rack: str) -> _Scope | None:
        """The scope of one rack of the tree; cached."""
        found = self._scopes.get(rack, False)
        if found is not False:
            return found  # type: ignore[return-value]
        return self._scope(rack, [rack], ())

    def _scope(self, key: Any, racks: list[str], excluded: Sequence[str]
               ) -> _Scope | None:
        """(racks, cumulative capped masses, cap, zero-weight mass, leaves) of a scope; None when empty."""
        count = sum(len(self.members[r]) for r in racks)
        if count == 0:
            result = None
        else:
            total = sum(self.totals[r] for r in racks)
            cap = float("inf")
            if total == 0:
                zero_mass = 1.0                                   # all zero: uniform
            else:
                zero_mass = min(self.min_nonzero[r] for r in racks)
                if len(racks) == 1:
                    ordered = self.sorted_weights[racks[0]]
                    kth = ordered.__getitem__
                else:
                    def kth(k: int) -> int:
                        return self._kth(k, excluded)
                median = kth(count // 2) if count % 2 else (kth(count // 2 - 1) + kth(count // 2)) / 2.0
                if self.max_multiple > 0 and median > 0:
                    cap = self.max_multiple * median
                    zero_mass = min(zero_mass, cap)
            cumulative: list[float] = []
            running = 0.0
            for rack in racks:
                running += self._rack_mass(rack, cap, zero_mass)
                cumulative.append(running)
            result = (racks, cumulative, cap, zero_mass, count)
        if len(self._scopes) >= self._limit:
            self._scopes = {}
        self._scopes[key] = result
        return result

    def _rack_mass(self, rack: str, cap: float, zero_mass: float) -> float:
        ordered = self.sorted_weights[rack]
        j = len(ordered) if cap == float("inf") else bisect.bisect_right(ordered, cap)
        capped = (len(ordered) - j) * cap if j < len(ordered) else 0.0
        return self.zeros[rack] * zero_mass + self.prefix[rack][j] + capped

    def _draw(self, scope: _Scope, rng: random.Random) -> str:
        racks, cumulative, cap, zero_mass, _ = scope
        u = rng.random() * cumulative[-1]
        r = min(bisect.bisect_right(cumulative, u), len(racks) - 1)
        rack = racks[r]
        u -= cumulative[r - 1] if r else 0.0
        members = self.members[rack]
        zeros = self.zeros[rack]
        zero_block = zeros * zero_mass
        if u < zero_block:
            return members[min(int(u / zero_mass), zeros - 1)]
        u -= zero_block
        prefix = self.prefix[rack]
        ordered = self.sorted_weights[rack]
        j = len(ordered) if cap == float("inf") else bisect.bisect_right(ordered, cap)
        if u < prefix[j] or j == len(ordered):
            i = bisect.bisect_right(prefix, u, zeros, j + 1) - 1
            return members[min(max(i, zeros), len(members) - 1)]
        return members[min(j + int((u - prefix[j]) / cap), len(members) - 1)]

    def _capped(self, scope: _Scope) -> Iterator[tuple[str, float]]:
        racks, _, cap, zero_mass, _ = scope
        for rack in racks:
            for bookie, w in zip(self.members[rack], self.sorted_weights[rack]):
                yield bookie, (zero_mass if w == 0 else min(w, cap))

    def pick(self, scope: _Scope | None, rng: random.Random,
             accept: Callable[[str], bool], tries: int = 32) -> str | None:
        """A leaf of `scope` drawn by capped weight among those `accept` allows, or None.

        A few independent draws first; then the acceptable leaves are enumerated and one is drawn from
        their masses (the same conditional distribution).
        """
        if scope is None:
            return None
        for _ in range(min(tries, 2 * scope[4])):
            bookie = self._draw(scope, rng)
            if accept(bookie):
                return bookie
        acceptable = [(b, m) for b, m in self._capped(scope) if accept(b)]
        if not acceptable:
            return None
        u = rng.random() * sum(m for _, m in acceptable)
        for bookie, mass in acceptable:
            u -= mass
            if u < 0:
                return bookie
        return acceptable[-1][0]


