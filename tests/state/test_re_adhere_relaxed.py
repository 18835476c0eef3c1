"""Ledgers placed under a fallback that still adhere: when the topology recovers so that
the fallback is no longer needed, `placement.ledger.re_adhere_possible` fires once with a minimal fix, and
it resolves like the other ledger alerts. Replayed scenarios through `state.step`; each test asserts the
complete list of alert types a step produced, so an extra alert fails it."""

import json

from state.audit import ALERT_LEDGER_NOT_ADHERING, ALERT_LEDGER_RE_ADHERE
from state.snapshot import dumps, from_document, loads, to_document
from tests.state.helpers import Runner, check, create, location, lost, v2_audit, writable

RESOLVED = ".resolved"
ISOLATED = {"ensemblePlacementPolicy": "isolated", "bookkeeperClientIsolationGroups": "g1",
            "bookkeeperClientSecondaryIsolationGroups": "g2"}
P1, P2, P3, P4 = "p1:3181", "p2:3181", "p3:3181", "p4:3181"
S1, S2 = "s1:3181", "s2:3181"


def isolated_cluster():
    """Primary group g1: p1-p3 on racks /r1-/r3; secondary group g2: s1 on /r1."""
    runner = Runner(ISOLATED)
    runner.run(*[writable(0, f"p{i}:3181", f"/r{i}", group="g1") for i in (1, 2, 3)],
               writable(0, S1, "/r1", group="g2"))
    return runner


def types(runner, produced):
    return [a["type"] for a in runner.alerts(produced=produced)]


def outage_then_placement(runner):
    """Ledger 1 on the primary group, then p1 is lost and ledger 2 needs a secondary-group bookie."""
    runner.run(create(1_000, "before", 3, 2, 2, ledger_id=1))
    assert sorted(runner.decision("before")["ensemble"]) == [P1, P2, P3]
    produced = runner.run(lost(2_000, P1))
    assert types(runner, produced) == [ALERT_LEDGER_NOT_ADHERING]
    produced = runner.run(create(3_000, "during", 3, 2, 2, ledger_id=2))
    decided = runner.decision("during")
    assert sorted(decided["ensemble"]) == [P2, P3, S1], "two primary bookies are left: s1 is admitted"
    assert decided["adherence"] == "MEETS_STRICT", "the secondary group keeps the rack rule"
    assert types(runner, produced) == [], "an adhering placement raises no alert; the audit only tags it"
    return decided


def test_isolation_primary_outage_then_recovery_fires_re_adhere_once_with_a_fix():
    runner = isolated_cluster()
    decided = outage_then_placement(runner)
    rules = decided["explain"]["relaxed"]
    assert rules[0]["rule"] == "isolation" and rules[0]["admitted"] == "secondary"

    produced = runner.run(writable(4_000, P1, "/r1", group="g1"))            # the primary group recovers
    assert sorted(types(runner, produced)) == [ALERT_LEDGER_NOT_ADHERING + RESOLVED, ALERT_LEDGER_RE_ADHERE]
    [re_adhere] = runner.alerts(ALERT_LEDGER_RE_ADHERE, produced)
    assert re_adhere["type"] == "placement.ledger.re_adhere_possible"
    assert re_adhere["subject"] == "ledger/2", "never for ledger 1, placed without a fallback"
    data = re_adhere["data"]
    assert data["severity"] == "info" and data["adherence"] == "MEETS_STRICT"
    assert data["fix"]["possible"] is True and data["fix"]["adherence"] == "MEETS_STRICT"
    [move] = data["fix"]["replace"]
    assert move["bookie"] == S1 and move["with"] == P1, "the secondary member moves to the primary group"
    assert sorted(data["fix"]["ensemble"]) == [P1, P2, P3]
    assert data["relaxed_rules"] == [{"admitted": "secondary", "primary": ["g1"], "rule": "isolation",
                                      "secondary": ["g2"]}], "the policy's tag, as an object"
    assert data["relaxed"] == [
        "primary isolation groups [g1] have 2 writable bookie(s), fewer than ensemble_size=3: admitted "
        "secondary groups [g2] (1 bookie(s))"], "sentences only: no rule encoded as text"

    # Further improvements do not repeat it.
    assert runner.run(writable(5_000, P4, "/r1", group="g1")) == []
    # The operator moves the ledger; the check registers the new ensemble and resolves the alert.
    produced = runner.run(check(6_000, "moved", data["fix"]["ensemble"], 2, 2, ledger_id=2))
    assert types(runner, produced) == [ALERT_LEDGER_RE_ADHERE + RESOLVED]
    [resolved] = runner.alerts(produced=produced)
    assert resolved["subject"] == "ledger/2" and resolved["data"]["resolves"] == re_adhere["id"]
    assert runner.run(lost(7_000, P4), writable(8_000, P4, "/r1", group="g1")) == []
    assert runner.alerts(ALERT_LEDGER_RE_ADHERE) == [re_adhere], "fired exactly once"


def test_nothing_fires_while_the_primary_group_is_still_too_small():
    runner = isolated_cluster()
    outage_then_placement(runner)
    # Improvements that leave the primary group at 2 writable bookies (< ensemble_size 3) change nothing.
    assert runner.run(writable(3_500, S2, "/r2", group="g2")) == []
    assert runner.run(writable(3_600, "u1:3181", "/r3")) == []
    assert "ledger/2" in runner.model.audit.waiting
    produced = runner.run(writable(4_000, P1, "/r1", group="g1"))            # 3 primary bookies
    assert sorted(types(runner, produced)) == [ALERT_LEDGER_NOT_ADHERING + RESOLVED, ALERT_LEDGER_RE_ADHERE]
    [re_adhere] = runner.alerts(ALERT_LEDGER_RE_ADHERE, produced)
    assert re_adhere["subject"] == "ledger/2"
    assert [m["with"] for m in re_adhere["data"]["fix"]["replace"]] == [P1]


def test_a_ledger_placed_without_a_fallback_never_gets_re_adhere():
    runner = isolated_cluster()
    runner.run(create(1_000, "plain", 3, 2, 2, ledger_id=1))
    assert runner.model.audit.entries["ledger/1"].relaxed == ()
    assert runner.model.audit.entries["ledger/1"].rules == ()
    assert "ledger/1" not in runner.model.audit.waiting
    for event in (writable(2_000, P4, "/r1", group="g1"), lost(3_000, S1), writable(4_000, S1, "/r1", group="g2")):
        assert runner.run(event) == []
    assert runner.alerts() == []


def test_the_alert_resolves_when_the_relaxation_disappears_without_a_move():
    """The secondary member joins the primary group: the ledger no longer depends on the fallback."""
    runner = isolated_cluster()
    outage_then_placement(runner)
    produced = runner.run(writable(4_000, P1, "/r1", group="g1"))
    [re_adhere] = runner.alerts(ALERT_LEDGER_RE_ADHERE, produced)
    produced = runner.run(location(5_000, S1, "/r1", group="g1"))
    assert types(runner, produced) == [ALERT_LEDGER_RE_ADHERE + RESOLVED]
    [resolved] = runner.alerts(produced=produced)
    assert resolved["data"]["resolves"] == re_adhere["id"]
    entry = runner.model.audit.entries["ledger/2"]
    assert entry.rules == (), "the relaxation is dropped from the ledger's rules"
    assert any("admitted secondary groups" in note for note in entry.relaxed), "the sentence still says how"
    assert "ledger/2" not in runner.model.audit.waiting


def test_a_snapshot_keeps_the_relaxation_waiting():
    runner = isolated_cluster()
    outage_then_placement(runner)
    rules = runner.model.audit.entries["ledger/2"].rules
    runner.model = loads(dumps(runner.model), runner.settings)
    runner.model.check_invariants()
    assert runner.model.audit.entries["ledger/2"].rules == rules != ()
    assert "ledger/2" in runner.model.audit.waiting
    produced = runner.run(writable(4_000, P1, "/r1", group="g1"))
    assert sorted(types(runner, produced)) == [ALERT_LEDGER_NOT_ADHERING + RESOLVED, ALERT_LEDGER_RE_ADHERE]


def test_replaying_the_scenario_gives_identical_alert_ids():
    def replay():
        runner = isolated_cluster()
        outage_then_placement(runner)
        runner.run(writable(4_000, P1, "/r1", group="g1"))
        return [a["id"] for a in runner.alerts()]

    assert replay() == replay()


def test_rack_outage_then_recovery_offers_to_spread_a_ledger_over_the_recovered_rack():
    """Rack-aware: E=4 on two racks while /c is down (MEETS_STRICT with minNumRacksPerWriteQuorum=2)."""
    runner = Runner({"ensemblePlacementPolicy": "rackaware"})
    runner.run(*[writable(0, f"{name}:3181", f"/{name[0]}") for name in ("a1", "a2", "b1", "b2", "c1")])
    runner.run(lost(1_000, "c1:3181"))
    produced = runner.run(create(2_000, "r", 4, 2, 2, ledger_id=4))
    decided = runner.decision("r")
    assert decided["adherence"] == "MEETS_STRICT"
    assert decided["explain"]["relaxed"] == [{"rule": "racks", "spanned": 2}]
    assert types(runner, produced) == []
    produced = runner.run(writable(3_000, "c1:3181", "/c"))
    assert types(runner, produced) == [ALERT_LEDGER_RE_ADHERE]
    fix = runner.alerts(produced=produced)[0]["data"]["fix"]
    [move] = fix["replace"]
    assert move["with"] == "c1:3181" and fix["adherence"] == "MEETS_STRICT"


def test_region_outage_then_recovery_offers_to_spread_a_single_region_ledger():
    conf = {"ensemblePlacementPolicy": "regionaware", "minNumRacksPerWriteQuorum": "2"}
    runner = Runner(conf)
    runner.run(*[writable(0, f"{r}{k}:3181", f"/{r}/rack{k}") for r in ("x", "y") for k in (1, 2)])
    runner.run(lost(1_000, "y1:3181"), lost(1_000, "y2:3181"))               # region y is down
    produced = runner.run(create(2_000, "r", 2, 2, 2, ledger_id=5))
    decided = runner.decision("r")
    assert decided["adherence"] == "MEETS_STRICT"
    assert decided["explain"]["relaxed"] == [{"rule": "regions", "spanned": 1}]
    assert types(runner, produced) == []
    produced = runner.run(writable(3_000, "y1:3181", "/y/rack1"))
    assert types(runner, produced) == [ALERT_LEDGER_RE_ADHERE]
    re_adhere = runner.alerts(produced=produced)[0]
    assert [m["with"] for m in re_adhere["data"]["fix"]["replace"]] == ["y1:3181"]
    assert re_adhere["data"]["fix"]["adherence"] == "MEETS_STRICT"


def test_a_snapshot_written_before_the_rules_field_still_loads_and_fires():
    """A v2 snapshot's audit rows could have five columns and keep each rule as a `rule {json}` note in
    `relaxed`: the import moves it into `rules`, so the alert carries it as an object."""
    runner = isolated_cluster()
    outage_then_placement(runner)
    document = to_document(runner.model)
    document["v"], document["audit"] = 2, v2_audit(document["audit"])
    [row] = [row for row in document["audit"]["extra"].values() if row[5]]
    relaxed, rules = row[0], row[5]
    row[:] = [relaxed + ["rule " + json.dumps(rule, sort_keys=True, separators=(",", ":")) for rule in rules],
              *row[1:5]]
    runner.model = from_document(json.loads(json.dumps(document)), runner.settings)
    runner.model.check_invariants()
    entry = runner.model.audit.entries["ledger/2"]
    assert [dict(rule) for rule in entry.rules] == rules and list(entry.relaxed) == relaxed
    assert "ledger/2" in runner.model.audit.waiting
    produced = runner.run(writable(4_000, P1, "/r1", group="g1"))
    [re_adhere] = runner.alerts(ALERT_LEDGER_RE_ADHERE, produced)
    assert re_adhere["data"]["relaxed_rules"] == rules
    assert not any(note.startswith("rule ") for note in re_adhere["data"]["relaxed"])
