"""The ledger audit as a pure component: registration, re-checks of touched ledgers, transitions,
fixes, bounds and snapshots. The cluster is a real `ClusterModel` driven by the step; the audit is
called by hand, so these tests do not depend on how the step wires it in."""

import random

import pytest

from state import MODEL_KEYS, ModelSettings
from state.alert_text import narrowest_write_set, relaxed_notes
from state.audit import ALERT_LEDGER_NOT_ADHERING, ALERT_LEDGER_RE_ADHERE, LedgerAudit, ledger_key, relaxation_rules
from tests.state.helpers import CLUSTER, T0, Runner, location, lost, readonly, writable

A1, A2, B1, B2, C1, C2 = "a1:3181", "a2:3181", "b1:3181", "b2:3181", "c1:3181", "c2:3181"
RACKS = [writable(0, A1, "/a"), writable(0, A2, "/a"), writable(0, B1, "/b"), writable(0, B2, "/b"),
         writable(0, C1, "/c"), writable(0, C2, "/c")]
CONF = {"ensemblePlacementPolicy": "rackaware", "minNumRacksPerWriteQuorum": "2"}


def cluster(conf=CONF, events=RACKS):
    runner = Runner(conf)
    runner.run(*events)
    return runner


def audit_of(**kwargs):
    return LedgerAudit(CLUSTER, **kwargs)


def remember(audit, runner, ledger_id, ensemble, write_quorum=2, ack_quorum=2, t=0, **kwargs):
    return audit.remember(runner.model, ledger_id=ledger_id, request_id=f"req-{ledger_id}", ensemble=ensemble,
                          write_quorum=write_quorum, ack_quorum=ack_quorum, time_ms=T0 + t, **kwargs)


def change(audit, runner, record, *touched, improving=False, wide=False):
    """Apply one event to the cluster, then tell the audit which bookies it touched."""
    runner.run(record)
    produced = audit.on_topology_change(runner.model, touched or (record.bookie,), runner.model.clock_ms,
                                        improving=improving, wide=wide, trigger=record.type)
    audit.check_invariants()
    return [o.payload for o in produced]


def test_a_lost_member_raises_one_alert_with_a_fix_and_its_return_resolves_it():
    runner = cluster()
    audit = audit_of()
    assert remember(audit, runner, 7, [A1, B1, C1]) == []
    [alert] = change(audit, runner, lost(10_000, B1))
    assert alert["type"] == ALERT_LEDGER_NOT_ADHERING
    assert alert["subject"] == "ledger/7"
    data = alert["data"]
    assert data["severity"] == "error"
    assert f"{B1} is not registered (lost)" in data["problems"]
    assert data["unavailable"] == [B1]
    fix = data["fix"]
    assert fix["possible"] is True
    [move] = fix["replace"]
    assert move["position"] == 1 and move["bookie"] == B1 and move["with"] != B1
    assert fix["adherence"] == "MEETS_STRICT"
    assert B1 in data["action"]
    # Another change touching the same ledger while it is still broken: reported once.
    assert change(audit, runner, readonly(11_000, C1)) == []
    runner.run(writable(12_000, C1))
    [resolved] = change(audit, runner, writable(13_000, B1), improving=True)
    assert resolved["type"] == ALERT_LEDGER_NOT_ADHERING + ".resolved"
    assert resolved["subject"] == alert["subject"]
    assert resolved["data"]["resolves"] == alert["id"]
    assert resolved["data"]["severity"] == "info"
    assert audit.open_alerts() == {}


def test_a_read_only_member_is_a_warning_under_the_default_policy_and_an_error_when_rules_fail():
    runner = cluster({"ensemblePlacementPolicy": "default"})
    audit = audit_of()
    remember(audit, runner, 1, [A1, B1, C1])
    [alert] = change(audit, runner, readonly(5_000, B1))
    assert alert["data"]["problems"] == [f"{B1} is read-only"]
    assert alert["data"]["severity"] == "warning", "the default policy has no rules to break"
    assert alert["data"]["fix"]["possible"] is True
    # Rack-aware: a read-only bookie is not placed, so its write sets lose a rack: the rules FAIL.
    runner = cluster()
    audit = audit_of()
    remember(audit, runner, 1, [A1, B1, C1])
    [alert] = change(audit, runner, readonly(5_000, B1))
    assert alert["data"]["severity"] == "error"
    assert alert["data"]["adherence"] == "FAIL"


def test_ledgers_without_a_touched_bookie_are_not_rechecked():
    runner = cluster()
    audit = audit_of()
    remember(audit, runner, 1, [A1, B1, C1])
    remember(audit, runner, 2, [A2, B2, C2])
    [alert] = change(audit, runner, lost(1_000, A2))
    assert alert["subject"] == "ledger/2"
    assert sorted(audit.entries.keys_on(A1)) == ["ledger/1"]


def test_a_rack_change_that_breaks_the_rule_alerts_and_moving_back_resolves():
    runner = cluster()
    audit = audit_of()
    remember(audit, runner, 3, [A1, B1], write_quorum=2)
    [alert] = change(audit, runner, location(1_000, B1, "/a"))
    assert alert["type"] == ALERT_LEDGER_NOT_ADHERING
    assert any("spans 1 location(s) (/a); needs 2" in p for p in alert["data"]["problems"])
    assert alert["data"]["fix"]["possible"] is True
    [resolved] = change(audit, runner, location(2_000, B1, "/b"), improving=True)
    assert resolved["type"].endswith(".resolved") and resolved["subject"] == "ledger/3"


def test_stabilization_defers_the_verdict_until_the_departure_settles():
    conf = {**CONF, "networkTopologyStabilizePeriodSeconds": "60"}
    runner = cluster(conf)
    audit = audit_of()
    remember(audit, runner, 1, [A1, B1, C1])
    assert change(audit, runner, lost(1_000, B1)) == [], "pending leave: no verdict yet"
    assert change(audit, runner, writable(2_000, B1), improving=True) == [], "returned inside the window"
    assert change(audit, runner, lost(3_000, B1)) == []
    runner.run(writable(70_000, C2))       # the clock passes 3 s + 60 s: the leave expires
    assert runner.model.pending == {}
    [alert] = [o.payload for o in audit.on_topology_change(runner.model, [B1], runner.model.clock_ms,
                                                           trigger="stabilization expired")]
    assert alert["type"] == ALERT_LEDGER_NOT_ADHERING and alert["data"]["unavailable"] == [B1]


def test_a_ledger_placed_under_a_relaxed_rule_gets_re_adhere_possible_when_the_topology_recovers():
    runner = cluster(events=[writable(0, A1, "/a"), writable(0, A2, "/a")])
    audit = audit_of()
    # Only rack /a exists: the ensemble FAILs (the decision alert reported it); the audit tags it.
    assert remember(audit, runner, 9, [A1, A2], adherence="FAIL",
                    explain={"fallbacks": ["fewer than 2 racks: random selection"]}) == []
    entry = audit.entries["ledger/9"]
    assert entry.relaxed == ("adherence FAIL", "fewer than 2 racks: random selection")
    assert "ledger/9" in audit.waiting
    assert change(audit, runner, lost(1_000, A2)) == [], "already reported by its decision; no new alert"
    [alert] = change(audit, runner, writable(2_000, B1, "/b"), improving=True)
    assert alert["type"] == ALERT_LEDGER_RE_ADHERE
    assert alert["subject"] == "ledger/9"
    assert alert["data"]["severity"] == "info"
    assert alert["data"]["fix"]["possible"] is True
    assert alert["data"]["relaxed"] == ["adherence FAIL", "fewer than 2 racks: random selection"]
    assert alert["data"]["relaxed_rules"] == [], "no machine-readable relaxation was tagged"
    assert change(audit, runner, writable(3_000, B2, "/b"), improving=True) == [], "reported once"
    # The operator re-places the ledger on an adhering ensemble: the alert resolves.
    runner.run(writable(4_000, A2))
    [resolved] = remember(audit, runner, 9, [A1, B1], t=5_000, adherence="MEETS_STRICT")
    assert resolved.payload["type"] == ALERT_LEDGER_RE_ADHERE + ".resolved"
    assert resolved.payload["subject"] == "ledger/9"


def test_without_a_fix_the_alert_says_so_and_a_later_fix_raises_re_adhere_possible():
    runner = cluster(events=[writable(0, A1, "/a"), writable(0, B1, "/b")])
    audit = audit_of()
    remember(audit, runner, 4, [A1, B1])
    [alert] = change(audit, runner, lost(1_000, B1))
    assert alert["data"]["fix"]["possible"] is False
    assert "no fix is possible now" in alert["data"]["action"]
    [later] = change(audit, runner, writable(2_000, C1, "/c"), improving=True)
    assert later["type"] == ALERT_LEDGER_RE_ADHERE
    assert later["data"]["fix"]["replace"][0]["with"] == C1


def test_the_registry_is_bounded_by_count_and_by_age():
    runner = cluster()
    audit = audit_of(max_ledgers=2, ttl_ms=100_000)
    for ledger in (1, 2, 3):
        remember(audit, runner, ledger, [A1, B1], t=ledger)
    assert list(audit.entries) == ["ledger/2", "ledger/3"], "the least recently seen ledger went first"
    remember(audit, runner, 2, [A1, B1], t=50_000)
    assert list(audit.entries) == ["ledger/3", "ledger/2"], "a refresh makes it recent"
    audit.expire(T0 + 100_003)
    assert list(audit.entries) == ["ledger/2"]
    audit.check_invariants()


def test_trimming_a_loaded_registry_forgets_as_a_live_one_does():
    """After a load the oldest ledgers are packed rows; the count bound drops an unread plain one without
    building it, and still resolves the open alert of one it forgets."""
    def build(round_trip):
        runner = cluster()
        audit = audit_of(max_ledgers=3)
        remember(audit, runner, 1, [A2, C2])
        remember(audit, runner, 2, [A1, B1, C1], t=1)
        remember(audit, runner, 3, [A2, C1], t=2)
        [alert] = change(audit, runner, lost(1_000, B1))
        if round_trip:
            loaded = audit_of(max_ledgers=3)
            loaded.import_state(audit.export_state())
            audit = loaded
        return runner, audit, alert

    results = []
    for round_trip in (False, True):
        runner, audit, alert = build(round_trip)
        produced = remember(audit, runner, 4, [A2, C2], t=2_000) + remember(audit, runner, 5, [A1, C1], t=2_001)
        audit.check_invariants()
        assert list(audit.entries) == ["ledger/3", "ledger/4", "ledger/5"]
        [resolved] = [o.payload for o in produced]
        assert resolved["subject"] == alert["subject"] == "ledger/2"
        assert "engine.audit.maxLedgers=3" in resolved["data"]["reason"]
        assert audit.open_alerts() == {} and not audit.waiting
        results.append(([o.payload for o in produced],
                        [(e.key, e.ensemble, e.seen_ms, e.adherence) for e in audit.entries.values()]))
    assert results[0] == results[1]


def test_trimming_forgets_a_loaded_relaxed_ledger_without_building_it_as_a_live_registry_does(monkeypatch):
    """A relaxed placement keeps a verdict (its notes and rules) and waits for a better topology, but
    opens no alert: after a load, the bound forgets it without building its entry, with the same
    outputs and registry as without the load."""
    from state.registry import LedgerRegistry

    relaxed = {"relaxed": [{"rule": "racks", "spanned": 1}], "fallbacks": ["one rack left"]}
    results = []
    for round_trip in (False, True):
        runner = cluster()
        audit = audit_of(max_ledgers=2)
        remember(audit, runner, 1, [A1, B1], adherence="MEETS_SOFT", explain=relaxed)
        remember(audit, runner, 2, [A2, C1], t=1)
        assert audit.waiting == {"ledger/1"}
        if round_trip:
            loaded = audit_of(max_ledgers=2)
            loaded.import_state(audit.export_state())
            audit = loaded
        built = []
        read_row = LedgerRegistry._read_row
        monkeypatch.setattr(LedgerRegistry, "_read_row", lambda self, row: built.append(row) or read_row(self, row))
        produced = remember(audit, runner, 3, [A1, C2], t=2)
        monkeypatch.undo()
        audit.check_invariants()
        assert produced == [] and built == []
        assert list(audit.entries) == ["ledger/2", "ledger/3"] and not audit.waiting
        results.append([(e.key, e.ensemble, e.seen_ms, e.adherence, e.relaxed) for e in audit.entries.values()])
    assert results[0] == results[1]


def test_forgetting_a_ledger_with_an_open_alert_resolves_it():
    runner = cluster()
    audit = audit_of(max_ledgers=10, ttl_ms=60_000)
    remember(audit, runner, 1, [A1, B1])
    [alert] = change(audit, runner, lost(1_000, B1))
    [resolved] = [o.payload for o in audit.expire(T0 + 60_000)]
    assert resolved["subject"] == alert["subject"]
    assert "engine.audit.ttlSeconds" in resolved["data"]["reason"]


def test_a_ledger_without_an_id_is_keyed_by_its_request():
    assert ledger_key(None, "r-1") == "request/r-1"
    assert ledger_key(12, "r-1") == "ledger/12"


def test_export_and_import_round_trip_keeps_order_index_and_open_alerts():
    runner = cluster()
    audit = audit_of()
    remember(audit, runner, 1, [A1, B1, C1])
    remember(audit, runner, 2, [A2, B2], adherence="FAIL", t=5)
    change(audit, runner, lost(1_000, B1))
    state = audit.export_state()
    copy = audit_of()
    copy.import_state(state)
    copy.check_invariants()
    assert copy.export_state() == state
    assert copy.entries.bookie_index() == audit.entries.bookie_index() and copy.waiting == audit.waiting
    assert copy.open_alerts() == audit.open_alerts() != {}


def test_a_round_trip_keeps_each_ledgers_own_ensemble_order_when_ledgers_share_bookies():
    runner = cluster()
    audit = audit_of()
    remember(audit, runner, 1, [A1, B1, C1])
    remember(audit, runner, 2, [C1, B1, A1], t=1)
    remember(audit, runner, 3, [A1, B1, C1], t=2)
    copy = audit_of()
    copy.import_state(audit.export_state())
    assert [entry.ensemble for entry in copy.entries.values()] == [(A1, B1, C1), (C1, B1, A1), (A1, B1, C1)]
    assert copy.export_state() == audit.export_state()


def test_the_same_input_gives_the_same_alert_ids():
    def run():
        runner = cluster()
        audit = audit_of()
        remember(audit, runner, 1, [A1, B1, C1])
        return change(audit, runner, lost(1_000, B1)) + change(audit, runner, writable(2_000, B1), improving=True)

    first, second = run(), run()
    assert [a["id"] for a in first] == [a["id"] for a in second]
    assert len({a["id"] for a in first}) == 2


def test_turning_the_audit_off_remembers_nothing():
    runner = cluster()
    audit = audit_of(max_ledgers=0)
    remember(audit, runner, 1, [A1, B1])
    assert len(audit) == 0


def test_the_audit_keys_have_defaults_and_reject_bad_values():
    settings = ModelSettings.from_conf({})
    assert (settings.audit_max_ledgers, settings.audit_ttl_s) == (100_000, 604_800)
    settings = ModelSettings.from_conf({"engine.audit.maxLedgers": "0", "engine.audit.ttlSeconds": "60"})
    assert (settings.audit_max_ledgers, settings.audit_ttl_s) == (0, 60)
    assert {"engine.audit.maxLedgers", "engine.audit.ttlSeconds"} <= set(MODEL_KEYS)
    with pytest.raises(ValueError, match="engine.audit.maxLedgers"):
        ModelSettings.from_conf({"engine.audit.maxLedgers": "-1"})
    with pytest.raises(ValueError, match="engine.audit.ttlSeconds"):
        ModelSettings.from_conf({"engine.audit.ttlSeconds": "0"})


def test_relaxations_are_kept_apart_from_the_sentences_as_private_copies():
    explain = {"fallbacks": ["rack /c is down: placed on 2 racks"], "relaxed": [
        {"rule": "isolation", "primary": ["g1"], "secondary": ["g2"]}, {"no": "rule"}, "racks"]}
    assert relaxed_notes("MEETS_STRICT", explain) == ("rack /c is down: placed on 2 racks",)
    rules = relaxation_rules(explain)
    assert rules == ({"primary": ["g1"], "rule": "isolation", "secondary": ["g2"]},), "only tags with a rule"
    explain["relaxed"][0]["primary"].append("g9")
    assert rules[0]["primary"] == ["g1"], "the audit keeps its own copy of the decision's tags"
    assert relaxation_rules(None) == () and relaxation_rules({"relaxed": None}) == ()


def test_the_narrowest_write_set_is_the_first_with_the_fewest_locations():
    """`narrowest_write_set` slides per-location counts (O(E)); it names the write set that building
    each write set in turn names (first one of the fewest distinct locations, unplaced members not
    counted), over random ensembles with shared, repeated and unplaced locations."""
    def reference(locations, write_quorum):
        size = len(locations)
        worst = None
        for start in range(size):
            window = {locations[(start + j) % size] for j in range(write_quorum)} - {None}
            if worst is None or len(window) < worst[0]:
                worst = (len(window), start)
        return worst

    g = random.Random(11)
    for _ in range(3000):
        size = g.randint(1, 24)
        pool = [None, *(f"/r{k}" for k in range(g.randint(1, 8)))]
        locations = [g.choice(pool) for _ in range(size)]
        write_quorum = g.randint(1, size)
        assert narrowest_write_set(locations, write_quorum) == reference(locations, write_quorum)
