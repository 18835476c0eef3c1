"""The complete search of `placement.search=complete`: an exact search for an ensemble that meets the
enforced rack rule, run when BookKeeper's greedy placement gave up.

Spec: bookkeeper-rackaware.md §4.4 (the greedy search it backs up), §5.1 (replacement), §6.1 (the rule).

The rule (§6.1 under `enforceMinNumRacksPerWriteQuorum`): write set `i` is positions `i .. i+W-1`
(mod `E`), and every write set spans at least `k = min(W, minNumRacksPerWriteQuorum)` racks. When
`W >= E` a write set is the whole ensemble. Which bookies are eligible (writable, not excluded, not in
the default rack) is the caller's business: this module sees racks with the eligible bookies in each.

**New ensemble** (`complete_ensemble`). Only the rack of each position matters, so the search assigns
racks to positions (a rack pattern) and draws the bookies inside each rack afterwards. It backtracks
position by position:

* capacity: a rack holds at most its eligible bookies, and at most `E x (W-k+1) / W` positions (each
  write set holds a rack at most `W-k+1` times, and each position lies in `W` write sets);
* write sets: every write set not complete yet must still be able to reach `k` racks (the racks it
  has, plus one new rack per missing position, among the racks with capacity left that it lacks), and
  a write set through the position being filled that needs a new rack at every missing position
  forbids the racks it has there;
* repeats: the write sets together may repeat a rack at most `E x (W-k)` times; a lower bound of the
  repeats of any completion (from the gaps between positions of each rack) cuts a node above it, and
  at the root rejects most impossible requests before any search;
* symmetry: only the racks in the first `W-1` positions (the write sets that wrap around) and in the
  last `W-1` positions filled constrain what follows; every other rack is known by its remaining
  capacity alone, so one rack per remaining capacity is tried, not each of them;
* memory of failures: a state (position, the racks of those positions with their remaining
  capacities, how many other racks have each remaining capacity) that failed is not searched again.

Racks are tried in the order the request's rng shuffled them (a rack in no write set through the
position first, then the one farthest from its nearest position, then most remaining capacity), and
the bookies of each rack are then drawn with `rng.sample`: the same rng gives the same ensemble. Disk
weights and the local node are not used (they are preferences, not part of the rule).

**Replacement** (`complete_replacement`): the rest of the ensemble is fixed, so a replacement is valid
when every write set through its position spans `k` racks of the known members (unknown members count
for no rack, as in §6.1) with no member in the forbidden (default) rack; one valid bookie is drawn
uniformly. No search is needed.

Cost: `complete_ensemble` visits at most `SEARCH_BUDGET` nodes (a node places one rack at one
position) when `E + W <= 32`, and proportionally fewer above, so that nodes x (E + W) stays at most
`32 x SEARCH_BUDGET`; a node costs O(E + W log W + racks used + distinct capacities), dominated by
the sweep over the write sets. It keeps one key per failed state (memory O(nodes)), and O(bookies)
groups and draws the bookies. Past the budget it gives up (`CompleteSearch.bounded`), so a request
costs bounded time. `complete_replacement` is O(bookies + W^2).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

SEARCH_BUDGET = 200_000
"""Nodes the exact search may visit before it gives up, for `E + W <= 32` (scaled down above, see
`node_budget`). The hardest requests of the tests (ensembles of 10 to 16, every write quorum and rack
minimum, racks of 1 to 3 bookies, impossible ones searched to the end) stay far below it."""
SIZE_OF_BUDGET = 32
"""`E + W` up to which a request gets the whole `SEARCH_BUDGET`."""


def node_budget(ensemble_size: int, write_quorum: int, budget: int = SEARCH_BUDGET) -> int:
    """Nodes a request may visit: `budget` up to `E + W = 32`, then `budget x 32 / (E + W)` (a node's
    cost grows with `E + W`), never fewer than `E` (one straight descent)."""
    weight = ensemble_size + span_of(ensemble_size, write_quorum)
    return max(ensemble_size, budget * SIZE_OF_BUDGET // max(SIZE_OF_BUDGET, weight))


@dataclass(frozen=True, slots=True)
class CompleteSearch:
    """The outcome of a complete search.

    Attributes:
        ensemble: the bookies in position order; None when no valid ensemble was found.
        nodes: search nodes visited (one per rack placed at a position).
        bounded: the search stopped at its budget (so a valid ensemble may exist).
    """

    ensemble: tuple[str, ...] | None
    nodes: int
    bounded: bool = False


@dataclass(frozen=True, slots=True)
class RackPattern:
    """A rack pattern: `pattern[i]` indexes the rack of position `i` (None: none exists)."""

    pattern: tuple[int, ...] | None
    nodes: int
    bounded: bool = False


def span_of(ensemble_size: int, write_quorum: int) -> int:
    """Positions a write set covers once (`min(W, E)`): with `W >= E` it is the whole ensemble."""
    return min(write_quorum, ensemble_size)


def complete_ensemble(racks: Mapping[str, Sequence[str]], ensemble_size: int, write_quorum: int, min_racks: int,
                      rng: random.Random, budget: int = SEARCH_BUDGET) -> CompleteSearch:
    """A valid ensemble from `racks` (rack -> its eligible bookies), or None when none exists.

    Args:
        racks: every rack with eligible bookies; each rack's bookies in a stable (sorted) order.
        ensemble_size, write_quorum: the request's E and W.
        min_racks: `k = min(W, minNumRacksPerWriteQuorum)`, racks every write set must span.
        rng: the request's generator; the rack order and the bookies drawn come from it.
        budget: search nodes for `E + W <= 32` (see `node_budget`).

    Returns:
        The ensemble, the nodes visited and whether the budget stopped the search.
    """
    order = sorted(rack for rack, members in racks.items() if members)
    rng.shuffle(order)
    found = rack_pattern([len(racks[rack]) for rack in order], ensemble_size, write_quorum, min_racks, budget)
    if found.pattern is None:
        return CompleteSearch(None, found.nodes, found.bounded)
    counts: dict[int, int] = {}
    for index in found.pattern:
        counts[index] = counts.get(index, 0) + 1
    drawn = {index: iter(rng.sample(list(racks[order[index]]), count)) for index, count in counts.items()}
    return CompleteSearch(tuple(next(drawn[index]) for index in found.pattern), found.nodes)


def rack_pattern(capacities: Sequence[int], ensemble_size: int, write_quorum: int, min_racks: int,
                 budget: int = SEARCH_BUDGET) -> RackPattern:
    """A rack per position such that rack `r` is used at most `capacities[r]` times and every write set
    spans `min_racks` racks; the first such pattern in the search order (see the module docstring).

    Cost: at most `node_budget(E, W, budget)` nodes (see the module docstring).
    """
    size = ensemble_size
    if size <= 0:
        return RackPattern((), 0)
    span = span_of(size, write_quorum)
    need = max(min_racks, 1)
    if need > span:
        return RackPattern(None, 0)
    # A write set holds a rack at most span - need + 1 times, and each position is in `span` write sets.
    limit = min(size, size * (span - need + 1) // span)
    caps = [min(c, limit) for c in capacities]
    if sum(caps) < size or sum(1 for c in caps if c > 0) < need:
        return RackPattern(None, 0)
    return _Search(caps, size, span, need, node_budget(size, write_quorum, budget)).run()


class _Search:
    """The backtracking search of `rack_pattern`, iterative (an ensemble may have 1024 positions).

    `window[r]` counts the positions of rack `r` among the head (positions `0 .. span-2`, held by the
    write sets that wrap around) and the tail (the last `span-1` positions filled). Racks with no
    position there and capacity left are idle: `idle[c]` is a stack of the idle racks with `c`
    positions left, and the top one stands for all of them.

    The repeat bound: a write set of `span` positions spanning `d` racks has `span - d` repeats, so
    the write sets together may have at most `E x (span - need)`. A rack with `c` positions and gaps
    `g_1 .. g_c` between consecutive ones (sum `E`) causes `span x c - E + sum(max(0, g - span))` of
    them. `_repeats_bound` adds, over the racks, the repeats the gaps already closed cause and the
    fewest the open gaps and the racks not used yet can cause, given the positions left; a node above
    the limit is cut.
    """

    def __init__(self, caps: list[int], size: int, span: int, need: int, budget: int) -> None:
        self.size, self.span, self.need, self.budget = size, span, need, budget
        self.limit = size * (span - need)          # repeats the write sets may have together
        self.remaining = list(caps)
        self.pattern = [-1] * size
        self.window = [0] * len(caps)
        self.idle: dict[int, list[int]] = {}
        self.untouched: dict[int, int] = {}        # remaining capacity -> racks not used yet
        for rack in reversed(range(len(caps))):
            if caps[rack] > 0:
                self.idle.setdefault(caps[rack], []).append(rack)
                self.untouched[caps[rack]] = self.untouched.get(caps[rack], 0) + 1
        self.used = [0] * len(caps)
        self.first = [0] * len(caps)
        self.last = [0] * len(caps)
        self.closed = [0] * len(caps)              # sum(max(0, g - span)) over the rack's closed gaps
        self.touched: list[int] = []               # racks in order of first use
        self.saved: list[tuple[int, int]] = [(0, 0)] * size   # per position: (previous last, its closed gap)
        self.failed: set[tuple[object, ...]] = set()
        self.nodes = 0

    def run(self) -> RackPattern:
        first = self._expand(0)
        if first is None:
            return RackPattern(None, 0)
        frames: list[list[object]] = [[first[0], 0, first[1]]]   # [candidates, next index, state key]
        while frames:
            position = len(frames) - 1
            frame = frames[-1]
            if self.pattern[position] != -1:
                self._undo(position)
            candidates: list[int] = frame[0]  # type: ignore[assignment]
            if frame[1] == len(candidates):
                self.failed.add(frame[2])  # type: ignore[arg-type]
                frames.pop()
                continue
            rack = candidates[frame[1]]  # type: ignore[index]
            frame[1] += 1  # type: ignore[operator]
            self.nodes += 1
            if self.nodes > self.budget:
                # Give up: the budget bounds the cost of a request.
                return RackPattern(None, self.nodes - 1, bounded=True)
            self._place(position, rack)
            if position + 1 == self.size:
                return RackPattern(tuple(self.pattern), self.nodes)
            following = self._expand(position + 1)
            if following is not None:
                frames.append([following[0], 0, following[1]])
        return RackPattern(None, self.nodes)

    # -- moves -------------------------------------------------------------------------------------

    def _leaving(self, position: int) -> int:
        """The position that leaves the tail when `position` is filled, or -1 (none, or in the head)."""
        gone = position - self.span + 1
        return gone if gone > self.span - 2 else -1

    def _place(self, position: int, rack: int) -> None:
        remaining = self.remaining[rack]
        if self.window[rack] == 0:
            stack = self.idle[remaining]
            stack.pop()          # the rack tried is always the top of its stack
            if not stack:
                del self.idle[remaining]
        if self.used[rack] == 0:
            self.untouched[remaining] -= 1
            if not self.untouched[remaining]:
                del self.untouched[remaining]
            self.touched.append(rack)
            self.first[rack] = position
            self.saved[position] = (position, 0)
        else:
            closed = max(0, position - self.last[rack] - self.span)
            self.closed[rack] += closed
            self.saved[position] = (self.last[rack], closed)
        self.last[rack] = position
        self.used[rack] += 1
        self.remaining[rack] = remaining - 1
        self.pattern[position] = rack
        self.window[rack] += 1
        gone = self._leaving(position)
        if gone >= 0:
            old = self.pattern[gone]
            self.window[old] -= 1
            if self.window[old] == 0 and self.remaining[old] > 0:
                self.idle.setdefault(self.remaining[old], []).append(old)

    def _undo(self, position: int) -> None:
        gone = self._leaving(position)
        if gone >= 0:
            old = self.pattern[gone]
            if self.window[old] == 0 and self.remaining[old] > 0:
                stack = self.idle[self.remaining[old]]
                stack.pop()
                if not stack:
                    del self.idle[self.remaining[old]]
            self.window[old] += 1
        rack = self.pattern[position]
        self.pattern[position] = -1
        self.window[rack] -= 1
        self.remaining[rack] += 1
        remaining = self.remaining[rack]
        self.used[rack] -= 1
        if self.used[rack] == 0:
            self.touched.pop()
            self.untouched[remaining] = self.untouched.get(remaining, 0) + 1
        else:
            self.last[rack], closed = self.saved[position]
            self.closed[rack] -= closed
        if self.window[rack] == 0:
            self.idle.setdefault(remaining, []).append(rack)

    # -- a node ------------------------------------------------------------------------------------

    def _expand(self, position: int) -> tuple[list[int], tuple[object, ...]] | None:
        """The racks to try at `position` (positions before it filled), best first, and the state key;
        None when no rack can go there or the state is known to fail."""
        if self._repeats_bound(position) > self.limit:
            return None
        forbidden = self._forbidden(position)
        if forbidden is None:
            return None
        pattern, span, size = self.pattern, self.span, self.size
        seen: dict[int, list[int]] = {}
        head = min(span - 1, position)
        for q in range(head):
            seen.setdefault(pattern[q], []).append(q)
        for q in range(max(head, position - span + 1), position):
            seen.setdefault(pattern[q], []).append(q)
        remaining = self.remaining
        key = (position, tuple(sorted((remaining[r], tuple(qs)) for r, qs in seen.items())),
               tuple(sorted((c, len(stack)) for c, stack in self.idle.items())))
        if key in self.failed:
            return None
        # Farthest from its nearest position first (an idle rack is in no write set through here), then
        # most remaining capacity.
        ranked = [(-min(span, *(min(position - q, q + size - position) for q in qs)), -remaining[r], r)
                  for r, qs in seen.items() if remaining[r] > 0 and r not in forbidden]
        ranked.extend((-span, -c, stack[-1]) for c, stack in self.idle.items())
        ranked.sort()
        return [r for _, _, r in ranked], key

    def _repeats_bound(self, position: int) -> int:
        """The fewest repeats a completion of the positions before `position` can have (see the class
        docstring): the closed gaps' repeats, then the cheapest extra positions, rack by rack.

        Each rack's extra repeats grow convexly with its extra positions (free while an open gap is
        longer than `span`, then one partial step, then `span` each), so taking the cheapest steps
        over all racks is exact for this bound. Cost: O(racks used + distinct capacities).
        """
        size, span = self.size, self.span
        left = size - position
        total = 0
        free = 0
        partial: list[int] = []
        for rack in self.touched:
            open_gap = size - (self.last[rack] - self.first[rack])
            total += span * self.used[rack] - size + self.closed[rack] + max(0, open_gap - span)
            spare = self.remaining[rack]
            if spare:
                whole, rest = divmod(open_gap, span)
                zeros = min(spare, max(0, whole - 1))
                free += zeros
                if whole >= 1 and spare > zeros:
                    partial.append(span - rest)
        whole, rest = divmod(size, span)
        for capacity, racks in self.untouched.items():
            free += racks * min(capacity, whole)
            if capacity > whole:
                partial.extend([span - rest] * racks)
        if free >= left:
            return total
        left -= free
        partial.sort()
        for step in partial[:left]:
            total += step
        return total + span * max(0, left - len(partial))

    def _forbidden(self, position: int) -> set[int] | None:
        """Racks that may not take `position`, or None when some write set can no longer reach `need`.

        Every write set not complete yet (those through `position` and the later ones, which wrap
        into the head) must be able to reach `need` racks: the racks it has, plus at most one new rack
        per missing position, and only racks with capacity left that it does not have. A write set
        through `position` whose every missing position must bring a new rack forbids the racks it
        has. Slides over those write sets, counting racks of filled positions: O(E + W).
        """
        size, span, need, pattern, remaining = self.size, self.span, self.need, self.pattern, self.remaining
        available = sum(1 for rack in self.touched if remaining[rack] > 0) + sum(self.untouched.values())
        counts: dict[int, int] = {}
        spare = 0            # racks of the write set with capacity left
        missing = 0          # positions of the write set not filled yet (the one being filled included)
        start = size - 1
        for j in range(span):
            q = (start + j) % size
            if q < position:
                rack = pattern[q]
                if rack not in counts:
                    counts[rack] = 0
                    spare += remaining[rack] > 0
                counts[rack] += 1
            else:
                missing += 1
        forbidden: set[int] = set()
        for k in range(min(size, size - position + span - 1)):
            if k:
                start -= 1
                q = start % size
                if q < position:
                    rack = pattern[q]
                    if rack not in counts:
                        counts[rack] = 0
                        spare += remaining[rack] > 0
                    counts[rack] += 1
                else:
                    missing += 1
                q = (start + span) % size
                if q < position:
                    rack = pattern[q]
                    counts[rack] -= 1
                    if not counts[rack]:
                        del counts[rack]
                        spare -= remaining[rack] > 0
                else:
                    missing -= 1
            held = len(counts)
            if held + min(missing, available - spare) < need:
                return None
            if held + missing == need and (position - start) % size < span:
                forbidden.update(counts)
        return forbidden


def complete_replacement(racks_of_members: Sequence[str | None], position: int, candidates: Mapping[str, Sequence[str]],
                         write_quorum: int, min_racks: int, forbidden_rack: str | None,
                         rng: random.Random) -> str | None:
    """A bookie for `position` such that every write set through it spans `min_racks` racks.

    Args:
        racks_of_members: the rack of each member (None: not known, counts for no rack); the entry
            at `position` is ignored.
        position: the position being replaced.
        candidates: rack -> its eligible bookies (stable order); the bookies of the other members
            and the replaced one must not be listed.
        write_quorum, min_racks: W and `k = min(W, minNumRacksPerWriteQuorum)`.
        forbidden_rack: a write set holding a member of this rack is invalid whatever is chosen
            (the default rack under enforcement); None: no such rack.
        rng: draws one bookie uniformly among the valid ones.

    Returns:
        The bookie, or None when no eligible bookie makes the write sets through `position` valid.
    """
    size = len(racks_of_members)
    span = span_of(size, write_quorum)
    forbidden: set[str] = set()
    for k in range(span):
        start = (position - k) % size
        others = {racks_of_members[(start + j) % size] for j in range(span) if (start + j) % size != position}
        others.discard(None)
        if (forbidden_rack is not None and forbidden_rack in others) or len(others) + 1 < min_racks:
            return None
        if len(others) < min_racks:
            forbidden.update(others)  # type: ignore[arg-type]
    valid = [bookie for rack in sorted(candidates) if rack not in forbidden for bookie in candidates[rack]]
    if not valid:
        return None
    return valid[int(rng.random() * len(valid))]


__all__ = ["SEARCH_BUDGET", "SIZE_OF_BUDGET", "CompleteSearch", "RackPattern", "complete_ensemble",
           "complete_replacement", "node_budget", "rack_pattern", "span_of"]
