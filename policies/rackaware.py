"""BookKeeper's public rack-aware placement policy (`RackawareEnsemblePlacementPolicy`): the rack-aware
algorithm (`rackaware_impl.RackawarePolicyImpl`) plus, with stabilization on, a secondary instance on
a stabilized topology that placements are retried on.

Spec: bookkeeper-rackaware.md §2.4 (stabilization); the algorithm itself is §4-§8.

With `networkTopologyStabilizePeriodSeconds = P > 0` the secondary `RackawarePolicyImpl` keeps
departed bookies in its tree for `P` seconds (`stabilize.StabilizedTopology`, on the injected
clock); placements that cannot be made on the live topology are retried there ("a bookie that is
only flapping may still take urgent allocations"). Membership, weights, rack changes and the
default rack are forwarded to the secondary.

`RackawarePolicyImpl` is re-exported here: `from policies.rackaware import RackawarePolicy,
RackawarePolicyImpl` is the import other modules use.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Collection, Iterable, Mapping, MutableMapping, Sequence
from typing import Any

from .api import Adherence, BookieInfo, PlacementResult
from .errors import NotEnoughBookiesError
from .provenance import retried
from .rack_complete import RackComplete
from .rack_selection import Predicate
from .rackaware_impl import Clock, RackawarePolicyImpl
from .resolver import LocationResolver
from .settings import PlacementSettings
from .stabilize import StabilizedTopology

__all__ = ["Clock", "RackawarePolicy", "RackawarePolicyImpl"]


class RackawarePolicy(RackComplete, RackawarePolicyImpl):
    """The public rack-aware policy (`RackawareEnsemblePlacementPolicy`, spec §2.4).

    With `networkTopologyStabilizePeriodSeconds = P > 0` a secondary instance keeps departed bookies in
    its tree for `P` seconds (on the injected clock); placements that fail with NotEnough on this
    (primary) instance are retried there, and a FAIL of `replace_to_adhere` is retried there.
    Membership, weights, rack changes and the default rack are forwarded to the secondary.

    With `placement.search=complete` under enforcement, a `new_ensemble` or `replace_bookie` that
    BookKeeper's search (and its retry) cannot place goes to the complete search (`rack_complete`).

    Args: as `RackawarePolicyImpl`; `stabilize_period_s` defaults to the configured period.
    """

    def __init__(self, settings: PlacementSettings, resolver: LocationResolver, clock: Clock,
                 features: MutableMapping[str, int], default_location: str | None = None,
                 enforce_durability: bool = False, stabilize_period_s: float | None = None) -> None:
        period = settings.stabilize_period_s if stabilize_period_s is None else stabilize_period_s
        self.secondary: RackawarePolicyImpl | None = None
        self._now: float | None = None
        super().__init__(settings, resolver, clock, features, default_location, enforce_durability, 0)
        self.stabilize_period_s = period
        if period > 0:
            self.secondary = self._new_secondary()

    def _new_secondary(self) -> RackawarePolicyImpl:
        secondary = RackawarePolicyImpl(self.settings, self.resolver, self._clock_reading, self.features,
                                        self.default_location, self.enforce_durability, self.stabilize_period_s)
        secondary.weights = self.weights
        return secondary

    def _clock_reading(self) -> float:
        """The secondary's clock: this call's reading, so the clock is read once per public call."""
        return self._now if self._now is not None else self.clock()

    def tick(self) -> None:
        """`RackawarePolicyImpl.tick`: read the clock once and hand the reading to the secondary, whose
        stabilized departures past their delay leave its tree."""
        if self.secondary is not None:
            self._now = self.clock()
            if self.secondary.topology.advance(self._now):  # type: ignore[attr-defined]
                self.secondary._invalidate()

    # -- forwarding ----------------------------------------------------------------------------------

    def on_cluster_changed(self, writable: Iterable[str], readonly: Iterable[str], *,
                           changed: Collection[str] | None = None) -> set[str]:
        """Spec §2.2/§2.4. With stabilization on, the dead set is always empty.

        BK quirk (spec bookkeeper-rackaware.md §2.4, App. A #1): Java returns the secondary's result,
        which is always empty; kept (BookKeeper's watcher ignores it).
        """
        if not isinstance(writable, (set, frozenset)):
            writable = list(writable)
        readonly = list(readonly)
        dead = super().on_cluster_changed(writable, readonly, changed=changed)
        if self.secondary is None:
            return dead
        # BK quirk (spec bookkeeper-rackaware.md §2.4, App. A #1): the secondary's (empty) dead set is returned.
        return self.secondary.on_cluster_changed(writable, readonly, changed=changed)

    def handle_bookies_that_left(self, bookies: list[str]) -> None:
        super().handle_bookies_that_left(bookies)
        if self.secondary is not None:
            self.secondary.handle_bookies_that_left(bookies)

    def handle_bookies_that_moved_away(self, bookies: list[str]) -> None:
        """The bookies now belong to another policy (a region-aware bookie whose region changed): they
        leave both views at once. A move is not a departure, so the stabilized view does not keep
        them for its retries, as a rack change within the policy does not (App. A #8, fixed)."""
        self.handle_bookies_that_left(bookies)
        if self.secondary is not None:
            topology = self.secondary.topology
            for bookie in bookies:
                if bookie in topology.pending:  # type: ignore[attr-defined]
                    topology.remove_now(bookie)  # type: ignore[attr-defined]
            self.secondary._invalidate()

    def handle_bookies_that_joined(self, bookies: list[str]) -> None:
        super().handle_bookies_that_joined(bookies)
        if self.secondary is not None:
            self.secondary.handle_bookies_that_joined(bookies)

    def is_departing(self, bookie: str) -> bool:
        """Whether the stabilized view keeps `bookie` as a departure waiting out its delay."""
        return self.secondary is not None and bookie in self.secondary.topology.pending  # type: ignore[attr-defined]

    def on_bookie_rack_change(self, bookies: Iterable[str]) -> None:
        """Spec §2.5. BK bug fixed (App. A #8): the secondary gets the rack change too."""
        bookies = list(bookies)
        super().on_bookie_rack_change(bookies)
        # BK bug fixed (spec bookkeeper-rackaware.md App. A #8): Java's secondary never hears of rack changes.
        if self.secondary is not None:
            self.secondary.on_bookie_rack_change(bookies)

    def update_rack_entries(self, entries: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> bool:
        """Rack info changed for `entries`' bookies only (`LocationResolver.update_rack_entries`): the
        same as `update_rack_info` with the whole new rack info, at O(changed bookies + join failures).

        `update_rack_info` notifies a rack change to every bookie listed before or after (as Pulsar).
        For a listed bookie whose listing did not change, the notification re-resolves it to where it
        already is, and does nothing, unless its last move or join failed (`join_failures`, of this
        instance or the secondary): so only the changed bookies and those are notified. Exact when the
        caller has notified every change of its mapping (`on_bookie_rack_change`), as the cluster
        model does: then a known bookie is where it resolves, or recorded as failed.

        Returns:
            Whether isolation-group membership changed.
        """
        resolver = self.resolver
        failed = set(self.join_failures)
        if self.secondary is not None:
            failed |= self.secondary.join_failures.keys()
        retry = {bookie for bookie in failed if resolver.is_listed(bookie)}
        membership_changed = resolver.update_rack_entries(entries)
        retry |= {bookie for bookie in failed if resolver.is_listed(bookie)}
        self.on_bookie_rack_change(sorted(retry.union(entries)))
        return membership_changed

    def update_bookie_info(self, infos: Mapping[str, BookieInfo]) -> None:
        """Spec §7.2. BK bug fixed (App. A #8): the secondary gets the same weights."""
        super().update_bookie_info(infos)
        # BK bug fixed (spec bookkeeper-rackaware.md App. A #8): Java's secondary keeps uniform weights.
        if self.secondary is not None:
            self.secondary.weights = self.weights

    def with_default_rack(self, rack: str) -> None:
        """BK bug fixed (App. A #8): the secondary uses the same default rack."""
        super().with_default_rack(rack)
        # BK bug fixed (spec bookkeeper-rackaware.md App. A #8): Java's secondary keeps /default-rack.
        if self.secondary is not None:
            self.secondary.with_default_rack(rack)

    def pending_leaves(self) -> dict[str, float]:
        """Departed bookies still usable by the secondary: bookie -> expiry time (s)."""
        self.tick()
        if self.secondary is None:
            return {}
        return self.secondary.topology.expiries()  # type: ignore[attr-defined]

    # -- placement with retry on the secondary ---------------------------------------------------------

    _RETRIED = "retried on the stabilized topology"

    def new_ensemble(self, ensemble_size: int, write_quorum: int, ack_quorum: int,
                     custom_metadata: Mapping[str, bytes] | None = None, exclude: Iterable[str] | None = (), *,
                     rng: random.Random | None = None) -> PlacementResult:
        if exclude is None:
            exclude = ()
        exclude = tuple(exclude)
        try:
            return self._bookkeeper_new_ensemble(ensemble_size, write_quorum, ack_quorum, custom_metadata, exclude,
                                                 rng)
        except NotEnoughBookiesError as exc:
            if not self.is_complete_search_on():
                raise
            error = exc
        return self.complete_new_ensemble(error, ensemble_size, write_quorum, ack_quorum, exclude, rng)

    def _bookkeeper_new_ensemble(self, ensemble_size: int, write_quorum: int, ack_quorum: int,
                                 custom_metadata: Mapping[str, bytes] | None, exclude: tuple[str, ...],
                                 rng: random.Random | None) -> PlacementResult:
        """BookKeeper's search: this instance, then the retry on the stabilized view."""
        try:
            return super().new_ensemble(ensemble_size, write_quorum, ack_quorum, custom_metadata, exclude,
                                        rng=rng)
        except NotEnoughBookiesError as exc:
            if self.secondary is None:
                raise
            first_error = exc
        result = self._on_secondary(first_error, self.secondary.new_ensemble, ensemble_size, write_quorum,
                                    ack_quorum, custom_metadata, exclude, rng=rng)
        return self._retried(first_error, result)

    def replace_bookie(self, ensemble_size: int, write_quorum: int, ack_quorum: int,
                       custom_metadata: Mapping[str, bytes] | None, current_ensemble: Sequence[str],
                       bookie_to_replace: str, exclude: Iterable[str] | None = (), *,
                       rng: random.Random | None = None) -> PlacementResult:
        if exclude is None:
            exclude = ()
        exclude = tuple(exclude)
        try:
            return self._bookkeeper_replace_bookie(ensemble_size, write_quorum, ack_quorum, custom_metadata,
                                                   current_ensemble, bookie_to_replace, exclude, rng)
        except NotEnoughBookiesError as exc:
            if not self.is_complete_search_on():
                raise
            error = exc
        return self.complete_replace_bookie(error, ensemble_size, write_quorum, ack_quorum, current_ensemble,
                                            bookie_to_replace, exclude, rng)

    def _bookkeeper_replace_bookie(self, ensemble_size: int, write_quorum: int, ack_quorum: int,
                                   custom_metadata: Mapping[str, bytes] | None, current_ensemble: Sequence[str],
                                   bookie_to_replace: str, exclude: tuple[str, ...],
                                   rng: random.Random | None) -> PlacementResult:
        """BookKeeper's replacement: this instance, then the retry on the stabilized view."""
        try:
            return super().replace_bookie(ensemble_size, write_quorum, ack_quorum, custom_metadata,
                                          current_ensemble, bookie_to_replace, exclude, rng=rng)
        except NotEnoughBookiesError as exc:
            if self.secondary is None:
                raise
            first_error = exc
        result = self._on_secondary(first_error, self.secondary.replace_bookie, ensemble_size, write_quorum,
                                    ack_quorum, custom_metadata, current_ensemble, bookie_to_replace, exclude,
                                    rng=rng)
        return self._retried(first_error, result)

    def replace_to_adhere(self, ensemble_size: int, write_quorum: int, ack_quorum: int, exclude: Iterable[str] | None,
                          current_ensemble: Sequence[str], *, rng: random.Random | None = None) -> PlacementResult:
        if exclude is None:
            exclude = ()
        exclude = tuple(exclude)
        if rng is None:
            rng = random.Random(0)
        result = super().replace_to_adhere(ensemble_size, write_quorum, ack_quorum, exclude, current_ensemble,
                                           rng=rng)
        if result.adherence != Adherence.FAIL or self.secondary is None:
            return result
        retry = self.secondary.replace_to_adhere(ensemble_size, write_quorum, ack_quorum, exclude,
                                                 current_ensemble, rng=rng)
        return _with_retry_note(retry, self._RETRIED)

    def new_ensemble_internal(self, ensemble_size: int, write_quorum: int, ack_quorum: int,
                              exclude: Iterable[str], parent: Any, parent_predicate: Any,
                              rng: random.Random, *, fallbacks: list[str] | None = None) -> PlacementResult:
        exclude = tuple(exclude)
        try:
            return super().new_ensemble_internal(ensemble_size, write_quorum, ack_quorum, exclude, parent,
                                                 parent_predicate, rng, fallbacks=fallbacks)
        except NotEnoughBookiesError as exc:
            if self.secondary is None:
                raise
            first_error = exc
        if fallbacks is not None:
            fallbacks.append(self._RETRIED)
        return self._on_secondary(first_error, self.secondary.new_ensemble_internal, ensemble_size,
                                  write_quorum, ack_quorum, exclude, parent, parent_predicate, rng,
                                  fallbacks=fallbacks)

    def select_from_network_location(self, scope: str, exclude: set[str], predicate: Predicate | None,
                                     ensemble: Any, fallback_to_random: bool, rng: random.Random, *,
                                     fallbacks: list[str] | None = None) -> str:
        try:
            return super().select_from_network_location(scope, exclude, predicate, ensemble, fallback_to_random,
                                                        rng, fallbacks=fallbacks)
        except NotEnoughBookiesError as exc:
            if self.secondary is None:
                raise
            first_error = exc
        if fallbacks is not None:
            fallbacks.append(self._RETRIED)
        return self._on_secondary(first_error, self.secondary.select_from_network_location, scope, exclude,
                                  predicate, ensemble, fallback_to_random, rng, fallbacks=fallbacks)

    def select_from_network_location_excluding_racks(
            self, scope: str | None, exclude_racks: Iterable[str], exclude: set[str],
            predicate: Predicate | None, ensemble: Any, fallback_to_random: bool, rng: random.Random, *,
            fallbacks: list[str] | None = None) -> str:
        exclude_racks = tuple(exclude_racks)
        try:
            return super().select_from_network_location_excluding_racks(
                scope, exclude_racks, exclude, predicate, ensemble, fallback_to_random, rng, fallbacks=fallbacks)
        except NotEnoughBookiesError as exc:
            if self.secondary is None:
                raise
            first_error = exc
        if fallbacks is not None:
            fallbacks.append(self._RETRIED)
        return self._on_secondary(first_error, self.secondary.select_from_network_location_excluding_racks,
                                  scope, exclude_racks, exclude, predicate, ensemble, fallback_to_random, rng,
                                  fallbacks=fallbacks)

    def _retried(self, first_error: NotEnoughBookiesError, result: PlacementResult) -> PlacementResult:
        """A result found on the stabilized topology: both attempts' steps, the retry noted last."""
        if not first_error.explain:
            return _with_retry_note(result, self._RETRIED)
        explain = retried(first_error.explain, result.explain, self._RETRIED, self._secondary_size())
        return PlacementResult(result.ensemble, result.adherence, result.bookie, explain)

    def _secondary_size(self) -> int:
        return len(self.secondary.topology) if self.secondary is not None else 0

    def _on_secondary(self, first_error: NotEnoughBookiesError, method: Callable[..., Any], *args: Any,
                      **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except NotEnoughBookiesError as exc:
            explain = (retried(first_error.explain, exc.explain, self._RETRIED, self._secondary_size(),
                               failed_too=True) if first_error.explain else {})
            raise NotEnoughBookiesError(f"{first_error}; also not possible on the stabilized topology "
                                        f"(departed bookies kept for the stabilization period): {exc}",
                                        explain=explain) from exc

    # -- snapshots ------------------------------------------------------------------------------------

    def export_state(self) -> dict[str, Any]:
        """As `RackawarePolicyImpl.export_state`, plus the secondary's pending departures."""
        state = super().export_state()
        if self.secondary is not None:
            state["pending_leaves"] = self.secondary.topology.export_pending()  # type: ignore[attr-defined]
        return state

    def import_state(self, state: Mapping[str, Any]) -> None:
        """Restore the primary, then rebuild the secondary: same membership plus pending departures."""
        secondary, self.secondary = self.secondary, None
        RackawarePolicyImpl.import_state(self, state)
        if secondary is None:
            return
        self.secondary = self._new_secondary()
        core = {key: state[key] for key in ("known", "readonly", "weights", "join_failures") if key in state}
        core["pending_leaves"] = state.get("pending_leaves", {})
        self.secondary.import_state(core)

    def check_invariants(self) -> None:
        super().check_invariants()
        assert not isinstance(self.topology, StabilizedTopology)
        if self.secondary is not None:
            self.secondary.check_invariants()
            assert self.secondary.known == self.known, "secondary membership differs from the primary's"
            assert self.secondary.default_location == self.default_location


def _with_retry_note(result: PlacementResult, note: str) -> PlacementResult:
    explain = dict(result.explain)
    explain["fallbacks"] = [*explain.get("fallbacks", ()), note]
    return PlacementResult(result.ensemble, result.adherence, result.bookie, explain)
