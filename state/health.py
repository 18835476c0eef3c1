"""Topology health: bookie-level conditions an operator should fix, each raised once when it starts
and resolved (`<type>.resolved`, same subject) when it ends (CONTRACT §2 "Alerts").

Spec: bookkeeper-rackaware.md §1.4 (join failures), §2.4 (stabilization), §4.3 (default-rack bookies
under `enforceMinNumRacksPerWriteQuorum`); upstream apache/bookkeeper#2957 (no default-rack alarm
when enforcement is off and every bookie shares the default rack).

* `placement.bookie.default_rack` (opened here): a writable bookie is placed in the policy's
  default location and either enforcement is on (it is never used) or other bookies have racks (it
  was probably forgotten). Clears when it moves, leaves, or the condition ends.
* `placement.bookie.departure_pending` (opened here): a writable bookie left (lost or read-only) and
  waits out `networkTopologyStabilizePeriodSeconds`. Clears when it returns (`outcome: returned`)
  or its delay ends (`outcome: expired`, severity warning).
* `placement.bookie.join_failed` (opened by `ClusterModel`): a bookie's location is invalid or of
  another depth. Clears when it joins, or leaves.
* `placement.bookie.flapping` (opened by `ClusterModel`): `engine.flapThreshold` departures inside
  `engine.flapWindowSeconds`. Clears when the window passes without reaching the threshold.

A clearing is a `<type>.resolved` event with the same subject.

`TopologyHealth.observe(model, touched, time_ms)` runs after every record. Cost: O(touched bookies)
plus O(size) diffs of the (small) flapping and join-failure sets; pending leaves cost O(bookies that
entered or left them since the last observation), read from the model's change log
(`ClusterModel.pending_changes_since`), so P delays that end one by one cost O(P) in all, not
O(P^2) (the whole dicts are compared only by a health that has not followed the model record by
record: the first observation after a snapshot restore). All of it only when the topology version moved; when
the cluster first gets (or loses its last) bookie outside the default rack, the default-rack bookies
are re-evaluated (O(default-rack bookies)).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from events.limits import MAX_TIME_MS
from events.model import BookieLocation, BookieLost, BookieReadonly, BookieWritable, ClusterView, FeatureSet
from events.times import format_time
from policies.resolver import host_of

from . import outputs
from .outputs import Output

ALERT_DEFAULT_RACK = "placement.bookie.default_rack"
ALERT_DEPARTURE_PENDING = "placement.bookie.departure_pending"
RESOLVED_SUFFIX = ".resolved"
_ENFORCING_POLICIES = frozenset({"rackaware", "isolated", "regionaware"})
HEALTH_ALERT_TYPES = (ALERT_DEFAULT_RACK, ALERT_DEPARTURE_PENDING, outputs.ALERT_JOIN_FAILED,
                      outputs.ALERT_FLAPPING)


class TopologyHealth:
    """Open bookie-level health alerts of one cluster and the state they were derived from.

    Args:
        cluster: the cluster name.
    """

    def __init__(self, cluster: str) -> None:
        self.cluster = cluster
        self.default_rack: dict[str, str] = {}   # bookie -> severity of its open default-rack alert
        self.pending: dict[str, float] = {}      # bookie -> time (s) it left, as the model had it
        self.flapping: set[str] = set()
        self.join_failed: set[str] = set()
        self.mixed = False                       # some placed bookie is outside the default rack
        self.version = -1
        self.settled: list[str] = []             # pending leaves that ended at the last observation
        # The model's `pending_serial` when `pending` was last compared; None: compare the whole dicts.
        self.pending_serial: int | None = 0

    # -- the check -------------------------------------------------------------------------------

    def observe(self, model: Any, touched: Iterable[str], time_ms: int) -> list[Output]:
        """Compare the model with what was last seen; open and resolve alerts. See the module docstring.

        Args:
            model: the `ClusterModel` after a record was applied.
            touched: bookies whose membership or location the record changed.
            time_ms: the cluster clock.
        """
        produced: list[Output] = []
        self.settled = []
        version = model.version
        key = f"v{version}"
        if model.flapping != self.flapping:
            for bookie in sorted(self.flapping - model.flapping):
                produced.append(self._resolved(outputs.ALERT_FLAPPING, bookie, time_ms, key, outputs.INFO,
                                               {"bookie": bookie, "reason": "no longer flapping: fewer departures "
                                                "than engine.flapThreshold inside engine.flapWindowSeconds"}))
            self.flapping = set(model.flapping)
        failures = model.join_failures
        if failures.keys() != self.join_failed:
            known = model.policy.known
            for bookie in sorted(self.join_failed - failures.keys()):
                joined = bookie in known
                produced.append(self._resolved(
                    outputs.ALERT_JOIN_FAILED, bookie, time_ms, key, outputs.INFO,
                    {"bookie": bookie, "location": model.location_of(bookie),
                     "reason": "joined the topology" if joined else "no longer writable"}))
            self.join_failed = set(failures)
        if version == self.version:
            return produced
        self.version = version
        if model.pending_serial != self.pending_serial:
            changed = (model.pending_changes_since(self.pending_serial) if self.pending_serial is not None
                       else None)
            self.pending_serial = model.pending_serial
            produced += self._pending_changes(model, changed, time_ms, key)
        produced += self._default_rack_changes(model, touched, time_ms, key)
        return produced

    def _pending_changes(self, model: Any, changed: list[str] | None, time_ms: int, key: str) -> list[Output]:
        """Resolve the pending leaves that ended, open those that began: among `changed` (the model's
        logged changes since the last look), or among all bookies when None. Either way the same
        bookies (those in one dict and not the other), in the same order. O(changed), or O(pending)."""
        if changed is None:
            ended = self.pending.keys() - model.pending.keys()
            began = model.pending.keys() - self.pending.keys()
        else:
            mine, theirs = self.pending, model.pending
            ended = {b for b in changed if b in mine and b not in theirs}
            began = {b for b in changed if b in theirs and b not in mine}
        produced = []
        period = model.stabilize_period_s
        for bookie in sorted(ended):
            left_s = self.pending.pop(bookie)
            self.settled.append(bookie)
            returned = bookie in model.writable
            data = {"bookie": bookie, "location": model.location_of(bookie), "left_at": _iso_s(left_s),
                    "outcome": "returned" if returned else "expired"}
            if returned:
                data["action"] = "none: the bookie came back inside the stabilization period"
            else:
                data["readonly"] = bookie in model.readonly
                data["action"] = ("the departure is final: its ledgers are re-checked "
                                  "(placement.ledger.not_adhering); restore the bookie or let autorecovery "
                                  "re-replicate")
            produced.append(self._resolved(ALERT_DEPARTURE_PENDING, bookie, time_ms, key,
                                           outputs.INFO if returned else outputs.WARNING, data))
        for bookie in sorted(began):
            left_s = model.pending[bookie]
            self.pending[bookie] = left_s
            produced.append(outputs.alert(
                alert_type=ALERT_DEPARTURE_PENDING, cluster=self.cluster, subject=bookie, time_ms=time_ms,
                key=key, severity=outputs.INFO,
                data={"bookie": bookie, "location": model.location_of(bookie), "readonly": bookie in model.readonly,
                      "left_at": _iso_s(left_s), "expires_at": _iso_s(left_s + period),
                      "stabilize_period_seconds": period, "flap_count": model.flap_count(bookie),
                      "state": "firing",
                      "action": "none yet: placement avoids the bookie but may still use it as a last resort; "
                                "if it does not return, check the bookie before the delay ends"}))
        return produced

    def _default_rack_changes(self, model: Any, touched: Iterable[str], time_ms: int, key: str) -> list[Output]:
        policy = model.policy
        known = policy.known
        topology = policy.topology
        if topology is None:
            return []                  # the default policy has no locations
        default = policy.default_location
        # enforceMinNumRacksPerWriteQuorum excludes default-rack bookies only in these policies (spec §4.3).
        enforced = bool(model.placement.enforce_min_racks) and model.policy_name in _ENFORCING_POLICIES
        in_default = len(topology.bookies_in(default))
        mixed = _is_mixed(model)
        candidates = set(touched)
        if mixed != self.mixed:
            self.mixed = mixed
            candidates |= set(self.default_rack)
            candidates |= {b for b in topology.bookies_in(default) if b in known} if in_default else set()
        produced: list[Output] = []
        for bookie in sorted(candidates):
            located = policy.known_location(bookie) == default
            severity = outputs.WARNING if enforced else outputs.INFO if mixed else None
            wanted = severity if located else None
            current = self.default_rack.get(bookie)
            if wanted == current:
                continue
            if current is not None:
                del self.default_rack[bookie]
                produced.append(self._resolved(
                    ALERT_DEFAULT_RACK, bookie, time_ms, key, outputs.INFO,
                    {"bookie": bookie, "location": model.location_of(bookie),
                     "reason": "placed outside the default rack" if bookie in known and not located else
                     "no longer writable" if bookie not in known else "every bookie shares the default rack"}))
            if wanted is not None:
                self.default_rack[bookie] = wanted
                produced.append(self._default_rack_alert(model, bookie, default, enforced, time_ms, key, wanted))
        return produced

    def _default_rack_alert(self, model: Any, bookie: str, default: str, enforced: bool, time_ms: int, key: str,
                            severity: str) -> Output:
        unmapped = bookie not in model.mapping
        reason = ("no location is configured for it (unmapped): it resolves to the default location"
                  if unmapped else "its configured location is the default location")
        if enforced:
            effect = ("enforceMinNumRacksPerWriteQuorum is on, so the policy never places data on it")
        else:
            effect = (f"other bookies have racks, so {default} is treated as one more rack holding every "
                      "unmapped bookie")
        return outputs.alert(
            alert_type=ALERT_DEFAULT_RACK, cluster=self.cluster, subject=bookie, time_ms=time_ms, key=key,
            severity=severity,
            data={"bookie": bookie, "location": default, "unmapped": unmapped, "enforced": enforced,
                  "reason": f"{reason}; {effect}", "state": "firing",
                  "action": "set its rack (bookie_location / pulsar-admin bookies set-bookie-rack, or the "
                            "resolver mapping)"})

    def _resolved(self, alert_type: str, subject: str, time_ms: int, key: str, severity: str,
                  data: dict[str, Any]) -> Output:
        body = dict(data)
        body["state"] = "resolved"
        return outputs.alert(alert_type=alert_type + RESOLVED_SUFFIX, cluster=self.cluster, subject=subject,
                             time_ms=time_ms, key=key, severity=severity, data=body)

    # -- snapshots -------------------------------------------------------------------------------

    def export_state(self) -> dict[str, Any]:
        return {"default_rack": dict(sorted(self.default_rack.items())), "pending": dict(sorted(self.pending.items())),
                "flapping": sorted(self.flapping), "join_failed": sorted(self.join_failed), "mixed": self.mixed,
                "version": self.version}

    def import_state(self, state: Mapping[str, Any]) -> None:
        self.default_rack = dict(state.get("default_rack", {}))
        self.pending = {b: float(t) for b, t in state.get("pending", {}).items()}
        self.flapping = set(state.get("flapping", ()))
        self.join_failed = set(state.get("join_failed", ()))
        self.mixed = bool(state.get("mixed", False))
        self.version = int(state.get("version", -1))
        self.pending_serial = None     # the restored model's change log starts afresh: compare once in full

    @classmethod
    def adopt(cls, cluster: str, model: Any) -> TopologyHealth:
        """Health state for a model restored from a snapshot without one (v1): the model's current
        flapping, join failures and pending leaves count as already reported, so nothing is re-raised;
        default-rack bookies (never reported by v1) are reported at their next change."""
        health = cls(cluster)
        health.flapping = set(model.flapping)
        health.join_failed = set(model.join_failures)
        health.pending = dict(model.pending)
        health.pending_serial = model.pending_serial
        health.version = model.version
        health.mixed = _is_mixed(model)
        return health


def changed_bookies(record: Any, before: tuple[set[str], set[str], int], model: Any) -> tuple[set[str], bool, bool]:
    """What a cluster event changed, for the re-checks: (touched bookies, improving, wide).

    Args:
        record: the event just applied.
        before: the model's (writable, readonly) set objects from before the event (a
            `cluster_view` replaces them, so holding the old objects costs nothing) and its version.
        model: the model after the event.

    `improving` is True when the event can make placements possible again (a bookie becomes
    writable, a location or a feature changes); `wide` when it concerns every ledger (a feature).
    A feature counts only when its value changed and the policy reads it (`reads_feature`): a switch
    republished unchanged, or one the policy never reads, re-checks nothing.
    Cost: O(1), O(changed bookies) for a view, O(writable) for a location keyed by host.
    """
    if isinstance(record, FeatureSet):
        matters = model.version != before[2] and model.policy.reads_feature(record.name)
        return set(), matters, matters
    if isinstance(record, ClusterView):
        old_writable, old_readonly, _ = before
        if old_writable is model.writable and old_readonly is model.readonly:
            return set(), False, False
        touched = (old_writable ^ model.writable) | (old_readonly ^ model.readonly)
        return touched, bool(model.writable - old_writable), False
    if isinstance(record, BookieLocation):
        bookie = record.bookie
        touched = {bookie}
        if ":" not in bookie:
            touched |= {w for w in model.writable if host_of(w) == bookie}
        return touched, True, False
    if isinstance(record, BookieWritable):
        return {record.bookie}, True, False
    if isinstance(record, (BookieReadonly, BookieLost)):
        return {record.bookie}, False, False
    return set(), False, False


def after_record(model: Any, record: Any, before: tuple[set[str], set[str], int] | None, *,
                 emit_health: bool = True) -> list[Output]:
    """Health checks, then ledger re-checks, after one record (an event or a request) was applied.

    The step calls this after `ClusterModel.apply(event)` (with `before`), and for a request with
    `before=None`, which observes nothing (see the comment in the body).

    Args:
        emit_health: False on shards other than 0: the health state is still kept up to date (every
            shard sees every event) but its alerts are emitted once, by shard 0. Ledger alerts are
            always emitted: each shard audits the ledgers it placed.
    """
    if before is None:
        # A request changes no topology; expiries were observed at their own times (`after_expiry`).
        return []
    touched, improving, wide = changed_bookies(record, before, model)
    subject = getattr(record, "bookie", None) or getattr(record, "name", None)
    trigger = f"{record.type} {subject}" if subject else record.type
    return _observe(model, touched, improving, wide, trigger, emit_health)


def after_expiry(model: Any, *, emit_health: bool = True) -> list[Output]:
    """Health checks, then ledger re-checks, after the timed changes due at the clock were applied.

    The step calls this once per expiry time (`state.step.settle`), so an ended stabilization delay,
    a flap window or a ledger's TTL is reported at the time it ended, whether the next record of the
    cluster or an idle-cluster tick brings the clock there. Every shard sees every expiry; as for
    events, shard 0 emits the health alerts and each shard its own ledgers' alerts.
    """
    return _observe(model, set(), False, False, None, emit_health)


def _observe(model: Any, touched: set[str], improving: bool, wide: bool, trigger: str | None,
             emit_health: bool) -> list[Output]:
    """Observe the model at its clock: health alerts, then the ledgers the change (or a settled
    pending leave) touches, else only the audit's TTL."""
    time_ms = model.clock_ms
    health = model.health.observe(model, touched, time_ms)
    settled = model.health.settled
    if settled:
        touched = touched | set(settled)
        ended = f"stabilization ended for {', '.join(sorted(settled))}"
        trigger = f"{trigger} ({ended})" if trigger else ended
    if touched or wide or improving:
        ledger = model.audit.on_topology_change(model, touched, time_ms, improving=improving, wide=wide,
                                                trigger=trigger)
    else:
        ledger = model.audit.expire(time_ms, model.version) if model.audit.entries else []
    return (health if emit_health else []) + ledger


def _is_mixed(model: Any) -> bool:
    """Whether some placed bookie is outside the policy's default location (False without racks)."""
    policy = model.policy
    topology = policy.topology
    if topology is None:
        return False
    in_default = len(topology.bookies_in(policy.default_location))
    return topology.num_racks > (1 if in_default else 0)


def _iso_s(seconds: float) -> str | None:
    """The time as ISO-8601; None past the last representable time (a delay that ends after
    9999-12-31T23:59:59.999Z, which no record's time can reach)."""
    ms = int(round(seconds * 1000))
    return format_time(ms) if ms <= MAX_TIME_MS else None


__all__ = ["ALERT_DEFAULT_RACK", "ALERT_DEPARTURE_PENDING", "HEALTH_ALERT_TYPES", "RESOLVED_SUFFIX", "TopologyHealth",
           "after_expiry", "after_record", "changed_bookies"]
