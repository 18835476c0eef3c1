"""BookKeeper's rack-aware algorithm on one topology (`RackawareEnsemblePlacementPolicyImpl`).

Spec: bookkeeper-rackaware.md §2 (membership), §4 (new ensemble), §5.1 (replace bookie), §8 (read
ordering; the ordering itself lives in `read_order.py`).

`RackawarePolicyImpl` is also the per-region engine of the region-aware policy, which calls the
topology-aware extension methods (`new_ensemble_internal`, `select_from_network_location`,
`select_from_network_location_excluding_racks`, `select_random`, `default_rack_bookies`). Those
methods take an `exclude` set owned by the caller's algorithm and extend it with chosen bookies
exactly where Java does (never a public caller's object).

This module keeps membership, the general placement loop of §4.4, the replacement of §5.1, read
ordering and snapshots. The class composes the parts that live in their own modules:

* `rack_index.py`      the leaf and selector indexes (disk weights, §7.4);
* `rack_selection.py`  the selection primitives of §4.5;
* `rack_fast.py`       the fast placement paths of §4.4 (every position in a rack of its own);
* `rack_adherence.py`  adherence (§6), replace-to-adhere (§5.2) and relaxation fixes.

The public policy with its stabilized secondary instance (§2.4) is `rackaware.RackawarePolicy`.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Collection, Iterable, Mapping, MutableMapping, Sequence
from typing import Any

from .api import Adherence, HealthInfo, PlacementResult
from .base import TopologyAwarePolicy, replace_in_ensemble
from .coverage import NO_CONSTRAINTS, CoverageEnsemble
from .errors import NotEnoughBookiesError
from .location import ROOT
from .provenance import POSITIONS, RULE_RACKS, failed, unavailable
from .provenance import position as position_name
from .rack_adherence import RackAdherence
from .rack_fast import RackFastPaths
from .rack_index import ExcludedPerRack
from .rack_selection import (
    SCOPE_CLUSTER,
    SCOPE_FALLBACK,
    SCOPE_LOCAL,
    SCOPE_RANDOM,
    SCOPE_UNUSED,
    STEP_ENSEMBLE,
    check_sizes,
)
from .read_order import SlowBookieCache, add_missing_indices, reorder_read_sequence
from .resolver import LocationResolver
from .settings import PlacementSettings
from .stabilize import StabilizedTopology
from .topology import NetworkTopology

Clock = Callable[[], float]


class RackawarePolicyImpl(RackFastPaths, RackAdherence, TopologyAwarePolicy):
    """The rack-aware algorithm on one topology (spec §4-§8).

    Args:
        settings: parsed configuration (`minNumRacksPerWriteQuorum`, enforcement, weights, ...).
        resolver: bookie -> location.
        clock: event-time seconds; read at most once per public call (stabilization, slow bookies).
        features: runtime switches (unused by rack-aware placement itself).
        default_location: the default rack `D` (`/default-rack` unless given).
        enforce_durability: the constructor flag of §4.5: random fallbacks honour the predicate.
        stabilize_period_s: > 0 makes this instance's own topology a stabilized one (Java's bare
            `RackawareEnsemblePlacementPolicyImpl` initialised with a period).
    """

    name = "rackaware"
    enforced_skips_default_rack = True      # spec §4.3

    def __init__(self, settings: PlacementSettings, resolver: LocationResolver, clock: Clock,
                 features: MutableMapping[str, int], default_location: str | None = None,
                 enforce_durability: bool = False, stabilize_period_s: float = 0) -> None:
        self._invalidate()
        super().__init__(settings, resolver, clock, features, default_location)
        self.enforce_durability = enforce_durability
        self.stabilize_period_s = stabilize_period_s
        self._stabilized = stabilize_period_s > 0
        if self._stabilized:
            self.topology = StabilizedTopology(stabilize_period_s)
        self.slow_bookies = SlowBookieCache(settings.failure_history_expiration_ms / 1000.0)

    # -- clock -------------------------------------------------------------------------------------

    def tick(self) -> None:
        """Read the clock once for the call under way and expire stabilized departures whose delay is over.

        Every public call does this first. A policy that drives this one as a sub-policy (the
        region-aware policy) calls it before handing over membership changes, so that departures are
        stamped with the current event time, and before a step it decides without calling in.
        """
        if self._stabilized and self.topology.advance(self.clock()):  # type: ignore[attr-defined]
            self._invalidate()

    # -- membership --------------------------------------------------------------------------------

    def on_cluster_changed(self, writable: Iterable[str], readonly: Iterable[str], *,
                           changed: Collection[str] | None = None) -> set[str]:
        """Spec §2.2: apply a membership snapshot; return the dead bookies (left, not read-only)."""
        self.tick()
        return super().on_cluster_changed(writable, readonly, changed=changed)

    def handle_bookies_that_left(self, bookies: list[str]) -> None:
        super().handle_bookies_that_left(bookies)
        self._invalidate()

    def handle_bookies_that_joined(self, bookies: list[str]) -> None:
        super().handle_bookies_that_joined(bookies)
        self._invalidate()

    def on_bookie_rack_change(self, bookies: Iterable[str]) -> None:
        """Spec §2.5: re-resolve known bookies and move them in the topology."""
        self.tick()
        super().on_bookie_rack_change(bookies)
        self._invalidate()

    def with_default_rack(self, rack: str) -> None:
        """Change the default rack `D` (Java `withDefaultRack`); later resolutions use it."""
        if not rack:
            raise ValueError("default rack: expected a network location such as /default-rack, got "
                             f"{rack!r}")
        self.default_location = rack

    def pending_leaves(self) -> dict[str, float]:
        """Departed bookies whose leaf waits out the stabilization delay: bookie -> expiry time (s)."""
        self.tick()
        if self._stabilized:
            return self.topology.expiries()  # type: ignore[attr-defined]
        return {}

    # -- locations -----------------------------------------------------------------------------------

    def _locate(self, bookie: str) -> str:
        """A bookie's rack: its leaf in the tree, else its known location, else a fresh resolution."""
        rack = self.topology.rack_of(bookie)
        return rack if rack is not None else self.location_of(bookie)

    def first_position_scope(self) -> str:
        """The scope position 0 of a new ensemble draws from (§4.4): the local node's rack, or the whole
        cluster (ROOT) when there is no local node, it is ignored, or it is the default rack."""
        settings = self.settings
        local = settings.local_node_location
        if local is None or settings.ignore_local_node or local == self.default_location:
            return ROOT
        return local

    def default_rack_bookies(self) -> set[str]:
        """Bookies (tree leaves) under the default location `D`."""
        return set(self.topology.leaves(self.default_location))

    def _default_rack_exclusion(self, exclude: set[str], explain: dict[str, list[str]]) -> None:
        """§4.3: under enforcement, add every bookie of the default rack to `exclude` (in place)."""
        if self.settings.enforce_min_racks:
            defaults = self.topology.leaves(self.default_location)
            if len(defaults):
                exclude.update(defaults)
                explain["default_rack"] = sorted(defaults)

    # -- new ensemble (§4) -------------------------------------------------------------------------

    def new_ensemble(self, ensemble_size: int, write_quorum: int, ack_quorum: int,
                     custom_metadata: Mapping[str, bytes] | None = None, exclude: Iterable[str] | None = (), *,
                     rng: random.Random | None = None) -> PlacementResult:
        """A new ensemble (spec §4.2-§4.4). `custom_metadata` is ignored, as in BookKeeper.

        `explain` has `policy`, `steps` (one per position, plus each fallback tried), `fallbacks`,
        `excluded` and, when a position could not take a rack of its own, `relaxed`.

        Raises:
            ValueError: a negative size.
            NotEnoughBookiesError: the request cannot be met; the message names the constraint and
                `.explain` holds the steps reached and the constraint.
        """
        if exclude is None:
            exclude = ()
        self.tick()
        check_sizes(ensemble_size, write_quorum, ack_quorum)
        if rng is None:
            rng = random.Random(0)
        excluded = set(exclude)
        explain_excluded: dict[str, list[str]] = {"caller": sorted(excluded)} if excluded else {}
        self._default_rack_exclusion(excluded, explain_excluded)
        if self.readonly or self.join_failures:
            unavailable(self, explain_excluded)
        fallbacks: list[str] = []
        steps: list[dict[str, Any]] = []
        if ensemble_size > len(POSITIONS):
            position_name(ensemble_size)
        try:
            ensemble, adherence = self._place(ensemble_size, write_quorum, ack_quorum, excluded, None, None, rng,
                                              fallbacks, steps)
        except NotEnoughBookiesError as exc:
            failed(exc, {"policy": self.name, "steps": steps, "fallbacks": fallbacks, "excluded": explain_excluded})
            raise
        explain: dict[str, Any] = {"policy": self.name, "steps": steps, "fallbacks": fallbacks,
                                   "excluded": explain_excluded}
        if fallbacks:
            spanned = len({self._locate(b) for b in ensemble})
            if spanned < len(ensemble):
                explain["relaxed"] = [{"rule": RULE_RACKS, "spanned": spanned}]
        return PlacementResult(ensemble, adherence, None, explain)

    def new_ensemble_internal(self, ensemble_size: int, write_quorum: int, ack_quorum: int,
                              exclude: Iterable[str], parent: Any, parent_predicate: Any,
                              rng: random.Random, *, fallbacks: list[str] | None = None) -> PlacementResult:
        """The topology-aware extension form (§4.2): no default-rack exclusion; the local coverage
        ensemble gets `parent` / `parent_predicate`. `exclude` is copied (Java converts it to a new set),
        but picks are recorded in `parent` through the coverage ensemble, even when the call fails.
        No `steps` are recorded (the region-aware caller counts its own).

        Raises:
            NotEnoughBookiesError: the ensemble cannot be completed.
        """
        self.tick()
        check_sizes(ensemble_size, write_quorum, ack_quorum)
        notes: list[str] = [] if fallbacks is None else fallbacks
        ensemble, adherence = self._place(ensemble_size, write_quorum, ack_quorum, set(exclude), parent,
                                          parent_predicate, rng, notes)
        return PlacementResult(ensemble, adherence, None, {"policy": self.name, "fallbacks": notes})

    def _place(self, ensemble_size: int, write_quorum: int, ack_quorum: int, exclude: set[str],
               parent: Any, parent_predicate: Any, rng: random.Random,
               fallbacks: list[str], steps: list[dict[str, Any]] | None = None) -> tuple[list[str], Adherence]:
        """`newEnsembleInternal` (§4.4) on a private exclusion set; returns (ensemble, adherence).

        With `steps`, one record per position (and per fallback) is appended; the fast path records
        its positions from the counts it already has, so the common case costs one small dict per position.
        """
        min_racks = min(write_quorum, self.settings.min_racks_per_write_quorum)
        counted: ExcludedPerRack | None = None
        if (parent is None and parent_predicate is None and ensemble_size >= write_quorum and ensemble_size > 0
                and self.topology.num_racks >= 2):
            if steps is not None and exclude:
                counted = ExcludedPerRack(self.topology, self._index()[2], exclude)
            if self.settings.disk_weighted:
                chosen = self._place_fast_weighted(ensemble_size, exclude, rng, steps, counted)
            else:
                chosen = self._place_fast(ensemble_size, exclude, rng, steps, counted)
            if len(chosen) == ensemble_size:
                return chosen, self._fast_adherence(chosen, write_quorum, ack_quorum)
        else:
            chosen = []
        if steps is not None:
            if counted is None:
                counted = ExcludedPerRack(self.topology, self._index()[2], exclude)
            else:
                for bookie in chosen:
                    counted.add(self.topology.rack_of(bookie))
            if len(chosen) == ensemble_size - 1 and min_racks < write_quorum:
                placed = self._place_beyond_racks(ensemble_size, write_quorum, ack_quorum, chosen, exclude, rng,
                                                  fallbacks, steps, counted)
                if placed is not None:
                    return placed
        coverage = CoverageEnsemble(ensemble_size, write_quorum, ack_quorum, min_racks, self._locate,
                                    parent, parent_predicate)
        for bookie in chosen:
            coverage.add_node(bookie)
        racks = [self._locate(b) for b in chosen]
        try:
            return self._place_positions(ensemble_size, write_quorum, coverage, min_racks, exclude, rng, fallbacks,
                                         len(chosen), racks[:-1], racks[-1] if racks else "", steps, counted)
        except NotEnoughBookiesError as exc:
            # Picks were added to `exclude`; the caller's exclusions are the rest.
            excluded = exclude - set(coverage.chosen)
            message, info = self._why_not_enough(ensemble_size, write_quorum, excluded, exc)
            raise NotEnoughBookiesError(message, explain=info) from exc

    def _place_positions(self, ensemble_size: int, write_quorum: int, coverage: CoverageEnsemble,
                         min_racks: int, exclude: set[str], rng: random.Random, fallbacks: list[str],
                         start: int = 0, avoided: list[str] | None = None, prev_rack: str = "",
                         steps: list[dict[str, Any]] | None = None,
                         counted: ExcludedPerRack | None = None) -> tuple[list[str], Adherence]:
        """The general loop of §4.4 from position `start`. With `steps` (then `counted` holds every
        exclusion so far), each position records its scope's candidates, marked failed when no
        candidate met the rack coverage, followed by the fallback scope it tried."""
        topology = self.topology
        enforce = self.settings.enforce_min_racks
        record = steps is not None and counted is not None
        racks_total = topology.num_racks
        if racks_total < 2:
            known = self.known
            eligible = len(known) - sum(1 for b in exclude if b in known) if record else 0
            if enforce and min_racks > 1:
                if record:
                    steps.append({"step": STEP_ENSEMBLE, "scope": SCOPE_CLUSTER, "candidates": eligible,
                                  "racks": racks_total, "failed": True})
                raise NotEnoughBookiesError("fewer than 2 racks")
            fallbacks.append("fewer than 2 racks: random selection")
            if record:
                steps.append({"step": STEP_ENSEMBLE, "scope": SCOPE_RANDOM, "candidates": eligible,
                              "racks": racks_total})
            self.select_random(ensemble_size, exclude, None, coverage, rng)
            # BK quirk (spec bookkeeper-rackaware.md §4.4, App. A #3): FAIL even when WQ = 1 or m = 1.
            return coverage.to_list(), Adherence.FAIL
        scope = self.first_position_scope()
        ranges = self._index()[2] if record else None
        # Racks avoided since the last reset ("~" scope); None: the scope is not a "~" scope.
        avoid: list[str] | None = list(avoided) if start > 0 and avoided is not None else None
        for position in range(start, ensemble_size):
            if position == 0:
                leaves = topology.leaves(scope)
                key: Any = scope
                if record:
                    if scope == ROOT:
                        ex, full = counted.outside(())
                        where, racks_in = SCOPE_CLUSTER, racks_total
                    else:
                        ex, full = counted.within(scope)
                        where, racks_in = SCOPE_LOCAL, int(scope in ranges)
            else:
                if avoid is None:
                    avoid = [prev_rack]
                else:
                    avoid.append(prev_rack)
                leaves = topology.leaves_excluding(avoid)
                key = tuple(avoid)
                if record:
                    ex, full = counted.outside(avoid)
                    where = SCOPE_UNUSED
                    racks_in = racks_total - sum(1 for rack in set(avoid) if rack in ranges)
            if record:
                name = POSITIONS[position]
                steps.append({"step": name, "scope": where, "candidates": len(leaves) - ex,
                              "racks": racks_in - full})
                before = len(exclude)
            chosen = self.pick_leaf(key, leaves, exclude, coverage, coverage, rng)
            if chosen is not None:
                self._record(chosen, exclude, coverage)
            else:
                if record:
                    steps[-1]["failed"] = True
                if position == 0 and scope == ROOT:
                    raise NotEnoughBookiesError("no eligible bookie in the cluster")
                if position == 0:
                    fallbacks.append(f"position 0: no eligible bookie in the local rack {scope}; "
                                     "chose from the whole cluster")
                else:
                    fallbacks.append(f"position {position}: no bookie outside the racks used so far met the "
                                     "rack coverage; chose from the whole cluster")
                avoid = None
                if record:
                    ex, full = counted.outside(())
                    steps.append({"step": name, "scope": SCOPE_FALLBACK, "candidates": len(topology) - ex,
                                  "racks": racks_total - full})
                chosen = self._select_from_location(ROOT, exclude, coverage, coverage,
                                                    (not enforce) or position == 0, rng, fallbacks,
                                                    steps if record else None, name if record else "")
            if record and len(exclude) > before:
                counted.add(topology.rack_of(chosen))
            prev_rack = self._locate(chosen)
        result = coverage.to_list()
        if len(result) != ensemble_size:
            raise NotEnoughBookiesError(f"only {len(result)} of {ensemble_size} positions could be filled")
        return result, self.is_ensemble_adhering(result, write_quorum, coverage.ack_quorum)

    def _why_not_enough(self, ensemble_size: int, write_quorum: int, exclude: set[str],
                        cause: Exception) -> tuple[str, dict[str, Any]]:
        """A message naming the constraint that failed, and the `constraint` / `eligible` entries of the
        error's explanation (computed on the failure path only)."""
        settings = self.settings
        min_racks = min(write_quorum, settings.min_racks_per_write_quorum)
        eligible = [b for b in self.known_sorted() if b not in exclude]
        racks = sorted({self.known[b] for b in eligible})
        shown = ", ".join(racks[:8]) + (", ..." if len(racks) > 8 else "")
        where = (f"{len(eligible)} eligible bookie(s) (writable, not excluded) in {len(racks)} rack(s)"
                 f"{' (' + shown + ')' if racks else ''} after excluding {len(exclude)} bookie(s)")
        request = f"ensemble_size={ensemble_size}, write_quorum={write_quorum}"
        info: dict[str, Any] = {"eligible": {"bookies": len(eligible), "racks": len(racks)}}
        if len(eligible) < ensemble_size:
            info["constraint"] = (f"ensemble_size={ensemble_size} needs {ensemble_size} eligible bookies; "
                                  f"{len(eligible)} eligible")
            return f"cannot place {request}: only {where}; add bookies or exclude fewer", info
        if settings.enforce_min_racks and min_racks > 1:
            info["constraint"] = (f"minNumRacksPerWriteQuorum={settings.min_racks_per_write_quorum} enforced: each "
                                  f"write set needs {min_racks} racks; eligible bookies are in {len(racks)} rack(s)")
            return (f"cannot place {request} with minNumRacksPerWriteQuorum={settings.min_racks_per_write_quorum} "
                    f"enforced: {cause}; {where}; add racks or lower the setting"), info
        info["constraint"] = f"rack coverage: {cause}"
        return f"cannot place {request}: {cause}; {where}", info

    # -- replace bookie (§5.1) ---------------------------------------------------------------------

    def replace_bookie(self, ensemble_size: int, write_quorum: int, ack_quorum: int,
                       custom_metadata: Mapping[str, bytes] | None, current_ensemble: Sequence[str],
                       bookie_to_replace: str, exclude: Iterable[str] | None = (), *,
                       rng: random.Random | None = None) -> PlacementResult:
        """A replacement for `bookie_to_replace`: same rack, else an unused rack, else any (§5.1).

        Raises:
            ValueError: `bookie_to_replace` is not in a non-empty `current_ensemble`.
            NotEnoughBookiesError: no replacement (with enforcement: no same-rack or unused-rack bookie).
        """
        if exclude is None:
            exclude = ()
        self.tick()
        check_sizes(ensemble_size, write_quorum, ack_quorum)
        if rng is None:
            rng = random.Random(0)
        current = list(current_ensemble)
        fallbacks: list[str] = []
        steps: list[dict[str, Any]] = []
        explain_excluded: dict[str, list[str]] = {}
        # BK quirk not reproduced (spec App. A #7): Java adds to the caller's set; we work on a copy.
        excluded = set(exclude)
        if excluded:
            explain_excluded["caller"] = sorted(excluded)
        self._default_rack_exclusion(excluded, explain_excluded)
        if self.readonly or self.join_failures:
            unavailable(self, explain_excluded)
        others = [b for b in current if b != bookie_to_replace]
        if others:
            explain_excluded["ensemble"] = sorted(set(others))
        excluded.update(current)
        excluded.add(bookie_to_replace)
        rack_of = self.topology.rack_map     # `_locate`, with its tree lookup inline
        replaced_rack = rack_of.get(bookie_to_replace) or self._locate(bookie_to_replace)
        used_racks = {rack_of.get(b) or self._locate(b) for b in others}
        enforce = self.settings.enforce_min_racks
        explain: dict[str, Any] = {"policy": self.name, "steps": steps, "fallbacks": fallbacks,
                                   "excluded": explain_excluded}
        try:
            candidate = self._select_excluding_racks(replaced_rack, used_racks, excluded, None, NO_CONSTRAINTS,
                                                     not enforce, rng, fallbacks, steps)
        except NotEnoughBookiesError as exc:
            constraint = (f"enforceMinNumRacksPerWriteQuorum: the replacement must be in rack {replaced_rack} or in "
                          "a rack unused by the rest of the ensemble" if enforce else
                          "the replacement must be a writable bookie outside the ensemble and the exclusions")
            raise NotEnoughBookiesError(
                f"cannot replace {bookie_to_replace} (rack {replaced_rack}): no eligible bookie in its rack"
                + (" or in a rack unused by the rest of the ensemble "
                   "(enforceMinNumRacksPerWriteQuorum is on, so no random fallback)" if enforce else
                   " nor anywhere in the cluster")
                + f" after excluding {len(excluded)} bookie(s); add bookies or exclude fewer",
                explain={**explain, "constraint": constraint}) from exc
        ensemble = replace_in_ensemble(current, bookie_to_replace, candidate)
        adherence = self.is_ensemble_adhering(ensemble, write_quorum, ack_quorum)
        return PlacementResult(ensemble, adherence, candidate, explain)

    # -- read ordering (§8) ----------------------------------------------------------------------------

    def register_slow_bookie(self, bookie: str, entry_id: int) -> None:
        """Remember a slow bookie for `bookieFailureHistoryExpirationMSec` (§8.2); ignored when the
        pending-request threshold is on."""
        if self.settings.read_reorder_threshold_pending <= 0:
            now = self.clock()
            if len(self.slow_bookies) > 1024:
                self.slow_bookies.purge(now)
            self.slow_bookies.register(bookie, entry_id, now)

    def reorder_read_sequence(self, ensemble: Sequence[str], health: HealthInfo | None,
                              write_set: Iterable[int], *, rng: random.Random | None = None) -> list[int]:
        """Read order of a write set (§8.1); a new list, the argument is not modified."""
        return self._reorder(ensemble, health, write_set, rng)

    def reorder_read_lac_sequence(self, ensemble: Sequence[str], health: HealthInfo | None,
                                  write_set: Iterable[int], *, rng: random.Random | None = None) -> list[int]:
        """`reorder_read_sequence`, then every missing ensemble index, ascending (§8.3)."""
        return add_missing_indices(self._reorder(ensemble, health, write_set, rng), len(ensemble))

    def _reorder(self, ensemble: Sequence[str], health: HealthInfo | None, write_set: Iterable[int],
                 rng: random.Random | None) -> list[int]:
        health = health if health is not None else HealthInfo()
        now = self.clock()
        slow = self.slow_bookies
        settings = self.settings
        return reorder_read_sequence(
            ensemble, write_set,
            is_known=self.known.__contains__, is_readonly=self.readonly.__contains__,
            is_slow=lambda bookie: slow.contains(bookie, now),
            failure_of=health.failure_of, pending_of=health.pending_of,
            threshold_pending=settings.read_reorder_threshold_pending,
            random_reordering=settings.random_read_reordering, rng=rng)

    # -- snapshots and checks --------------------------------------------------------------------------

    def _fresh_topology(self) -> NetworkTopology:
        return StabilizedTopology(self.stabilize_period_s) if self._stabilized else NetworkTopology()

    def export_state(self) -> dict[str, Any]:
        """JSON-able state: membership, weights, slow bookies and (stabilized) pending departures."""
        self.tick()
        state = super().export_state()
        state["slow_bookies"] = self.slow_bookies.export()
        if self._stabilized:
            state["pending_leaves"] = self.topology.export_pending()  # type: ignore[attr-defined]
        return state

    def import_state(self, state: Mapping[str, Any]) -> None:
        """Restore what `export_state` produced, into a freshly created policy."""
        self.topology = self._fresh_topology()
        self.known = {}
        super().import_state(state)
        self.slow_bookies.restore(state.get("slow_bookies", {}))
        if self._stabilized:
            self.topology.import_pending(state.get("pending_leaves", {}))  # type: ignore[attr-defined]
        self._invalidate()

    def check_invariants(self) -> None:
        """Assert the membership and the topology agree (tests only; never on the hot path)."""
        self.topology.check_invariants()
        for bookie, rack in self.known.items():
            assert self.topology.rack_of(bookie) == rack, f"{bookie}: known at {rack}, tree says " \
                                                          f"{self.topology.rack_of(bookie)}"
        tree = self.topology.bookies()
        pending = set(getattr(self.topology, "pending", {}))
        in_tree = pending - set(getattr(self.topology, "set_aside", {}))   # set-aside leaves are out of it
        assert set(tree) == set(self.known) | in_tree, "tree leaves are not known or pending bookies"
        assert not (pending & set(self.known)), "a known bookie is pending departure"
        if self._known_sorted is not None:
            assert self._known_sorted == tuple(sorted(self.known))
