"""Topology health as a pure component: default-rack bookies (with and without enforcement, upstream
#2957), pending departures and their outcome, resolving events for flapping and join failures.
`TopologyHealth.observe` is called by hand after each record, as the step does."""

from state.health import ALERT_DEFAULT_RACK, ALERT_DEPARTURE_PENDING, TopologyHealth
from state.outputs import ALERT_FLAPPING, ALERT_JOIN_FAILED
from tests.state.helpers import CLUSTER, Runner, location, lost, readonly, writable

A, B, C, D = "a:3181", "b:3181", "c:3181", "d:3181"
RACKAWARE = {"ensemblePlacementPolicy": "rackaware"}
ENFORCED = {**RACKAWARE, "enforceMinNumRacksPerWriteQuorum": "true"}


class Watched:
    """A runner plus a health tracker fed after every record; `alerts` holds both their alerts."""

    def __init__(self, conf):
        self.runner = Runner(conf)
        self.health = TopologyHealth(CLUSTER)
        self.alerts = []

    def run(self, *records):
        produced = []
        for record in records:
            # Openers raised by the cluster model itself (the step's own health alerts are left out,
            # so this tracker is the only source of the rest).
            produced += [o.payload for o in self.runner.run(record)
                         if o.kind == "alert" and o.payload["type"] in (ALERT_FLAPPING, ALERT_JOIN_FAILED)]
            touched = [record.bookie] if hasattr(record, "bookie") else []
            model = self.runner.model
            produced += [o.payload for o in self.health.observe(model, touched, model.clock_ms)]
        self.alerts += produced
        return produced

    def of(self, alert_type, produced=None):
        return [a for a in (self.alerts if produced is None else produced) if a["type"] == alert_type]


def test_all_bookies_in_the_default_rack_without_enforcement_is_not_an_alarm():
    """Upstream apache/bookkeeper#2957: a single-rack cluster without enforcement is a valid setup."""
    watched = Watched(RACKAWARE)
    assert watched.run(writable(0, A), writable(0, B), writable(0, C)) == []


def test_with_enforcement_every_default_rack_bookie_is_reported_once():
    watched = Watched(ENFORCED)
    produced = watched.run(writable(0, A), writable(0, B, "/r1"))
    [alert] = watched.of(ALERT_DEFAULT_RACK, produced)
    assert alert["subject"] == A
    assert alert["data"]["severity"] == "warning"
    assert alert["data"]["enforced"] is True and alert["data"]["unmapped"] is True
    assert "never places data on it" in alert["data"]["reason"]
    assert "set-bookie-rack" in alert["data"]["action"]
    assert watched.run(writable(1_000, C, "/r2")) == []
    [resolved] = watched.run(location(2_000, A, "/r3"))
    assert resolved["type"] == ALERT_DEFAULT_RACK + ".resolved"
    assert resolved["subject"] == A and resolved["data"]["reason"] == "placed outside the default rack"


def test_with_enforcement_a_single_rack_cluster_is_still_reported():
    watched = Watched(ENFORCED)
    produced = watched.run(writable(0, A), writable(0, B))
    assert sorted(a["subject"] for a in watched.of(ALERT_DEFAULT_RACK, produced)) == [A, B]


def test_without_enforcement_a_forgotten_bookie_among_racked_ones_is_info_and_clears_with_the_racks():
    watched = Watched(RACKAWARE)
    assert watched.run(writable(0, A)) == []
    [alert] = watched.run(writable(1_000, B, "/r1"))
    assert alert["type"] == ALERT_DEFAULT_RACK and alert["subject"] == A
    assert alert["data"]["severity"] == "info"
    [resolved] = watched.run(lost(2_000, B))
    assert resolved["type"] == ALERT_DEFAULT_RACK + ".resolved" and resolved["subject"] == A
    assert resolved["data"]["reason"] == "every bookie shares the default rack"


def test_a_default_rack_bookie_that_leaves_resolves():
    watched = Watched(ENFORCED)
    watched.run(writable(0, A), writable(0, B, "/r1"))
    [resolved] = watched.run(lost(1_000, A))
    assert resolved["subject"] == A and resolved["data"]["reason"] == "no longer writable"


def test_the_default_policy_has_no_racks_and_no_default_rack_alerts():
    watched = Watched({"ensemblePlacementPolicy": "default", "enforceMinNumRacksPerWriteQuorum": "true"})
    assert watched.run(writable(0, A), writable(0, B)) == []


def test_a_pending_departure_is_reported_and_resolved_by_return_or_expiry():
    watched = Watched({**RACKAWARE, "networkTopologyStabilizePeriodSeconds": "60"})
    watched.run(writable(0, A, "/r1"), writable(0, B, "/r2"))
    [pending] = watched.run(lost(10_000, A))
    assert pending["type"] == ALERT_DEPARTURE_PENDING and pending["subject"] == A
    assert pending["data"]["expires_at"] == "2023-11-14T22:14:30.000Z"
    assert pending["data"]["severity"] == "info" and pending["data"]["readonly"] is False
    [back] = watched.run(writable(20_000, A))
    assert back["type"] == ALERT_DEPARTURE_PENDING + ".resolved"
    assert back["data"]["outcome"] == "returned" and back["data"]["severity"] == "info"
    [again] = watched.run(readonly(30_000, A))
    assert again["data"]["readonly"] is True
    produced = watched.run(writable(95_000, C, "/r3"))       # 30 s + 60 s have passed
    [expired] = watched.of(ALERT_DEPARTURE_PENDING + ".resolved", produced)
    assert expired["subject"] == A and expired["data"]["outcome"] == "expired"
    assert expired["data"]["severity"] == "warning"


def test_no_pending_departures_without_stabilization():
    watched = Watched(RACKAWARE)
    watched.run(writable(0, A, "/r1"))
    assert watched.run(lost(1_000, A)) == []


def test_flapping_resolves_when_the_window_passes():
    watched = Watched({**RACKAWARE, "engine.flapWindowSeconds": "60", "engine.flapThreshold": "2"})
    watched.run(writable(0, A, "/r1"), writable(0, B, "/r2"))
    watched.run(lost(1_000, A), writable(2_000, A), lost(3_000, A), writable(4_000, A))
    assert len(watched.of(ALERT_FLAPPING)) == 1
    produced = watched.run(writable(70_000, C, "/r3"))
    [resolved] = watched.of(ALERT_FLAPPING + ".resolved", produced)
    assert resolved["subject"] == A and resolved["data"]["severity"] == "info"


def test_a_join_failure_resolves_when_the_location_is_fixed():
    watched = Watched(RACKAWARE)
    watched.run(writable(0, A, "/r1"))
    produced = watched.run(writable(1_000, B, "/r1/deeper"))
    assert len(watched.of(ALERT_JOIN_FAILED, produced)) == 1
    [resolved] = watched.of(ALERT_JOIN_FAILED + ".resolved", watched.run(location(2_000, B, "/r2")))
    assert resolved["subject"] == B and resolved["data"]["reason"] == "joined the topology"


def test_state_round_trips():
    watched = Watched(ENFORCED)
    watched.run(writable(0, A), writable(0, B, "/r1"))
    copy = TopologyHealth(CLUSTER)
    copy.import_state(watched.health.export_state())
    assert copy.export_state() == watched.health.export_state()


def test_the_rack_enforcement_key_does_not_apply_to_the_zone_aware_policy():
    watched = Watched({"ensemblePlacementPolicy": "zoneaware", "enforceMinNumRacksPerWriteQuorum": "true"})
    produced = watched.run(writable(0, A, "/z1/ud1"), writable(0, B))
    [alert] = watched.of(ALERT_DEFAULT_RACK, produced)
    assert alert["subject"] == B and alert["data"]["location"] == "/default-zone/default-upgradedomain"
    assert alert["data"]["severity"] == "info" and alert["data"]["enforced"] is False
