"""BookKeeper client and Pulsar broker configuration keys -> one frozen `PlacementSettings`.

Only this module knows how keys are spelled. Values may be strings (as read from a properties file)
or Python values. A malformed value raises `ValueError` naming the key, what was expected and what
arrived. Keys this module does not know are ignored: a `bookkeeper.conf` has hundreds of them.

Spec: bookkeeper-rackaware.md §9, bookkeeper-region-zone-isolation.md §5.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .location import normalize

POLICY_CLASSES = {
    "org.apache.bookkeeper.client.RackawareEnsemblePlacementPolicy": "rackaware",
    "org.apache.bookkeeper.client.RackawareEnsemblePlacementPolicyImpl": "rackaware",
    "org.apache.bookkeeper.client.RegionAwareEnsemblePlacementPolicy": "regionaware",
    "org.apache.bookkeeper.client.ZoneawareEnsemblePlacementPolicy": "zoneaware",
    "org.apache.bookkeeper.client.ZoneawareEnsemblePlacementPolicyImpl": "zoneaware",
    "org.apache.bookkeeper.client.DefaultEnsemblePlacementPolicy": "default",
    "org.apache.pulsar.bookie.rackawareness.IsolatedBookieEnsemblePlacementPolicy": "isolated",
}
SHORT_NAMES = ("rackaware", "regionaware", "zoneaware", "default", "isolated")
ISOLATION_POLICY_CLASS = "org.apache.pulsar.bookie.rackawareness.IsolatedBookieEnsemblePlacementPolicy"

KNOWN_KEYS: frozenset[str] = frozenset({
    "ensemblePlacementPolicy", "localNodeLocation", "ignoreLocalNodeInPlacementPolicy",
    "minNumRacksPerWriteQuorum", "enforceMinNumRacksPerWriteQuorum", "enforceMinNumFaultDomainsForWrite",
    "networkTopologyStabilizePeriodSeconds", "ensembleRandomReadReordering",
    "readReorderThresholdPendingRequests", "reorderReadSequenceEnabled", "bookieFailureHistoryExpirationMSec",
    "diskWeightBasedPlacementEnabled", "bookieMaxMultipleForWeightBasedPlacement",
    "reppRegionsToWrite", "reppMinimumRegionsForDurability", "reppEnableDurabilityEnforcementInReplace",
    "reppDisableDurabilityFeatureName", "reppDisallowBookiePlacementInRegionFeatureName", "reppEnableValidation",
    "minNumZonesPerWriteQuorum", "desiredNumZonesPerWriteQuorum", "enforceStrictZoneawarePlacement",
    "bookkeeperClientIsolationGroups", "isolationBookieGroups",
    "bookkeeperClientSecondaryIsolationGroups", "secondaryIsolationBookieGroups",
    "placement.compat.keepStaleReadOnlySet", "placement.isolation.failClosed", "placement.search",
})
"""Every key `PlacementSettings.from_conf` reads: the catalog the configuration lint
(`policies.conf_lint`) checks a file against. A test keeps it equal to the keys `from_conf` reads."""

_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}


def _bool(conf: Mapping[str, Any], key: str, default: bool) -> bool:
    value = conf.get(key)
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise ValueError(f"{key}: expected a boolean (true or false), got {value!r}")


def int_key(conf: Mapping[str, Any], key: str, default: int, minimum: int | None = None,
            maximum: int | None = None) -> int:
    """An integer key (a Python int or a decimal string); ValueError naming the key otherwise.

    Shared with the engine's model settings (`state.settings`), which read their keys the same way.
    """
    value = conf.get(key)
    if value is None:
        return default
    if minimum is None:
        expected = "an integer"
    elif maximum is None:
        expected = f"an integer >= {minimum}"
    else:
        expected = f"an integer between {minimum} and {maximum}"
    if isinstance(value, bool):
        raise ValueError(f"{key}: expected {expected}, got {value!r}")
    if isinstance(value, int):
        number = value
    elif isinstance(value, str):
        try:
            number = int(value.strip())
        except ValueError:
            raise ValueError(f"{key}: expected {expected}, got {value!r}") from None
    else:
        raise ValueError(f"{key}: expected {expected}, got {value!r}")
    if (minimum is not None and number < minimum) or (maximum is not None and number > maximum):
        raise ValueError(f"{key}: expected {expected}, got {value!r}")
    return number



def _str(conf: Mapping[str, Any], key: str, default: str | None) -> str | None:
    value = conf.get(key)
    if value is None:
        return default
    if not isinstance(value, str):
        raise ValueError(f"{key}: expected a string, got {value!r}")
    return value.strip()


def _list(conf: Mapping[str, Any], key: str, separator: str) -> tuple[str, ...] | None:
    """A separated list; a Python list/tuple is accepted as is. None when the key is absent."""
    value = conf.get(key)
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        items = [str(v).strip() for v in value]
    elif isinstance(value, str):
        items = [v.strip() for v in value.split(separator)]
    else:
        raise ValueError(f"{key}: expected a {separator!r}-separated list, got {value!r}")
    return tuple(v for v in items if v)


def _java_split(conf: Mapping[str, Any], key: str, separator: str) -> tuple[str, ...] | None:
    """A list read as Java's `String.split` reads it; None when the key is absent.

    BK quirk (spec bookkeeper-region-zone-isolation.md §1.1, §1.5): `reppRegionsToWrite` is split on
    `;` with nothing trimmed, so empty and space-padded names are regions of their own (`r1;;r2` lists
    three, one named ""; `r1; r2` lists `r1` and ` r2`), except that trailing empty items are dropped
    (`r1;r2;` lists two, `;` none) and a value without the separator is one item (`""` lists one, "").
    Every item counts against `reppMinimumRegionsForDurability`. A Python list is taken as it is.
    """
    value = conf.get(key)
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        return tuple(str(v) for v in value)
    if not isinstance(value, str):
        raise ValueError(f"{key}: expected a {separator!r}-separated list, got {value!r}")
    if separator not in value:
        return (value,)
    items = value.split(separator)
    while items and not items[-1]:
        items.pop()
    return tuple(items)


SEARCHES = ("bookkeeper", "complete")
"""Values of `placement.search`: BookKeeper's greedy search alone, or followed by the complete search."""


def search_name(value: Any) -> str:
    """`placement.search`: `bookkeeper` (default) or `complete`; ValueError naming the key otherwise."""
    if value is None:
        return "bookkeeper"
    if isinstance(value, str) and value.strip().lower() in SEARCHES:
        return value.strip().lower()
    raise ValueError(f"placement.search: expected one of {', '.join(SEARCHES)}, got {value!r}")


def policy_name(value: Any) -> str:
    """Short policy name for a Java class name or short name; ValueError naming the key otherwise."""
    if isinstance(value, str):
        name = value.strip()
        if name in POLICY_CLASSES:
            return POLICY_CLASSES[name]
        if name.lower() in SHORT_NAMES:
            return name.lower()
    known = ", ".join(SHORT_NAMES)
    raise ValueError(f"ensemblePlacementPolicy: unknown placement policy {value!r}; use one of {known} "
                     "or the BookKeeper/Pulsar class name")


@dataclass(frozen=True, slots=True, kw_only=True)
class PlacementSettings:
    """Every placement-related key, parsed once. Field comments give the key and its default."""

    policy: str = "rackaware"                          # ensemblePlacementPolicy (RackawareEnsemblePlacementPolicy)
    local_node_location: str | None = None             # localNodeLocation (absent: no local node)
    ignore_local_node: bool = False                    # ignoreLocalNodeInPlacementPolicy
    min_racks_per_write_quorum: int = 2                # minNumRacksPerWriteQuorum
    enforce_min_racks: bool = False                    # enforceMinNumRacksPerWriteQuorum
    enforce_min_fault_domains_for_write: bool = False  # enforceMinNumFaultDomainsForWrite
    stabilize_period_s: int = 0                        # networkTopologyStabilizePeriodSeconds
    random_read_reordering: bool = False               # ensembleRandomReadReordering
    read_reorder_threshold_pending: int = 0            # readReorderThresholdPendingRequests
    reorder_read_sequence: bool = True                 # reorderReadSequenceEnabled
    failure_history_expiration_ms: int = 60000         # bookieFailureHistoryExpirationMSec
    disk_weighted: bool = False                        # diskWeightBasedPlacementEnabled
    max_weight_multiple: int = 3                       # bookieMaxMultipleForWeightBasedPlacement
    regions_to_write: tuple[str, ...] | None = None    # reppRegionsToWrite (';'-separated; None: unset)
    min_regions_for_durability: int = 2                # reppMinimumRegionsForDurability
    durability_in_replace: bool = True                 # reppEnableDurabilityEnforcementInReplace
    disable_durability_feature: str = "repp_disable_durability_enforcement"  # reppDisableDurabilityFeatureName
    disallow_region_feature: str | None = None         # reppDisallowBookiePlacementInRegionFeatureName
    region_validation: bool = True                     # reppEnableValidation
    min_zones_per_write_quorum: int = 2                # minNumZonesPerWriteQuorum
    desired_zones_per_write_quorum: int = 3            # desiredNumZonesPerWriteQuorum
    strict_zoneaware: bool = True                      # enforceStrictZoneawarePlacement
    isolation_groups: tuple[str, ...] | None = None    # bookkeeperClientIsolationGroups / isolationBookieGroups
    # bookkeeperClientSecondaryIsolationGroups / secondaryIsolationBookieGroups
    secondary_isolation_groups: tuple[str, ...] = ()
    keep_stale_readonly_set: bool = False              # placement.compat.keepStaleReadOnlySet (BK quirk App. A #2)
    isolation_fail_closed: bool = False                # placement.isolation.failClosed
    # placement.search: "complete" backs the rack-aware search under enforcement with an exact one
    search: str = "bookkeeper"

    @property
    def effective_min_regions(self) -> int:
        """`minRegionsForDurability`: the configured minimum only when regions to write are set."""
        return self.min_regions_for_durability if self.regions_to_write is not None else 0

    @classmethod
    def from_conf(cls, conf: Mapping[str, Any]) -> PlacementSettings:
        """Parse a configuration mapping; raise ValueError naming the key on a bad value."""
        policy = policy_name(conf.get("ensemblePlacementPolicy", "rackaware"))
        local = _str(conf, "localNodeLocation", None)
        if local:
            try:
                local = normalize(local)
            except ValueError:
                raise ValueError(f"localNodeLocation: expected a network location starting with '/', "
                                 f"got {local!r}") from None
        # Pulsar's stock broker.conf carries a blank `bookkeeperClientIsolationGroups=` line meaning "unset".
        isolation = _list(conf, "bookkeeperClientIsolationGroups", ",") or None
        if isolation is None:
            isolation = _list(conf, "isolationBookieGroups", ",")
        secondary = _list(conf, "bookkeeperClientSecondaryIsolationGroups", ",")
        if secondary is None:
            secondary = _list(conf, "secondaryIsolationBookieGroups", ",")
        regions = _java_split(conf, "reppRegionsToWrite", ";")
        settings = cls(
            policy=policy,
            local_node_location=local or None,
            ignore_local_node=_bool(conf, "ignoreLocalNodeInPlacementPolicy", False),
            min_racks_per_write_quorum=int_key(conf, "minNumRacksPerWriteQuorum", 2, minimum=0),
            enforce_min_racks=_bool(conf, "enforceMinNumRacksPerWriteQuorum", False),
            enforce_min_fault_domains_for_write=_bool(conf, "enforceMinNumFaultDomainsForWrite", False),
            stabilize_period_s=int_key(conf, "networkTopologyStabilizePeriodSeconds", 0, minimum=0),
            random_read_reordering=_bool(conf, "ensembleRandomReadReordering", False),
            read_reorder_threshold_pending=int_key(conf, "readReorderThresholdPendingRequests", 0),
            reorder_read_sequence=_bool(conf, "reorderReadSequenceEnabled", True),
            failure_history_expiration_ms=int_key(conf, "bookieFailureHistoryExpirationMSec", 60000, minimum=0),
            disk_weighted=_bool(conf, "diskWeightBasedPlacementEnabled", False),
            max_weight_multiple=int_key(conf, "bookieMaxMultipleForWeightBasedPlacement", 3),
            regions_to_write=regions,
            min_regions_for_durability=int_key(conf, "reppMinimumRegionsForDurability", 2, minimum=0),
            durability_in_replace=_bool(conf, "reppEnableDurabilityEnforcementInReplace", True),
            disable_durability_feature=_str(conf, "reppDisableDurabilityFeatureName",
                                            "repp_disable_durability_enforcement") or "",
            disallow_region_feature=_str(conf, "reppDisallowBookiePlacementInRegionFeatureName", None) or None,
            region_validation=_bool(conf, "reppEnableValidation", True),
            min_zones_per_write_quorum=int_key(conf, "minNumZonesPerWriteQuorum", 2, minimum=0),
            desired_zones_per_write_quorum=int_key(conf, "desiredNumZonesPerWriteQuorum", 3, minimum=0),
            strict_zoneaware=_bool(conf, "enforceStrictZoneawarePlacement", True),
            isolation_groups=isolation,
            secondary_isolation_groups=secondary or (),
            keep_stale_readonly_set=_bool(conf, "placement.compat.keepStaleReadOnlySet", False),
            isolation_fail_closed=_bool(conf, "placement.isolation.failClosed", False),
            search=search_name(conf.get("placement.search")),
        )
        if settings.isolation_groups is not None and policy != "isolated":
            if policy != "rackaware":
                raise ValueError(
                    f"bookkeeperClientIsolationGroups: isolation groups work only over rack-aware placement "
                    f"(Pulsar's isolation policy extends it), but ensemblePlacementPolicy is {policy}; "
                    "remove the groups or use rackaware/isolated")
            # Pulsar selects the isolation policy whenever isolation groups are configured.
            settings = _replace(settings, policy="isolated")
        settings.check()
        return settings

    def check(self) -> None:
        """Reject impossible combinations (BookKeeper's IllegalArgumentException at initialize).

        The zone keys are checked only for the zone-aware policy, the only one that reads them (spec
        bookkeeper-region-zone-isolation.md §3.2).
        """
        if self.policy == "zoneaware" and self.desired_zones_per_write_quorum < 1:
            raise ValueError(
                f"desiredNumZonesPerWriteQuorum: expected an integer >= 1 for the zone-aware policy, got "
                f"{self.desired_zones_per_write_quorum}")
        if self.policy == "zoneaware" and self.min_zones_per_write_quorum > self.desired_zones_per_write_quorum:
            raise ValueError(
                f"minNumZonesPerWriteQuorum: {self.min_zones_per_write_quorum} is greater than "
                f"desiredNumZonesPerWriteQuorum ({self.desired_zones_per_write_quorum}); lower it or raise the desired")
        if self.policy == "regionaware" and self.regions_to_write is not None and \
                len(self.regions_to_write) < self.min_regions_for_durability:
            raise ValueError(
                f"reppRegionsToWrite: lists {len(self.regions_to_write)} region(s) but "
                f"reppMinimumRegionsForDurability is {self.min_regions_for_durability}; list more regions "
                "or lower the minimum")


def _replace(settings: PlacementSettings, **changes: Any) -> PlacementSettings:
    return dataclasses.replace(settings, **changes)
