"""Dead letters keep the raw input, its source and what a requester needs to hear back
(CONTRACT.md §2 "Dead letters": a malformed request with readable cluster and request_id gets a
failed decision with code INVALID_REQUEST)."""

from __future__ import annotations

import json
from types import MappingProxyType

import pytest

from events import DeadLetter, Origin, Reason, parse_record
from events.errors import EventError

T = "2026-11-22T03:00:00Z"
BAD_REQUEST = {
    "type": "bookie_replace",
    "cluster": "prod",
    "time": T,
    "request_id": "req-77",
    "ledger_id": 1234,
    "ensemble": ["bk1:3181", "bk2:3181"],
    "bookie": "bk9:3181",
    "write_quorum": 2,
    "ack_quorum": 2,
}


def test_to_record_has_the_contract_shape():
    raw = json.dumps(BAD_REQUEST)
    letter = parse_record(raw, Origin.from_file("/data/events.jsonl", 7))
    assert letter.to_record() == {
        "raw": raw,
        "source": {"file": "/data/events.jsonl", "line": 7},
        "reason": 'bookie: expected one of the ensemble\'s 2 bookies, got "bk9:3181"',
        "code": "BOOKIE_NOT_IN_ENSEMBLE",
        "cluster": "prod",
        "request_id": "req-77",
        "ledger_id": 1234,
        "type": "bookie_replace",
    }
    assert letter.needs_failed_decision
    json.dumps(letter.to_record())  # JSON-ready


@pytest.mark.parametrize(
    ("origin", "source"),
    [
        (Origin.from_file("/x/events.jsonl", 1), {"file": "/x/events.jsonl", "line": 1}),
        (Origin.from_kafka("events", 0, 42), {"topic": "events", "partition": 0, "offset": 42}),
        (Origin.inline(), {"inline": "inline"}),
        (Origin.inline("unit-test"), {"inline": "unit-test"}),
    ],
)
def test_source_comes_from_the_origin(origin, source):
    assert parse_record("not json", origin).source == source
    assert origin.to_record() == source


def test_default_origin_is_inline():
    assert parse_record("not json").source == {"inline": "inline"}


@pytest.mark.parametrize("bad", [("events", -1, 0), ("events", 0, -1), ("events", True, 0), (None, 0, 0)])
def test_kafka_origin_checks_its_values(bad):
    with pytest.raises(EventError):
        Origin.from_kafka(*bad)


@pytest.mark.parametrize("bad", [("/x", 0), ("/x", "7"), (7, 1)])
def test_file_origin_checks_its_values(bad):
    with pytest.raises(EventError):
        Origin.from_file(*bad)


def test_raw_is_the_input_text_exactly():
    text = '  {"type": "bookie_lost",\t"cluster": "prod"}  '
    assert parse_record(text).raw == text
    assert parse_record(text.encode()).raw == text
    assert parse_record(b'{"cluster":"caf\xe9"}').raw == '{"cluster":"caf\ufffd"}'


def test_raw_of_a_mapping_is_compact_sorted_json():
    letter = parse_record(MappingProxyType({"type": "bookie_lost", "cluster": "prod", "time": T, "bookie": "a b"}))
    assert letter.raw == '{"bookie":"a b","cluster":"prod","time":"2026-11-22T03:00:00Z","type":"bookie_lost"}'
    assert parse_record({"z": "é", "a": 1}).raw == '{"a":1,"z":"é"}'


def test_raw_of_a_mapping_that_is_not_json_is_still_text():
    letter = parse_record({"type": "feature", 1: {1, 2}, "x": b"\x00"})
    assert isinstance(letter, DeadLetter)
    assert isinstance(letter.raw, str) and "feature" in letter.raw


@pytest.mark.parametrize(
    "record",
    [
        BAD_REQUEST | {"write_quorum": 9},
        BAD_REQUEST | {"time": "2026-11-22 03:00"},
        BAD_REQUEST | {"ensembel": ["bk1:3181"]},
        BAD_REQUEST | {"type": "bookie_replac"},  # an unknown type that carries a request_id
        {k: v for k, v in BAD_REQUEST.items() if k != "type"},
        {
            "type": "ledger_create",
            "cluster": "prod",
            "time": T,
            "request_id": "req-77",
            "ledger_id": 1234,
            "ensemble_size": 3,
            "write_quorum": 2,
            "ack_quorum": 2,
            "custom_metadata": {"k": 1},
        },
        {"type": "ensemble_check", "cluster": "prod", "time": T, "request_id": "req-77", "ledger_id": 1234},
    ],
)
def test_malformed_requests_keep_cluster_and_request_id(record):
    letter = parse_record(record)
    assert isinstance(letter, DeadLetter)
    assert (letter.cluster, letter.request_id, letter.ledger_id) == ("prod", "req-77", 1234)
    assert letter.needs_failed_decision


def test_requests_whose_ids_cannot_be_read_do_not_ask_for_a_decision():
    for record in (
        BAD_REQUEST | {"cluster": ""},
        BAD_REQUEST | {"request_id": 77},
        {k: v for k, v in BAD_REQUEST.items() if k != "request_id"},
    ):
        letter = parse_record(record)
        assert isinstance(letter, DeadLetter)
        assert not letter.needs_failed_decision
    letter = parse_record(BAD_REQUEST | {"ledger_id": -1})
    assert (letter.reason, letter.ledger_id, letter.needs_failed_decision) == (Reason.INVALID_LEDGER_ID, None, True)


def test_events_never_carry_a_request_id():
    letter = parse_record({"type": "bookie_lost", "cluster": "prod", "time": T, "bookie": "a b", "request_id": "r"})
    assert (letter.reason, letter.cluster, letter.request_id, letter.record_type) == (
        Reason.UNKNOWN_FIELD,
        "prod",
        None,
        "bookie_lost",
    )
    assert not letter.needs_failed_decision


def test_text_without_an_object_has_no_identity():
    for raw in ("", "[]", "{", b"\xff\xfe", "null"):
        letter = parse_record(raw)
        assert (letter.cluster, letter.request_id, letter.ledger_id, letter.record_type) == (None, None, None, None)


def test_reason_str_is_the_code():
    assert str(Reason.INVALID_QUORUM) == "INVALID_QUORUM"
    assert all(member.value for member in Reason)  # every code documents its meaning


class _NumpyLikeInt:
    """Stands in for numpy.int64 from a pandas frame: an integer through __index__ only."""

    def __init__(self, value):
        self.value = value

    def __index__(self):
        return self.value


def test_kafka_origin_accepts_integer_like_offsets():
    origin = Origin.from_kafka("events", _NumpyLikeInt(2), _NumpyLikeInt(42))
    assert origin.to_record() == {"topic": "events", "partition": 2, "offset": 42}
    assert type(origin.offset) is int
