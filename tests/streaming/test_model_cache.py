"""The worker-local model cache: reusing a live model between micro-batches never changes an output."""

import json

import pandas as pd
import pytest

import streaming.stateful as stateful
from events import Origin, parse_record
from state.settings import ModelSettings
from state.step import step
from streaming.stateful import ModelCache, guarded_step, make_state_function

CONF = {"ensemblePlacementPolicy": "rackaware", "minNumRacksPerWriteQuorum": "2",
        "diskWeightBasedPlacementEnabled": "true", "networkTopologyStabilizePeriodSeconds": "5", "engine.seed": "3"}


class GroupState:
    """The part of Spark's GroupState the state function uses, without timeouts."""

    hasTimedOut = False  # noqa: N815 - Spark's name

    def __init__(self, value=None):
        self.value = value

    @property
    def exists(self):
        return self.value is not None

    @property
    def get(self):
        return self.value

    def update(self, value):
        self.value = value


def _day():
    """Six bookies on three racks, disk reports, a bookie that leaves and comes back, and requests."""
    raw = [{"type": "bookie_writable", "cluster": "c1", "time": 1_000, "bookie": f"bk{i}:3181",
            "location": f"/r{i % 3}"} for i in range(6)]
    raw += [{"type": "bookie_disk", "cluster": "c1", "time": 1_500, "bookie": f"bk{i}:3181",
             "free_disk": 100 * (i + 1), "total_disk": 1000} for i in range(6)]
    for n in range(60):
        raw.append({"type": "ledger_create", "cluster": "c1", "time": 2_000 + 500 * n, "request_id": f"r{n}",
                    "ledger_id": n, "ensemble_size": 3, "write_quorum": 2, "ack_quorum": 2})
        if n % 7 == 3:
            raw.append({"type": "bookie_replace", "cluster": "c1", "time": 2_100 + 500 * n, "request_id": f"x{n}",
                        "ensemble": ["bk0:3181", "bk1:3181", "bk2:3181"], "bookie": "bk1:3181",
                        "write_quorum": 2, "ack_quorum": 2})
        if n == 20:
            raw.append({"type": "bookie_readonly", "cluster": "c1", "time": 2_200 + 500 * n, "bookie": "bk4:3181"})
        if n == 40:
            raw.append({"type": "bookie_writable", "cluster": "c1", "time": 2_200 + 500 * n, "bookie": "bk4:3181",
                        "location": "/r1"})
    return [json.dumps(r) for r in raw]


def _frame(lines, first):
    positions = list(range(first, first + len(lines)))
    return pd.DataFrame({"cluster": "c1", "shard": 0, "o1": positions, "o2": 0, "o3": 0, "src_name": "requests",
                         "src_part": 0, "src_pos": positions, "value": lines})


def _run(function, state, lines, first):
    frames = list(function(("c1", 0), iter([_frame(lines, first)]), state))
    return [tuple(row) for frame in frames for row in frame.itertuples(index=False)]


def _batches(lines, size):
    return [(lines[i:i + size], i) for i in range(0, len(lines), size)]


@pytest.fixture
def cache(monkeypatch):
    fresh = ModelCache()
    monkeypatch.setattr(stateful, "MODEL_CACHE", fresh)
    return fresh


def test_outputs_and_states_are_the_same_with_and_without_the_cache(cache, monkeypatch):
    lines = _day()
    cached_state, cached = GroupState(), []
    function = make_state_function(ModelSettings.from_conf(CONF), "kafka")
    for batch, first in _batches(lines, 9):
        cached.append((_run(function, cached_state, batch, first), cached_state.value))
    assert cache.hits == len(cached) - 1  # every batch after the first reused the live model

    monkeypatch.setattr(stateful, "MODEL_CACHE", ModelCache(max_entries=0))
    plain_state, plain = GroupState(), []
    for batch, first in _batches(lines, 9):
        plain.append((_run(function, plain_state, batch, first), plain_state.value))
    assert cached == plain
    assert sum(len(outputs) for outputs, _ in plain) > len(lines) // 2


def test_a_batch_run_again_from_an_older_state_reloads_it_and_gives_the_same_outputs(cache):
    lines = _day()
    (first_batch, a), (second_batch, b), (third_batch, c) = _batches(lines, 30)[:3]
    function = make_state_function(ModelSettings.from_conf(CONF), "kafka")
    state = GroupState()
    _run(function, state, first_batch, a)
    after_first = state.value
    second = _run(function, state, second_batch, b)
    after_second = state.value
    third = _run(function, state, third_batch, c)
    # Spark failed after the second batch's step but before its commit: the batch runs again from
    # the state stored by the first, while this worker holds the model stepped through the third.
    misses = cache.misses
    state = GroupState(after_first)
    assert _run(function, state, second_batch, b) == second
    assert state.value == after_second
    assert cache.misses == misses + 1
    assert _run(function, state, third_batch, c) == third


def test_a_model_is_reused_only_under_the_configuration_it_was_built_with(cache):
    lines = _day()
    (first_batch, a), (second_batch, b) = _batches(lines, 40)[:2]
    other_conf = {**CONF, "engine.seed": "4"}
    one = make_state_function(ModelSettings.from_conf(CONF), "kafka")
    other = make_state_function(ModelSettings.from_conf(other_conf), "kafka")
    state = GroupState()
    _run(one, state, first_batch, a)
    # The same stored state under another seed: loaded afresh, so its draws follow the new seed.
    fresh_state = GroupState(state.value)
    reused = _run(other, GroupState(state.value), second_batch, b)
    cache.clear()
    assert _run(other, fresh_state, second_batch, b) == reused


def test_a_step_that_raises_leaves_no_half_applied_model_behind(cache):
    settings = ModelSettings.from_conf(CONF)
    items = [parse_record(line, Origin.from_kafka("requests", 0, i)) for i, line in enumerate(_day())]
    key = ("test", "c1", 0, 1)
    state, _, _ = guarded_step(None, "c1", items[:12], settings, cache_key=key)

    def half_then_boom(model, cluster, batch, settings, **kwargs):
        step(model, cluster, batch[:len(batch) // 2], settings, **kwargs)  # mutates the model
        raise KeyError("boom")

    rest = items[12:30]
    failed = guarded_step(state, "c1", rest, settings, step_fn=half_then_boom, cache_key=key)
    assert len(failed.outputs) >= len(rest)  # every record came back as a dead letter (and a failed decision)
    # The model the failing step mutated is gone: the next batch starts from the stored state.
    after = guarded_step(state, "c1", rest, settings, cache_key=key)
    cache.clear()
    plain = guarded_step(state, "c1", rest, settings)
    assert [o.to_json() for o in after.outputs] == [o.to_json() for o in plain.outputs]
    assert after.state == plain.state
