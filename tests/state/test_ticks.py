"""Idle-cluster ticks (`step(..., horizon_ms=...)`): timed changes reported at their own time.

The streaming job ticks an idle cluster up to the event-time watermark and a replay ticks every
cluster up to the end of its input. A tick may only bring forward what the next record would have
reported: the outputs, their ids and times must not depend on whether, or where, ticks happened.
"""

import json

from hypothesis import assume, given
from hypothesis import strategies as st

from events.times import format_time
from state import ModelSettings, step
from state.audit import ALERT_LEDGER_NOT_ADHERING
from state.health import ALERT_DEPARTURE_PENDING, RESOLVED_SUFFIX
from state.outputs import ALERT_FLAPPING
from state.skew import ALERT_SKEW
from state.status import STATUS
from tests.state.helpers import CLUSTER, T0, Runner, create, lost, writable
from tests.state.strategies import CONFS, configured_streams, streams
from tests.state.test_properties import shard_of

STABILIZED = {"ensemblePlacementPolicy": "rackaware", "networkTopologyStabilizePeriodSeconds": "30"}


def tick(runner, t):
    """An idle-cluster tick at T0 + t; returns its outputs."""
    result = step(runner.model, runner.cluster, [], runner.settings, shard=runner.shard,
                  shards=runner.shards, horizon_ms=T0 + t)
    runner.model = result.model
    runner.model.check_invariants()
    runner.outputs.extend(result.outputs)
    return result.outputs


def types(produced):
    return [o.payload["type"] for o in produced if o.kind == "alert"]


def alerts_of(produced):
    """The alerts among `produced` (a tick may also bring a status record due: `state.status`)."""
    return [o for o in produced if o.kind == "alert"]


def three_racks_and_a_ledger(conf):
    runner = Runner(conf)
    runner.run(writable(0, "a:3181", "/a"), writable(0, "b:3181", "/b"), writable(0, "c:3181", "/c"),
               writable(0, "d:3181", "/a"))
    runner.run(create(1_000, "r1", 3, 2, 2, ledger_id=1))
    return runner


def test_a_tick_reports_an_ended_stabilization_delay_at_the_time_it_ended():
    runner = three_racks_and_a_ledger(STABILIZED)
    ledger_bookie = runner.decision("r1")["ensemble"][0]
    assert types(runner.run(lost(10_000, ledger_bookie))) == [ALERT_DEPARTURE_PENDING]
    assert tick(runner, 39_999) == []                       # the delay ends at 40 s
    ticked = tick(runner, 100_000)
    produced = alerts_of(ticked)
    assert types(produced) == [ALERT_DEPARTURE_PENDING + RESOLVED_SUFFIX, ALERT_LEDGER_NOT_ADHERING]
    assert {o.payload["time"] for o in produced} == {format_time(T0 + 40_000)}
    # The status record the changes since the first one (at T0) made due: at the interval's end.
    assert [o.payload["time"] for o in ticked if o.kind == STATUS] == [format_time(T0 + 60_000)]
    assert runner.model.clock_ms == T0 + 40_000, "a tick moves the clock only to what expired"
    assert tick(runner, 200_000) == [], "reported once"


def test_a_record_after_a_tick_is_not_late_and_sees_the_settled_topology():
    runner = three_racks_and_a_ledger(STABILIZED)
    runner.run(lost(10_000, "a:3181"))
    tick(runner, 60_000)
    runner.run(create(50_000, "r2", 3, 3, 2))              # before the horizon, after the expiry
    assert runner.model.late_records == 0
    assert "a:3181" not in runner.decision("r2")["ensemble"]


def test_a_flapping_bookie_is_resolved_by_a_tick_when_its_departures_leave_the_window():
    conf = {**STABILIZED, "engine.flapThreshold": "2", "engine.flapWindowSeconds": "60"}
    runner = three_racks_and_a_ledger(conf)
    runner.run(lost(10_000, "a:3181"), writable(11_000, "a:3181"), lost(20_000, "a:3181"),
               writable(21_000, "a:3181"))
    assert ALERT_FLAPPING in types(runner.outputs)
    produced = alerts_of(tick(runner, 75_000))              # the first departure left at 70 s
    assert types(produced) == [ALERT_FLAPPING + RESOLVED_SUFFIX]
    assert produced[0].payload["time"] == format_time(T0 + 70_000)


def run_with_ticks(conf, batches, horizons, end_ms, *, shard=0, shards=1):
    settings = ModelSettings.from_conf(conf)
    model, produced = None, []
    for batch, horizon in zip(batches, horizons):
        for items, at in ((batch, None), ([], horizon)):
            if model is None and not items:
                continue
            result = step(model, CLUSTER, items, settings, shard=shard, shards=shards, horizon_ms=at)
            model = result.model
            model.check_invariants()
            produced.extend((o.kind, o.id, o.to_json()) for o in result.outputs)
    if model is not None:
        result = step(model, CLUSTER, [], settings, shard=shard, shards=shards, horizon_ms=end_ms)
        produced.extend((o.kind, o.id, o.to_json()) for o in result.outputs)
    return produced


def ticked(records, cuts, fractions):
    """Batches at `cuts`, each followed by a tick somewhere between its last record and the next one."""
    points = sorted({min(c, len(records)) for c in cuts})
    batches, start = [], 0
    for point in points + [len(records)]:
        batches.append(records[start:point])
        start = point
    horizons = []
    for index, batch in enumerate(batches):
        low = batch[-1].time_ms if batch else (horizons[-1] if horizons else T0)
        later = [b[0].time_ms for b in batches[index + 1:] if b]
        high = later[0] if later else low + 500_000
        fraction = fractions[index % len(fractions)]
        horizons.append(low + int((max(high, low) - low) * fraction))
    return batches, horizons


@given(case=configured_streams(metadata_groups=True), cuts=st.lists(st.integers(0, 40), max_size=4),
       fractions=st.lists(st.sampled_from((0.0, 0.3, 0.999, 1.0)), min_size=1, max_size=4))
def test_ticks_up_to_the_next_record_change_no_output(case, cuts, fractions):
    """Whatever ticks run between batches, outputs equal one batch plus the same end-of-input tick."""
    name, records = case
    conf = CONFS[name]
    end_ms = records[-1].time_ms + 500_000
    whole = run_with_ticks(conf, [records], [None], end_ms)
    batches, horizons = ticked(records, cuts, fractions)
    assert run_with_ticks(conf, batches, horizons, end_ms) == whole


@given(records=streams(), shards=st.integers(2, 4), cuts=st.lists(st.integers(0, 40), max_size=3),
       fractions=st.lists(st.sampled_from((0.0, 0.5, 1.0)), min_size=1, max_size=3))
def test_ticked_shards_give_the_same_outputs_as_one(records, shards, cuts, fractions):
    """Every shard applies every event and settles to the same end; requests go to one shard; the union
    of outputs is the unsharded outputs, each once. (Without the common end, a shard that saw no record
    after an expiry would not have reported it yet.)"""
    assert_shards_match_one(CONFS["rackaware-stabilized-weighted"], records, shards, cuts, fractions)


@given(case=configured_streams(metadata_groups=True), shards=st.integers(2, 4),
       cuts=st.lists(st.integers(0, 40), max_size=3),
       fractions=st.lists(st.sampled_from((0.0, 0.5, 1.0)), min_size=1, max_size=3))
def test_ticked_shards_of_every_policy_give_the_same_outputs_as_one(case, shards, cuts, fractions):
    """As above, for every configuration whose decisions do not depend on earlier requests (all but
    region-aware, whose round robin across calls is per shard: README, Deploying on a Spark cluster)."""
    name, records = case
    conf = CONFS[name]
    assume(conf["ensemblePlacementPolicy"] != "regionaware")
    assert_shards_match_one(conf, records, shards, cuts, fractions)


def assert_shards_match_one(conf, records, shards, cuts, fractions):
    """Each shard's outputs with ticks, together, are the unsharded outputs, each once."""
    end_ms = records[-1].time_ms + 500_000
    single = run_with_ticks(conf, [records], [None], end_ms)
    union = []
    for shard in range(shards):
        mine = [r for r in records if shard_of(r, shards) in (None, shard)]
        if not mine:
            continue
        batches, horizons = ticked(mine, cuts, fractions)
        union.extend(run_with_ticks(conf, batches, horizons, end_ms, shard=shard, shards=shards))
    # Status records and skew alerts are per shard by design (each shard's record and windows cover the
    # requests it answered: state/status.py, state/skew.py), so they are left out of the comparison;
    # every other output is the unsharded run's, once.
    union, single = per_cluster(union), per_cluster(single)
    assert sorted(union) == sorted(single)
    assert len(union) == len(single)


def per_cluster(produced):
    """`produced` without the outputs that are per shard: status records and skew alerts."""
    return [(kind, ident, text) for kind, ident, text in produced
            if kind != STATUS and not (kind == "alert" and json.loads(text)["type"].startswith(ALERT_SKEW))]
