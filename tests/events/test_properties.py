"""Properties of parse_record over generated input (Hypothesis; profile in tests/conftest.py)."""

from __future__ import annotations

import dataclasses
import json
import re

from hypothesis import given
from hypothesis import strategies as st

from events import (
    FIELDS,
    MAX_CLUSTER_CHARS,
    MAX_STRING_CHARS,
    RECORD_CLASSES,
    BookieDisk,
    BookieLocation,
    BookieReplace,
    BookieWritable,
    ClusterView,
    DeadLetter,
    Origin,
    Reason,
    parse_record,
    to_json,
    to_json_text,
)
from tests.events import strategies as s

JAVA_BOOKIE_RULE = re.compile(r"[a-zA-Z0-9:-_.\-]+")
ORIGIN = Origin.from_file("/fuzz.jsonl", 1)


def assert_parsed_or_dead(result, raw):
    """The only two outcomes: a record, or a dead letter that explains itself."""
    if isinstance(result, DeadLetter):
        assert isinstance(result.reason, Reason)
        assert result.detail and isinstance(result.detail, str)
        assert result.source == {"file": "/fuzz.jsonl", "line": 1}
        assert isinstance(result.raw, str)
        if isinstance(raw, str):
            assert result.raw == raw
        json.dumps(result.to_record())
    else:
        assert type(result) in RECORD_CLASSES.values()
        assert_invariants(result)


def assert_invariants(rec):
    """What code past events/ may rely on for any accepted record (an oracle independent of the parser)."""
    assert isinstance(rec.cluster, str) and 0 < len(rec.cluster) <= MAX_CLUSTER_CHARS
    rec.cluster.encode("utf-8")
    assert type(rec.time_ms) is int and rec.time_ms >= 0
    bookies = []
    for field in dataclasses.fields(rec):
        value = getattr(rec, field.name)
        if field.name in ("bookie",):
            bookies.append(value)
        elif field.name in ("ensemble", "writable", "readonly", "exclude"):
            bookies.extend(value)
        elif isinstance(value, str):
            # A bookie_location's location is Pulsar rack info: empty means the default rack.
            assert 0 < len(value) <= MAX_STRING_CHARS or field.name == "cluster" or (
                isinstance(rec, BookieLocation) and field.name == "location")
            value.encode("utf-8")
        elif isinstance(value, int):
            assert type(value) is int
    for bookie in bookies:
        assert JAVA_BOOKIE_RULE.fullmatch(bookie) and bookie.lower() != "readonly"
    if hasattr(rec, "write_quorum"):
        assert 1 <= rec.ack_quorum <= rec.write_quorum <= rec.ensemble_size
    if hasattr(rec, "ensemble"):
        assert rec.ensemble and len(set(rec.ensemble)) == len(rec.ensemble)
    if isinstance(rec, BookieReplace):
        assert rec.bookie in rec.ensemble
    if isinstance(rec, ClusterView):
        assert not set(rec.writable) & set(rec.readonly)
    if isinstance(rec, BookieDisk):
        assert 0 <= rec.free_disk <= rec.total_disk
    if isinstance(rec, BookieWritable) and rec.location is not None:
        assert rec.location.startswith("/")     # a bookie_location's is read as Pulsar reads rack info


@given(st.text())
def test_arbitrary_text_never_raises(text):
    """Any str gives a record or a dead letter."""
    assert_parsed_or_dead(parse_record(text, ORIGIN), text)


@given(st.binary())
def test_arbitrary_bytes_never_raise(blob):
    """Any bytes give a record or a dead letter."""
    assert_parsed_or_dead(parse_record(blob, ORIGIN), blob)


@given(s.json_values)
def test_arbitrary_json_values_never_raise(value):
    """Any JSON value, as text or as a Python value, gives a record or a dead letter."""
    text = json.dumps(value)
    assert_parsed_or_dead(parse_record(text, ORIGIN), text)
    assert_parsed_or_dead(parse_record(value, ORIGIN), None)


@given(st.sampled_from(sorted(FIELDS)), st.dictionaries(st.text(max_size=12), s.python_values, max_size=6))
def test_records_of_a_known_type_with_junk_fields_never_raise(kind, junk):
    """A known type with arbitrary (also non-JSON) field values gives a record or a dead letter."""
    assert_parsed_or_dead(parse_record({"type": kind, **junk}, ORIGIN), None)


@given(s.records, st.data())
def test_one_corrupted_field_never_raises(rec, data):
    """A valid record with one field replaced by any JSON value, or removed, is checked, never crashes,
    and is accepted only if it still satisfies every invariant."""
    obj = to_json(rec)
    key = data.draw(st.sampled_from(sorted(FIELDS[rec.type])))
    if data.draw(st.booleans()):
        obj[key] = data.draw(s.json_values | st.integers() | st.text(max_size=40) | st.lists(s.bookie_ids, max_size=4))
    else:
        obj.pop(key, None)
    text = json.dumps(obj)
    assert_parsed_or_dead(parse_record(text, ORIGIN), text)


@given(s.records)
def test_round_trip(rec):
    """parse_record(to_json(rec)) == rec for every valid record, from a dict, JSON text and UTF-8 bytes."""
    assert parse_record(to_json(rec)) == rec
    text = to_json_text(rec)
    assert parse_record(text) == rec
    assert parse_record(text.encode("utf-8")) == rec
    assert_invariants(rec)


@given(s.records)
def test_valid_records_serialise_to_their_own_type_fields(rec):
    """to_json writes exactly the contract's fields for the type."""
    assert tuple(to_json(rec)) == FIELDS[rec.type]
