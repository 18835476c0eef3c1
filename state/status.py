"""A cluster's status at a glance: the gauges the metrics export, and the status record.

`status_gauges(model)` gives the numbers an operator alerts on (BookKeeper exports the same kind:
default-rack bookies, ledgers not adhering), computed from the model without any policy call:

| key | what it counts |
|---|---|
| `writable`, `readonly` | registered bookies by state |
| `pending_departure` | departed bookies waiting out `networkTopologyStabilizePeriodSeconds` |
| `default_rack` | writable bookies the policy placed in its default location |
| `join_failures` | writable bookies whose location is unusable |
| `flapping` | bookies over `engine.flapThreshold` departures inside the flap window |
| `remembered_ledgers` | ledgers the audit remembers (this shard's) |
| `not_adhering` | open `placement.ledger.not_adhering` alerts (this shard's ledgers) |
| `re_adhere_possible` | open re-adhere alerts (this shard's ledgers) |
| `topology_version` | the model's topology version |
| `clock_ms` | the cluster's event-time clock |

The two ledger-alert counts are kept by `StatusState.count`, which the step feeds every output it
emits: an opening alert adds one, its `.resolved` event takes one away (every open ledger alert is
resolved by exactly one such event, `state.audit`), so the counts cost O(1) per output and never a
scan of the audit's registry.
Cost: `status_gauges` is O(1).

**The status record** (kind `status`, `STATUS_TYPE`; built by `status_record`): the gauges above, the
racks with their writable and read-only bookies, the write share per rack over the skew windows
(`state.skew`) and the open skew scopes. The step emits one (`StatusState.observe`):

* when its content (everything but the time) differs from the last one emitted, and at most once
  per `engine.statusIntervalSeconds` of the cluster's event time;
* decided at record boundaries: after each record or timed change, at the cluster clock. A change
  inside the interval schedules the record for the interval's end (`due_ms`), where the step emits
  it like any timed change, before a record of that time or later, or at an idle tick or the end of
  a replay that reaches it (`state.step.settle`). Micro-batch boundaries and ticks therefore change
  no status record: the times they carry are those of records and of interval ends.
* Each shard emits its own (`shard`, `shards`): ledger counts and the write share are of the
  requests that shard answered; the topology is the same on every shard, so a reader sums ledger
  counts over the shards of a cluster and takes the bookies from any one.

Cost: a record boundary costs one time comparison (O(1)) while the interval runs or a record is
already due, else an O(1) change signature (`signature`); only a changed signature with the
interval over builds the record: O(bookies + racks) plus the write share's O(bases x bookies).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import orjson

from policies import PlacementError

from . import outputs
from .audit import LEDGER_ALERT_TYPES
from .outputs import ALERT, ALERT_LEDGER_NOT_ADHERING, RESOLVED_SUFFIX, Output

STATUS = "status"
STATUS_TYPE = "placement.cluster.status"

#: The keys of `status_gauges`, in the order the metrics list them.
GAUGE_KEYS = ("writable", "readonly", "pending_departure", "default_rack", "join_failures", "flapping",
              "remembered_ledgers", "not_adhering", "re_adhere_possible", "skew_open", "topology_version", "clock_ms")

# alert type -> (index into StatusState.open_ledger_alerts, +1 or -1)
_LEDGER_COUNTS: dict[str, tuple[int, int]] = {}
for _type in LEDGER_ALERT_TYPES:
    _slot = 0 if _type == ALERT_LEDGER_NOT_ADHERING else 1
    _LEDGER_COUNTS[_type] = (_slot, 1)
    _LEDGER_COUNTS[_type + RESOLVED_SUFFIX] = (_slot, -1)


class StatusState:
    """What the status keeps between records (see the module docstring).

    Attributes:
        open_ledger_alerts: [open not-adhering alerts, open re-adhere alerts] of this model's ledgers.
        last_ms: the time of the last status record emitted (None: none yet).
        due_ms: when the next one is due, the content having changed inside the interval (None: not due).
        signature: the change signature when the content was last built.
        digest: the digest of the last emitted record's content (time left out).
    """

    __slots__ = ("open_ledger_alerts", "last_ms", "due_ms", "signature", "digest")

    def __init__(self) -> None:
        self.open_ledger_alerts = [0, 0]      # [not adhering, re-adhere possible]
        self.last_ms: int | None = None
        self.due_ms: int | None = None
        self.signature: tuple | None = None
        self.digest: str | None = None

    def observe(self, model: Any, interval_ms: int, *, shard: int = 0, shards: int = 1) -> list[Output]:
        """At a record boundary (the model at its clock): the status record if one is due now, else
        schedule one for the interval's end when the content changed. Cost: see the module docstring."""
        if not interval_ms or self.due_ms is not None:
            return []
        time_ms = model.clock_ms
        if self.last_ms is not None and time_ms < self.last_ms + interval_ms:
            if signature(model) != self.signature:
                self.due_ms = self.last_ms + interval_ms
            return []
        return self._emit(model, time_ms, shard, shards)

    def fire_due(self, model: Any, *, shard: int = 0, shards: int = 1) -> list[Output]:
        """The record scheduled for `due_ms` (the step calls this when the cluster's time reaches it)."""
        time_ms, self.due_ms = self.due_ms, None
        if time_ms is None or not model.settings.status_interval_ms:
            return []
        return self._emit(model, time_ms, shard, shards)

    def _emit(self, model: Any, time_ms: int, shard: int, shards: int) -> list[Output]:
        current = signature(model)
        if current == self.signature and self.last_ms is not None:
            return []
        self.signature = current
        record = status_record(model, time_ms, shard=shard, shards=shards)
        digest = content_digest(record.payload)
        if digest == self.digest:
            return []
        self.digest = digest
        self.last_ms = time_ms
        return [record]

    def count(self, produced: Iterable[Output]) -> None:
        """Count the ledger alerts opened and resolved among `produced`. Cost: O(outputs)."""
        counts = self.open_ledger_alerts
        for output in produced:
            if output.kind == ALERT:
                change = _LEDGER_COUNTS.get(output.payload["type"])
                if change is not None:
                    counts[change[0]] += change[1]

    def recount(self, open_alerts: Mapping[str, Mapping[str, str]]) -> None:
        """Counts from the audit's open alerts (`LedgerAudit.open_alerts()`, O(ledgers)): a model restored
        from a snapshot that did not store them."""
        counts = [0, 0]
        for opened in open_alerts.values():
            for alert_type in opened:
                counts[0 if alert_type == ALERT_LEDGER_NOT_ADHERING else 1] += 1
        self.open_ledger_alerts = counts

    def export_state(self) -> dict[str, Any]:
        return {"open_ledger_alerts": list(self.open_ledger_alerts), "last_ms": self.last_ms, "due_ms": self.due_ms,
                "signature": None if self.signature is None else list(self.signature), "digest": self.digest}

    def import_state(self, state: Mapping[str, Any], interval_ms: int) -> None:
        """Restore `export_state()` output under `engine.statusIntervalSeconds` (in ms) as configured now:
        a record due under another interval falls due at the end of the new one (none when it is 0)."""
        self.open_ledger_alerts = [int(n) for n in state["open_ledger_alerts"]]
        self.last_ms = state.get("last_ms")
        due = state.get("due_ms")
        self.due_ms = None if due is None or not interval_ms or self.last_ms is None else self.last_ms + interval_ms
        stored = state.get("signature")
        self.signature = None if stored is None else _as_tuple(stored)
        self.digest = state.get("digest")


def _as_tuple(value: Any) -> Any:
    """A signature read back from JSON: its lists as tuples again."""
    return tuple(_as_tuple(v) for v in value) if isinstance(value, list) else value


def default_rack_count(model: Any) -> int:
    """Writable bookies the policy placed in its default location (0 for a policy without locations)."""
    topology = model.policy.topology
    return 0 if topology is None else len(topology.bookies_in(model.policy.default_location))


def status_gauges(model: Any) -> dict[str, int]:
    """The cluster's (or shard's) gauges, keys as `GAUGE_KEYS`. Cost: O(1)."""
    not_adhering, re_adhere = model.status.open_ledger_alerts
    return {
        "writable": len(model.writable),
        "readonly": len(model.readonly),
        "pending_departure": len(model.pending),
        "default_rack": default_rack_count(model),
        "join_failures": len(model.join_failures),
        "flapping": len(model.flapping),
        "remembered_ledgers": len(model.audit),
        "not_adhering": not_adhering,
        "re_adhere_possible": re_adhere,
        "skew_open": len(model.skew.open_scopes()),
        "topology_version": model.version,
        "clock_ms": model.clock_ms,
    }


def signature(model: Any) -> tuple:
    """What the status record's content depends on, in O(1): a record whose signature did not change
    since the last one was built has the same content (the topology version moves with every change of
    membership, locations, disk weights and features; the rest are counts)."""
    skew = model.skew
    return (model.version, len(model.writable), len(model.readonly), len(model.pending), len(model.join_failures),
            len(model.flapping), len(model.audit), tuple(model.status.open_ledger_alerts), skew.decisions_seen,
            tuple(skew.open_scopes()))


def content_digest(payload: Mapping[str, Any]) -> str:
    """A digest of a status record's content: everything but its id and time."""
    content = {k: v for k, v in payload.items() if k not in ("id", "time", "time_ms")}
    return outputs.stable_id(STATUS, orjson.dumps(content, option=orjson.OPT_SORT_KEYS).decode("utf-8"))


def bookie_location(model: Any, bookie: str) -> str:
    """Where a bookie is, for the status's racks: where the policy placed it, else where it resolves
    (read-only and unplaced bookies), else the policy's default location."""
    policy = model.policy
    location = policy.known_location(bookie)
    if location is None:
        try:
            location = policy.resolver.resolve(bookie)
        except (PlacementError, ValueError):
            location = None
    return location or policy.default_location


def status_record(model: Any, time_ms: int, *, shard: int = 0, shards: int = 1) -> Output:
    """The `placement.cluster.status` record of the model now, stamped `time_ms` (see the module
    docstring for its fields). Cost: O(bookies + racks) plus the write share's."""
    gauges = status_gauges(model)
    racks: dict[str, list[int]] = {}
    for bookie in model.writable:
        racks.setdefault(bookie_location(model, bookie), [0, 0])[0] += 1
    for bookie in model.readonly:
        racks.setdefault(bookie_location(model, bookie), [0, 0])[1] += 1
    skew = model.skew
    cluster = model.cluster
    ident = outputs.stable_id(STATUS, cluster, str(shard), str(time_ms))
    payload = {
        "id": ident,
        "type": STATUS_TYPE,
        "cluster": cluster,
        "shard": shard,
        "shards": shards,
        "time": outputs.iso_time(time_ms),
        "time_ms": time_ms,
        "policy": model.policy_name,
        "topology_version": model.version,
        "bookies": {key: gauges[key] for key in ("writable", "readonly", "pending_departure", "default_rack",
                                                 "join_failures", "flapping")},
        "ledgers": {"remembered": gauges["remembered_ledgers"], "not_adhering": gauges["not_adhering"],
                    "re_adhere_possible": gauges["re_adhere_possible"]},
        "racks": [{"rack": rack, "writable": counts[0], "readonly": counts[1]}
                  for rack, counts in sorted(racks.items())],
        "write_share": skew.write_share(model),
        "skew": {"open": bool(skew.open_scopes()), "scopes": skew.open_scopes()},
    }
    return Output(STATUS, cluster, ident, payload)


__all__ = ["GAUGE_KEYS", "STATUS", "STATUS_TYPE", "StatusState", "content_digest", "default_rack_count",
           "signature", "status_gauges", "status_record"]
