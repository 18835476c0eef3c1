"""Membership bookkeeping shared by the topology-aware policies (BookKeeper's
`TopologyAwareEnsemblePlacementPolicy`): known bookies, joins, departures, rack changes, weights.

Spec: bookkeeper-rackaware.md §2.2 (onClusterChanged), §2.5 (rack change), §7.2 (updateBookieInfo).

"Known" bookies are the writable bookies that joined successfully; only they are in the topology and
only they are placed. Read-only bookies are tracked apart (read ordering only). A bookie whose
location is invalid or of the wrong depth fails to join: it stays unknown, its reason is kept in
`join_failures`, and it is retried at every later `on_cluster_changed`, as in BookKeeper.

Subclasses override the `handle_bookies_that_left` / `handle_bookies_that_joined` hooks (the
rack-aware wrapper forwards them to its stabilized secondary; region-aware to its per-region policies).
`TopologyAwarePolicy` also gives every member of the `PlacementPolicy` interface (`policies.api`) a
default with the right meaning for a policy that does not override it (no regions, no relaxations,
no stabilization, rack info handed over whole).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Iterable, Iterator, Mapping, MutableMapping, Sequence
from itertools import repeat
from typing import Any

from . import shares
from .api import BookieInfo, PlacementResult, RackEntries
from .errors import InvalidLocationError, InvalidTopologyError, UnsupportedOperationError
from .location import DEFAULT_RACK
from .resolver import LocationResolver, RackInfo
from .settings import PlacementSettings
from .topology import NetworkTopology

Clock = Callable[[], float]


def write_sets(ensemble_size: int, write_quorum: int) -> list[list[int]]:
    """Ensemble positions of each write set i: i, i+1, ..., i+W-1 (mod E) (round-robin striping)."""
    return [[(i + j) % ensemble_size for j in range(write_quorum)] for i in range(ensemble_size)]


def write_set_moves(values: list[Any], write_quorum: int) -> zip[tuple[Any, Any]]:
    """(leaving, entering) values as write set i becomes write set i + 1, for i = 0 .. E - 2.

    Write set i covers positions i .. i+W-1 (mod E), so the step drops position i and takes position
    i+W (mod E). Meant for 1 <= W < E, where every write set is W distinct positions: the adherence
    checks keep per-location counts of write set 0 and apply these moves, O(E) in all instead of
    O(E x W) for building every write set.
    """
    return zip(values, values[write_quorum:] + values[:write_quorum - 1])


def distinct_per_write_set(values: Sequence[Any], write_quorum: int) -> Iterator[int]:
    """How many distinct values (None not counted) write sets 0, 1, ..., E - 1 hold, in O(E) in all.

    With W >= E every write set holds every position; below that, per-value counts follow the write
    set as it slides (`write_set_moves`). Lazy, so a caller looking for the first short write set
    stops there.
    """
    size = len(values)
    if write_quorum >= size or write_quorum < 1:
        held = len({value for value in values if value is not None}) if write_quorum >= 1 else 0
        yield from repeat(held, size)
        return
    counts: dict[Any, int] = {}
    for value in values[:write_quorum]:
        if value is not None:
            counts[value] = counts.get(value, 0) + 1
    yield len(counts)
    for leaving, entering in write_set_moves(list(values), write_quorum):
        if leaving != entering:
            if entering is not None:
                counts[entering] = counts.get(entering, 0) + 1
            if leaving is not None:
                left = counts[leaving] - 1
                if left:
                    counts[leaving] = left
                else:
                    del counts[leaving]
        yield len(counts)


def replace_in_ensemble(current: Sequence[str], bookie_to_replace: str, candidate: str) -> list[str]:
    """`current` with `candidate` at the first position of `bookie_to_replace` (Java's
    `set(indexOf(bookie), candidate)`), or `[candidate]` for an empty ensemble.

    Callers pick the candidate first: Java looks the bookie up only then, so with nothing eligible it
    raises NotEnoughBookies whether or not the bookie is in the ensemble (spec §3, §5.1 step 7).

    Raises:
        ValueError: `bookie_to_replace` is not in a non-empty `current` (Java: an index error).
    """
    if not current:
        return [candidate]
    if bookie_to_replace not in current:
        raise ValueError(f"bookie_to_replace: {bookie_to_replace} is not a member of current_ensemble "
                         f"{list(current)}")
    ensemble = list(current)
    ensemble[ensemble.index(bookie_to_replace)] = candidate
    return ensemble


class TopologyAwarePolicy:
    """Known bookies, their locations and weights, kept up to date by membership callbacks.

    Args:
        settings: parsed configuration.
        resolver: bookie -> location (the caller's mapping and rack info).
        clock: event-time seconds; read at most once per public call.
        features: runtime feature switches, read at decision time (0 or missing = off).
        default_location: the location of unmapped bookies (the policy's default rack).
    """

    name = "topology-aware"
    default_location = DEFAULT_RACK
    #: Whether `enforceMinNumRacksPerWriteQuorum` keeps the bookies of the default location unused
    #: (spec §4.3): true for the rack-aware placements (rack-aware, isolated, region-aware).
    enforced_skips_default_rack = False
    #: A twin over a stabilized topology that keeps the same membership (the rack-aware policy's,
    #: when a stabilization period is set); None for the others.
    secondary: TopologyAwarePolicy | None = None

    def __init__(self, settings: PlacementSettings, resolver: LocationResolver, clock: Clock,
                 features: MutableMapping[str, int], default_location: str | None = None) -> None:
        self.settings = settings
        self.resolver = resolver
        self.clock = clock
        self.features = features
        if default_location is not None:
            self.default_location = default_location
        self.topology = NetworkTopology()
        self.known: dict[str, str] = {}
        self.readonly: frozenset[str] = frozenset()
        self.weights: dict[str, int] = {}
        self.join_failures: dict[str, str] = {}

    # -- locations ------------------------------------------------------------------------------

    def resolve_location(self, bookie: str) -> str:
        """Resolve now: the resolver's answer or the default location (BookKeeper's decorator).

        Raises:
            InvalidLocationError: the resolver's answer is not a usable location.
        """
        location = self.resolver.resolve(bookie)
        return self.default_location if location is None else location

    def location_of(self, bookie: str) -> str:
        """A known bookie's location, else a freshly resolved one (for excluded or departed bookies)."""
        location = self.known.get(bookie)
        return location if location is not None else self.resolve_location(bookie)

    def known_location(self, bookie: str) -> str | None:
        """Where a known bookie is placed; None for a bookie the policy does not know."""
        return self.known.get(bookie)

    def disallowed_regions(self) -> list[str]:
        """Regions placement is switched off in right now: none (only the region-aware policy has them)."""
        return []

    def region_of_bookie(self, bookie: str) -> str | None:
        """The bookie's region: None (only the region-aware policy has regions)."""
        return None

    def is_feature_on(self, name: str) -> bool:
        """A feature switch is on when its availability is > 0 (missing = off)."""
        return bool(name) and int(self.features.get(name, 0) or 0) > 0

    def reads_feature(self, name: str) -> bool:
        """Whether the feature `name` can change any answer of this policy (only the region-aware one
        reads features), so that the engine re-checks ledgers only for switches that matter."""
        return False

    # -- membership -----------------------------------------------------------------------------

    def on_cluster_changed(self, writable: Iterable[str], readonly: Iterable[str], *,
                           changed: Collection[str] | None = None) -> set[str]:
        """Apply a membership snapshot; return the dead bookies (left and not read-only). Spec §2.2.

        `changed`: when given, the bookies whose membership may differ from the previous call's
        snapshot (an engine that applies one event at a time knows them). Left and joined bookies are
        then found among them and the join failures, which every call retries, in O(changed + join
        failures) instead of comparing the whole sets; the result is the same.
        """
        writable_set = writable if changed is not None and isinstance(writable, (set, frozenset)) else set(writable)
        readonly_set = set(readonly)
        if changed is None:
            left = sorted(self.known.keys() - writable_set)
            joined = sorted(writable_set - self.known.keys())
        else:
            known = self.known
            left = sorted(b for b in changed if b in known and b not in writable_set)
            joined = sorted({b for b in (*changed, *self.join_failures) if b in writable_set and b not in known})
        dead = set(left) - readonly_set
        self.handle_bookies_that_left(left)
        self.handle_bookies_that_joined(joined)
        for bookie in list(self.join_failures):
            if bookie not in writable_set:
                del self.join_failures[bookie]
        # BK quirk kept only on request (spec App. A #2): Java never resets the read-only set to empty.
        if readonly_set or not self.settings.keep_stale_readonly_set:
            self.readonly = frozenset(readonly_set)
        return dead

    def handle_bookies_that_left(self, bookies: list[str]) -> None:
        for bookie in bookies:
            if self.known.pop(bookie, None) is not None:
                self.topology.remove(bookie)
                self.weights.pop(bookie, None)

    def handle_bookies_that_joined(self, bookies: list[str]) -> None:
        for bookie in bookies:
            try:
                location = self.resolve_location(bookie)
                self.topology.add(bookie, location)
            except (InvalidLocationError, InvalidTopologyError) as exc:
                self.join_failures[bookie] = str(exc)
                continue
            self.join_failures.pop(bookie, None)
            self.known[bookie] = location
            if self.settings.disk_weighted:
                self.weights.setdefault(bookie, 0)

    def on_bookie_rack_change(self, bookies: Iterable[str]) -> None:
        """Re-resolve known bookies whose mapping changed (spec §2.5); unknown bookies are ignored.

        A move that fails (invalid location, wrong depth) leaves the bookie where it was and records
        the reason in `join_failures`. Differs from Java (README, differences): for a location the
        topology refuses ("", "/", another depth), Java has removed the old leaf already and leaves the
        bookie known but out of the tree, never picked until a later move or rejoin.
        """
        for bookie in sorted(set(bookies)):
            old = self.known.get(bookie)
            if old is None:
                continue
            try:
                new = self.resolve_location(bookie)
            except InvalidLocationError as exc:
                self.join_failures[bookie] = str(exc)
                continue
            if new == old:
                continue
            self.topology.remove(bookie)
            try:
                self.topology.add(bookie, new)
            except (InvalidLocationError, InvalidTopologyError) as exc:
                self.topology.add(bookie, old)
                self.join_failures[bookie] = str(exc)
                continue
            self.join_failures.pop(bookie, None)
            self.move_bookie(bookie, old, new)

    def move_bookie(self, bookie: str, old: str, new: str) -> None:
        """Hook after a known bookie changed location (the topology is already updated)."""
        self.known[bookie] = new

    def update_rack_info(self, rack_info: RackInfo) -> None:
        """Replace Pulsar rack info and notify a rack change for every bookie listed before or after."""
        changed = self.resolver.update_rack_info(rack_info)
        self.on_bookie_rack_change(changed)

    def update_rack_entries(self, entries: RackEntries) -> bool:
        """Replace the rack-info listings of `entries`' bookies (`{bookie: {group: {"rack", "hostname"}}}`,
        `{}` to unlist one): `update_rack_info` with the whole rack info so changed, which this default
        builds. Policies that can take the changed listings alone override it (the rack-aware one).

        Returns:
            Whether isolation-group membership changed. Cost: O(rack info).
        """
        rack_info = self.resolver.rack_info
        membership_changed = False
        for bookie, listing in entries.items():
            before = tuple(group for group, members in sorted(rack_info.items()) if bookie in members)
            for group in before:
                members = rack_info[group]
                del members[bookie]
                if not members:
                    del rack_info[group]
            for group, info in listing.items():
                rack_info.setdefault(group, {})[bookie] = dict(info)
            membership_changed = membership_changed or before != tuple(sorted(listing))
        self.update_rack_info(rack_info)
        return membership_changed

    def restore_readonly(self, readonly: Iterable[str]) -> None:
        """Set the read-only set, here and in the stabilized twin (a snapshot written under
        `placement.compat.keepStaleReadOnlySet`, restored without it)."""
        self.readonly = frozenset(readonly)
        if self.secondary is not None:
            self.secondary.restore_readonly(self.readonly)

    def update_bookie_info(self, infos: Mapping[str, BookieInfo]) -> None:
        """Weights = free disk of every known bookie; unreported known bookies get 0 (spec §7.2).

        Ignored when disk-weighted placement is off (BK bug fixed, spec App. A #11).
        """
        if not self.settings.disk_weighted:
            return
        self.weights = {bookie: (infos[bookie].free_disk if bookie in infos else 0) for bookie in self.known}

    # -- queries for the cluster model -------------------------------------------------------------

    def writable_bookies(self) -> frozenset[str]:
        return frozenset(self.known)

    def pending_leaves(self) -> dict[str, float]:
        """Departed bookies still usable after a stabilization delay: bookie -> expiry time (s)."""
        return {}

    def replace_to_adhere(self, ensemble_size: int, write_quorum: int, ack_quorum: int,
                          exclude: Iterable[str] | None, current_ensemble: list[str], *, rng=None):
        raise UnsupportedOperationError(f"the {self.name} policy does not implement replace_to_adhere")

    # -- relaxation fixes ------------------------------------------------------------------------------

    def is_relaxed(self, ensemble: Sequence[str], write_quorum: int, ack_quorum: int,
                   rule: Mapping[str, Any]) -> bool:
        """Whether `ensemble` still depends on the relaxation `rule` (an `explain.relaxed` entry of
        the result that placed it). Policies override it for the rules they emit; unknown rules: False."""
        return False

    def relaxation_fix(self, ensemble_size: int, write_quorum: int, ack_quorum: int,
                       current_ensemble: Sequence[str], rule: Mapping[str, Any], exclude: Iterable[str] = (), *,
                       rng: Any = None) -> PlacementResult | None:
        """The fewest replacements that make `current_ensemble` stop depending on `rule`: None when it
        no longer does (or the rule is unknown), else a `PlacementResult` (empty and FAIL when no fix
        exists now). Policies override it for the rules they emit."""
        return None

    # -- expected shares ----------------------------------------------------------------------------

    def placement_scope(self, ensemble_size: int, custom_metadata: Mapping[str, Any] | None) -> Hashable:
        """What, beyond the topology, selects the bookies a call may place on: nothing here (`()`);
        the isolation policy overrides it. Cost: O(1)."""
        return ()

    def expected_shares(self, scope: Hashable) -> dict[str, float]:
        """Each bookie's share of one placement for a call in `scope` (`placement_scope`), over the
        bookies such a call may place on now, sorted by bookie (`placeable_shares`). Cost: O(bookies)."""
        return self.placeable_shares(())

    def placeable_shares(self, excluded: Collection[str]) -> dict[str, float]:
        """`shares.expected_shares` over the known bookies, without `excluded`, without the bookies of
        disallowed regions, and without the default location's bookies when enforcement keeps them
        unused (`enforced_skips_default_rack`); by the policy's own weights when disk weighting is on.
        Cost: O(bookies)."""
        settings = self.settings
        dropped = set(excluded)
        disallowed = set(self.disallowed_regions())
        if disallowed:
            region_of = self.region_of_bookie
            dropped.update(b for b in self.known if region_of(b) in disallowed)
        if self.enforced_skips_default_rack and settings.enforce_min_racks:
            dropped.update(self.topology.bookies_in(self.default_location))
        eligible = sorted(b for b in self.known if b not in dropped)
        return shares.expected_shares(eligible, self.weights if settings.disk_weighted else None,
                                      settings.max_weight_multiple)

    # -- snapshots ------------------------------------------------------------------------------

    def export_state(self) -> dict[str, Any]:
        """JSON-able state that the membership callbacks cannot rebuild (see `import_state`)."""
        return {
            "known": dict(sorted(self.known.items())),
            "readonly": sorted(self.readonly),
            "weights": dict(sorted(self.weights.items())),
            "join_failures": dict(sorted(self.join_failures.items())),
        }

    def import_state(self, state: Mapping[str, Any]) -> None:
        """Restore what `export_state` produced, into a freshly created policy."""
        self.handle_bookies_that_left(sorted(self.known))
        for bookie, location in sorted(state.get("known", {}).items()):
            self.topology.add(bookie, location)
            self.known[bookie] = location
        self.readonly = frozenset(state.get("readonly", ()))
        self.weights = dict(state.get("weights", {}))
        self.join_failures = dict(state.get("join_failures", {}))

    def check_invariants(self) -> None:
        """Assert that every known bookie sits in the topology at its known location (tests only)."""
        for bookie, location in self.known.items():
            assert self.topology.rack_of(bookie) == location, f"{bookie}: known at {location}, " \
                f"in the topology at {self.topology.rack_of(bookie)}"
