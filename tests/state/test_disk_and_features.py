"""Disk reports become placement weights (spec §7.2); feature switches reach the policy."""

import math

from tests.state.helpers import Runner, create, disk, feature, lost, writable

A, B, C = "a:3181", "b:3181", "c:3181"
WEIGHTED = {"ensemblePlacementPolicy": "rackaware", "diskWeightBasedPlacementEnabled": "true"}


def placed_on(runner, prefix, count, t):
    runner.run(*[create(t, f"{prefix}-{i}", 1, 1, 1) for i in range(count)])
    chosen = [runner.decision(f"{prefix}-{i}")["ensemble"][0] for i in range(count)]
    return chosen.count(A)


def test_weights_are_the_reported_free_disk_of_known_bookies():
    runner = Runner(WEIGHTED)
    runner.run(writable(0, A, "/r1"), writable(0, B, "/r2"), disk(1, A, 300), disk(1, B, 100, 500),
               disk(1, C, 50))
    runner.run(create(2, "r"))
    assert runner.model.policy.weights == {A: 300, B: 100}, "C is not writable: no weight"


def test_a_joining_bookie_gets_its_earlier_report_by_the_next_request():
    runner = Runner(WEIGHTED)
    runner.run(writable(0, A, "/r1"), disk(1, C, 70), writable(2, C, "/r2"), create(3, "r", 1, 1, 1))
    assert runner.model.policy.weights == {A: 0, C: 70}


def test_disk_reports_shift_placement():
    """E=1 draws follow free disk: A 300 vs B 100 gives A 3/4 of the draws; reversed reports reverse it.

    400 draws per phase, p = 0.75: sigma = sqrt(400 * 0.75 * 0.25) = 8.66; tolerance 4 sigma (35).
    """
    runner = Runner(WEIGHTED)
    runner.run(writable(0, A, "/r1"), writable(0, B, "/r2"), disk(1, A, 300), disk(1, B, 100))
    n, p = 400, 0.75
    tolerance = 4 * math.sqrt(n * p * (1 - p))
    assert abs(placed_on(runner, "first", n, 10) - n * p) <= tolerance
    runner.run(disk(20, A, 100), disk(20, B, 300))
    assert abs(placed_on(runner, "second", n, 30) - n * (1 - p)) <= tolerance


def test_disk_reports_change_the_topology_version_only_when_weighting_is_on():
    plain = Runner()
    plain.run(writable(0, A, "/r1"))
    version = plain.model.version
    plain.run(disk(1, A, 10))
    assert plain.model.version == version
    weighted = Runner(WEIGHTED)
    weighted.run(writable(0, A, "/r1"))
    version = weighted.model.version
    weighted.run(disk(1, A, 10))
    assert weighted.model.version == version + 1
    weighted.run(disk(2, A, 10))
    assert weighted.model.version == version + 1, "an identical report is not a change"


def test_a_departed_bookies_disk_report_expires_with_its_history():
    runner = Runner({**WEIGHTED, "engine.bookieHistoryTtlSeconds": "10"})
    runner.run(writable(0, A, "/r1"), disk(0, A, 5), lost(1_000, A))
    assert A in runner.model.disk
    runner.run(writable(11_000, B, "/r2"))
    assert A not in runner.model.disk


def test_a_report_for_a_never_registered_bookie_expires_too():
    runner = Runner({**WEIGHTED, "engine.bookieHistoryTtlSeconds": "10"})
    runner.run(disk(0, C, 5))
    runner.run(writable(10_000, A, "/r1"))
    assert runner.model.disk == {}


def test_features_reach_the_policy_and_count_as_changes():
    runner = Runner()
    runner.run(writable(0, A, "/r1"))
    version = runner.model.version
    runner.run(feature(1, "region2.disallowBookies", 1))
    assert runner.model.policy.features["region2.disallowBookies"] == 1
    assert runner.model.policy.features is runner.model.features
    assert runner.model.version == version + 1
    runner.run(feature(2, "region2.disallowBookies", 1))
    assert runner.model.version == version + 1
    runner.run(feature(3, "region2.disallowBookies", 0))
    assert runner.model.features == {"region2.disallowBookies": 0}
    assert runner.model.version == version + 2


def _wide_rechecks(runner, monkeypatch):
    """Records, for every re-check the audit is asked for, whether it covered every ledger."""
    calls = []
    original = type(runner.model.audit).on_topology_change

    def recording(self, view, touched, time_ms, **kwargs):
        calls.append(kwargs.get("wide", False))
        return original(self, view, touched, time_ms, **kwargs)

    monkeypatch.setattr(type(runner.model.audit), "on_topology_change", recording)
    return calls


def test_only_a_changed_feature_the_policy_reads_rechecks_every_ledger(monkeypatch):
    """Re-checking every remembered ledger (up to engine.audit.maxLedgers) is worth it only when the
    switch can change an answer: a region-aware policy reads its durability and disallow switches,
    nothing reads any other name, and a switch republished with the same value changes nothing."""
    conf = {"ensemblePlacementPolicy": "regionaware", "reppDisallowBookiePlacementInRegionFeatureName": "disallow",
            "minNumRacksPerWriteQuorum": "2"}
    runner = Runner(conf)
    runner.run(*[writable(0, f"{r}{k}:3181", f"/{r}/rack{k}") for r in ("x", "y", "z") for k in (1, 2)])
    runner.run(create(1_000, "r", 3, 2, 2, ledger_id=8))
    wide = _wide_rechecks(runner, monkeypatch)
    runner.run(feature(2_000, "unrelated.switch", 1))
    runner.run(feature(2_100, "x.disallow", 1))
    runner.run(feature(2_200, "x.disallow", 1))
    runner.run(feature(2_300, "repp_disable_durability_enforcement", 1))
    assert wide == [True, True]


def test_no_feature_rechecks_ledgers_under_a_policy_that_reads_none(monkeypatch):
    runner = Runner({"ensemblePlacementPolicy": "rackaware"})
    runner.run(writable(0, A, "/r1"), writable(0, "b:3181", "/r2"))
    runner.run(create(1_000, "r", 2, 2, 2, ledger_id=1))
    wide = _wide_rechecks(runner, monkeypatch)
    runner.run(feature(2_000, "x.disallowBookies", 1), feature(2_100, "repp_disable_durability_enforcement", 1))
    assert wide == []
    assert runner.model.features == {"x.disallowBookies": 1, "repp_disable_durability_enforcement": 1}
