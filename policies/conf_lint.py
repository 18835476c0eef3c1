"""The configuration lint: a BookKeeper/Pulsar/engine key mapping -> findings (`placement-engine check-conf`).

One job: say what in a configuration will not do what its author meant, before the engine runs.
The engine itself accepts any key that is not `engine.*` (a `bookkeeper.conf` has hundreds), so a
misspelled placement key (`minNumRackPerWriteQuorum`) is silently not applied; this module finds it.

Each finding has a severity:

* `ERROR`: the configuration does not say what it seems to say, or the engine refuses it: an unknown
  key close to a key the engine reads (a typo: the intended setting is not applied), an unknown
  `engine.*` key, a malformed value or an impossible combination (what `PlacementSettings.from_conf`
  refuses).
* `WARNING`: the engine runs, but a key has no effect or a combination is risky: a key the chosen
  policy does not read, a Pulsar broker key the engine does not translate, an unknown key close to no
  key the engine reads, contradictory settings.
* `NOTE`: for information only: a BookKeeper or Pulsar key the engine has no use for.

The keys the engine reads are `policies.settings.KNOWN_KEYS` and the engine keys the caller passes
(the streaming and model settings own them); the BookKeeper and Pulsar keys it knows but does not read
are `policies.key_catalog`. `POLICY_KEYS` says which placement keys each policy reads.

Cost: O(keys) lookups, plus O(unknown keys x catalog) for the "did you mean" search (difflib), which dominates.
"""

from __future__ import annotations

import difflib
import enum
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .key_catalog import (
    BOOKKEEPER_CLIENT_KEYS,
    BOOKKEEPER_SERVER_KEYS,
    LOCATION_SOURCE_KEYS,
    PULSAR_BROKER_KEYS,
    PULSAR_DEFAULT_SHAPE,
    PULSAR_MIN_AVAILABLE_IN_GROUPS,
    PULSAR_PASS_THROUGH,
    PULSAR_REGIONAWARE_SWITCH,
    PULSAR_SHAPE_KEYS,
    PULSAR_TRANSLATED,
)
from .location import components
from .settings import KNOWN_KEYS, PlacementSettings, policy_name

# -- severities and findings -------------------------------------------------------------------------


class Severity(enum.IntEnum):
    """How bad a finding is; the lint's exit code is the worst WARNING/ERROR (0 without either)."""

    NOTE = 0
    WARNING = 1
    ERROR = 2

    def __str__(self) -> str:
        return self.name.lower()


@dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    """One thing the lint has to say.

    Attributes:
        severity: ERROR, WARNING or NOTE.
        rule: a short stable name of the rule that found it (`unknown-key`, `ignored-by-policy`, ...);
            the README lists them.
        key: the configuration key concerned (the first one, for a combination), or None.
        message: what is wrong and what to do, naming the keys.
    """

    severity: Severity
    rule: str
    key: str | None
    message: str

    def __str__(self) -> str:
        return f"{self.severity}: {self.key}: {self.message}" if self.key else f"{self.severity}: {self.message}"


def exit_code(findings: Iterable[Finding]) -> int:
    """0 clean (notes only), 1 warnings, 2 errors (CONTRACT §3)."""
    return int(max((finding.severity for finding in findings), default=Severity.NOTE))


# -- the catalog --------------------------------------------------------------------------------------

ROLE_READ_PATH: frozenset[str] = frozenset({
    "ensembleRandomReadReordering", "readReorderThresholdPendingRequests", "reorderReadSequenceEnabled",
    "bookieFailureHistoryExpirationMSec", "enforceMinNumFaultDomainsForWrite",
})
"""Placement keys parsed for callers of the read-order and acked-adherence methods: the engine answers
creates, replaces and checks only, so no decision depends on them."""

_COMMON = frozenset({"ensemblePlacementPolicy", "diskWeightBasedPlacementEnabled",
                     "bookieMaxMultipleForWeightBasedPlacement", "placement.compat.keepStaleReadOnlySet"})
_RACK = frozenset({"localNodeLocation", "ignoreLocalNodeInPlacementPolicy", "minNumRacksPerWriteQuorum",
                   "enforceMinNumRacksPerWriteQuorum", "networkTopologyStabilizePeriodSeconds"})
_REGION = frozenset({"reppRegionsToWrite", "reppMinimumRegionsForDurability",
                     "reppEnableDurabilityEnforcementInReplace", "reppDisableDurabilityFeatureName",
                     "reppDisallowBookiePlacementInRegionFeatureName", "reppEnableValidation"})
_ZONE = frozenset({"minNumZonesPerWriteQuorum", "desiredNumZonesPerWriteQuorum", "enforceStrictZoneawarePlacement",
                   "networkTopologyStabilizePeriodSeconds"})
_SEARCH = frozenset({"placement.search"})   # the rack-aware search under enforcement (and so isolated)
_ISOLATION = frozenset({"bookkeeperClientIsolationGroups", "isolationBookieGroups",
                        "bookkeeperClientSecondaryIsolationGroups", "secondaryIsolationBookieGroups",
                        "placement.isolation.failClosed"})

POLICY_KEYS: Mapping[str, frozenset[str]] = {
    "default": _COMMON,
    "rackaware": _COMMON | _RACK | _SEARCH,
    "isolated": _COMMON | _RACK | _SEARCH | _ISOLATION,
    "regionaware": _COMMON | _RACK | _REGION,
    "zoneaware": _COMMON | _ZONE,
}
"""The placement keys each policy reads (the read-path keys, `ROLE_READ_PATH`, apart). The region-aware
policy reads the rack keys for the rack-aware policy it runs inside each region; the isolation policy
is Pulsar's extension of the rack-aware one."""

ENGINE_PREFIX = "engine."
CLOSE_MATCH_CUTOFF = 0.85
"""difflib ratio above which an unknown key is taken for a misspelling of a known one. At 0.85 a
dropped, doubled or swapped letter in a key of 12 or more characters matches; unrelated keys that
share a prefix (`bookkeeperClient...`) do not."""


# -- the lint -----------------------------------------------------------------------------------------


def lint_conf(conf: Mapping[str, Any], *, engine_keys: Collection[str] = (),
              engine_prefixes: Collection[str] = ()) -> list[Finding]:
    """Lint one configuration mapping (values as read from a properties file).

    Args:
        conf: the whole configuration: BookKeeper, Pulsar and engine keys.
        engine_keys: every `engine.*` key the engine reads (the streaming and model settings own them).
        engine_prefixes: prefixes under which any key is accepted (`engine.kafka.client.`).

    Returns:
        The findings: first one per key that is not a placement or engine key, in the order of `conf`,
        then a refused value, then the combinations, then the keys the policy does not read.
    """
    catalog = _Catalog(frozenset(engine_keys), tuple(engine_prefixes))
    findings: list[Finding] = []
    for key, value in conf.items():
        if not catalog.is_read(key):
            findings.append(_foreign_key(key, value, conf, catalog))
    settings, policy = _parse(conf, findings)
    if policy is not None:
        findings.extend(_combinations(conf, settings, policy))
        reported = {finding.key for finding in findings}
        findings.extend(_ignored_keys(conf, policy, reported))
    return findings


@dataclass(frozen=True, slots=True)
class _Catalog:
    """The keys the engine reads (placement and engine keys) and every key the lint knows."""

    engine_keys: frozenset[str]
    engine_prefixes: tuple[str, ...]

    def is_read(self, key: str) -> bool:
        return key in KNOWN_KEYS or key in self.engine_keys or key.startswith(self.engine_prefixes)

    @property
    def read(self) -> frozenset[str]:
        return KNOWN_KEYS | self.engine_keys

    @property
    def known(self) -> frozenset[str]:
        return KNOWN_KEYS | self.engine_keys | BOOKKEEPER_CLIENT_KEYS | BOOKKEEPER_SERVER_KEYS | PULSAR_BROKER_KEYS


def closest_key(key: str, candidates: Iterable[str]) -> str | None:
    """The known key `key` most likely misspells, or None: a match ignoring case, else the closest
    candidate with a difflib ratio of at least `CLOSE_MATCH_CUTOFF` (case ignored)."""
    by_lower: dict[str, str] = {}
    for candidate in sorted(candidates):
        by_lower.setdefault(candidate.lower(), candidate)
    lowered = key.lower()
    if lowered in by_lower:
        return by_lower[lowered]
    match = difflib.get_close_matches(lowered, list(by_lower), n=1, cutoff=CLOSE_MATCH_CUTOFF)
    return by_lower[match[0]] if match else None


def effective_policy(conf: Mapping[str, Any]) -> str | None:
    """The policy the engine would run (isolation groups select `isolated`), or None when the
    configuration is refused."""
    try:
        return PlacementSettings.from_conf(_placement_part(conf)).policy
    except ValueError:
        return None


def configured_shape(conf: Mapping[str, Any]) -> tuple[int, int, int] | None:
    """Pulsar's default ledger shape `(E, W, A)` when the configuration sets any of its keys (Pulsar's
    defaults fill the others), else None; None too when a value is not a positive integer."""
    if not any(key in conf for key in PULSAR_SHAPE_KEYS):
        return None
    shape = []
    for key, default in zip(PULSAR_SHAPE_KEYS, PULSAR_DEFAULT_SHAPE, strict=True):
        try:
            number = int(str(conf.get(key, default)).strip())
        except ValueError:
            return None
        if number < 1:
            return None
        shape.append(number)
    return shape[0], shape[1], shape[2]


def is_one_level(location: str) -> bool:
    """A location of one level (`/rack1`): under the region-aware policy its one component is read as
    the region, and each such "region" has a single rack."""
    return len(components(location)) == 1


def one_level_message(locations: str) -> str:
    """The warning text for one-level locations met by the region-aware policy (shared with the
    topology report so both say the same); `locations` shows the ones met."""
    return (f"the region-aware policy reads a one-level location ({locations}) as a region holding one "
            "rack, so every rack becomes a region and placement inside it falls back to random selection; "
            "give bookies /region/rack locations or use ensemblePlacementPolicy=rackaware")


# -- rules --------------------------------------------------------------------------------------------


def _foreign_key(key: str, value: Any, conf: Mapping[str, Any], catalog: _Catalog) -> Finding:
    """A key the engine does not read: a Pulsar or BookKeeper key, or an unknown (perhaps misspelled) one."""
    if key in PULSAR_TRANSLATED:
        return _pulsar_translated(key, value, conf)
    if key == PULSAR_MIN_AVAILABLE_IN_GROUPS and _is_set(value):
        return Finding(severity=Severity.WARNING, rule="pulsar-key", key=key, message=(
            "the engine does not implement this Pulsar key: it uses the secondary isolation groups when the "
            "primary groups have fewer writable bookies than the ensemble needs"))
    if key in PULSAR_SHAPE_KEYS:
        return Finding(severity=Severity.NOTE, rule="pulsar-shape", key=key, message=(
            "Pulsar's default ledger shape: not read by the engine (requests carry their own); check-conf "
            "tests it against the topology given with --events"))
    if key in LOCATION_SOURCE_KEYS:
        return Finding(severity=Severity.NOTE, rule="not-used", key=key, message=(
            "the engine does not read it: bookie locations come from the event stream "
            "(bookie_writable and bookie_location events)"))
    if key in PULSAR_BROKER_KEYS:
        return Finding(severity=Severity.NOTE, rule="not-used", key=key,
                       message="a Pulsar broker key the engine does not read")
    if key in BOOKKEEPER_CLIENT_KEYS:
        return Finding(severity=Severity.NOTE, rule="not-used", key=key,
                       message="a BookKeeper client key the engine does not read")
    if key in BOOKKEEPER_SERVER_KEYS:
        return Finding(severity=Severity.NOTE, rule="not-used", key=key,
                       message="a bookie (server) key the engine does not read")
    if key.startswith(PULSAR_PASS_THROUGH):
        return _pass_through(key)
    if key.startswith(ENGINE_PREFIX):
        guess = closest_key(key, catalog.engine_keys)
        hint = f"did you mean {guess}?" if guess else "conf/engine.properties lists the engine keys"
        return Finding(severity=Severity.ERROR, rule="unknown-key", key=key,
                       message=f"unknown engine key (the engine refuses to start with it); {hint}")
    guess = closest_key(key, catalog.known)
    if guess is None:
        return Finding(severity=Severity.WARNING, rule="unknown-key", key=key, message=(
            "unknown key, close to no BookKeeper, Pulsar or engine key; the engine ignores it"))
    if guess not in catalog.read:
        return Finding(severity=Severity.WARNING, rule="unknown-key", key=key, message=(
            f"unknown key; did you mean {guess}? The engine does not read {guess} either"))
    kept = f"its value {conf[guess]!r}" if guess in conf else "its default"
    return Finding(severity=Severity.ERROR, rule="unknown-key", key=key, message=(
        f"unknown key; did you mean {guess}? As written it is ignored, so {guess} keeps {kept}"))


def _pulsar_translated(key: str, value: Any, conf: Mapping[str, Any]) -> Finding:
    target = PULSAR_TRANSLATED[key]
    if target == "ensemblePlacementPolicy":
        wanted = "regionaware" if key == PULSAR_REGIONAWARE_SWITCH else "rackaware"
        advice = f"write ensemblePlacementPolicy={wanted}" if _is_true(value) else "remove it"
    else:
        advice = f"write {target}={str(value).strip()}"
    already = f" ({target} is set to {conf[target]!r} and applies)" if target in conf else ""
    return Finding(severity=Severity.WARNING, rule="pulsar-key", key=key, message=(
        f"Pulsar's broker translates this key into {target}, the engine does not: {advice}{already}"))


def _pass_through(key: str) -> Finding:
    target = key[len(PULSAR_PASS_THROUGH):]
    if target in KNOWN_KEYS:
        return Finding(severity=Severity.WARNING, rule="pulsar-key", key=key, message=(
            f"Pulsar hands this to its BookKeeper client as {target}, the engine does not: write {target}"))
    return Finding(severity=Severity.NOTE, rule="not-used", key=key,
                   message=f"a Pulsar pass-through of {target} to its BookKeeper client; the engine does not read it")


def _parse(conf: Mapping[str, Any], findings: list[Finding]) -> tuple[PlacementSettings | None, str | None]:
    """Parse the placement keys; a refusal becomes an `invalid-value` error. Returns the settings (None
    when refused) and the policy to lint against (the configured one when the rest is refused)."""
    try:
        settings = PlacementSettings.from_conf(_placement_part(conf))
    except ValueError as exc:
        message = str(exc)
        key, _, rest = message.partition(": ")
        findings.append(Finding(severity=Severity.ERROR, rule="invalid-value", key=key if rest else None,
                                message=rest or message))
        try:
            return None, policy_name(conf.get("ensemblePlacementPolicy", "rackaware"))
        except ValueError:
            return None, None
    return settings, settings.policy


def _ignored_keys(conf: Mapping[str, Any], policy: str, reported: set[str | None]) -> list[Finding]:
    read = POLICY_KEYS[policy]
    found: list[Finding] = []
    for key, value in conf.items():
        if key in reported or key not in KNOWN_KEYS or not _is_set(value):
            continue
        if key in ROLE_READ_PATH:
            found.append(Finding(severity=Severity.NOTE, rule="read-path-key", key=key, message=(
                "parsed for the read-order and acked-adherence methods; the engine answers creates, "
                "replaces and checks, so no decision depends on it")))
        elif key not in read:
            readers = ", ".join(name for name, keys in POLICY_KEYS.items() if key in keys)
            found.append(Finding(severity=Severity.WARNING, rule="ignored-by-policy", key=key, message=(
                f"the {policy} policy does not read it (read by: {readers}); it has no effect")))
    return found


def _combinations(conf: Mapping[str, Any], settings: PlacementSettings | None, policy: str) -> list[Finding]:
    """Contradictory or risky combinations of keys the policy reads."""
    found: list[Finding] = []

    def warn(rule: str, key: str, message: str, severity: Severity = Severity.WARNING) -> None:
        found.append(Finding(severity=severity, rule=rule, key=key, message=message))

    primary = _is_set(conf.get("bookkeeperClientIsolationGroups")) or _is_set(conf.get("isolationBookieGroups"))
    for secondary in ("bookkeeperClientSecondaryIsolationGroups", "secondaryIsolationBookieGroups"):
        if _is_set(conf.get(secondary)) and not primary:
            warn("secondary-without-primary", secondary,
                 "secondary isolation groups without primary groups (bookkeeperClientIsolationGroups): "
                 "isolation is off and the secondary groups are ignored")
    if policy == "default" and _is_set(conf.get("networkTopologyStabilizePeriodSeconds")):
        warn("ignored-by-policy", "networkTopologyStabilizePeriodSeconds",
             "the default policy does not stabilize the topology; here the key only sets the default of "
             "engine.flapWindowSeconds")
    if settings is None:
        return found
    if primary and conf.get("ensemblePlacementPolicy") is not None and \
            policy_name(conf["ensemblePlacementPolicy"]) == "rackaware":
        warn("isolation-selects-policy", "bookkeeperClientIsolationGroups",
             "isolation groups select the isolated policy over ensemblePlacementPolicy=rackaware, as in Pulsar",
             Severity.NOTE)
    if settings.isolation_groups is not None:
        both = sorted(set(settings.isolation_groups) & set(settings.secondary_isolation_groups))
        if both:
            warn("group-in-both", "bookkeeperClientSecondaryIsolationGroups",
                 f"group(s) {', '.join(both)} are both primary and secondary; a group listed as primary is "
                 "always eligible, so the secondary listing has no effect")
    if "bookieMaxMultipleForWeightBasedPlacement" in conf and not settings.disk_weighted:
        warn("weights-off", "bookieMaxMultipleForWeightBasedPlacement",
             "has no effect while diskWeightBasedPlacementEnabled is false")
    reads_racks = "minNumRacksPerWriteQuorum" in POLICY_KEYS[policy]
    if reads_racks and settings.local_node_location and settings.ignore_local_node:
        warn("local-node-ignored", "localNodeLocation",
             "ignoreLocalNodeInPlacementPolicy=true: the local node is ignored, so localNodeLocation has no effect")
    if reads_racks and settings.min_racks_per_write_quorum <= 1:
        suffix = (": with enforceMinNumRacksPerWriteQuorum=true bookies on the default rack are still never "
                  "chosen" if settings.enforce_min_racks else "")
        warn("rack-rule-off", "minNumRacksPerWriteQuorum",
             f"minNumRacksPerWriteQuorum={settings.min_racks_per_write_quorum} asks for no rack diversity{suffix}")
    if "placement.search" in POLICY_KEYS[policy] and settings.search == "complete" and not settings.enforce_min_racks:
        warn("complete-search-idle", "placement.search",
             "placement.search=complete has no effect while enforceMinNumRacksPerWriteQuorum is false: without "
             "enforcement BookKeeper's search fails only when too few bookies are eligible")
    if settings.keep_stale_readonly_set:
        warn("compat-bug", "placement.compat.keepStaleReadOnlySet",
             "reproduces BookKeeper's never-cleared read-only set: a bookie that returns from read-only stays "
             "excluded from placement until it leaves")
    if policy == "regionaware":
        found.extend(_region_combinations(conf, settings))
    return found


def _region_combinations(conf: Mapping[str, Any], settings: PlacementSettings) -> list[Finding]:
    found: list[Finding] = []
    if settings.regions_to_write is None:
        for key in ("reppMinimumRegionsForDurability", "reppEnableDurabilityEnforcementInReplace"):
            if _is_set(conf.get(key)):
                found.append(Finding(severity=Severity.WARNING, rule="needs-regions-to-write", key=key, message=(
                    "read only when reppRegionsToWrite is set (BookKeeper enforces durability across "
                    "the listed regions only); it has no effect")))
    else:
        odd = [name for name in settings.regions_to_write if not name or name != name.strip()]
        if odd:
            shown = ", ".join(repr(name) for name in odd)
            found.append(Finding(severity=Severity.WARNING, rule="region-name-spaces", key="reppRegionsToWrite",
                                 message=(
                f"lists region(s) {shown}: BookKeeper splits on ';' without trimming, so an empty or "
                "space-padded item is a region of its own, spaces included; remove them")))
    local = settings.local_node_location
    if local and not settings.ignore_local_node and is_one_level(local):
        found.append(Finding(severity=Severity.WARNING, rule="one-level-location", key="localNodeLocation",
                             message=one_level_message(local)))
    return found


# -- helpers ------------------------------------------------------------------------------------------


def _placement_part(conf: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in conf.items() if not key.startswith(ENGINE_PREFIX)}


def _is_set(value: Any) -> bool:
    """A value that says something (Pulsar's stock files carry blank `key=` lines meaning unset)."""
    return value is not None and str(value).strip() != ""


def _is_true(value: Any) -> bool:
    return str(value).strip().lower() in {"true", "yes", "on", "1"}


__all__ = ["Finding", "Severity", "closest_key", "configured_shape", "effective_policy", "exit_code",
           "is_one_level", "lint_conf", "one_level_message"]
