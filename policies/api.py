"""The placement API (CONTRACT §1): its value types (results, adherence, disk and health info) and
`PlacementPolicy`, the interface every policy implements and the cluster model (`state/`) programs
against.
"""

from __future__ import annotations

import enum
import random
from collections.abc import Collection, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from .resolver import LocationResolver, RackInfo
from .settings import PlacementSettings
from .topology import NetworkTopology


class Adherence(enum.IntEnum):
    """BookKeeper's `PlacementPolicyAdherence`; ordered so that `min()` gives the worst."""

    FAIL = 1
    MEETS_SOFT = 3
    MEETS_STRICT = 5

    def __str__(self) -> str:
        return self.name

    def __format__(self, spec: str) -> str:
        return format(self.name, spec)


@dataclass(frozen=True, slots=True)
class PlacementResult:
    """What a placement call returns.

    Attributes:
        ensemble: the full, ordered list of bookie ids.
        adherence: how the ensemble meets the policy.
        bookie: the chosen replacement (`replace_bookie` only).
        explain: provenance: which fallback paths were taken, what was excluded and why.
    """

    ensemble: list[str]
    adherence: Adherence
    bookie: str | None = None
    explain: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class BookieInfo:
    """Disk usage reported by a bookie (BookKeeper's `BookieInfoReader.BookieInfo`).

    The placement weight is the free disk space in bytes (spec §7.1).
    """

    total_disk: int = 0
    free_disk: int = 0

    @property
    def weight(self) -> int:
        return self.free_disk


@dataclass(frozen=True, slots=True)
class HealthInfo:
    """Per-bookie read health: last failed entry id and pending requests (spec §8.1).

    Bookies missing from `failures` have no failure (-1); missing from `pending` have 0 requests.
    """

    failures: Mapping[str, int] = field(default_factory=dict)
    pending: Mapping[str, int] = field(default_factory=dict)

    def failure_of(self, bookie: str) -> int:
        return self.failures.get(bookie, -1)

    def pending_of(self, bookie: str) -> int:
        return self.pending.get(bookie, 0)


#: `update_rack_entries` argument: bookie -> its new listings `{group: {"rack", "hostname"}}` (`{}`: unlisted).
RackEntries = Mapping[str, Mapping[str, Mapping[str, Any]]]


@runtime_checkable
class PlacementPolicy(Protocol):
    """What every placement policy offers: BookKeeper's `EnsemblePlacementPolicy` (CONTRACT §1) plus
    the read-only views and hooks the cluster model uses. `create_policy` returns one.

    Lifecycle: the policy is built from `PlacementSettings` with a resolver, an event-time clock and a
    features dict (`policies.factory`); membership arrives through `on_cluster_changed`, locations
    through `on_bookie_rack_change` / `update_rack_info` / `update_rack_entries`, disk reports through
    `update_bookie_info`; placements and checks answer against that state; `export_state` /
    `import_state` carry it across a snapshot; `placement_scope` / `expected_shares` say what share of
    placements each bookie should get (the write-skew detector, `state.skew`). The view members are
    read-only: only the policy's own methods change them.

    Attributes:
        name: the short policy name (`default`, `rackaware`, `regionaware`, `zoneaware`, `isolated`).
        settings: the parsed configuration the policy was built from.
        default_location: where an unmapped bookie is placed (`/default-rack`,
            `/default-region/default-rack`, `/default-zone/default-upgradedomain`).
        resolver: bookie -> location (the caller's mapping and Pulsar rack info).
        topology: the placed bookies indexed by location; None for a policy that places without
            locations (the default policy).
        known: the writable bookies the policy places on (their join succeeded).
        readonly: the read-only bookies of the last membership change.
        join_failures: bookie -> why its join or last move failed (an unusable location); retried at
            every membership change.
    """

    name: str
    settings: PlacementSettings
    default_location: str
    resolver: LocationResolver

    @property
    def topology(self) -> NetworkTopology | None: ...

    @property
    def known(self) -> Collection[str]: ...

    @property
    def readonly(self) -> frozenset[str]: ...

    @property
    def join_failures(self) -> Mapping[str, str]: ...

    # -- membership and locations (CONTRACT §1) -------------------------------------------------------

    def on_cluster_changed(self, writable: Iterable[str], readonly: Iterable[str], *,
                           changed: Collection[str] | None = None) -> set[str]:
        """Apply a membership snapshot; return the dead bookies. `changed`: the bookies whose membership
        may differ from the previous call's (None: compare the whole sets)."""
        ...

    def on_bookie_rack_change(self, bookies: Iterable[str]) -> None:
        """Re-resolve these bookies' locations (the caller changed the resolver mapping)."""
        ...

    def update_rack_info(self, rack_info: RackInfo) -> None:
        """Replace Pulsar rack info; every bookie listed before or after is re-resolved."""
        ...

    def update_rack_entries(self, entries: RackEntries) -> bool:
        """Replace the rack-info listings of some bookies only, with the effect of `update_rack_info`
        given the whole rack info so changed. Returns whether isolation-group membership changed."""
        ...

    def update_bookie_info(self, infos: Mapping[str, BookieInfo]) -> None:
        """Disk reports (weights for disk-weighted placement)."""
        ...

    def restore_readonly(self, readonly: Iterable[str]) -> None:
        """Set the read-only set (a snapshot written under `placement.compat.keepStaleReadOnlySet`,
        restored without it)."""
        ...

    def known_location(self, bookie: str) -> str | None:
        """Where the policy placed a known bookie; None for an unknown bookie, or when the policy
        places without locations."""
        ...

    def pending_leaves(self) -> dict[str, float]:
        """Departed bookies still usable during the stabilization delay: bookie -> expiry time (s)."""
        ...

    def reads_feature(self, name: str) -> bool:
        """Whether the feature switch `name` can change any answer of this policy."""
        ...

    def disallowed_regions(self) -> list[str]:
        """Regions placement is switched off in right now, sorted (empty unless the policy has regions)."""
        ...

    def region_of_bookie(self, bookie: str) -> str | None:
        """The region of a bookie (None when the policy has no regions)."""
        ...

    # -- placement (CONTRACT §1) ------------------------------------------------------------------------

    def new_ensemble(self, ensemble_size: int, write_quorum: int, ack_quorum: int,
                     custom_metadata: Mapping[str, bytes] | None = None, exclude: Iterable[str] | None = (), *,
                     rng: random.Random | None = None) -> PlacementResult:
        ...

    def replace_bookie(self, ensemble_size: int, write_quorum: int, ack_quorum: int,
                       custom_metadata: Mapping[str, bytes] | None, current_ensemble: Sequence[str],
                       bookie_to_replace: str, exclude: Iterable[str] | None = (), *,
                       rng: random.Random | None = None) -> PlacementResult:
        ...

    def replace_to_adhere(self, ensemble_size: int, write_quorum: int, ack_quorum: int,
                          exclude: Iterable[str] | None, current_ensemble: Sequence[str], *,
                          rng: random.Random | None = None) -> PlacementResult:
        ...

    def is_ensemble_adhering(self, ensemble: Sequence[str], write_quorum: int, ack_quorum: int) -> Adherence:
        ...

    def are_acked_bookies_adhering(self, acked: Iterable[str], write_quorum: int, ack_quorum: int) -> bool:
        ...

    # -- expected shares (what the write-skew detector compares placements with) ---------------------------

    def placement_scope(self, ensemble_size: int, custom_metadata: Mapping[str, Any] | None) -> Hashable:
        """What, beyond the topology, selects the bookies a call with these arguments may place on: `()`
        for every policy but the isolated one with isolation groups configured, whose scope is the call's
        groups (from its metadata, else the client's) and its ensemble size. Calls of one scope at one
        topology have the same `expected_shares`. Cost: O(1) (O(metadata) when isolating).

        Raises:
            PlacementError: the metadata names isolation groups in a form that cannot be read (such a
                call is refused by the placement too).
        """
        ...

    def expected_shares(self, scope: Hashable) -> dict[str, float]:
        """Each bookie's share of one placement for a call in `scope` (`placement_scope`), over the bookies
        such a call may place on now, keys sorted by bookie, shares summing to 1 (empty when none).

        Uniform, or, when `diskWeightBasedPlacementEnabled` is on, by free disk with BookKeeper's cap
        (`bookieMaxMultipleForWeightBasedPlacement` x the median; the policy's own weights). Without the
        bookies of disallowed regions, and without the default location's bookies when
        `enforceMinNumRacksPerWriteQuorum` keeps them unused; under isolation, only the bookies the
        policy's isolation analysis admits for the scope now. The caller's exclusions are not known here
        and not taken out. Cost: O(bookies).
        """
        ...

    # -- relaxations (what the ledger audit re-checks) -----------------------------------------------------

    def is_relaxed(self, ensemble: Sequence[str], write_quorum: int, ack_quorum: int,
                   rule: Mapping[str, Any]) -> bool:
        """Whether `ensemble` still depends on the relaxation `rule` (an `explain.relaxed` entry)."""
        ...

    def relaxation_fix(self, ensemble_size: int, write_quorum: int, ack_quorum: int,
                       current_ensemble: Sequence[str], rule: Mapping[str, Any], exclude: Iterable[str] = (), *,
                       rng: random.Random | None = None) -> PlacementResult | None:
        """The fewest replacements that end the dependence on `rule`: None when there is none to end."""
        ...

    # -- reads (CONTRACT §1) ----------------------------------------------------------------------------

    def register_slow_bookie(self, bookie: str, entry_id: int) -> None:
        ...

    def reorder_read_sequence(self, ensemble: Sequence[str], health: HealthInfo,
                              write_set: Sequence[int]) -> list[int]:
        ...

    def reorder_read_lac_sequence(self, ensemble: Sequence[str], health: HealthInfo,
                                  write_set: Sequence[int]) -> list[int]:
        ...

    # -- snapshots and self-check ------------------------------------------------------------------------

    def export_state(self) -> dict[str, Any]:
        """JSON-able state the membership callbacks cannot rebuild."""
        ...

    def import_state(self, state: Mapping[str, Any]) -> None:
        """Restore what `export_state` produced, into a freshly created policy."""
        ...

    def check_invariants(self) -> None:
        """Assert every internal invariant (tests only, never on the hot path)."""
        ...
