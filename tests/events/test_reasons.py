"""Every dead-letter Reason, each with a realistic bad record and the exact message a user reads
(CONTRACT.md §2 "Dead letters"; STYLE R7: one test per reason)."""

from __future__ import annotations

import json

import pytest

from events import DeadLetter, Origin, Reason, parse_record
from events.limits import MAX_RECORD_BYTES, MAX_STRING_CHARS

T = "2026-11-22T03:00:00Z"
ORIGIN = Origin.from_kafka("events", 1, 1042)


def dead(raw, reason):
    """Parse ``raw``; it must become a dead letter with ``reason``."""
    result = parse_record(raw, ORIGIN)
    assert isinstance(result, DeadLetter), result
    assert result.reason is reason, result.detail
    assert result.source == {"topic": "events", "partition": 1, "offset": 1042}
    return result


def create(**fields):
    return {
        "type": "ledger_create",
        "cluster": "prod",
        "time": T,
        "request_id": "req-7",
        "ensemble_size": 3,
        "write_quorum": 2,
        "ack_quorum": 2,
    } | fields


def test_record_too_large():
    # A producer dumps a whole registry with long generated ids into one snapshot.
    writable = [f"bookie-{i:06d}.rack-{i % 40:02d}.dc-east.example.internal:3181" for i in range(20_000)]
    raw = json.dumps({"type": "cluster_view", "cluster": "prod", "time": T, "writable": writable, "readonly": []})
    letter = dead(raw, Reason.RECORD_TOO_LARGE)
    assert letter.detail == f"record: at most {MAX_RECORD_BYTES} bytes allowed, got {len(raw)}"
    assert letter.raw == raw  # the whole input is kept
    dead(raw.encode(), Reason.RECORD_TOO_LARGE)


def test_record_too_large_counts_utf8_bytes_of_text():
    raw = json.dumps(create(request_id="é" * 600_000), ensure_ascii=False)  # 600k characters, 1.2 MB
    assert len(raw) < MAX_RECORD_BYTES < len(raw.encode())
    assert dead(raw, Reason.RECORD_TOO_LARGE).detail.endswith(f"got {len(raw.encode())}")


def test_invalid_encoding():
    # A Latin-1 producer writes a hostname with an umlaut.
    raw = (
        b'{"type":"bookie_writable","cluster":"prod","time":"'
        + T.encode()
        + b'","bookie":"bk1:3181","hostname":"m\xfcnchen-1"}'
    )
    letter = dead(raw, Reason.INVALID_ENCODING)
    assert letter.detail == f"record: not valid UTF-8 at byte {raw.index(0xFC)} (invalid start byte)"
    assert "m\ufffdnchen-1" in letter.raw  # decoded with replacement characters


def test_invalid_encoding_of_an_escaped_lone_surrogate():
    letter = dead(
        '{"type":"bookie_lost","cluster":"prod\\ud800","time":0,"bookie":"bk1:3181"}', Reason.INVALID_ENCODING
    )
    assert letter.detail == "cluster: holds an unpaired surrogate at character 4; strings must be valid Unicode"


def test_invalid_json():
    # Python's str(dict) instead of json.dumps.
    letter = dead("{'type': 'bookie_lost', 'cluster': 'prod'}", Reason.INVALID_JSON)
    assert letter.detail.startswith("record: not valid JSON: Expecting property name enclosed in double quotes")


@pytest.mark.parametrize(
    ("raw", "detail"),
    [
        (
            '{"type":"feature","cluster":"prod","time":0,"name":"x","value":NaN}',
            "record: NaN is not valid JSON (strict JSON has no NaN or Infinity)",
        ),
        (
            '{"type":"bookie_lost"}\n{"type":"bookie_lost"}',
            "record: not valid JSON: Extra data: line 2 column 1 (char 23)",
        ),
        ("", "record: empty; expected one JSON object"),
        ("  \n", "record: empty; expected one JSON object"),
        ("[" * 100_000, "record: JSON nested too deeply to read"),
    ],
)
def test_invalid_json_forms(raw, detail):
    assert dead(raw, Reason.INVALID_JSON).detail == detail


def test_not_an_object():
    # A batch of two events sent as one JSON array.
    raw = json.dumps([{"type": "bookie_lost", "cluster": "prod", "time": T, "bookie": "bk1:3181"}] * 2)
    assert dead(raw, Reason.NOT_AN_OBJECT).detail == "record: expected a JSON object, got a list of 2 items"
    assert dead('"bookie_lost"', Reason.NOT_AN_OBJECT).detail == 'record: expected a JSON object, got "bookie_lost"'
    assert dead(42, Reason.NOT_AN_OBJECT).detail == (
        "record: expected JSON text (str or bytes) or a mapping, got a Python int"
    )


def test_missing_field():
    # delete-bookie-rack must say so with "location": null; leaving the key out is an error.
    raw = {"type": "bookie_location", "cluster": "prod", "time": T, "bookie": "bk1:3181"}
    assert dead(raw, Reason.MISSING_FIELD).detail == "location: required for bookie_location but missing"


def test_missing_type():
    letter = dead({"cluster": "prod", "time": T, "bookie": "bk1:3181"}, Reason.MISSING_FIELD)
    assert letter.detail.startswith("type: required but missing; one of bookie_writable, ")


def test_unknown_type():
    letter = dead(create(type="ledger_craete"), Reason.UNKNOWN_TYPE)
    assert letter.detail.startswith("type: expected one of bookie_writable, bookie_readonly, ")
    assert letter.detail.endswith('got "ledger_craete" (did you mean "ledger_create"?)')
    assert (letter.record_type, letter.request_id) == ("ledger_craete", "req-7")  # the requester can be answered


def test_unknown_field():
    letter = dead(create(ensemble_szie=3), Reason.UNKNOWN_FIELD)
    assert letter.detail == (
        'ensemble_szie: not a field of ledger_create (did you mean "ensemble_size"?); ledger_create has: type, '
        "cluster, time, request_id, ledger_id, ensemble_size, write_quorum, ack_quorum, custom_metadata, exclude"
    )


def test_wrong_type():
    # A shell script quoted the number.
    letter = dead(create(ensemble_size="3"), Reason.WRONG_TYPE)
    assert letter.detail == 'ensemble_size: expected an integer, got "3"'


def test_wrong_type_boolean_is_not_an_integer():
    assert dead(create(ack_quorum=True), Reason.WRONG_TYPE).detail == "ack_quorum: expected an integer, got true"


def test_empty_field():
    assert dead(create(cluster=""), Reason.EMPTY_FIELD).detail == 'cluster: expected a non-empty string, got ""'


def test_field_too_large():
    letter = dead(create(request_id="r" * 5000), Reason.FIELD_TOO_LARGE)
    assert letter.detail == f"request_id: at most {MAX_STRING_CHARS} characters allowed, got 5000"
    assert letter.request_id is None  # an unusable request_id is not echoed back


def test_invalid_time():
    # A local timestamp without a zone is ambiguous.
    letter = dead(create(time="2026-11-22T03:00:00"), Reason.INVALID_TIME)
    assert letter.detail == (
        "time: expected an ISO-8601 time with a zone (like 2026-11-22T03:00:00.000Z) or epoch milliseconds, "
        'got "2026-11-22T03:00:00" (no zone; add Z or an offset such as +00:00)'
    )


def test_invalid_time_outside_what_every_stage_can_hold():
    # A sentinel "end of time" and a zero date: Spark's nanosecond timestamps cannot hold either.
    late = dead(create(time="9999-12-31T23:59:59.999Z"), Reason.INVALID_TIME)
    assert late.detail == (
        "time: expected an ISO-8601 time with a zone (like 2026-11-22T03:00:00.000Z) or epoch milliseconds, "
        'got "9999-12-31T23:59:59.999Z" (after 2262-04-11T23:47:16.854Z, the latest time the engine can hold)'
    )
    assert (late.cluster, late.request_id, late.time_ms) == ("prod", "req-7", None), "answered, with no time"
    early = dead(create(time="0001-01-01T00:00:00Z"), Reason.INVALID_TIME)
    assert early.detail.endswith("(before 1970)")
    assert dead(create(time=253_402_300_799_999), Reason.INVALID_TIME).detail.endswith(
        "(after 2262-04-11T23:47:16.854Z, the latest time the engine can hold)")


def test_time_too_far_ahead():
    """Set by the cluster model against engine.maxFutureSkewSeconds (tests/state/test_future_skew.py),
    never by parsing: the time itself is valid."""
    record = create(time="2262-04-01T00:00:00Z")
    assert not isinstance(parse_record(json.dumps(record), ORIGIN), DeadLetter)
    letter = DeadLetter(raw=json.dumps(record), source=ORIGIN.to_record(), reason=Reason.TIME_TOO_FAR_AHEAD,
                        detail="time: ...", cluster="prod", request_id="req-7", record_type="ledger_create")
    assert letter.to_record()["code"] == "TIME_TOO_FAR_AHEAD"
    assert letter.needs_failed_decision


def test_invalid_bookie_id():
    raw = {"type": "bookie_lost", "cluster": "prod", "time": T, "bookie": "bk1.example.com/3181"}
    assert dead(raw, Reason.INVALID_BOOKIE_ID).detail == (
        'bookie: "bk1.example.com/3181" is not a valid bookie id: character "/" at position 15 is not allowed '
        "(allowed: letters, digits, '.', '-' and ':' to '_' (0x3A-0x5F); spec bookkeeper-rackaware.md §1.1)"
    )


def test_invalid_location():
    # Pulsar accepts "rack1" and adds the slash; the event stream must carry the network location.
    raw = {"type": "bookie_writable", "cluster": "prod", "time": T, "bookie": "bk1:3181", "location": "rack1"}
    assert dead(raw, Reason.INVALID_LOCATION).detail == (
        'location: expected a network location starting with "/" (like "/region-a/rack1"), got "rack1"'
    )


def test_invalid_ledger_id():
    letter = dead(create(ledger_id=-1), Reason.INVALID_LEDGER_ID)
    assert letter.detail == "ledger_id: expected a non-negative integer, got -1"


def test_negative_disk():
    raw = {
        "type": "bookie_disk",
        "cluster": "prod",
        "time": T,
        "bookie": "bk1:3181",
        "free_disk": -4096,
        "total_disk": 1 << 40,
    }
    assert dead(raw, Reason.NEGATIVE_DISK).detail == "free_disk: expected a non-negative number of bytes, got -4096"


def test_invalid_disk():
    raw = {
        "type": "bookie_disk",
        "cluster": "prod",
        "time": T,
        "bookie": "bk1:3181",
        "free_disk": 2 << 40,
        "total_disk": 1 << 40,
    }
    assert dead(raw, Reason.INVALID_DISK).detail == (
        f"free_disk: expected at most total_disk ({1 << 40}), got {2 << 40}"
    )


def test_invalid_quorum():
    letter = dead(create(write_quorum=5), Reason.INVALID_QUORUM)
    assert letter.detail == "write_quorum: expected an integer between 1 and ensemble_size (3), got 5"


def test_bookie_not_in_ensemble():
    raw = {
        "type": "bookie_replace",
        "cluster": "prod",
        "time": T,
        "request_id": "req-9",
        "ledger_id": 17,
        "ensemble": ["bk1:3181", "bk2:3181", "bk3:3181"],
        "bookie": "bk4:3181",
        "write_quorum": 3,
        "ack_quorum": 2,
    }
    letter = dead(raw, Reason.BOOKIE_NOT_IN_ENSEMBLE)
    assert letter.detail == 'bookie: expected one of the ensemble\'s 3 bookies, got "bk4:3181"'


def test_duplicate_bookie():
    raw = {
        "type": "ensemble_check",
        "cluster": "prod",
        "time": T,
        "request_id": "req-10",
        "ledger_id": 17,
        "ensemble": ["bk1:3181", "bk2:3181", "bk1:3181"],
        "write_quorum": 2,
        "ack_quorum": 2,
    }
    assert dead(raw, Reason.DUPLICATE_BOOKIE).detail == (
        'ensemble: bookie "bk1:3181" is listed twice (ensemble[0] and ensemble[2]); each bookie may appear once'
    )


def test_internal_error():
    """Set by the streaming job's per-record guard (tests/streaming/test_stateful_guard.py), never by parsing."""
    letter = DeadLetter(raw="{}", source={"topic": "t", "partition": 0, "offset": 1}, reason=Reason.INTERNAL_ERROR,
                        detail="KeyError: 'x'", cluster="c1", request_id="r1", record_type="ledger_create")
    assert letter.to_record()["code"] == "INTERNAL_ERROR"
    assert letter.needs_failed_decision


def test_every_reason_has_a_test():
    """Each Reason member has a test named after it in this module (test_<code in lower case>)."""
    missing = [reason.name for reason in Reason if not callable(globals().get(f"test_{reason.name.lower()}"))]
    assert not missing
