"""The topology at the end of an event log, and which common ledger shapes it can place (`check-conf --events`).

One job: replay a log's cluster events through the pure step (`state.step`), exactly as `replay`
applies them (time order, timed changes settled up to the log's last record time), then describe
each cluster's final topology and try `new_ensemble` for common `(E, W, A)` shapes on it.

* Requests are not answered (they change no topology); their times still move the horizon, as in
  `replay`. Dead letters are skipped: `replay` reports them.
* A shape is tried `DRAWS` times, each with the generator a request would get (`request_rng` with
  the configured `engine.seed`, the cluster and a fixed request id per shape and draw), because
  BookKeeper's greedy search can fail a create for which a valid ensemble exists: a shape that
  fails on some draws and not others is reported as such.
* The binding constraint of a failed shape is the configuration key its error names (the policy's
  `explain["constraint"]`, else its message; a key written with its value first), else the bookie
  count. A shape placed without meeting the rules names the rule it relaxed (`explain["relaxed"]`)
  or the policy's adherence key.

Cost: O(events in the log) to replay, then shapes x DRAWS placements per cluster; the replay dominates.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from events.dead_letter import DeadLetter
from events.model import REQUEST_TYPES
from policies import Adherence, NotEnoughBookiesError, PlacementError
from policies.conf_lint import Finding, Severity, is_one_level, one_level_message
from policies.location import components
from policies.region_location import region_of_location
from policies.settings import KNOWN_KEYS

from .cluster import ClusterModel
from .settings import ModelSettings
from .step import request_rng, step

COMMON_SHAPES: tuple[tuple[int, int, int], ...] = (
    (2, 2, 2), (3, 2, 2), (3, 3, 2), (3, 3, 3), (4, 3, 2), (5, 3, 2), (5, 5, 3),
)
"""`(ensemble_size, write_quorum, ack_quorum)` shapes tried on every topology: Pulsar's default
(2, 2, 2), BookKeeper's usual (3, 2, 2) and (3, 3, 2), and the wider ones operators pick for durability."""

DRAWS = 8
"""Placements tried per shape, each with its own seeded generator."""

STATUS_OK = "ok"                      # every draw placed an ensemble meeting the rules strictly
STATUS_SOFT = "meets-soft"            # placed, meeting only the soft rule (zone-aware desired zones)
STATUS_NOT_ADHERING = "not-adhering"  # placed by relaxing a rule: the ensemble does not adhere
STATUS_SOMETIMES = "fails-sometimes"  # some draws failed: the greedy search misses valid ensembles
STATUS_INFEASIBLE = "infeasible"      # every draw failed
STATUS_INVALID = "invalid"            # the policy refuses the shape itself (ValueError)

_RELAXED_RULE_KEYS = {"racks": "minNumRacksPerWriteQuorum", "zones": "desiredNumZonesPerWriteQuorum",
                      "isolation": "bookkeeperClientIsolationGroups", "regions": "region spread"}
_ADHERENCE_KEYS = {"rackaware": "minNumRacksPerWriteQuorum", "isolated": "minNumRacksPerWriteQuorum",
                   "regionaware": "minNumRacksPerWriteQuorum", "zoneaware": "minNumZonesPerWriteQuorum"}
_BOOKIE_COUNT = "eligible bookies"
_ENFORCING = frozenset({"rackaware", "isolated", "regionaware"})


@dataclass(frozen=True, slots=True, kw_only=True)
class ShapeOutcome:
    """What placing one `(E, W, A)` shape gave over `draws` tries.

    Attributes:
        shape: `(ensemble_size, write_quorum, ack_quorum)`.
        status: one of the `STATUS_*` values.
        failures: draws that raised.
        draws: draws tried.
        binding: the configuration key (or `eligible bookies`) that bound, None when nothing did.
        detail: the constraint, error or relaxation behind `binding`, as the policy worded it.
    """

    shape: tuple[int, int, int]
    status: str
    failures: int
    draws: int
    binding: str | None
    detail: str


@dataclass(frozen=True, slots=True, kw_only=True)
class TopologyReport:
    """One cluster at the end of the log.

    Attributes:
        cluster: the cluster name.
        policy: the policy's short name.
        clock_ms: the model's clock: the time of its last change (an event, or a timed change the log's
            end settled).
        writable, readonly, lost: bookie ids by registration state (sorted).
        pending: departed bookies still usable during the stabilization period (sorted).
        placeable: writable bookies the policy places on (their join succeeded; sorted).
        join_failures: bookie -> why the policy refused its location.
        racks: location -> placeable bookies there (BookKeeper's rack is the bookie's whole location).
        regions: region -> placeable bookies (region-aware policy only, else empty).
        zones: zone -> placeable bookies (zone-aware policy only, else empty).
        default_location: where an unmapped bookie is placed.
        on_default: placeable bookies at the default location (sorted).
        one_level: under the region-aware policy, bookie -> its one-level location (bookies in id order).
        shapes: the outcome of each shape tried.
    """

    cluster: str
    policy: str
    clock_ms: int
    writable: tuple[str, ...]
    readonly: tuple[str, ...]
    lost: tuple[str, ...]
    pending: tuple[str, ...]
    placeable: tuple[str, ...]
    join_failures: Mapping[str, str]
    racks: Mapping[str, int]
    regions: Mapping[str, int]
    zones: Mapping[str, int]
    default_location: str
    on_default: tuple[str, ...]
    one_level: Mapping[str, str]
    shapes: tuple[ShapeOutcome, ...]
    enforce_min_racks: bool


def final_models(items: Iterable[Any], settings: ModelSettings) -> dict[str, ClusterModel]:
    """Each cluster's model after every cluster event of `items`, settled up to the last record time.

    Args:
        items: parsed records and dead letters (`events.parse_record` results), in input order.
        settings: the model settings of the configuration under test.

    Returns:
        cluster -> its model, clusters in name order.
    """
    events: dict[str, list[Any]] = {}
    horizon: int | None = None
    for item in items:
        if isinstance(item, DeadLetter):
            continue
        horizon = item.time_ms if horizon is None else max(horizon, item.time_ms)
        if item.type not in REQUEST_TYPES:
            events.setdefault(item.cluster, []).append(item)
    models: dict[str, ClusterModel] = {}
    for cluster in sorted(events):
        models[cluster] = step(None, cluster, events[cluster], settings, horizon_ms=horizon).model
    return models


def topology_report(model: ClusterModel, shapes: Sequence[tuple[int, int, int]] = COMMON_SHAPES, *,
                    draws: int = DRAWS) -> TopologyReport:
    """Describe `model`'s topology and try each shape on it (the model's policy may keep state from the
    tries: use the model for nothing else afterwards)."""
    policy = model.policy
    placeable = tuple(sorted(policy.known))
    locations = {bookie: model.location_of(bookie) for bookie in placeable}
    default = model.default_location
    racks = Counter(location or "(none)" for location in locations.values())
    regions: Counter[str] = Counter()
    zones: Counter[str] = Counter()
    if model.policy_name == "regionaware":
        regions.update(region_of_location(location or "") for location in locations.values())
    if model.policy_name == "zoneaware":
        zones.update((components(location or "") or ["(none)"])[0] for location in locations.values())
    one_level: dict[str, str] = {}
    if model.policy_name == "regionaware":
        for bookie in sorted(set(model.writable) | set(model.readonly)):
            location = model.location_of(bookie)
            if location and is_one_level(location):
                one_level[bookie] = location
    return TopologyReport(
        cluster=model.cluster, policy=model.policy_name, clock_ms=model.clock_ms,
        writable=tuple(sorted(model.writable)), readonly=tuple(sorted(model.readonly)),
        lost=tuple(sorted(model.lost)), pending=tuple(sorted(model.pending)), placeable=placeable,
        join_failures=dict(sorted(policy.join_failures.items())),
        racks=dict(sorted(racks.items())), regions=dict(sorted(regions.items())), zones=dict(sorted(zones.items())),
        default_location=default,
        on_default=tuple(bookie for bookie in placeable if locations[bookie] == default),
        one_level=one_level,
        shapes=tuple(try_shape(model, shape, draws) for shape in shapes),
        enforce_min_racks=model.placement.enforce_min_racks,
    )


def try_shape(model: ClusterModel, shape: tuple[int, int, int], draws: int = DRAWS) -> ShapeOutcome:
    """Place `shape` `draws` times on the model's topology and summarize the outcomes."""
    ensemble_size, write_quorum, ack_quorum = shape
    failures: list[PlacementError] = []
    worst: tuple[Adherence, Mapping[str, Any]] | None = None
    for draw in range(draws):
        rng = request_rng(model.settings.seed, model.cluster,
                          f"check-conf {ensemble_size}/{write_quorum}/{ack_quorum} #{draw}")
        model.prepare_request()
        try:
            result = model.policy.new_ensemble(ensemble_size, write_quorum, ack_quorum, None, (), rng=rng)
        except ValueError as exc:
            text = str(exc)
            return ShapeOutcome(shape=shape, status=STATUS_INVALID, failures=draws, draws=draws,
                                binding=_key_named(text), detail=text)
        except PlacementError as exc:
            failures.append(exc)
            continue
        if worst is None or result.adherence < worst[0]:
            worst = (result.adherence, result.explain)
    if failures:
        first = failures[0]
        constraint = str(first.explain.get("constraint") or first)
        binding = _key_named(constraint) or _key_named(str(first))
        if binding is None:
            binding = _BOOKIE_COUNT if isinstance(first, NotEnoughBookiesError) else first.code
        status = STATUS_INFEASIBLE if len(failures) == draws else STATUS_SOMETIMES
        return ShapeOutcome(shape=shape, status=status, failures=len(failures), draws=draws, binding=binding,
                            detail=constraint)
    assert worst is not None
    adherence, explain = worst
    if adherence is Adherence.MEETS_STRICT:
        return ShapeOutcome(shape=shape, status=STATUS_OK, failures=0, draws=draws, binding=None, detail="")
    relaxed = [entry.get("rule") for entry in explain.get("relaxed", ()) if isinstance(entry, Mapping)]
    fallbacks = [str(text) for text in explain.get("fallbacks", ())]
    binding = next((_RELAXED_RULE_KEYS[rule] for rule in relaxed if rule in _RELAXED_RULE_KEYS), None)
    if binding is None and adherence is Adherence.MEETS_SOFT and model.policy_name == "zoneaware":
        binding = "desiredNumZonesPerWriteQuorum"
    if binding is None:
        binding = _ADHERENCE_KEYS.get(model.policy_name)
    status = STATUS_SOFT if adherence is Adherence.MEETS_SOFT else STATUS_NOT_ADHERING
    return ShapeOutcome(shape=shape, status=status, failures=0, draws=draws, binding=binding,
                        detail=fallbacks[-1] if fallbacks else f"adherence {adherence}")


def topology_findings(report: TopologyReport, configured: tuple[int, int, int] | None = None) -> list[Finding]:
    """What in the final topology works against the configuration (for `check-conf --events`).

    Args:
        report: the cluster's report.
        configured: the shape the configuration names (Pulsar's default ledger shape), if any; it
            must be among `report.shapes` to be judged.
    """
    found: list[Finding] = []
    where = f"cluster {report.cluster}"
    if report.one_level:
        shown = _sample(tuple(report.one_level), lambda b: f"{b} at {report.one_level[b]}")
        found.append(Finding(severity=Severity.WARNING, rule="one-level-location", key="ensemblePlacementPolicy",
                             message=f"{where}: {len(report.one_level)} bookie(s) have one-level locations "
                                     f"({shown}); {one_level_message('/rack1')}"))
    if report.on_default and report.policy in _ENFORCING:
        if report.enforce_min_racks:
            found.append(Finding(severity=Severity.WARNING, rule="default-rack", key="enforceMinNumRacksPerWriteQuorum",
                                 message=f"{where}: {len(report.on_default)} bookie(s) on the default location "
                                         f"{report.default_location} ({_sample(report.on_default)}) are never "
                                         "chosen while enforcement is on; give them a location"))
        else:
            found.append(Finding(severity=Severity.NOTE, rule="default-rack", key=None,
                                 message=f"{where}: {len(report.on_default)} bookie(s) on the default location "
                                         f"{report.default_location} ({_sample(report.on_default)}), which counts "
                                         "as one rack"))
    if report.join_failures:
        shown = _sample(tuple(report.join_failures), lambda b: f"{b}: {report.join_failures[b]}")
        found.append(Finding(severity=Severity.WARNING, rule="join-failed", key=None,
                             message=f"{where}: {len(report.join_failures)} writable bookie(s) cannot be placed "
                                     f"on: {shown}"))
    if not report.placeable:
        found.append(Finding(severity=Severity.WARNING, rule="no-bookies", key=None,
                             message=f"{where}: no writable bookie at the end of the log"))
    if configured is not None:
        for outcome in report.shapes:
            if outcome.shape == configured and outcome.status in (STATUS_INFEASIBLE, STATUS_SOMETIMES,
                                                                  STATUS_INVALID):
                found.append(Finding(severity=Severity.WARNING, rule="shape-infeasible", key=outcome.binding,
                                     message=f"{where}: Pulsar's default ledger shape {configured} is "
                                             f"{outcome.status} ({outcome.failures} of {outcome.draws} draws "
                                             f"failed): {outcome.detail}"))
    return found


def _key_named(text: str) -> str | None:
    """The placement key `text` names: the first written with its value (`minNumRacksPerWriteQuorum=3`),
    else the first named at all; None when it names none."""
    with_value = [(at, key) for key in KNOWN_KEYS if (at := text.find(key + "=")) >= 0]
    if with_value:
        return min(with_value)[1]
    positions = [(at, key) for key in KNOWN_KEYS if (at := text.find(key)) >= 0]
    return min(positions)[1] if positions else None


def _sample(items: Sequence[str], show: Any = str, limit: int = 5) -> str:
    shown = ", ".join(show(item) for item in items[:limit])
    return shown + (f", and {len(items) - limit} more" if len(items) > limit else "")


__all__ = ["COMMON_SHAPES", "DRAWS", "ShapeOutcome", "TopologyReport", "final_models", "topology_findings",
           "topology_report", "try_shape"]
