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
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .audit import ALERT_LEDGER_NOT_ADHERING, LEDGER_ALERT_TYPES, RESOLVED_SUFFIX
from .outputs import ALERT, Output

#: The keys of `status_gauges`, in the order the metrics list them.
GAUGE_KEYS = ("writable", "readonly", "pending_departure", "default_rack", "join_failures", "flapping",
              "remembered_ledgers", "not_adhering", "re_adhere_possible", "topology_version", "clock_ms")

# alert type -> (index into StatusState.open_ledger_alerts, +1 or -1)
_LEDGER_COUNTS: dict[str, tuple[int, int]] = {}
for _type in LEDGER_ALERT_TYPES:
    _slot = 0 if _type == ALERT_LEDGER_NOT_ADHERING else 1
    _LEDGER_COUNTS[_type] = (_slot, 1)
    _LEDGER_COUNTS[_type + RESOLVED_SUFFIX] = (_slot, -1)


class StatusState:
    """What the status keeps between records: open ledger-alert counts (see the module docstring)."""

    __slots__ = ("open_ledger_alerts",)

    def __init__(self) -> None:
        self.open_ledger_alerts = [0, 0]      # [not adhering, re-adhere possible]

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
        return {"open_ledger_alerts": list(self.open_ledger_alerts)}

    def import_state(self, state: Mapping[str, Any]) -> None:
        self.open_ledger_alerts = [int(n) for n in state["open_ledger_alerts"]]


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
        "topology_version": model.version,
        "clock_ms": model.clock_ms,
    }


__all__ = ["GAUGE_KEYS", "StatusState", "default_rack_count", "status_gauges"]
