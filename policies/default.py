"""BookKeeper's default (random) placement policy (`DefaultEnsemblePlacementPolicy`).

Spec: bookkeeper-rackaware.md §2.3 (membership), §3 (placement), §7.3 (weights), §8 (read hooks).

No topology: every writable bookie is a candidate, chosen uniformly at random or, with
`diskWeightBasedPlacementEnabled`, in proportion to its free disk space (capped at
`bookieMaxMultipleForWeightBasedPlacement` x the median). Every ensemble "adheres" (MEETS_STRICT).
Locations are never resolved, so no bookie ever fails to join. It implements the whole
`PlacementPolicy` interface (`policies.api`): the location views answer "none" (`topology` and
`known_location` are None, `join_failures` stays empty), and rack info is only kept in the resolver.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Collection, Hashable, Iterable, Mapping, MutableMapping, Sequence
from typing import Any

from . import shares
from .api import Adherence, BookieInfo, HealthInfo, PlacementResult, RackEntries
from .base import replace_in_ensemble
from .errors import NotEnoughBookiesError, UnsupportedOperationError
from .location import DEFAULT_RACK
from .provenance import failed, unavailable
from .read_order import add_missing_indices
from .resolver import LocationResolver, RackInfo
from .selection import WeightedSelector, lazy_shuffle
from .settings import PlacementSettings

Clock = Callable[[], float]


class DefaultPolicy:
    """Random placement over the writable bookies (spec §3).

    Args:
        settings: parsed configuration (only the disk-weight keys matter).
        resolver: kept for rack info (an empty one when None); locations are never resolved.
        clock, features: accepted for a uniform constructor; unused.

    Attributes:
        known: the writable bookies (ids).
        readonly: the read-only bookies (only kept for snapshots; reads are never reordered).
        weights: bookie -> free disk bytes (weighted mode).
        join_failures: always empty (no bookie fails to join).
        topology: None (placement ignores locations).
    """

    name = "default"
    default_location = DEFAULT_RACK
    topology: None = None

    def __init__(self, settings: PlacementSettings, resolver: LocationResolver | None = None,
                 clock: Clock | None = None, features: MutableMapping[str, int] | None = None) -> None:
        self.settings = settings
        self.resolver = resolver if resolver is not None else LocationResolver()
        self.clock = clock
        self.features = features if features is not None else {}
        self.known: set[str] = set()
        self.readonly: frozenset[str] = frozenset()
        self.weights: dict[str, int] = {}
        self.join_failures: dict[str, str] = {}
        self._sorted: tuple[str, ...] | None = None
        self._selector: WeightedSelector | None = None

    # -- membership ----------------------------------------------------------------------------------

    def on_cluster_changed(self, writable: Iterable[str], readonly: Iterable[str], *,
                           changed: Collection[str] | None = None) -> set[str]:
        """Spec §2.3: dead = known - writable - readonly; weights of dead bookies dropped, joiners get 0.

        `changed`: as for the topology-aware policies (`TopologyAwarePolicy.on_cluster_changed`), the
        bookies whose membership may differ from the previous call's; O(changed) instead of O(bookies).
        """
        readonly_set = frozenset(readonly)
        if changed is None:
            writable_set = set(writable)
            joined = writable_set - self.known
            dead = self.known - writable_set - readonly_set
        else:
            writable_set = writable if isinstance(writable, (set, frozenset)) else set(writable)
            joined = {b for b in changed if b in writable_set and b not in self.known}
            gone = {b for b in changed if b in self.known and b not in writable_set}
            dead = gone - readonly_set
        if self.settings.disk_weighted:
            for bookie in dead:
                self.weights.pop(bookie, None)
            # A bookie (re)joining gets a fresh zero weight until its disk is reported, as in Java.
            for bookie in joined:
                self.weights[bookie] = 0
        if changed is None:
            self.known = writable_set
        else:
            self.known -= gone
            self.known |= joined
        self.readonly = readonly_set
        self._invalidate()
        return dead

    def on_bookie_rack_change(self, bookies: Iterable[str]) -> None:
        """Locations do not matter to the default policy."""

    def reads_feature(self, name: str) -> bool:
        """No feature changes the default policy's answers."""
        return False

    def update_rack_info(self, rack_info: RackInfo) -> None:
        """Kept in the resolver for consistency; locations do not matter to the default policy."""
        self.resolver.update_rack_info(rack_info)

    def update_rack_entries(self, entries: RackEntries) -> bool:
        """Kept in the resolver, as `update_rack_info`; returns whether group membership changed."""
        return self.resolver.update_rack_entries(entries)

    def restore_readonly(self, readonly: Iterable[str]) -> None:
        """Set the read-only set (a snapshot restored without `placement.compat.keepStaleReadOnlySet`)."""
        self.readonly = frozenset(readonly)

    def known_location(self, bookie: str) -> str | None:
        """None: the default policy places without locations."""
        return None

    def disallowed_regions(self) -> list[str]:
        """Empty: the default policy has no regions."""
        return []

    def region_of_bookie(self, bookie: str) -> str | None:
        """None: the default policy has no regions."""
        return None

    def update_bookie_info(self, infos: Mapping[str, BookieInfo]) -> None:
        """Merge disk reports into the weights (weighted mode).

        BK bug fixed (spec bookkeeper-rackaware.md App. A #11): Java fails with a null pointer when
        disk weights are off; the call is ignored here.
        """
        # BK bug fixed (spec bookkeeper-rackaware.md App. A #11): ignored instead of a null-pointer error.
        if not self.settings.disk_weighted:
            return
        for bookie, info in infos.items():
            self.weights[bookie] = info.free_disk
        self._invalidate()

    def _invalidate(self) -> None:
        self._sorted = None
        self._selector = None

    def _population(self) -> tuple[str, ...]:
        if self._sorted is None:
            self._sorted = tuple(sorted(self.known))
        return self._sorted

    def writable_bookies(self) -> frozenset[str]:
        return frozenset(self.known)

    def pending_leaves(self) -> dict[str, float]:
        """The default policy has no stabilization: always empty."""
        return {}

    def placement_scope(self, ensemble_size: int, custom_metadata: Mapping[str, Any] | None) -> Hashable:
        """`()`: every call may place on every writable bookie."""
        return ()

    def expected_shares(self, scope: Hashable) -> dict[str, float]:
        """Each writable bookie's share of one placement, sorted by bookie: uniform, or by free disk with
        BookKeeper's cap when disk weighting is on (`shares.expected_shares`). Cost: O(bookies)."""
        settings = self.settings
        return shares.expected_shares(self._population(), self.weights if settings.disk_weighted else None,
                                      settings.max_weight_multiple)

    # -- placement -----------------------------------------------------------------------------------

    def new_ensemble(self, ensemble_size: int, write_quorum: int, ack_quorum: int,
                     custom_metadata: Mapping[str, bytes] | None = None, exclude: Iterable[str] | None = (), *,
                     rng: random.Random | None = None) -> PlacementResult:
        """`ensemble_size` distinct random writable bookies not in `exclude` (spec §3).

        An `ensemble_size <= 0` gives an empty ensemble with FAIL, as in Java.

        Raises:
            NotEnoughBookiesError: fewer eligible bookies than `ensemble_size`.
        """
        if exclude is None:
            exclude = ()
        excluded = frozenset(exclude)
        explain_excluded: dict[str, list[str]] = {"caller": sorted(excluded)} if excluded else {}
        unavailable(self, explain_excluded)
        steps: list[dict[str, Any]] = []
        explain = {"policy": self.name, "steps": steps, "fallbacks": [], "excluded": explain_excluded}
        if ensemble_size <= 0:
            return PlacementResult([], Adherence.FAIL, None, explain)
        try:
            chosen = self._choose(ensemble_size, excluded, rng if rng is not None else random.Random(0), steps,
                                  "ensemble")
        except NotEnoughBookiesError as exc:
            failed(exc, explain, f"ensemble_size={ensemble_size} needs {ensemble_size} writable bookies that are not "
                                 f"excluded; {steps[0]['candidates']} eligible")
            raise
        return PlacementResult(chosen, Adherence.MEETS_STRICT, None, explain)

    def _choose(self, count: int, excluded: frozenset[str] | set[str], rng: random.Random,
                steps: list[dict[str, Any]], step: str) -> list[str]:
        """`count` distinct eligible bookies; records the one selection step (all writable bookies
        not excluded are the candidates). Cost: O(excluded) for the count, plus the draws."""
        population = self._population()
        chosen: list[str] = []
        known = self.known
        eligible = len(population) - sum(1 for b in excluded if b in known)
        steps.append({"step": step, "scope": "cluster", "candidates": eligible})
        if eligible < count:
            steps[-1]["failed"] = True
            raise self._not_enough(count, eligible, len(excluded))
        if self.settings.disk_weighted:
            selector = self._selector
            if selector is None:
                selector = self._selector = WeightedSelector(population, self.weights,
                                                             self.settings.max_weight_multiple)
            taken: set[str] = set()

            def acceptable(bookie: str) -> bool:
                return bookie not in excluded and bookie not in taken

            # BK bug fixed (spec App. A #6): draws come from the writable bookies only (Java's selector
            # also holds read-only and merely reported bookies) and the loop is bounded (the selector
            # enumerates the acceptable members after a few rejected draws).
            while len(chosen) < count:
                bookie = selector.pick(rng, acceptable)
                if bookie is None:
                    break
                taken.add(bookie)
                chosen.append(bookie)
        else:
            for bookie in lazy_shuffle(rng, population):
                if bookie in excluded:
                    continue
                chosen.append(bookie)
                if len(chosen) == count:
                    break
        if len(chosen) < count:
            steps[-1]["failed"] = True
            raise self._not_enough(count, len(chosen), len(excluded))
        return chosen

    def _not_enough(self, count: int, eligible: int, excluded: int) -> NotEnoughBookiesError:
        return NotEnoughBookiesError(
            f"cannot place {count} bookie(s): only {eligible} writable bookie(s) remain after excluding "
            f"{excluded} of {len(self.known)}; add bookies or exclude fewer")

    def replace_bookie(self, ensemble_size: int, write_quorum: int, ack_quorum: int,
                       custom_metadata: Mapping[str, bytes] | None, current_ensemble: Sequence[str],
                       bookie_to_replace: str, exclude: Iterable[str] | None = (), *,
                       rng: random.Random | None = None) -> PlacementResult:
        """A random writable bookie outside `exclude` and the current ensemble (spec §3).

        Raises:
            ValueError: `bookie_to_replace` is not in a non-empty `current_ensemble`.
            NotEnoughBookiesError: no eligible bookie.
        """
        if exclude is None:
            exclude = ()
        current = list(current_ensemble)
        caller = set(exclude)
        explain_excluded: dict[str, list[str]] = {"caller": sorted(caller)} if caller else {}
        unavailable(self, explain_excluded)
        if current:
            explain_excluded["ensemble"] = sorted(set(current))
        # BK quirk not reproduced (spec App. A #7): Java adds the ensemble to the caller's set.
        # Differs from Java: the bookie being replaced is excluded even when current_ensemble is empty.
        excluded = caller | set(current) | {bookie_to_replace}
        steps: list[dict[str, Any]] = []
        explain = {"policy": self.name, "steps": steps, "fallbacks": [], "excluded": explain_excluded}
        try:
            candidate = self._choose(1, excluded, rng if rng is not None else random.Random(0), steps,
                                     "replacement")[0]
        except NotEnoughBookiesError as exc:
            failed(exc, explain, "the replacement must be a writable bookie outside the ensemble and the "
                                 "exclusions; none is left")
            raise
        ensemble = replace_in_ensemble(current, bookie_to_replace, candidate)
        return PlacementResult(ensemble, Adherence.MEETS_STRICT, candidate, explain)

    def replace_to_adhere(self, ensemble_size: int, write_quorum: int, ack_quorum: int, exclude: Iterable[str] | None,
                          current_ensemble: Sequence[str], *, rng: random.Random | None = None) -> PlacementResult:
        """Not supported, as in BookKeeper (every ensemble already adheres)."""
        raise UnsupportedOperationError(
            "the default policy does not implement replace_to_adhere: every ensemble adheres to it; "
            "use the rackaware policy to relocate ensembles")

    def is_ensemble_adhering(self, ensemble: Sequence[str], write_quorum: int, ack_quorum: int) -> Adherence:
        """Always MEETS_STRICT (spec §3)."""
        return Adherence.MEETS_STRICT

    def are_acked_bookies_adhering(self, acked: Iterable[str], write_quorum: int, ack_quorum: int) -> bool:
        """Always true (the interface default)."""
        return True

    def is_relaxed(self, ensemble: Sequence[str], write_quorum: int, ack_quorum: int,
                   rule: Mapping[str, Any]) -> bool:
        """The default policy never relaxes a rule: always False."""
        return False

    def relaxation_fix(self, ensemble_size: int, write_quorum: int, ack_quorum: int,
                       current_ensemble: Sequence[str], rule: Mapping[str, Any], exclude: Iterable[str] = (), *,
                       rng: random.Random | None = None) -> PlacementResult | None:
        """Nothing to fix (the default policy never relaxes a rule): None."""
        return None

    # -- reads ---------------------------------------------------------------------------------------

    def register_slow_bookie(self, bookie: str, entry_id: int) -> None:
        """No-op (spec §8.2)."""

    def reorder_read_sequence(self, ensemble: Sequence[str], health: HealthInfo | None,
                              write_set: Iterable[int], *, rng: random.Random | None = None) -> list[int]:
        """The write set unchanged (a copy), spec §8.1."""
        return list(write_set)

    def reorder_read_lac_sequence(self, ensemble: Sequence[str], health: HealthInfo | None,
                                  write_set: Iterable[int], *, rng: random.Random | None = None) -> list[int]:
        """The write set followed by the missing ensemble indices, ascending (spec §8.3)."""
        return add_missing_indices(list(write_set), len(ensemble))

    # -- snapshots -----------------------------------------------------------------------------------

    def export_state(self) -> dict[str, Any]:
        """JSON-able state: writable and read-only bookies, weights."""
        return {
            "known": sorted(self.known),
            "readonly": sorted(self.readonly),
            "weights": dict(sorted(self.weights.items())),
        }

    def import_state(self, state: Mapping[str, Any]) -> None:
        """Restore what `export_state` produced."""
        self.known = set(state.get("known", ()))
        self.readonly = frozenset(state.get("readonly", ()))
        self.weights = dict(state.get("weights", {}))
        self._invalidate()

    def check_invariants(self) -> None:
        """Assert the state is consistent (tests only)."""
        if self._sorted is not None:
            assert self._sorted == tuple(sorted(self.known))
        if not self.settings.disk_weighted:
            assert not self.weights
