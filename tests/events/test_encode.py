"""to_json / to_json_text: records back to contract JSON (events/encode.py)."""

from __future__ import annotations

import json

import pytest

from events import (
    BookieLocation,
    BookieReplace,
    EventError,
    LedgerCreate,
    Reason,
    parse_record,
    to_json,
    to_json_text,
)

MS = 1_795_316_400_007


def test_ledger_create_json():
    rec = LedgerCreate(
        cluster="c1",
        time_ms=MS,
        request_id="r1",
        ensemble_size=3,
        write_quorum=2,
        ack_quorum=2,
        custom_metadata=(("EnsemblePlacementPolicyConfig", b'{"policyClass":"x"}'),),
        exclude=frozenset({"b:1", "a:1"}),
    )
    assert to_json(rec) == {
        "type": "ledger_create",
        "cluster": "c1",
        "time": "2026-11-22T03:00:00.007Z",
        "request_id": "r1",
        "ledger_id": None,
        "ensemble_size": 3,
        "write_quorum": 2,
        "ack_quorum": 2,
        "custom_metadata": {"EnsemblePlacementPolicyConfig": '{"policyClass":"x"}'},
        "exclude": ["a:1", "b:1"],
    }


def test_deleting_location_is_written_as_null():
    rec = BookieLocation(cluster="c1", time_ms=MS, bookie="a:1", location=None)
    assert to_json(rec)["location"] is None
    assert parse_record(to_json(rec)) == rec


def test_to_json_text_is_one_compact_utf8_line():
    rec = BookieReplace(
        cluster="c-ü", time_ms=MS, request_id="r", ensemble=("a:1",), bookie="a:1", write_quorum=1, ack_quorum=1
    )
    text = to_json_text(rec)
    assert "\n" not in text and ", " not in text and "ü" in text
    assert json.loads(text) == to_json(rec)


def test_not_a_record_is_an_error():
    with pytest.raises(EventError) as caught:
        to_json({"type": "ledger_create"})  # type: ignore[arg-type]
    assert caught.value.reason is Reason.UNKNOWN_TYPE


def test_hand_built_metadata_that_is_not_utf8_is_an_error():
    rec = LedgerCreate(
        cluster="c1",
        time_ms=MS,
        request_id="r1",
        ensemble_size=1,
        write_quorum=1,
        ack_quorum=1,
        custom_metadata=(("k", b"\xff"),),
    )
    with pytest.raises(EventError, match=r"custom_metadata\.k: the value is not UTF-8"):
        to_json(rec)
