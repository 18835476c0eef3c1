"""The end-of-log topology and its shape check (`state.topology_report`, `check-conf --events`)."""

from __future__ import annotations

from policies import NotEnoughBookiesError
from policies.conf_lint import Severity
from state import ModelSettings
from state.topology_report import (
    STATUS_INFEASIBLE,
    STATUS_INVALID,
    STATUS_NOT_ADHERING,
    STATUS_OK,
    STATUS_SOMETIMES,
    final_models,
    topology_findings,
    topology_report,
    try_shape,
)
from tests.state.helpers import create, lost, raw, writable

TWO_RACKS = [writable(i, f"bk{i}:3181", f"/rack{i % 2}") for i in range(6)]


def report_for(items, conf, shapes=((2, 2, 2), (3, 3, 2)), cluster="c1"):
    model = final_models(items, ModelSettings.from_conf(conf))[cluster]
    return topology_report(model, shapes)


def outcome(report, shape):
    return next(o for o in report.shapes if o.shape == shape)


# -- the final topology ------------------------------------------------------------------------------


def test_each_cluster_gets_its_own_model_and_dead_letters_are_skipped():
    items = [*TWO_RACKS, writable(0, "bk9:3181", "/rack9", cluster="c2"), raw("not json")]
    models = final_models(items, ModelSettings.from_conf({}))
    assert sorted(models) == ["c1", "c2"]
    assert sorted(models["c2"].writable) == ["bk9:3181"]
    assert len(models["c1"].writable) == 6


def test_racks_count_the_placeable_bookies_and_a_lost_one_is_gone():
    report = report_for([*TWO_RACKS, lost(10, "bk0:3181")], {})
    assert report.racks == {"/rack0": 2, "/rack1": 3}
    assert report.lost == ("bk0:3181",)
    assert "bk0:3181" not in report.placeable


def test_a_later_request_moves_the_horizon_so_a_stabilization_delay_ends():
    """As in `replay`: the log's last record time settles the model, requests included."""
    conf = {"networkTopologyStabilizePeriodSeconds": "30"}
    departed = [*TWO_RACKS, lost(10_000, "bk0:3181")]
    assert report_for(departed, conf).pending == ("bk0:3181",)
    later = [*departed, create(60_000, "r1")]
    assert report_for(later, conf).pending == ()


def test_requests_are_not_answered():
    """A create placed by the step would be remembered by the ledger audit."""
    model = final_models([*TWO_RACKS, create(100, "r1")], ModelSettings.from_conf({}))["c1"]
    assert len(model.audit) == 0


def test_bookies_without_a_location_are_on_the_default_rack():
    report = report_for([*TWO_RACKS, writable(7, "bk7:3181")], {})
    assert report.on_default == ("bk7:3181",)
    assert report.racks["/default-rack"] == 1


def test_regions_and_zones_are_reported_for_their_policies():
    regional = [writable(i, f"bk{i}:3181", f"/region{i % 2}/rack{i % 3}") for i in range(6)]
    assert report_for(regional, {"ensemblePlacementPolicy": "regionaware"}).regions == {"region0": 3, "region1": 3}
    zonal = [writable(i, f"bk{i}:3181", f"/zone{i % 3}/ud{i % 2}") for i in range(6)]
    report = report_for(zonal, {"ensemblePlacementPolicy": "zoneaware"})
    assert report.zones == {"zone0": 2, "zone1": 2, "zone2": 2}
    assert report.regions == {}


def test_a_location_the_policy_refuses_is_a_join_failure():
    items = [writable(0, "bk1:3181", "/zone0/ud0"), writable(1, "bk2:3181", "/zone0/ud0/extra")]
    report = report_for(items, {"ensemblePlacementPolicy": "zoneaware"})
    assert list(report.join_failures) == ["bk2:3181"]
    assert report.placeable == ("bk1:3181",)
    finding = next(f for f in topology_findings(report) if f.rule == "join-failed")
    assert finding.severity is Severity.WARNING and "bk2:3181" in finding.message


# -- shapes -------------------------------------------------------------------------------------------


def test_two_racks_with_three_enforced_cannot_place_a_three_way_write_quorum():
    """E=3, W=3 needs three racks; the binding constraint is minNumRacksPerWriteQuorum."""
    report = report_for(TWO_RACKS, {"enforceMinNumRacksPerWriteQuorum": "true", "minNumRacksPerWriteQuorum": "3"})
    assert outcome(report, (2, 2, 2)).status == STATUS_OK
    failed = outcome(report, (3, 3, 2))
    assert failed.status == STATUS_INFEASIBLE
    assert failed.failures == failed.draws == 8
    assert failed.binding == "minNumRacksPerWriteQuorum"
    assert "2 rack(s)" in failed.detail


def test_without_enforcement_the_same_shape_is_placed_but_does_not_adhere():
    report = report_for(TWO_RACKS, {"minNumRacksPerWriteQuorum": "3"})
    relaxed = outcome(report, (3, 3, 2))
    assert relaxed.status == STATUS_NOT_ADHERING
    assert relaxed.binding == "minNumRacksPerWriteQuorum"
    assert relaxed.failures == 0


def test_too_few_bookies_binds_on_the_bookie_count():
    report = report_for(TWO_RACKS, {"ensemblePlacementPolicy": "default"}, shapes=((7, 3, 2),))
    assert outcome(report, (7, 3, 2)).status == STATUS_INFEASIBLE
    assert outcome(report, (7, 3, 2)).binding == "eligible bookies"


def test_a_shape_the_policy_refuses_is_invalid_and_names_the_key():
    zonal = [writable(i, f"bk{i}:3181", f"/zone{i % 3}/ud{i % 2}") for i in range(6)]
    report = report_for(zonal, {"ensemblePlacementPolicy": "zoneaware"}, shapes=((3, 2, 2),))
    refused = outcome(report, (3, 2, 2))
    assert refused.status == STATUS_INVALID
    assert refused.binding == "enforceStrictZoneawarePlacement"


def test_the_report_is_the_same_every_time():
    conf = {"minNumRacksPerWriteQuorum": "3", "engine.seed": "7"}
    assert report_for(TWO_RACKS, conf) == report_for(TWO_RACKS, conf)


class _FailsEveryOtherCall:
    """A policy stand-in whose placement fails on every second call."""

    def __init__(self, policy):
        self._policy, self._calls = policy, 0

    def __getattr__(self, name):
        return getattr(self._policy, name)

    def new_ensemble(self, *args, **kwargs):
        self._calls += 1
        if self._calls % 2 == 0:
            raise NotEnoughBookiesError("no luck", explain={"constraint": "minNumRacksPerWriteQuorum=2: no luck"})
        return self._policy.new_ensemble(*args, **kwargs)


def test_a_shape_that_fails_on_some_draws_only_is_reported_as_such():
    model = final_models(TWO_RACKS, ModelSettings.from_conf({}))["c1"]
    model.policy = _FailsEveryOtherCall(model.policy)
    result = try_shape(model, (2, 2, 2), draws=4)
    assert result.status == STATUS_SOMETIMES
    assert (result.failures, result.draws) == (2, 4)
    assert result.binding == "minNumRacksPerWriteQuorum"


# -- findings -----------------------------------------------------------------------------------------


def test_region_aware_over_one_level_locations_warns():
    report = report_for(TWO_RACKS, {"ensemblePlacementPolicy": "regionaware"})
    assert set(report.one_level) == {f"bk{i}:3181" for i in range(6)}
    finding = next(f for f in topology_findings(report) if f.rule == "one-level-location")
    assert finding.severity is Severity.WARNING
    assert "6 bookie(s)" in finding.message and "random selection" in finding.message


def test_rack_aware_over_one_level_locations_and_region_aware_over_two_levels_do_not():
    assert not report_for(TWO_RACKS, {}).one_level
    regional = [writable(i, f"bk{i}:3181", f"/region{i % 2}/rack{i % 3}") for i in range(6)]
    report = report_for(regional, {"ensemblePlacementPolicy": "regionaware"})
    assert not report.one_level
    assert not [f for f in topology_findings(report) if f.rule == "one-level-location"]


def test_default_rack_bookies_warn_under_enforcement_and_are_a_note_otherwise():
    items = [*TWO_RACKS, writable(7, "bk7:3181")]
    enforced = report_for(items, {"enforceMinNumRacksPerWriteQuorum": "true"})
    assert next(f for f in topology_findings(enforced) if f.rule == "default-rack").severity is Severity.WARNING
    relaxed = report_for(items, {})
    assert next(f for f in topology_findings(relaxed) if f.rule == "default-rack").severity is Severity.NOTE


def test_an_infeasible_configured_shape_is_a_warning_and_a_feasible_one_is_not():
    report = report_for(TWO_RACKS, {"enforceMinNumRacksPerWriteQuorum": "true", "minNumRacksPerWriteQuorum": "3"})
    finding = next(f for f in topology_findings(report, (3, 3, 2)) if f.rule == "shape-infeasible")
    assert finding.key == "minNumRacksPerWriteQuorum"
    assert not [f for f in topology_findings(report, (2, 2, 2)) if f.rule == "shape-infeasible"]
