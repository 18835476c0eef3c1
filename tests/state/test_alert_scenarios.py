"""Replayed scenarios through the step: each alert type fires exactly when it should and never
otherwise, and a replayed batch gives identical ids.

Each test asserts the complete list of alert types it produced, so an extra alert fails it."""

from events.model import BookieReplace
from events.times import format_time
from state.audit import ALERT_LEDGER_NOT_ADHERING, ALERT_LEDGER_RE_ADHERE
from state.health import ALERT_DEFAULT_RACK, ALERT_DEPARTURE_PENDING
from state.outputs import ALERT_DECISION_FAILED, ALERT_FLAPPING, ALERT_NOT_ADHERING
from tests.state.helpers import CLUSTER, T0, Runner, check, create, feature, location, lost, readonly, writable

RESOLVED = ".resolved"


def replace(t, request_id, ensemble, bookie, write_quorum=2, ack_quorum=2, *, ledger_id=None):
    return BookieReplace(cluster=CLUSTER, time_ms=T0 + t, request_id=request_id, ledger_id=ledger_id,
                         ensemble=tuple(ensemble), bookie=bookie, write_quorum=write_quorum, ack_quorum=ack_quorum,
                         exclude=frozenset())


def types(runner, produced):
    return [a["type"] for a in runner.alerts(produced=produced)]


def test_lost_bookie_alerts_its_ledgers_only_and_its_return_resolves_them():
    runner = Runner({"ensemblePlacementPolicy": "rackaware"})
    runner.run(*[writable(0, f"{name}:3181", f"/{name[0]}") for name in ("a1", "a2", "b1", "b2", "c1", "c2")])
    runner.run(create(1_000, "r1", 3, 2, 2, ledger_id=1), create(1_000, "r2", 3, 2, 2, ledger_id=2))
    first = runner.decision("r1")["ensemble"]
    second = runner.decision("r2")["ensemble"]
    victim = next(b for b in first if b not in second) if set(first) - set(second) else first[0]
    produced = runner.run(lost(2_000, victim))
    holders = sorted(f"ledger/{i}" for i, e in ((1, first), (2, second)) if victim in e)
    assert types(runner, produced) == [ALERT_LEDGER_NOT_ADHERING] * len(holders)
    assert sorted(a["subject"] for a in runner.alerts(produced=produced)) == holders
    alert = runner.alerts(produced=produced)[0]
    assert alert["data"]["fix"]["possible"] is True and alert["data"]["severity"] == "error"
    assert runner.run(lost(2_500, "zz:3181")) == [], "an unknown bookie touches nothing"
    produced = runner.run(writable(3_000, victim))
    assert types(runner, produced) == [ALERT_LEDGER_NOT_ADHERING + RESOLVED] * len(holders)
    assert sorted(a["subject"] for a in runner.alerts(produced=produced)) == holders


def test_rack_outage_and_recovery():
    conf = {"ensemblePlacementPolicy": "rackaware", "minNumRacksPerWriteQuorum": "3"}
    runner = Runner(conf)
    runner.run(writable(0, "a1:3181", "/a"), writable(0, "a2:3181", "/a"), writable(0, "b1:3181", "/b"),
               writable(0, "b2:3181", "/b"), writable(0, "c1:3181", "/c"))
    runner.run(create(1_000, "before", 3, 3, 2, ledger_id=1))
    assert "c1:3181" in runner.decision("before")["ensemble"]
    produced = runner.run(lost(2_000, "c1:3181"))                 # rack /c is down
    assert types(runner, produced) == [ALERT_LEDGER_NOT_ADHERING]
    [down] = runner.alerts(produced=produced)
    assert down["data"]["fix"]["possible"] is False, "two racks cannot hold a 3-rack write quorum"
    produced = runner.run(create(3_000, "during", 3, 3, 2, ledger_id=2))
    assert runner.decision("during")["adherence"] == "FAIL"
    assert types(runner, produced) == [ALERT_NOT_ADHERING], "the decision reports it; the audit only tags it"
    [decided] = runner.alerts(produced=produced)
    assert decided["data"]["reason"] and "enforceMinNumRacksPerWriteQuorum" in decided["data"]["action"]
    produced = runner.run(writable(4_000, "c1:3181"))            # the rack is back
    assert sorted(types(runner, produced)) == [ALERT_LEDGER_NOT_ADHERING + RESOLVED, ALERT_LEDGER_RE_ADHERE]
    readhere = runner.alerts(ALERT_LEDGER_RE_ADHERE, produced)[0]
    assert readhere["subject"] == "ledger/2"
    assert [m["with"] for m in readhere["data"]["fix"]["replace"]] == ["c1:3181"]
    # The operator moves the ledger to the suggested ensemble; the check registers it and resolves the alert.
    produced = runner.run(check(5_000, "fixed", readhere["data"]["fix"]["ensemble"], 3, 2, ledger_id=2))
    assert runner.decision("fixed")["adherence"] == "MEETS_STRICT"
    assert types(runner, produced) == [ALERT_LEDGER_RE_ADHERE + RESOLVED]
    [resolved] = runner.alerts(produced=produced)
    assert resolved["subject"] == "ledger/2" and resolved["data"]["adherence"] == "MEETS_STRICT"


def test_rack_change_breaks_and_restores_a_ledger():
    runner = Runner({"ensemblePlacementPolicy": "rackaware"})
    runner.run(writable(0, "a:3181", "/a"), writable(0, "b:3181", "/b"))
    runner.run(create(1_000, "r", 2, 2, 2, ledger_id=5))
    produced = runner.run(location(2_000, "b:3181", "/a"))
    assert types(runner, produced) == [ALERT_LEDGER_NOT_ADHERING]
    produced = runner.run(location(3_000, "b:3181", "/b"))
    assert types(runner, produced) == [ALERT_LEDGER_NOT_ADHERING + RESOLVED]


def test_replacing_the_broken_bookie_resolves_the_ledger_alert():
    runner = Runner({"ensemblePlacementPolicy": "rackaware"})
    runner.run(writable(0, "a:3181", "/a"), writable(0, "b:3181", "/b"), writable(0, "c:3181", "/b"))
    runner.run(create(1_000, "r", 2, 2, 2, ledger_id=5))
    ensemble = runner.decision("r")["ensemble"]
    gone = next(b for b in ensemble if b != "a:3181")
    runner.run(lost(2_000, gone))
    [alert] = runner.alerts(ALERT_LEDGER_NOT_ADHERING)
    produced = runner.run(replace(3_000, "fix", ensemble, gone, 2, 2, ledger_id=5))
    assert runner.decision("fix")["adherence"] == "MEETS_STRICT"
    [resolved] = runner.alerts(produced=produced)
    assert resolved["type"] == ALERT_LEDGER_NOT_ADHERING + RESOLVED and resolved["subject"] == alert["subject"]


def test_region_disabled_and_reenabled():
    conf = {"ensemblePlacementPolicy": "regionaware", "reppDisallowBookiePlacementInRegionFeatureName":
            "disallowBookies", "minNumRacksPerWriteQuorum": "2"}
    runner = Runner(conf)
    runner.run(*[writable(0, f"{r}{k}:3181", f"/{r}/rack{k}") for r in ("x", "y", "z") for k in (1, 2)])
    runner.run(create(1_000, "r", 3, 2, 2, ledger_id=8))
    ensemble = runner.decision("r")["ensemble"]
    region = ensemble[0][0]
    produced = runner.run(feature(2_000, f"{region}.disallowBookies", 1))
    assert types(runner, produced) == [ALERT_LEDGER_NOT_ADHERING]
    [alert] = runner.alerts(produced=produced)
    assert any("placement is disallowed" in p for p in alert["data"]["problems"])
    assert alert["data"]["severity"] == "warning"
    assert runner.run(feature(2_500, "unrelated.switch", 1)) == []
    produced = runner.run(feature(3_000, f"{region}.disallowBookies", 0))
    assert types(runner, produced) == [ALERT_LEDGER_NOT_ADHERING + RESOLVED]


def test_flapping_inside_the_stabilization_window_raises_no_ledger_alert():
    conf = {"ensemblePlacementPolicy": "rackaware", "networkTopologyStabilizePeriodSeconds": "30",
            "engine.flapThreshold": "3"}
    runner = Runner(conf)
    runner.run(writable(0, "a:3181", "/a"), writable(0, "b:3181", "/b"), writable(0, "c:3181", "/c"))
    runner.run(create(1_000, "r", 3, 2, 2, ledger_id=1))
    seen = []
    for s in (10, 12, 14):
        seen += types(runner, runner.run(lost(s * 1000, "a:3181"), writable(s * 1000 + 500, "a:3181")))
    assert seen == [ALERT_DEPARTURE_PENDING, ALERT_DEPARTURE_PENDING + RESOLVED] * 2 + \
        [ALERT_FLAPPING, ALERT_DEPARTURE_PENDING, ALERT_DEPARTURE_PENDING + RESOLVED]
    produced = runner.run(writable(100_000, "d:3181", "/d"))     # the flap window (30 s) has passed
    assert types(runner, produced) == [ALERT_FLAPPING + RESOLVED]


def test_departures_spread_wider_than_the_window_do_not_flap_and_an_expired_departure_alerts_ledgers():
    conf = {"ensemblePlacementPolicy": "rackaware", "networkTopologyStabilizePeriodSeconds": "30",
            "engine.flapThreshold": "2"}
    runner = Runner(conf)
    runner.run(writable(0, "a:3181", "/a"), writable(0, "b:3181", "/b"), writable(0, "c:3181", "/c"))
    runner.run(create(1_000, "r", 3, 2, 2, ledger_id=1))
    seen = []
    for s in (10, 50, 90):
        seen += types(runner, runner.run(lost(s * 1000, "a:3181"), writable(s * 1000 + 500, "a:3181")))
    assert ALERT_FLAPPING not in seen
    produced = runner.run(lost(200_000, "a:3181"))
    assert types(runner, produced) == [ALERT_DEPARTURE_PENDING]
    produced = runner.run(writable(231_000, "e:3181", "/e"))    # the 30 s delay ended at 230 s
    # Reported at 230 s, when the delay ended (no fix then: two racks left), then e's join at 231 s
    # makes a fix possible.
    assert types(runner, produced) == [ALERT_DEPARTURE_PENDING + RESOLVED, ALERT_LEDGER_NOT_ADHERING,
                                       ALERT_LEDGER_RE_ADHERE]
    expired, ledger, readhere = runner.alerts(produced=produced)
    assert expired["data"]["outcome"] == "expired" and ledger["subject"] == "ledger/1"
    assert expired["time"] == ledger["time"] == format_time(T0 + 230_000)
    assert readhere["time"] == format_time(T0 + 231_000) and readhere["subject"] == "ledger/1"


def test_default_rack_with_enforcement_off_and_one_rack_is_silent():
    """Upstream apache/bookkeeper#2957."""
    runner = Runner({"ensemblePlacementPolicy": "rackaware"})
    produced = runner.run(writable(0, "a:3181"), writable(0, "b:3181"), create(1_000, "r", 2, 2, 2, ledger_id=1))
    assert types(runner, produced) == [ALERT_NOT_ADHERING] or types(runner, produced) == []
    assert runner.alerts(ALERT_DEFAULT_RACK) == []


def test_default_rack_with_enforcement_on_alerts_each_bookie_and_the_failed_request_says_why():
    runner = Runner({"ensemblePlacementPolicy": "rackaware", "enforceMinNumRacksPerWriteQuorum": "true"})
    produced = runner.run(writable(0, "a:3181"), writable(0, "b:3181", "/r1"), writable(0, "c:3181", "/r2"))
    assert types(runner, produced) == [ALERT_DEFAULT_RACK]
    produced = runner.run(create(1_000, "r", 3, 2, 2, ledger_id=1))
    assert types(runner, produced) == [ALERT_DECISION_FAILED]
    [failed] = runner.alerts(produced=produced)
    assert "only 2 eligible bookie(s)" in failed["data"]["constraint"]
    assert "add writable bookies" in failed["data"]["action"]
    explain = runner.decision("r")["explain"]
    assert explain["bookies"] == {"writable": 3, "readonly": 0, "pending": 0, "join_failed": 0, "flapping": 0}


def test_a_replayed_batch_gives_identical_ids_and_splitting_it_changes_nothing():
    conf = {"ensemblePlacementPolicy": "rackaware", "networkTopologyStabilizePeriodSeconds": "10",
            "enforceMinNumRacksPerWriteQuorum": "true"}
    records = [writable(0, "a:3181", "/a"), writable(0, "b:3181", "/b"), writable(0, "c:3181", "/c"),
               writable(0, "d:3181"), create(1_000, "r1", 3, 2, 2, ledger_id=1), lost(2_000, "b:3181"),
               readonly(3_000, "c:3181"), create(20_000, "r2", 2, 2, 2, ledger_id=2), writable(21_000, "b:3181"),
               writable(22_000, "c:3181"), location(23_000, "d:3181", "/d")]

    def ids(*batches):
        runner = Runner(conf)
        for batch in batches:
            runner.run(*batch)
        return [a["id"] for a in runner.alerts()], [a["type"] for a in runner.alerts()]

    whole = ids(records)
    assert whole == ids(records)
    assert whole == ids(records[:5], records[5:8], records[8:])
    assert len(set(whole[0])) == len(whole[0])
    assert {ALERT_DEFAULT_RACK, ALERT_LEDGER_NOT_ADHERING} <= set(whole[1])


def test_sharded_model_emits_health_once_and_ledger_alerts_from_the_owning_shard():
    conf = {"ensemblePlacementPolicy": "rackaware", "enforceMinNumRacksPerWriteQuorum": "true"}
    events = [writable(0, "a:3181", "/a"), writable(0, "b:3181", "/b"), writable(0, "d:3181")]
    shard0, shard1 = Runner(conf, shard=0, shards=2), Runner(conf, shard=1, shards=2)
    shard0.run(*events)
    shard1.run(*events)
    shard1.run(create(1_000, "r", 2, 2, 2, ledger_id=3))
    assert [a["type"] for a in shard0.alerts()] == [ALERT_DEFAULT_RACK]
    assert shard1.alerts() == []
    victim = shard1.decision("r")["ensemble"][0]
    assert shard0.run(lost(2_000, victim)) == []
    assert types(shard1, shard1.run(lost(2_000, victim))) == [ALERT_LEDGER_NOT_ADHERING]
