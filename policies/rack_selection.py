"""The rack-aware policy's selection primitives (spec bookkeeper-rackaware.md §4.5): a random
acceptable leaf of a scope, `selectRandom`, and the two `selectFromNetworkLocation` forms with their
fallbacks. These are also the topology-aware extension methods the region-aware policy calls on its
per-region sub-policies.

Selection is uniform among acceptable candidates (Java's shuffle-and-walk) or disk-weighted with the
median cap (§7.3), always from the injected `random.Random`. Candidate sequences come from the
rack-indexed topology (`rack_index.py`), so a pick costs what the scope's shape and the rejections
cost, not what the number of bookies costs.

`check_sizes` is the size check every public placement call runs first. `RackSelection` is a mixin
of `RackawarePolicyImpl`; the host provides `tick` (the clock read of a public call) and
`enforce_durability`. The `SCOPE_*` and `STEP_*` names are the `scope` and `step` values of the
provenance steps (`provenance.py`) every rack-aware module records.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from .coverage import NO_CONSTRAINTS, CoverageEnsemble
from .errors import NotEnoughBookiesError
from .location import ROOT
from .rack_index import RackIndexes
from .selection import WeightedSelector, lazy_shuffle, pick_uniform, pick_uniform_view
from .topology import LeafView

# The `scope` and `step` names of the provenance steps (policies/provenance.py).
SCOPE_CLUSTER = "cluster"
SCOPE_LOCAL = "local rack"
SCOPE_UNUSED = "racks not used so far"
SCOPE_FALLBACK = "cluster (fallback)"
SCOPE_RANDOM = "cluster (random, rack rule ignored)"
SCOPE_SAME_RACK = "rack of the replaced bookie"
SCOPE_UNUSED_BY_ENSEMBLE = "racks unused by the ensemble"
STEP_ENSEMBLE = "ensemble"
STEP_REPLACEMENT = "replacement"
STEP_RELOCATION = "relocation"


class Predicate(Protocol):
    """BookKeeper's `Predicate<BookieNode>`: may `candidate` join `ensemble`?"""

    def apply(self, candidate: str, ensemble: object) -> bool: ...


class Ensemble(Protocol):
    """BookKeeper's `Ensemble<BookieNode>`: records a chosen bookie; False when it refuses it."""

    def add_node(self, bookie: str) -> bool: ...


def check_sizes(ensemble_size: int, write_quorum: int, ack_quorum: int) -> None:
    """Raise ValueError naming the first size that is not a non-negative integer."""
    if type(ensemble_size) is int and type(write_quorum) is int and type(ack_quorum) is int and (
            ensemble_size >= 0 and write_quorum >= 0 and ack_quorum >= 0):
        return
    for name, value in (("ensemble_size", ensemble_size), ("write_quorum", write_quorum),
                        ("ack_quorum", ack_quorum)):
        if not isinstance(value, int) or value < 0:
            raise ValueError(f"{name}: expected a non-negative integer, got {value!r}")


class _RegionRefused(Exception):
    """Raised from inside a pick's walk when the region-level predicate refuses the region of every
    candidate, to end the walk (see `_region_guard`)."""


def _region_guard(accept: Callable[[str], bool], predicate: Predicate | None) -> Callable[[str], bool]:
    """`accept`, raising `_RegionRefused` at a refusal when the outer (region-level) coverage of
    `predicate` refuses the refused candidate's region for the position being filled.

    A region's sub-policy picks among bookies of its own region, and the region-level write sets
    judge regions only: once they refuse the region, they refuse every candidate, and walking (and
    drawing for) each bookie of the region only to refuse it costs O(bookies) per position, every
    position of every request while, for example, the durability rule cannot be met in the regions
    left. Checked once per position of the outer ensemble, and only after a refusal, so picks that
    succeed at once pay nothing.
    """
    outer = predicate.parent_predicate if type(predicate) is CoverageEnsemble else None
    if type(outer) is not CoverageEnsemble:
        return accept
    checked_at = -1

    def guarded(bookie: str) -> bool:
        nonlocal checked_at
        if accept(bookie):
            return True
        position = len(outer.chosen)
        if position != checked_at:
            checked_at = position
            if outer.refuses_location(outer.locate(bookie)):
                raise _RegionRefused
        return False
    return guarded


def _describe_scope(scope: str) -> str:
    if scope == ROOT:
        return "the whole cluster"
    if scope.startswith("~"):
        racks = [s for s in scope[1:].split(",") if s]
        return "the cluster outside " + ", ".join(racks) if racks else "an empty scope"
    return scope


class RackSelection(RackIndexes):
    """Selection primitives over the host's topology and indexes (§4.5)."""

    enforce_durability: bool

    def pick_leaf(self, key: Any, leaves: Sequence[str], exclude: set[str], predicate: Predicate | None,
                  ensemble: Any, rng: random.Random) -> str | None:
        """A random acceptable leaf of a scope (uniform, or by capped disk weight, §4.5, §7.4), or None.

        `key` names the scope (ROOT, a rack, a tuple of racks to avoid, or a scope string) and `leaves`
        are its leaves. A leaf is acceptable when it is not in `exclude` and `predicate` (if any)
        accepts it for `ensemble`. Nothing is recorded: neither `exclude` nor `ensemble` changes.
        """
        if predicate is None:
            if not self.settings.disk_weighted:
                if type(leaves) is LeafView:
                    # `pick_uniform(rng, leaves, accept)` without the closure: the same draws.
                    return pick_uniform_view(rng, leaves, exclude) if len(leaves) else None
            elif type(key) is str and key in self._index()[2]:
                # `_weighted_pick` of one rack, without the closure: the same draws.
                sampler = self.rack_sampler()
                return sampler.pick_excluding(sampler.scope_rack(key), rng, exclude)

            def accept(bookie: str) -> bool:
                return bookie not in exclude
        else:
            if (type(predicate) is CoverageEnsemble and not predicate.min_durability
                    and self.topology.num_racks < min(predicate.write_quorum, predicate.min_racks)
                    and not self._some_rack_accepted(key, exclude, predicate, ensemble)):
                return None
            apply = predicate.apply

            def accept(bookie: str) -> bool:
                return bookie not in exclude and apply(bookie, ensemble)
            accept = _region_guard(accept, predicate)
        try:
            if not self.settings.disk_weighted:
                return pick_uniform(rng, leaves, accept)
            # Java raises at once when every leaf is excluded; the pick returns None then, same outcome.
            return self._weighted_pick(key, leaves, rng, accept)
        except _RegionRefused:
            return None

    def _some_rack_accepted(self, key: Any, exclude: set[str], coverage: CoverageEnsemble, ensemble: Any) -> bool:
        """Whether `coverage` accepts a bookie of some rack of the scope `key` (a rack, the root, or a
        tuple of racks to avoid); asked where every rack may be refused: fewer racks than a write set
        needs, as during a rack outage.

        The rack rule sees racks only, and a parent (region-level) predicate sees the region every
        bookie of this policy shares, so one bookie per rack, not excluded nor already chosen, answers
        for its rack. When no rack is accepted the pick is refused without walking, and drawing for,
        every bookie of the scope (O(bookies) per position, every position of every request while
        the outage lasts). Cost: O(racks + excluded bookies of those racks).
        """
        racks = self.topology.racks()
        if type(key) is tuple:
            avoid = set(key)
            racks = [rack for rack in racks if rack not in avoid]
        elif key != ROOT:
            racks = [rack for rack in racks if rack == key or rack.startswith(key + "/")]
        for rack in racks:
            for bookie in self.topology.bookies_in(rack):
                if bookie not in exclude and bookie not in coverage:
                    if coverage.apply(bookie, ensemble):
                        return True
                    break
        return False

    def _record(self, bookie: str, exclude: set[str], ensemble: Any) -> str:
        if ensemble.add_node(bookie):
            exclude.add(bookie)
        return bookie

    def select_random_from_rack(self, scope: str, exclude: set[str], predicate: Predicate | None,
                                ensemble: Any, rng: random.Random) -> str:
        """A random leaf of `scope` that is not excluded and that `predicate` accepts (§4.5).

        The leaf is offered to `ensemble.add_node`; when that accepts it, it is added to `exclude`.
        The leaf is returned either way (as in Java).

        Raises:
            NotEnoughBookiesError: no acceptable leaf in the scope.
        """
        ensemble = NO_CONSTRAINTS if ensemble is None else ensemble
        chosen = self.pick_leaf(scope, self.topology.leaves(scope), exclude, predicate, ensemble, rng)
        if chosen is None:
            raise NotEnoughBookiesError(f"no eligible bookie in {_describe_scope(scope)}")
        return self._record(chosen, exclude, ensemble)

    def select_random(self, n: int, exclude: set[str], predicate: Predicate | None, ensemble: Any,
                      rng: random.Random) -> list[str]:
        """`n` random known bookies (§4.5 `selectRandom`); see `select_random_internal`."""
        return self.select_random_internal(None, n, exclude, predicate, ensemble, rng)

    def select_random_internal(self, population: Sequence[str] | None, n: int, exclude: set[str],
                               predicate: Predicate | None, ensemble: Any, rng: random.Random,
                               accept: Callable[[str], bool] | None = None) -> list[str]:
        """`n` random members of `population` (default: all known bookies), §4.5.

        Skips excluded members, and members the predicate rejects only when `enforce_durability`
        is on (otherwise the predicate is ignored, as in Java). A member counts when
        `ensemble.add_node` accepts it; it is then added to `exclude`. `accept` is an extra filter
        (used by the excluded-racks form instead of materialising an exclusion list).

        Raises:
            NotEnoughBookiesError: fewer than `n` members could be chosen.
        """
        ensemble = NO_CONSTRAINTS if ensemble is None else ensemble
        shared = population is None
        if shared:
            population = self.known_sorted()
        check: Callable[[str], bool] | None = None
        if self.enforce_durability and predicate is not None:
            apply = predicate.apply
            check = _region_guard(lambda bookie: apply(bookie, ensemble), predicate)
        chosen: list[str] = []
        if n <= 0:
            return chosen
        try:
            self._select_into(chosen, population, shared, n, exclude, check, ensemble, rng, accept)
        except _RegionRefused:
            pass
        if len(chosen) < n:
            raise NotEnoughBookiesError(
                f"need {n} bookie(s) but only {len(chosen)} eligible bookie(s) could be chosen")
        return chosen

    def _select_into(self, chosen: list[str], population: Sequence[str], shared: bool, n: int, exclude: set[str],
                     check: Callable[[str], bool] | None, ensemble: Any, rng: random.Random,
                     accept: Callable[[str], bool] | None) -> None:
        """The walk of `select_random_internal`: appends to `chosen` until it holds `n` or nothing is left."""
        if self.settings.disk_weighted:
            if shared and accept is None:
                known = self.known
                available = len(population) - sum(1 for b in exclude if b in known)
            else:
                available = sum(1 for b in population if b not in exclude and (accept is None or accept(b)))
            if available < n:
                raise NotEnoughBookiesError(
                    f"need {n} bookie(s) but only {available} eligible bookie(s) remain after exclusions")
            # The shared selector is the one over all known bookies; any other population gets its own.
            selector = self.cluster_selector() if population is self.known_sorted() else WeightedSelector(
                population, self._weights, self.settings.max_weight_multiple)
            refused: set[str] = set()

            def acceptable(bookie: str) -> bool:
                return (bookie not in exclude and bookie not in refused
                        and (accept is None or accept(bookie))
                        and (check is None or check(bookie)))
            while len(chosen) < n:
                bookie = selector.pick(rng, acceptable)
                if bookie is None:
                    break
                if ensemble.add_node(bookie):
                    exclude.add(bookie)
                    chosen.append(bookie)
                else:
                    refused.add(bookie)
        else:
            for bookie in lazy_shuffle(rng, population):
                if bookie in exclude or (accept is not None and not accept(bookie)):
                    continue
                if check is not None and not check(bookie):
                    continue
                if ensemble.add_node(bookie):
                    exclude.add(bookie)
                    chosen.append(bookie)
                    if len(chosen) == n:
                        break

    def select_from_network_location(self, scope: str, exclude: set[str], predicate: Predicate | None,
                                     ensemble: Any, fallback_to_random: bool, rng: random.Random, *,
                                     fallbacks: list[str] | None = None) -> str:
        """A bookie of `scope`; else, if allowed, a random known bookie (§4.5, first form).

        Raises:
            NotEnoughBookiesError: nothing in the scope and no fallback (or the fallback failed).
        """
        self.tick()
        return self._select_from_location(scope, exclude, predicate, ensemble, fallback_to_random, rng,
                                          fallbacks)

    def _select_from_location(self, scope: str, exclude: set[str], predicate: Predicate | None, ensemble: Any,
                              fallback_to_random: bool, rng: random.Random, fallbacks: list[str] | None,
                              steps: list[dict[str, Any]] | None = None, step: str = "") -> str:
        """`select_from_network_location` without the clock tick. With `steps`, the caller has recorded
        the `scope` step last; it is marked failed on a fallback, which gets a step of its own."""
        try:
            return self.select_random_from_rack(scope, exclude, predicate, ensemble, rng)
        except NotEnoughBookiesError:
            if steps:
                steps[-1]["failed"] = True
            if not fallback_to_random:
                raise
        if fallbacks is not None:
            fallbacks.append(f"no eligible bookie in {_describe_scope(scope)} met the placement rule; "
                             "chose a random bookie of the cluster")
        return self._random_last_resort(step, exclude, predicate, ensemble, rng, steps)

    def _random_last_resort(self, step: str, exclude: set[str], predicate: Predicate | None, ensemble: Any,
                            rng: random.Random, steps: list[dict[str, Any]] | None) -> str:
        """The random fallback, a known bookie outside `exclude`; with `steps`, recorded as a step of
        its own with its candidate count, marked failed when nothing is left."""
        if steps is None:
            return self.select_random(1, exclude, predicate, ensemble, rng)[0]
        known = self.known
        steps.append({"step": step, "scope": SCOPE_RANDOM,
                      "candidates": len(known) - sum(1 for b in exclude if b in known)})
        try:
            return self.select_random(1, exclude, predicate, ensemble, rng)[0]
        except NotEnoughBookiesError:
            steps[-1]["failed"] = True
            raise

    def select_from_network_location_excluding_racks(
            self, scope: str | None, exclude_racks: Iterable[str], exclude: set[str],
            predicate: Predicate | None, ensemble: Any, fallback_to_random: bool, rng: random.Random, *,
            fallbacks: list[str] | None = None) -> str:
        """A bookie of `scope`; else one in a rack not in `exclude_racks`; else (if allowed) any (§4.5).

        `scope=None` is Java's "any rack but these" form. The rack-excluding step never adds the chosen
        bookie to `exclude` (Java extends a private copy); the other steps do.

        Raises:
            NotEnoughBookiesError: no step found a bookie.
        """
        self.tick()
        return self._select_excluding_racks(scope, exclude_racks, exclude, predicate, ensemble,
                                            fallback_to_random, rng, fallbacks)

    def _select_excluding_racks(self, scope: str | None, exclude_racks: Iterable[str], exclude: set[str],
                                predicate: Predicate | None, ensemble: Any, fallback_to_random: bool,
                                rng: random.Random, fallbacks: list[str] | None,
                                steps: list[dict[str, Any]] | None = None) -> str:
        """`select_from_network_location_excluding_racks` without the clock tick; with `steps`, one
        `replacement` step per scope tried (same rack, unused racks, random), counted in O(excluded + racks)."""
        ensemble = NO_CONSTRAINTS if ensemble is None else ensemble
        record = steps is not None
        if scope is not None:
            if record:
                in_rack = len(self.topology.bookies_in(scope))
                rack_of = self.topology.rack_map
                for b in exclude:
                    if rack_of.get(b) == scope:
                        in_rack -= 1
                steps.append({"step": STEP_REPLACEMENT, "scope": SCOPE_SAME_RACK, "candidates": in_rack,
                              "racks": int(in_rack > 0)})
            try:
                return self.select_random_from_rack(scope, exclude, predicate, ensemble, rng)
            except NotEnoughBookiesError:
                if steps:
                    steps[-1]["failed"] = True
                if fallbacks is not None:
                    fallbacks.append(f"no eligible bookie in {_describe_scope(scope)}; "
                                     "chose from racks not used by the ensemble")
        racks = sorted(set(exclude_racks))
        known = self.known
        # Known bookies outside the excluded racks: leaves outside them that are known (the tree of a
        # stabilized instance also holds departed bookies, which this form never picks).
        if self.settings.disk_weighted:
            rack_set = set(racks)
            population: Sequence[str] = self.known_sorted()

            def outside(bookie: str) -> bool:
                return known[bookie] not in rack_set
        else:
            # Java compares locations exactly: only strings that are racks of the tree exclude anything.
            ranges = self._index()[2]
            present = [rack for rack in racks if rack in ranges]
            population = self.topology.leaves_excluding(present) if present else self.topology.leaves(ROOT)

            def outside(bookie: str) -> bool:
                return bookie in known
        private = set(exclude)
        if record:
            per_rack = self.topology.rack_counts(exclude)
            unused = set(racks)
            eligible = eligible_racks = 0
            for rack, (start, end) in self._index()[2].items():
                if rack not in unused:
                    left = end - start - per_rack.get(rack, 0)
                    eligible += left
                    eligible_racks += left > 0
            steps.append({"step": STEP_REPLACEMENT, "scope": SCOPE_UNUSED_BY_ENSEMBLE, "candidates": eligible,
                          "racks": eligible_racks})
        try:
            return self.select_random_internal(population, 1, private, predicate, ensemble, rng, outside)[0]
        except NotEnoughBookiesError:
            if steps:
                steps[-1]["failed"] = True
            if not fallback_to_random:
                raise NotEnoughBookiesError(
                    f"no eligible bookie outside the racks {', '.join(racks) or '(none)'} "
                    "and the random fallback is off") from None
        if fallbacks is not None:
            fallbacks.append("no eligible bookie in a rack unused by the ensemble; chose a random bookie "
                             "of the cluster")
        return self._random_last_resort(STEP_REPLACEMENT, exclude, predicate, ensemble, rng, steps)
