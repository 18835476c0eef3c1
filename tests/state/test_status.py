"""The per-cluster status record (`state.status`): what it says, and when the step emits it."""

from collections import Counter

import pytest

from events.times import format_time
from state import ModelSettings, dumps, loads, step
from state.audit import ALERT_LEDGER_NOT_ADHERING, ALERT_LEDGER_RE_ADHERE
from state.status import STATUS, STATUS_TYPE, status_gauges
from tests.state.helpers import T0, Runner, check, create, lost, readonly, replace, writable

RACKS = {"/r1": ["a1", "a2", "a3"], "/r2": ["b1", "b2", "b3"], "/r3": ["c1", "c2", "c3"]}


def statuses(produced):
    return [o.payload for o in produced if o.kind == STATUS]


def open_alerts(runner, alert_type):
    """The alerts of `alert_type` still open: opened and not followed by their `.resolved` event."""
    opened = {}
    for alert in runner.alerts():
        if alert["type"] == alert_type:
            opened[alert["id"]] = alert
        elif alert["type"] == alert_type + ".resolved":
            del opened[alert["data"]["resolves"]]
    return list(opened.values())


def three_racks(conf=None, t=0):
    runner = Runner({"ensemblePlacementPolicy": "rackaware", **(conf or {})})
    runner.run(*[writable(t, f"{name}:3181", rack) for rack, names in RACKS.items() for name in names])
    return runner


def test_a_status_record_counts_what_the_model_holds():
    runner = three_racks({"networkTopologyStabilizePeriodSeconds": "30"})
    runner.run(writable(0, "d1:3181"), writable(0, "e1:3181", "bad-location"))   # default rack; join fails
    for i in range(40):
        runner.run(create(1_000 + i, f"r{i}", 3, 2, 2, ledger_id=i))
    runner.run(readonly(2_000, "a3:3181"), lost(2_000, "b3:3181"))
    # The changes since the first record (at T0) are reported when the interval ends: an idle tick brings it.
    ticked = step(runner.model, "c1", [], runner.settings, horizon_ms=T0 + 100_000)
    runner.model = model = ticked.model
    runner.outputs.extend(ticked.outputs)
    [record] = statuses(ticked.outputs)
    gauges = status_gauges(model)
    assert record["type"] == STATUS_TYPE and record["cluster"] == "c1"
    assert (record["shard"], record["shards"], record["policy"]) == (0, 1, "rackaware")
    assert record["time"] == format_time(T0 + 60_000) and record["time_ms"] == T0 + 60_000
    assert record["topology_version"] == model.version
    assert record["bookies"] == {"writable": 9, "readonly": 1, "pending_departure": 0, "default_rack": 1,
                                 "join_failures": 1, "flapping": 0}
    assert record["bookies"] == {key: gauges[key] for key in record["bookies"]}
    assert record["ledgers"] == {"remembered": 40, "not_adhering": gauges["not_adhering"],
                                 "re_adhere_possible": gauges["re_adhere_possible"]}
    assert gauges["not_adhering"] == len(open_alerts(runner, ALERT_LEDGER_NOT_ADHERING)) > 0
    # Racks: registered bookies where they are (the one whose location is unusable resolves nowhere).
    assert record["racks"] == [{"rack": "/default-rack", "writable": 2, "readonly": 0},
                               {"rack": "/r1", "writable": 2, "readonly": 1},
                               {"rack": "/r2", "writable": 2, "readonly": 0},
                               {"rack": "/r3", "writable": 3, "readonly": 0}]


def test_the_write_share_is_the_windows_placements_per_rack_against_uniform_bookies():
    runner = three_racks({"engine.skew.windowDecisions": "30", "engine.skew.minDecisions": "10"})
    rack_of = {f"{name}:3181": rack for rack, names in RACKS.items() for name in names}
    for i in range(50):
        runner.run(create(1_000 + i, f"r{i}", 3, 2, 2, ledger_id=i, exclude=["c1:3181"] if i % 2 else []))
    for i in range(10):
        ensemble = runner.decision(f"r{i}")["ensemble"]
        runner.run(replace(2_000 + i, f"x{i}", ensemble, ensemble[0]))
    [record] = statuses(runner.run(create(70_000, "last", 3, 2, 2, ledger_id=200)))
    share = record["write_share"]
    # The create window holds the last 30 creates ("last" included), the replace window the 10 replaces.
    creates = [runner.decision(f"r{i}")["ensemble"] for i in range(21, 50)] + [runner.decision("last")["ensemble"]]
    placed = [b for ensemble in creates for b in ensemble] + [runner.decision(f"x{i}")["bookie"] for i in range(10)]
    counts = Counter(rack_of[b] for b in placed)
    assert (share["window_decisions"], share["decisions"], share["placements"], share["basis"]) == (30, 40, 100,
                                                                                                  "bookies")
    assert share["racks"] == [{"rack": rack, "placements": counts[rack], "observed": round(counts[rack] / 100, 6),
                               "expected": round(1 / 3, 6)} for rack in sorted(RACKS)]


def test_the_expected_share_follows_disk_weights_when_placement_is_weighted():
    runner = three_racks({"diskWeightBasedPlacementEnabled": "true"})
    from tests.state.helpers import disk
    free = {"/r1": 100, "/r2": 100, "/r3": 200}
    runner.run(*[disk(0, f"{name}:3181", free[rack] * 2**30) for rack, names in RACKS.items() for name in names])
    for i in range(20):
        runner.run(create(1_000 + i, f"r{i}", 3, 2, 2, ledger_id=i))
    [record] = statuses(runner.run(create(70_000, "last", 3, 2, 2, ledger_id=99)))
    share = record["write_share"]
    assert share["basis"] == "weights"
    assert [r["expected"] for r in share["racks"]] == [0.25, 0.25, 0.5]


def test_a_change_inside_the_interval_is_reported_at_its_end_and_an_idle_cluster_reports_nothing():
    runner = three_racks({"engine.statusIntervalSeconds": "60"})
    [first] = statuses(runner.outputs)
    assert first["time_ms"] == T0, "a new cluster reports at once"
    assert statuses(runner.run(create(10_000, "r1", 3, 2, 2, ledger_id=1))) == []
    assert statuses(runner.run(create(59_999, "r2", 3, 2, 2, ledger_id=2))) == []
    produced = runner.run(create(90_000, "r3", 3, 2, 2, ledger_id=3))
    # Due at T0 + 60 s (what changed by then), before the record of 90 s, which changes it again: due at 120 s.
    [due] = statuses(produced)
    assert produced[0].kind == STATUS, "reported before the record that found it due"
    assert due["time_ms"] == T0 + 60_000 and due["ledgers"]["remembered"] == 2
    assert runner.model.status.due_ms == T0 + 120_000
    ticked = step(runner.model, "c1", [], runner.settings, horizon_ms=T0 + 500_000)
    [at_end] = statuses(ticked.outputs)
    assert at_end["time_ms"] == T0 + 120_000 and at_end["ledgers"]["remembered"] == 3
    assert statuses(step(ticked.model, "c1", [], runner.settings, horizon_ms=T0 + 900_000).outputs) == [], \
        "nothing changed: nothing reported"
    # After a long quiet spell a change is reported at its own time.
    runner.model = ticked.model
    [now] = statuses(runner.run(lost(1_000_000, "a1:3181")))
    assert now["time_ms"] == T0 + 1_000_000 and now["bookies"]["writable"] == 8


def test_a_change_that_is_undone_inside_the_interval_reports_nothing_new():
    runner = three_racks()
    runner.run(lost(10_000, "a1:3181"), writable(20_000, "a1:3181", "/r1"))
    ticked = step(runner.model, "c1", [], runner.settings, horizon_ms=T0 + 500_000)
    [record] = statuses(ticked.outputs)
    assert record["topology_version"] == runner.model.version, "the version moved: the content differs"
    assert record["bookies"]["writable"] == 9


def test_zero_interval_emits_no_status_record():
    runner = three_racks({"engine.statusIntervalSeconds": "0"})
    runner.run(create(1_000, "r1", 3, 2, 2, ledger_id=1), lost(100_000, "a1:3181"))
    assert statuses(runner.outputs) == []


def test_each_shard_reports_its_own_requests_and_the_same_topology():
    records = [writable(0, f"{name}:3181", rack) for rack, names in RACKS.items() for name in names]
    records += [create(1_000 + i, f"req-{i}", 3, 2, 2, ledger_id=i) for i in range(30)]
    records.append(lost(70_000, "a1:3181"))
    settings = ModelSettings.from_conf({"ensemblePlacementPolicy": "rackaware"})
    whole = statuses(step(None, "c1", records, settings).outputs)[-1]
    parts = []
    for shard in range(3):
        mine = [r for r in records if not hasattr(r, "ledger_id") or r.ledger_id % 3 == shard]
        parts.append(statuses(step(None, "c1", mine, settings, shard=shard, shards=3).outputs)[-1])
    assert [p["shard"] for p in parts] == [0, 1, 2] and {p["shards"] for p in parts} == {3}
    assert all(p["bookies"] == whole["bookies"] and p["racks"] == whole["racks"] for p in parts)
    assert sum(p["ledgers"]["remembered"] for p in parts) == whole["ledgers"]["remembered"] == 30
    assert sum(p["write_share"]["placements"] for p in parts) == whole["write_share"]["placements"] == 90
    assert len({p["id"] for p in parts}) == 3, "one record per shard"


def test_a_rack_outage_raises_the_ledger_debt_and_recovery_with_re_adherence_clears_it():
    """The issue's scenario: a rack goes down, ledgers stop adhering and ledgers placed meanwhile use fewer
    racks than the rules want; the rack returns, and the operator re-places what the audit suggests. The
    status's debt (`not_adhering`, `re_adhere_possible`) rises, then is back at 0."""
    conf = {"ensemblePlacementPolicy": "rackaware", "minNumRacksPerWriteQuorum": "3",
            "engine.statusIntervalSeconds": "10"}
    runner = three_racks(conf)
    for i in range(30):
        runner.run(create(1_000 + i, f"before-{i}", 3, 3, 2, ledger_id=i))
    runner.run(*[lost(20_000, f"{name}:3181") for name in RACKS["/r3"]])
    for i in range(30, 40):
        runner.run(create(21_000 + i, f"during-{i}", 3, 3, 2, ledger_id=i))
    down = statuses(runner.run(create(40_000, "probe-1", 3, 3, 2, ledger_id=100)))[-1]
    assert down["ledgers"]["not_adhering"] == 30, "every ledger had a bookie on /r3"
    assert [r["rack"] for r in down["racks"]] == ["/r1", "/r2"]

    runner.run(*[writable(50_000, f"{name}:3181", "/r3") for name in RACKS["/r3"]])
    back = statuses(runner.run(create(60_000, "probe-2", 3, 3, 2, ledger_id=101)))[-1]
    assert back["ledgers"]["not_adhering"] == 0, "the members are back: those ledgers adhere again"
    re_adhere = open_alerts(runner, ALERT_LEDGER_RE_ADHERE)
    assert back["ledgers"]["re_adhere_possible"] == len(re_adhere) >= 10, "placed on two racks: fixable now"
    assert {a["subject"] for a in re_adhere} >= {f"ledger/{i}" for i in range(30, 40)}

    # Re-adherence: the operator moves each ledger as suggested; the check registers the new ensemble.
    for i, alert in enumerate(re_adhere):
        data = alert["data"]
        runner.run(check(70_000 + i, f"moved-{i}", data["fix"]["ensemble"], 3, 2, ledger_id=data["ledger_id"]))
    after = statuses(runner.run(create(90_000, "probe-3", 3, 3, 2, ledger_id=102)))[-1]
    assert after["ledgers"] == {"remembered": 43, "not_adhering": 0, "re_adhere_possible": 0}
    assert status_gauges(runner.model)["re_adhere_possible"] == 0


@pytest.mark.parametrize("cut", [1, 17, 33, 64])
def test_a_snapshot_mid_window_continues_with_identical_outputs(cut):
    """Restoring the model (status emission state, skew windows) between batches changes no later output."""
    conf = {"ensemblePlacementPolicy": "rackaware", "engine.statusIntervalSeconds": "5",
            "engine.skew.windowDecisions": "40", "engine.skew.minDecisions": "10",
            "engine.skew.checkEveryDecisions": "3"}
    settings = ModelSettings.from_conf(conf)
    records = [writable(0, f"{name}:3181", rack) for rack, names in RACKS.items() for name in names]
    for i in range(90):
        exclude = [f"{n}:3181" for n in RACKS["/r1"] + RACKS["/r2"]] if 20 <= i < 50 else []
        records.append(create(1_000 * i, f"r{i}", 2, 2, 2, ledger_id=i, exclude=exclude))
        if i == 40:
            records.append(lost(1_000 * i, "a1:3181"))
    whole = [o.to_json() for o in step(None, "c1", records, settings).outputs]
    first = step(None, "c1", records[:cut], settings)
    restored = loads(dumps(first.model), settings)
    rest = step(restored, "c1", records[cut:], settings)
    restored.check_invariants()
    assert [o.to_json() for o in first.outputs + rest.outputs] == whole
    assert any('"placement.cluster.skew"' in text for text in whole), "the run exercises a skew alert"


def test_the_examples_of_docs_status_and_skew_are_what_the_step_writes():
    """docs/status-and-skew.md's status record and skew alerts, replayed from the scenario it describes
    (ids included)."""
    import json
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "status-and-skew.md").read_text(encoding="utf-8")
    examples = [json.loads(block) for block in re.findall(r"```json\n(\{.*?\})\n```", text, flags=re.S)]
    racks = {f"/rack-{k}": [f"bk{k}{i}:3181" for i in range(3)] for k in "abcd"}
    runner = Runner({"ensemblePlacementPolicy": "rackaware"}, cluster="prod")
    on = {"cluster": "prod"}
    runner.run(*[writable(0, b, rack, **on) for rack, names in racks.items() for b in names])
    excluded = racks["/rack-c"] + racks["/rack-d"]
    for start, count, exclude in ((0, 300, ()), (300, 600, excluded), (900, 1500, ())):
        runner.run(*[create(1_000 + 100 * i, f"create-{i}", 2, 2, 2, ledger_id=i, exclude=exclude, **on)
                     for i in range(start, start + count)])
    written = {o.payload["id"]: o.payload for o in runner.outputs}
    assert [e["type"] for e in examples] == [STATUS_TYPE, "placement.cluster.skew", "placement.cluster.skew.resolved"]
    for example in examples:
        assert example == written[example["id"]]


def test_a_restart_under_another_interval_reports_at_the_new_intervals_end_or_never():
    runner = three_racks({"engine.statusIntervalSeconds": "60"})
    runner.run(create(10_000, "r1", 3, 2, 2, ledger_id=1))
    assert runner.model.status.due_ms == T0 + 60_000
    shorter = ModelSettings.from_conf({"ensemblePlacementPolicy": "rackaware", "engine.statusIntervalSeconds": "20"})
    restored = loads(dumps(runner.model), shorter)
    restored.check_invariants()
    [record] = statuses(step(restored, "c1", [], shorter, horizon_ms=T0 + 30_000).outputs)
    assert record["time_ms"] == T0 + 20_000
    off = ModelSettings.from_conf({"ensemblePlacementPolicy": "rackaware", "engine.statusIntervalSeconds": "0"})
    restored = loads(dumps(runner.model), off)
    restored.check_invariants()
    produced = step(restored, "c1", [create(100_000, "r2", 3, 2, 2, ledger_id=2)], off, horizon_ms=T0 + 900_000)
    assert statuses(produced.outputs) == []
