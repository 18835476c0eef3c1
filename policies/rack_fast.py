"""The rack-aware policy's fast placement paths (spec bookkeeper-rackaware.md §4.4): the common case
of `newEnsembleInternal`, where every position takes a rack of its own, placed from the leaf index
without coverage bookkeeping, with the same draws as the general loop.

`_place_fast` (uniform) and `_place_fast_weighted` (disk weights, §7.4) place positions until the
first excluded draw; the general loop (`RackawarePolicyImpl._place_positions`) continues from there.
`_place_beyond_racks` places the last position once no rack is left; `_fast_adherence` answers the
adherence of an ensemble whose bookies are all in distinct racks.

`RackFastPaths` is a mixin of `RackawarePolicyImpl`.
"""

from __future__ import annotations

import bisect
import random
from typing import Any

from .api import Adherence
from .errors import NotEnoughBookiesError
from .location import ROOT
from .provenance import POSITIONS
from .rack_index import ExcludedPerRack
from .rack_selection import SCOPE_CLUSTER, SCOPE_FALLBACK, SCOPE_LOCAL, SCOPE_UNUSED, RackSelection


class RackFastPaths(RackSelection):
    """The fast paths of §4.4 over the host's leaf index and disk-weight sampler.

    The host provides `first_position_scope`, `_locate`, `_why_not_enough`, `is_ensemble_adhering` and
    `_stabilized`.
    """

    _stabilized: bool

    def _place_beyond_racks(self, ensemble_size: int, write_quorum: int, ack_quorum: int, chosen: list[str],
                            exclude: set[str], rng: random.Random, fallbacks: list[str],
                            steps: list[dict[str, Any]], counted: ExcludedPerRack
                            ) -> tuple[list[str], Adherence] | None:
        """The general loop's last position after the fast path has put every other one in a rack of its
        own and no rack is left (5/3/2 on 4 racks), without its coverage bookkeeping; None when racks
        are left (the fast path stopped at an excluded draw), the caller then runs the loop.

        The loop finds no leaf outside the racks used so far (no draw), notes the fallback and picks
        from the whole cluster under the rack coverage. That coverage accepts every bookie not chosen
        yet when k = min(W, minNumRacksPerWriteQuorum) < W (the caller's condition): the earlier members
        of each write set holding the position are in distinct racks, and a write set refuses a
        candidate in one of its racks only when it could then no longer reach k racks, which with
        W - 1 >= k cannot happen. So the pick is the cluster pick without a predicate: the same draws,
        the same steps and notes, and the same random last resort or error when nothing is left.
        """
        position = len(chosen)
        topology = self.topology
        avoid = [self._locate(b) for b in chosen]
        leaves = topology.leaves_excluding(avoid)
        if len(leaves):
            return None
        ranges = self._index()[2]
        racks_total = topology.num_racks
        name = POSITIONS[position]
        ex, full = counted.outside(avoid)
        racks_in = racks_total - sum(1 for rack in set(avoid) if rack in ranges)
        steps.append({"step": name, "scope": SCOPE_UNUSED, "candidates": len(leaves) - ex, "racks": racks_in - full,
                      "failed": True})
        fallbacks.append(f"position {position}: no bookie outside the racks used so far met the rack coverage; "
                         "chose from the whole cluster")
        ex, full = counted.outside(())
        steps.append({"step": name, "scope": SCOPE_FALLBACK, "candidates": len(topology) - ex,
                      "racks": racks_total - full})
        try:
            bookie = self._select_from_location(ROOT, exclude, None, None, not self.settings.enforce_min_racks,
                                                rng, fallbacks, steps, name)
        except NotEnoughBookiesError as exc:
            message, info = self._why_not_enough(ensemble_size, write_quorum, exclude - set(chosen), exc)
            raise NotEnoughBookiesError(message, explain=info) from exc
        result = [*chosen, bookie]
        return result, self.is_ensemble_adhering(result, write_quorum, ack_quorum)

    def _place_fast(self, ensemble_size: int, exclude: set[str], rng: random.Random,
                    steps: list[dict[str, Any]] | None = None, counted: ExcludedPerRack | None = None) -> list[str]:
        """The common case of §4.4 without coverage bookkeeping: returns the positions placed before the
        first rejected draw (all of them, usually); the general loop continues from there.

        Each position draws one leaf uniformly from its scope (position 0: ROOT or the local rack;
        position p: outside the racks of positions 0..p-1). While every pick is in a rack of its own,
        the rack-coverage predicate accepts any bookie of an unused rack (a write set whose members all
        have distinct racks can always reach min(WQ, m) racks), so only the exclusion set can reject a
        draw. On a rejection the general loop redraws the same position among the acceptable leaves:
        one uniform draw, then (if rejected) a uniform pick among the acceptable ones, is uniform among
        the acceptable ones, so the outcome distribution is Java's.

        `steps` gets one record per placed position: the scope's size (minus the exclusions counted
        in `counted`, which holds the exclusions from before the call; None: there were none).

        Cost: O(E x racks used) per call, independent of the number of bookies.
        """
        flat, flat_racks, ranges = self._index()
        scope = self.first_position_scope()
        if scope == ROOT:
            low, high = 0, len(flat)
        else:
            hit = ranges.get(scope)
            if hit is None:
                return []
            low, high = hit
        draw = rng.random
        k = low + int(draw() * (high - low))
        bookie = flat[k]
        if bookie in exclude:
            return []
        chosen = [bookie]
        exclude.add(bookie)
        rack = flat_racks[k]
        cut = ranges[rack]
        cuts = [cut]
        remaining = len(flat) - (cut[1] - cut[0])
        record = steps is not None
        if record:
            racks_total = len(ranges)
            if counted is None:
                steps.append({"step": "position 0", "scope": SCOPE_CLUSTER if scope == ROOT else SCOPE_LOCAL,
                              "candidates": high - low, "racks": racks_total if scope == ROOT else 1})
            else:
                ex, full = counted.outside(()) if scope == ROOT else counted.within(scope)
                steps.append({"step": "position 0", "scope": SCOPE_CLUSTER if scope == ROOT else SCOPE_LOCAL,
                              "candidates": high - low - ex, "racks": (racks_total if scope == ROOT else 1) - full})
                used = [rack]
        for p in range(1, ensemble_size):
            if remaining <= 0:
                break
            k = int(draw() * remaining)
            for start, end in cuts:
                if k >= start:
                    k += end - start
                else:
                    break
            bookie = flat[k]
            if bookie in exclude:
                break
            if record:
                if counted is None:
                    steps.append({"step": POSITIONS[p], "scope": SCOPE_UNUSED, "candidates": remaining,
                                  "racks": racks_total - p})
                else:
                    ex, full = counted.outside(used)
                    steps.append({"step": POSITIONS[p], "scope": SCOPE_UNUSED, "candidates": remaining - ex,
                                  "racks": racks_total - p - full})
            chosen.append(bookie)
            exclude.add(bookie)
            rack = flat_racks[k]
            cut = ranges[rack]
            bisect.insort(cuts, cut)
            remaining -= cut[1] - cut[0]
            if counted is not None:
                used.append(rack)
        return chosen

    def _place_fast_weighted(self, ensemble_size: int, exclude: set[str], rng: random.Random,
                             steps: list[dict[str, Any]] | None = None,
                             counted: ExcludedPerRack | None = None) -> list[str]:
        """`_place_fast` with disk weights: one draw from each position's scope distribution (the
        cluster, the local rack, or the cluster minus the racks used so far); the general loop takes
        over at the first excluded draw, which again yields the scope distribution conditioned on the
        acceptable leaves. `steps` and `counted` as for `_place_fast`."""
        sampler = self.rack_sampler()
        scope_name = self.first_position_scope()
        ranges = self._index()[2]
        if scope_name == ROOT:
            scope = sampler.scope_excluding(())
            size, racks_in = sampler._count, len(ranges)
        elif scope_name in ranges:
            scope = sampler.scope_rack(scope_name)
            start, end = ranges[scope_name]
            size, racks_in = end - start, 1
        else:
            return []
        rack_of = sampler._rack_of   # every leaf's rack (the sampler is built over this tree)
        draw = sampler._draw
        chosen: list[str] = []
        used: list[str] = []
        while scope is not None:
            bookie = draw(scope, rng)
            if bookie in exclude:
                break
            if steps is not None:
                if counted is None:
                    ex = full = 0
                elif chosen:
                    ex, full = counted.outside(used)
                else:
                    ex, full = counted.outside(()) if scope_name == ROOT else counted.within(scope_name)
                steps.append({"step": POSITIONS[len(chosen)],
                              "scope": SCOPE_UNUSED if chosen else (SCOPE_CLUSTER if scope_name == ROOT
                                                                     else SCOPE_LOCAL),
                              "candidates": size - ex, "racks": racks_in - full})
            chosen.append(bookie)
            exclude.add(bookie)
            if len(chosen) == ensemble_size:
                break
            rack = rack_of[bookie]
            used.append(rack)
            if len(used) == 1:
                size, racks_in = sampler._count, len(ranges)
            start, end = ranges[rack]
            size -= end - start
            racks_in -= 1
            scope = sampler.scope_after(scope, rack, used)
        return chosen

    def _fast_adherence(self, chosen: list[str], write_quorum: int, ack_quorum: int) -> Adherence:
        """Adherence of an ensemble whose bookies are all in distinct racks (E >= WQ)."""
        if self._stabilized or self.settings.enforce_min_racks:
            # A stabilized tree holds departed (unknown) bookies; enforcement looks for the default rack.
            return self.is_ensemble_adhering(chosen, write_quorum, ack_quorum)
        return Adherence.MEETS_STRICT
