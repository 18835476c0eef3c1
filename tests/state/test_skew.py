"""Write-skew detection (`state.skew`): the statistic, the expected shares, the alert and its resolution."""

import math
from statistics import NormalDist

import pytest

from state import ModelSettings, dumps, loads, step
from state.skew import ALERT_SKEW, SCOPE_CREATE, SCOPE_REPLACE, judge
from state.status import STATUS, status_gauges
from tests.state.helpers import Runner, create, disk, lost, replace, writable

RESOLVED = ALERT_SKEW + ".resolved"
FOUR_RACKS = {f"/r{k}": [f"r{k}-{i}:3181" for i in range(4)] for k in range(4)}
SMALL_WINDOWS = {"engine.skew.windowDecisions": "100", "engine.skew.minDecisions": "50",
                 "engine.skew.checkEveryDecisions": "10"}


def four_racks(conf=None):
    runner = Runner({"ensemblePlacementPolicy": "rackaware", **(conf or {})})
    runner.run(*[writable(0, b, rack) for rack, names in FOUR_RACKS.items() for b in names])
    return runner


def skew_alerts(runner, produced=None):
    return [a for a in runner.alerts(produced=produced) if a["type"] in (ALERT_SKEW, RESOLVED)]


def creates(runner, start, count, t0, **kwargs):
    """`count` creates of 3 bookies, stepped 100 at a time (the runner checks invariants after each step)."""
    batch = [create(t0 + 10 * i, f"c{i}", 3, 2, 2, ledger_id=i, **kwargs) for i in range(start, start + count)]
    for at in range(0, count, 100):
        runner.run(*batch[at:at + 100])


def test_the_skew_keys_have_defaults_and_errors_name_the_key():
    settings = ModelSettings.from_conf({})
    assert (settings.status_interval_s, settings.skew_window, settings.skew_min_decisions, settings.skew_p_value,
            settings.skew_min_ratio, settings.skew_check_every) == (60, 1000, 200, 1e-6, 1.5, 100)
    small = ModelSettings.from_conf({"engine.skew.windowDecisions": "80", "engine.skew.pValue": "0.001"})
    assert (small.skew_window, small.skew_min_decisions, small.skew_p_value) == (80, 80, 0.001)
    for key, value, expected in [("engine.skew.pValue", "0", "a number > 0 and < 1"),
                                 ("engine.skew.pValue", "one", "a number > 0 and < 1"),
                                 ("engine.skew.pValue", "nan", "a number > 0 and < 1"),
                                 ("engine.skew.minRatio", "0.9", "a number >= 1"),
                                 ("engine.skew.windowDecisions", "-1", "an integer between 0 and"),
                                 ("engine.skew.checkEveryDecisions", "0", "an integer >= 1"),
                                 ("engine.statusIntervalSeconds", "-5", "an integer >= 0")]:
        with pytest.raises(ValueError, match=rf"^{key}: expected {expected}"):
            ModelSettings.from_conf({key: value})
    with pytest.raises(ValueError, match="engine.skew.minDecisions: expected at most engine.skew.windowDecisions"):
        ModelSettings.from_conf({"engine.skew.windowDecisions": "100", "engine.skew.minDecisions": "101"})


def test_clients_excluding_two_racks_skew_the_other_two_and_uniform_traffic_resolves_it():
    runner = four_racks()
    creates(runner, 0, 400, 1_000)
    assert skew_alerts(runner) == [], "uniform placements"
    favoured = FOUR_RACKS["/r2"] + FOUR_RACKS["/r3"]
    excluded = FOUR_RACKS["/r0"] + FOUR_RACKS["/r1"]
    creates(runner, 400, 600, 1_000, exclude=excluded)
    [opened] = skew_alerts(runner)
    data = opened["data"]
    assert opened["type"] == ALERT_SKEW and opened["subject"] == "cluster/c1"
    assert data["severity"] == "warning" and data["scope"] == SCOPE_CREATE and data["state"] == "firing"
    assert data["items"] == 20 and data["threshold"] == round(NormalDist().inv_cdf(1 - 1e-6 / 20), 3)
    assert 1 <= len(data["offenders"]) <= 5
    for offender in data["offenders"]:
        assert offender["name"] in favoured + ["/r2", "/r3"], "only the favoured racks and their bookies"
        assert offender["z"] >= data["threshold"]
        assert offender["observed_share"] >= 1.5 * offender["expected_share"]
    assert data["offenders"] == sorted(data["offenders"], key=lambda o: -o["z"])
    top = data["offenders"][0]
    assert data["message"].startswith(f"{top['level']} {top['name']} took ")
    assert runner.model.skew.open_scopes() == [SCOPE_CREATE]
    assert status_gauges(runner.model)["skew_open"] == 1, "the metrics' placement_open_skew_alerts"

    creates(runner, 1_000, 1_500, 1_000)
    [_, resolved] = skew_alerts(runner)
    assert resolved["type"] == RESOLVED and resolved["data"]["resolves"] == opened["id"]
    assert resolved["data"]["severity"] == "info" and resolved["data"]["state"] == "resolved"
    assert runner.model.skew.open_scopes() == []
    assert status_gauges(runner.model)["skew_open"] == 0


def test_a_recovery_hot_spot_opens_the_replace_scope_with_its_bookies_and_rack():
    """Rack /r0 is down; the replaces of its bookies concentrate on two bookies of /r3 (the recovery tool
    excludes the rest). Creates meanwhile are uniform over the racks that are up: the create scope stays
    quiet, because the rack that is down has no expected share any more."""
    runner = four_racks(SMALL_WINDOWS)
    creates(runner, 0, 300, 1_000)
    runner.run(*[lost(10_000, b) for b in FOUR_RACKS["/r0"]])
    hot = ["r3-0:3181", "r3-1:3181"]
    busy = FOUR_RACKS["/r1"] + FOUR_RACKS["/r2"] + ["r3-2:3181", "r3-3:3181"]
    victims = [runner.decision(f"c{i}")["ensemble"] for i in range(300)]
    victims = [ensemble for ensemble in victims if any(b in FOUR_RACKS["/r0"] for b in ensemble)]
    batch = []
    for n, ensemble in enumerate(victims[:120]):
        gone = next(b for b in ensemble if b in FOUR_RACKS["/r0"])
        batch.append(replace(20_000 + n, f"x{n}", ensemble, gone, exclude=[b for b in busy if b not in ensemble]))
        if n % 2:
            batch.append(create(20_000 + n, f"during-{n}", 3, 2, 2, ledger_id=1000 + n))
    runner.run(*batch)
    [opened] = skew_alerts(runner)
    data = opened["data"]
    assert data["scope"] == SCOPE_REPLACE
    assert {o["name"] for o in data["offenders"]} == {"/r3", *hot}
    rack = next(o for o in data["offenders"] if o["level"] == "rack")
    assert rack["expected_share"] == pytest.approx(1 / 3, abs=1e-6), "three racks are up"
    assert runner.model.skew.open_scopes() == [SCOPE_REPLACE]

    # The rack returns and replacements spread again: the window slides past the hot spot.
    runner.run(*[writable(30_000, b, "/r0") for b in FOUR_RACKS["/r0"]])
    runner.run(*[replace(40_000 + n, f"y{n}", victims[n % len(victims)], victims[n % len(victims)][n % 3])
                 for n in range(150)])
    [_, resolved] = skew_alerts(runner)
    assert resolved["type"] == RESOLVED and resolved["data"]["scope"] == SCOPE_REPLACE
    assert resolved["data"]["resolves"] == opened["id"]


def test_a_rack_that_is_down_is_expected_to_take_nothing_from_then_on():
    runner = four_racks(SMALL_WINDOWS)
    creates(runner, 0, 60, 1_000)
    runner.run(*[lost(5_000, b) for b in FOUR_RACKS["/r0"]])
    creates(runner, 60, 40, 5_000)
    window = runner.model.skew.windows[SCOPE_CREATE]
    _, racks = window.expected()
    # 60 decisions expected /r0 to take a quarter of their placements, the 40 after the outage none.
    assert racks["/r0"][0] == pytest.approx(60 * 3 / 4)
    assert racks["/r1"][0] == pytest.approx(60 * 3 / 4 + 40 * 3 / 3)
    assert not judge(window, 1e-6, 1.5, runner.model).offenders
    creates(runner, 100, 200, 5_000)
    assert skew_alerts(runner) == []
    assert "/r0" not in window.expected()[1], "every decision in the window was made without /r0"


def test_weighted_placement_is_judged_against_the_weights():
    """Bookies with more free disk take more placements: that is what the policy was asked to do."""
    runner = four_racks({"diskWeightBasedPlacementEnabled": "true", **SMALL_WINDOWS})
    free = {"/r0": 400, "/r1": 100, "/r2": 100, "/r3": 100}
    runner.run(*[disk(0, b, free[rack] * 2**30) for rack, names in FOUR_RACKS.items() for b in names])
    creates(runner, 0, 600, 1_000)
    assert skew_alerts(runner) == []
    _, racks = runner.model.skew.windows[SCOPE_CREATE].expected()
    assert racks["/r0"][0] / 300 == pytest.approx(0.5), "capped at 3x the median: 1200 of 2400 units"
    # The weights steer placements (more than a uniform quarter), as far as the rack rule lets them.
    assert runner.model.skew.windows[SCOPE_CREATE].rack_counts(runner.model)["/r0"] / 300 > 0.3


def test_a_rack_reporting_far_more_free_disk_than_it_can_take_flags_the_other_racks():
    """Disk weights reported wrongly: /r0's bookies claim ten times the free disk of the others. With three
    racks and three bookies per ensemble the rack rule puts one bookie on each rack, so the weights cannot
    be honoured: the lighter racks take a third each against their 20 % weight share, and are flagged."""
    racks = {f"/r{k}": [f"r{k}-{i}:3181" for i in range(3)] for k in range(3)}
    runner = Runner({"ensemblePlacementPolicy": "rackaware", "diskWeightBasedPlacementEnabled": "true"})
    runner.run(*[writable(0, b, rack) for rack, names in racks.items() for b in names])
    runner.run(*[disk(0, b, (10 if rack == "/r0" else 1) * 2**40) for rack, names in racks.items() for b in names])
    runner.run(*[create(1_000 + i, f"c{i}", 3, 3, 2, ledger_id=i) for i in range(300)])
    [opened] = skew_alerts(runner)
    data = opened["data"]
    assert data["basis"] == "weights"
    flagged_racks = [o for o in data["offenders"] if o["level"] == "rack"]
    assert {o["name"] for o in flagged_racks} == {"/r1", "/r2"}
    assert all(o["expected_share"] == 0.2 and o["observed_share"] == pytest.approx(1 / 3, abs=1e-6)
               for o in flagged_racks), "capped at 3x the median: /r0 expects 60 %"


def test_isolation_expects_the_primary_groups_bookies_only():
    conf = {"ensemblePlacementPolicy": "isolated", "bookkeeperClientIsolationGroups": "g1",
            "bookkeeperClientSecondaryIsolationGroups": "g2", **SMALL_WINDOWS}
    runner = Runner(conf)
    group = {"/r0": "g1", "/r1": "g1", "/r2": "g2", "/r3": None}
    runner.run(*[writable(0, b, rack, group=group[rack]) for rack, names in FOUR_RACKS.items() for b in names])
    primary = sorted(FOUR_RACKS["/r0"] + FOUR_RACKS["/r1"])
    policy = runner.model.policy
    assert policy.expected_shares(policy.placement_scope(3, None)) == dict.fromkeys(primary, 1 / 8)
    assert list(policy.expected_shares(policy.placement_scope(9, None))) == sorted(primary + FOUR_RACKS["/r2"]), \
        "secondary admitted"
    assert list(policy.expected_shares(())) == sorted(b for names in FOUR_RACKS.values() for b in names)
    creates(runner, 0, 400, 1_000)
    assert skew_alerts(runner) == [], "every placement is on the primary group, as expected"
    bookies, _ = runner.model.skew.windows[SCOPE_CREATE].expected()
    assert sorted(bookies) == primary


def test_skew_off_means_no_window_no_write_share_and_restored_open_alerts_resolve():
    runner = four_racks()
    creates(runner, 0, 300, 1_000, exclude=FOUR_RACKS["/r0"] + FOUR_RACKS["/r1"])
    [opened] = skew_alerts(runner)
    off = ModelSettings.from_conf({"ensemblePlacementPolicy": "rackaware", "engine.skew.windowDecisions": "0"})
    restored = loads(dumps(runner.model), off)
    produced = step(restored, "c1", [create(100_000, "after", 3, 2, 2, ledger_id=9999)], off).outputs
    [resolved] = [o.payload for o in produced if o.kind == "alert"]
    assert resolved["type"] == RESOLVED and resolved["data"]["resolves"] == opened["id"]
    assert "turned off" in resolved["data"]["reason"]
    [record] = [o.payload for o in produced if o.kind == STATUS]
    assert record["write_share"] is None and record["skew"] == {"open": False, "scopes": []}


def test_a_churning_topology_keeps_a_bounded_number_of_bases_and_restores_identically():
    conf = {"ensemblePlacementPolicy": "rackaware", "diskWeightBasedPlacementEnabled": "true", **SMALL_WINDOWS}
    settings = ModelSettings.from_conf(conf)
    records = [writable(0, b, rack) for rack, names in FOUR_RACKS.items() for b in names]
    for i in range(300):
        records.append(create(1_000 + 100 * i, f"c{i}", 3, 2, 2, ledger_id=i))
        if i % 7 == 0:         # a disk report that changes the weights: a new basis for the next decision
            records.append(disk(1_000 + 100 * i, f"r{i % 4}-{i % 3}:3181", (i + 1) * 2**30))
    whole = step(None, "c1", records, settings)
    window = whole.model.skew.windows[SCOPE_CREATE]
    window.check_invariants()
    assert len(window.bases) == 8, "merged down to MAX_BASES"
    for cut in (50, 123, 277):
        first = step(None, "c1", records[:cut], settings)
        rest = step(loads(dumps(first.model), settings), "c1", records[cut:], settings)
        assert [o.to_json() for o in first.outputs + rest.outputs] == [o.to_json() for o in whole.outputs]


def test_the_z_score_is_the_binomial_one_with_a_continuity_correction():
    """Two racks of one bookie each; clients exclude b for the first 40 of 100 single-bookie creates, so a
    takes about 70: z = (observed - 0.5 - 50) / sqrt(100 x 0.5 x 0.5), for the bookie and for its rack."""
    runner = Runner({"ensemblePlacementPolicy": "rackaware", "engine.skew.windowDecisions": "100",
                     "engine.skew.minDecisions": "100", "engine.skew.pValue": "0.01", "engine.skew.minRatio": "1.3"})
    runner.run(writable(0, "a:3181", "/r0"), writable(0, "b:3181", "/r1"))
    runner.run(*[create(1_000 + i, f"c{i}", 1, 1, 1, ledger_id=i, exclude=["b:3181"] if i < 40 else [])
                 for i in range(100)])
    window = runner.model.skew.windows[SCOPE_CREATE]
    observed = window.bookie_counts["a:3181"]
    assert observed >= 65, "40 forced, about half of the other 60"
    verdict = judge(window, 0.01, 1.3, runner.model)
    assert verdict.items == 4 and verdict.threshold == pytest.approx(NormalDist().inv_cdf(1 - 0.01 / 4))
    z = round((observed - 0.5 - 50) / math.sqrt(100 * 0.5 * 0.5), 3)
    assert [(o["level"], o["name"], o["placements"], o["z"]) for o in verdict.offenders] == [
        ("bookie", "a:3181", observed, z), ("rack", "/r0", observed, z)]
    assert verdict.offenders[0]["observed_share"] == observed / 100
    assert verdict.offenders[0]["expected_share"] == 0.5
