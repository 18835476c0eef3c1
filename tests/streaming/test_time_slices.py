"""A large group batch is stepped in slices, each slice's outputs handed to Spark before the next is
stepped: the outputs are those of stepping the batch whole, in the same order."""

import json
import random

import pytest

import streaming.stateful as stateful
from events import DeadLetter, Origin, parse_record
from streaming.stateful import ModelCache, make_state_function, time_slices
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
    whole = _run(make_state_function(CONF, "kafka"), whole_state, lines, 0)
    monkeypatch.setattr(stateful, "SLICE_RECORDS", 7)
    function = make_state_function(CONF, "kafka")
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
