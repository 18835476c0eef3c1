"""`state.status.status_gauges`: the numbers the metrics export equal what the model and its outputs say."""

from state.audit import ALERT_LEDGER_NOT_ADHERING, LEDGER_ALERT_TYPES, RESOLVED_SUFFIX
from state.snapshot import dumps, loads
from state.status import GAUGE_KEYS, status_gauges
from tests.state.helpers import T0, Runner, create, lost, readonly, writable

STABILIZED = {"ensemblePlacementPolicy": "rackaware", "networkTopologyStabilizePeriodSeconds": "30"}


def open_ledger_alerts(outputs):
    """Open ledger alerts by type, replaying the alert stream (an opening adds, its `.resolved` removes)."""
    count = dict.fromkeys(LEDGER_ALERT_TYPES, 0)
    for output in outputs:
        if output.kind != "alert":
            continue
        alert_type = output.payload["type"]
        if alert_type in count:
            count[alert_type] += 1
        elif alert_type.removesuffix(RESOLVED_SUFFIX) in count:
            count[alert_type.removesuffix(RESOLVED_SUFFIX)] -= 1
    return count


def test_gauges_count_the_models_bookies_and_the_open_ledger_alerts():
    runner = Runner(STABILIZED)
    runner.run(writable(0, "a:3181", "/a"), writable(0, "b:3181", "/b"), writable(0, "c:3181", "/c"),
               writable(0, "d:3181"), writable(0, "e:3181", "/a"))
    runner.run(*(create(1_000 + i, f"r{i}", 3, 2, 2, ledger_id=i) for i in range(20)))
    gauges = status_gauges(runner.model)
    assert tuple(gauges) == GAUGE_KEYS
    assert gauges["writable"] == 5 and gauges["readonly"] == 0
    assert gauges["default_rack"] == 1, "d:3181 has no location: the default rack"
    assert gauges["remembered_ledgers"] == 20
    assert gauges["not_adhering"] == 0

    runner.run(lost(10_000, "a:3181"), readonly(10_000, "b:3181"))
    gauges = status_gauges(runner.model)
    assert (gauges["writable"], gauges["readonly"], gauges["pending_departure"]) == (3, 1, 2)
    runner.run(create(50_000, "late", 3, 2, 2, ledger_id=100))      # both delays ended at 40 s
    gauges = status_gauges(runner.model)
    assert gauges["pending_departure"] == 0
    opened = open_ledger_alerts(runner.outputs)
    assert gauges["not_adhering"] == opened[ALERT_LEDGER_NOT_ADHERING] > 0
    assert gauges["clock_ms"] == T0 + 50_000
    assert gauges["topology_version"] == runner.model.version

    restored = loads(dumps(runner.model), runner.settings)
    assert status_gauges(restored) == gauges

    runner.run(writable(60_000, "a:3181", "/a"), writable(60_000, "b:3181", "/b"))
    gauges = status_gauges(runner.model)
    assert gauges["not_adhering"] == open_ledger_alerts(runner.outputs)[ALERT_LEDGER_NOT_ADHERING] == 0
