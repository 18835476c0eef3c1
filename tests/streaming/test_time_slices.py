"""A large group batch is stepped in slices, each slice's outputs handed to Spark before the next is
stepped: the outputs are those of stepping the batch whole, in the same order."""

import json
import random

import pytest

import streaming.stateful as stateful
from events import DeadLetter, Origin, parse_record
from state.settings import ModelSettings
from state.snapshot import loads, to_document
from state.step import step
from streaming.stateful import STATE_CODEC, ModelCache, guarded_step, make_state_function, step_slices, time_slices
from tests.streaming.test_model_cache import CONF, GroupState, _day, _frame, _run


@pytest.fixture(autouse=True)
def cache(monkeypatch):
    monkeypatch.setattr(stateful, "MODEL_CACHE", ModelCache())


def _arrivals():
    """The day's records in a scrambled arrival order (times no longer follow arrival), with two
    unreadable records among them."""
    lines = _day()
    random.Random(5).shuffle(lines)
    lines.insert(17, '{"type": "ledger_create", "cluster": "c1", "time": 3000, "request_id": 7}')
    lines.insert(40, "not json")
    return lines


def test_a_batch_stepped_in_slices_gives_the_outputs_of_the_whole_batch_in_order(monkeypatch):
    lines = _arrivals()
    whole_state, sliced_state = GroupState(), GroupState()
    whole = _run(make_state_function(ModelSettings.from_conf(CONF), "kafka"), whole_state, lines, 0)
    monkeypatch.setattr(stateful, "SLICE_RECORDS", 7)
    function = make_state_function(ModelSettings.from_conf(CONF), "kafka")
    frames = list(function(("c1", 0), iter([_frame(lines, 0)]), sliced_state))
    sliced = [tuple(row) for frame in frames for row in frame.itertuples(index=False)]
    assert len(frames) == -(-(len(lines) - 1) // 7), "one output frame per slice of 7 records"
    assert sliced == whole
    assert sum(1 for row in whole if row[0] == "dead_letter") == 2
    following = [json.dumps({"type": "ledger_create", "cluster": "c1", "time": 90_000 + n, "request_id": f"z{n}",
                             "ensemble_size": 3, "write_quorum": 2, "ack_quorum": 2}) for n in range(5)]
    assert _run(function, sliced_state, following, 1_000) == _run(function, whole_state, following, 1_000), \
        "the state stored after the last slice answers the next batch alike"


def test_slices_put_dead_letters_first_and_records_in_time_order_ties_by_arrival():
    def record(time_ms, request_id):
        text = json.dumps({"type": "ledger_create", "cluster": "c1", "time": time_ms, "request_id": request_id,
                           "ensemble_size": 1, "write_quorum": 1, "ack_quorum": 1})
        return parse_record(text, Origin.from_kafka("requests", 0, 0))

    letter = parse_record("{", Origin.from_kafka("requests", 0, 9))
    assert isinstance(letter, DeadLetter)
    items = [record(30, "a"), record(10, "b"), letter, record(30, "c"), record(20, "d"), record(10, "e")]
    slices = time_slices(items, 2)
    assert [["letter" if item is letter else item.request_id for item in part] for part in slices] == \
        [["letter", "b", "e"], ["d", "a"], ["c"]]
    assert time_slices(items, 6) == [items], "a batch that fits one slice is left as it arrived"


def _parsed(lines):
    return [parse_record(line, Origin.from_kafka("requests", 0, i)) for i, line in enumerate(lines)]


def test_the_model_is_stored_once_after_the_last_slice(monkeypatch):
    dumped = []
    real_dumps = stateful.dumps
    monkeypatch.setattr(stateful, "dumps", lambda model, *codec: dumped.append(1) or real_dumps(model, *codec))
    settings = ModelSettings.from_conf(CONF)
    items = _parsed(_day())
    parts = time_slices(items, 9)
    stepped = list(step_slices(None, "c1", parts, settings))
    assert len(stepped) == len(parts) > 3
    assert [s.state is None for s in stepped] == [True] * (len(parts) - 1) + [False]
    assert len(dumped) == 1
    whole = guarded_step(None, "c1", items, settings)
    assert [o.to_json() for s in stepped for o in s.outputs] == [o.to_json() for o in whole.outputs]
    assert stepped[-1].state == whole.state


def test_a_slice_that_fails_is_retried_record_by_record_from_the_state_it_started_from():
    settings = ModelSettings.from_conf(CONF)
    items = _parsed(_day())
    parts = time_slices(items, 9)
    in_order = [item for part in parts for item in part]
    bad = next(item.request_id for item in parts[2] if getattr(item, "request_id", None))

    def buggy_step(model, cluster, batch, settings, **kwargs):
        if any(getattr(item, "request_id", None) == bad for item in batch):
            raise KeyError("boom")
        return step(model, cluster, batch, settings, **kwargs)

    stepped = list(step_slices(None, "c1", parts, settings, step_fn=buggy_step))
    # The guard over the whole batch, in the slices' order, retries every record alone: the same outputs.
    whole = guarded_step(None, "c1", in_order, settings, step_fn=buggy_step)
    assert [o.to_json() for s in stepped for o in s.outputs] == [o.to_json() for o in whole.outputs]
    assert [s.state is None for s in stepped] == [True] * (len(parts) - 1) + [False]
    assert to_document(loads(stepped[-1].state, settings, codec=STATE_CODEC)) == \
        to_document(loads(whole.state, settings, codec=STATE_CODEC))
    failed = [o.payload for s in stepped for o in s.outputs if o.kind == "decision" and o.payload["status"] == "failed"]
    assert [(d["request_id"], d["error"]["code"]) for d in failed] == [(bad, "INTERNAL_ERROR")]
