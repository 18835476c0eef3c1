"""`engine.maxFutureSkewSeconds`: a record far ahead of its cluster's latest record cannot move the clock.

The defect it prevents: one valid record dated far in the future moved the cluster's event-time clock
there; from then on no stabilization delay ended, so bookies that had left stayed pending and kept
being placed. Each refused record is a `TIME_TOO_FAR_AHEAD` dead letter (a request also gets its
`failed` INVALID_REQUEST decision), decided in time order by the pure step, so `run` and `replay`
refuse the same records whatever the batch boundaries or idle ticks.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from events import DeadLetter, Origin, Reason
from events.limits import MAX_TIME_MS
from state import ModelSettings, step
from state.snapshot import dumps, from_document, loads, to_document
from tests.state.helpers import CLUSTER, T0, Runner, create, lost, raw, writable

A, B, C, D = "a:3181", "b:3181", "c:3181", "d:3181"
STABILIZED = {"ensemblePlacementPolicy": "rackaware", "networkTopologyStabilizePeriodSeconds": "60"}
DAY_MS = 86_400_000


def _record(time: str, **fields):
    return raw({"type": "ledger_create", "cluster": CLUSTER, "time": time, "request_id": "far",
                "ensemble_size": 2, "write_quorum": 2, "ack_quorum": 2} | fields)


def test_a_far_future_record_does_not_freeze_the_stabilization_clock():
    """The reproduction: bookies, a valid record dated near the end of time, bookies lost, then a create
    after the stabilization period must see only the live bookies."""
    runner = Runner(STABILIZED)
    runner.run(writable(0, A, "/r1"), writable(0, B, "/r2"), writable(0, C, "/r3"), writable(0, D, "/r4"))
    far = _record("2262-04-11T23:47:16.854Z", request_id="far-future")
    assert not isinstance(far, DeadLetter), "the time itself is valid"
    runner.run(far)
    runner.run(lost(1_000, C), lost(1_000, D))
    runner.run(create(1_000 + 61_000, "after-stabilization", 3, 2, 2))
    decision = runner.decision("after-stabilization")
    assert decision["status"] == "failed" and decision["error"]["code"] == "NOT_ENOUGH_BOOKIES", decision
    runner.run(create(1_000 + 62_000, "two", 2, 2, 2))
    assert sorted(runner.decision("two")["ensemble"]) == [A, B], "placed only on live bookies"
    [letter] = runner.dead_letters()
    assert letter["code"] == "TIME_TOO_FAR_AHEAD" and letter["request_id"] == "far-future"
    assert letter["reason"].startswith("time: 2262-04-11T23:47:16.854Z is ")
    assert "engine.maxFutureSkewSeconds=86400" in letter["reason"]
    refused = runner.decision("far-future")
    assert refused["status"] == "failed" and refused["error"]["code"] == "INVALID_REQUEST"
    assert refused["error"]["message"].startswith("TIME_TOO_FAR_AHEAD: time: 2262-04-11T23:47:16.854Z")
    assert refused["time"] == "2262-04-11T23:47:16.854Z"
    assert runner.model.record_clock_ms == runner.model.clock_ms == T0 + 63_000


def test_the_end_of_time_sentinel_is_refused_by_the_parser():
    """9999-12-31T23:59:59.999Z is past what Spark's timestamps hold: an INVALID_TIME dead letter."""
    runner = Runner(STABILIZED)
    runner.run(writable(0, A, "/r1"), writable(0, B, "/r2"))
    letter = _record("9999-12-31T23:59:59.999Z")
    assert isinstance(letter, DeadLetter) and letter.reason is Reason.INVALID_TIME
    runner.run(letter)
    assert runner.model.clock_ms == T0
    assert runner.decision("far")["error"]["code"] == "INVALID_REQUEST"


def test_an_event_beyond_the_bound_is_a_dead_letter_and_changes_nothing():
    runner = Runner()
    runner.run(writable(0, A, "/r1"), writable(0, B, "/r2"))
    version = runner.model.version
    runner.run(lost(DAY_MS + 1, B))
    assert B in runner.model.writable and runner.model.version == version
    [letter] = runner.dead_letters()
    assert (letter["code"], letter["type"], letter["cluster"]) == ("TIME_TOO_FAR_AHEAD", "bookie_lost", CLUSTER)
    assert letter["request_id"] is None and letter["source"] == {"inline": "unknown"}
    assert runner.decisions() == [], "an event is not answered"


def test_exactly_the_bound_ahead_is_accepted():
    runner = Runner()
    runner.run(writable(0, A, "/r1"), writable(0, B, "/r2"))
    runner.run(lost(DAY_MS, B))
    assert B not in runner.model.writable and runner.dead_letters() == []


def test_a_new_cluster_accepts_its_first_record_whatever_its_time():
    runner = Runner()
    runner.run(writable(MAX_TIME_MS - T0, A, "/r1"))
    assert runner.model.record_clock_ms == MAX_TIME_MS and runner.dead_letters() == []


def test_the_bound_is_measured_from_the_latest_record_not_from_ticks():
    """An idle tick moves the clock to the timed changes it applies, never the bound: `replay`, which
    ticks only at the end of its input, refuses the same records as `run`."""
    settings = ModelSettings.from_conf({**STABILIZED, "engine.maxFutureSkewSeconds": "3600"})
    items = [writable(0, A, "/r1"), writable(0, B, "/r2"), lost(1_000, B)]
    later = create(1_000 + 3_600_000 + 30_000, "later", 1, 1, 1)
    ticked = step(None, CLUSTER, items, settings).model
    ticked_out = step(ticked, CLUSTER, [], settings, horizon_ms=T0 + 3_000_000).outputs
    assert ticked.clock_ms == T0 + 61_000 and ticked.record_clock_ms == T0 + 1_000
    plain = step(None, CLUSTER, items, settings).model
    assert step(ticked, CLUSTER, [later], settings).outputs[-1:] == step(plain, CLUSTER, [later], settings).outputs[-1:]
    assert ticked_out, "the tick reported the end of the delay"
    assert plain.record_clock_ms == ticked.record_clock_ms


def test_zero_turns_the_bound_off():
    runner = Runner({"ensemblePlacementPolicy": "rackaware", "engine.maxFutureSkewSeconds": "0"})
    runner.run(writable(0, A, "/r1"), writable(0, B, "/r2"))
    runner.run(lost(10 * DAY_MS, B))
    assert B not in runner.model.writable and runner.dead_letters() == []


def test_a_cluster_silent_for_longer_than_the_bound_refuses_its_next_record():
    """The documented price of the bound (docs/state.md): raise the key, or set it to 0, to go on."""
    runner = Runner({"ensemblePlacementPolicy": "rackaware", "engine.maxFutureSkewSeconds": "3600"})
    runner.run(writable(0, A, "/r1"))
    runner.run(writable(3_600_001, B, "/r2"))
    assert [d["code"] for d in runner.dead_letters()] == ["TIME_TOO_FAR_AHEAD"]
    assert "3600.001 s ahead" in runner.dead_letters()[0]["reason"]


def test_the_origin_given_to_the_step_is_the_dead_letters_source():
    settings = ModelSettings.from_conf({})
    first = writable(0, A, "/r1")
    far = lost(2 * DAY_MS, A)
    result = step(None, CLUSTER, [first, far], settings, origins={id(far): Origin.from_kafka("events", 3, 99)})
    [letter] = [o.payload for o in result.outputs if o.kind == "dead_letter"]
    assert letter["source"] == {"topic": "events", "partition": 3, "offset": 99}
    assert letter["raw"].startswith('{"type":"bookie_lost","cluster":"c1","time":')


@pytest.mark.parametrize("shards", [1, 2])
def test_a_refused_event_is_reported_once_and_a_refused_request_by_its_shard(shards):
    settings = ModelSettings.from_conf({})
    items = [writable(0, A, "/r1"), lost(2 * DAY_MS, A), create(2 * DAY_MS, "r", 1, 1, 1)]
    letters = []
    for shard in range(shards):
        outputs = step(None, CLUSTER, items, settings, shard=shard, shards=shards).outputs
        letters += [o.payload["type"] for o in outputs if o.kind == "dead_letter"]
    assert sorted(letters) == ["bookie_lost"] + ["ledger_create"] * shards


@given(cut=st.integers(0, 6), gap=st.sampled_from([DAY_MS - 1, DAY_MS, DAY_MS + 1, 5 * DAY_MS]))
def test_splitting_time_ordered_input_changes_no_output(cut, gap):
    items = [writable(0, A, "/r1"), writable(0, B, "/r2"), create(10, "a", 1, 1, 1), lost(gap, B),
             create(gap + 1, "b", 1, 1, 1), create(gap + 2, "c", 1, 1, 1), writable(2 * gap, C, "/r3")]
    settings = ModelSettings.from_conf(STABILIZED)
    whole = step(None, CLUSTER, items, settings).outputs
    first = step(None, CLUSTER, items[:cut], settings)
    second = step(loads(dumps(first.model), settings) if first.model else None, CLUSTER, items[cut:], settings)
    assert [o.to_json() for o in first.outputs + second.outputs] == [o.to_json() for o in whole]


def test_the_latest_record_time_survives_a_snapshot_and_an_older_snapshot_restores_it_as_the_clock():
    runner = Runner()
    runner.run(writable(0, A, "/r1"), lost(5_000, A))
    settings = runner.settings
    assert loads(dumps(runner.model), settings).record_clock_ms == T0 + 5_000
    document = to_document(runner.model)
    del document["record_clock_ms"]
    document["clock_ms"] = T0 + 7_000
    assert from_document(document, settings).record_clock_ms == T0 + 7_000
    assert from_document({**document, "clock_ms": 0}, settings).record_clock_ms is None
