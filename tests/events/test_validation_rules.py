"""Validation rules beyond one-reason-each: the edges of every field and cross-field rule
(CONTRACT.md §2, events/fields.py, events/validate.py, events/limits.py)."""

from __future__ import annotations

import enum

import pytest

from events import (
    MAX_CLUSTER_CHARS,
    MAX_ENSEMBLE_SIZE,
    MAX_EXCLUDE,
    MAX_METADATA_ENTRIES,
    MAX_METADATA_VALUE_BYTES,
    MAX_STRING_CHARS,
    MAX_VIEW_BOOKIES,
    DeadLetter,
    LedgerCreate,
    Reason,
    parse_record,
)
from events.limits import MAX_LONG

T = "2026-11-22T03:00:00Z"


def ok(raw):
    result = parse_record(raw)
    assert not isinstance(result, DeadLetter), result.detail
    return result


def bad(raw, reason, detail=None):
    result = parse_record(raw)
    assert isinstance(result, DeadLetter), result
    assert result.reason is reason, result.detail
    if detail is not None:
        assert result.detail == detail
    return result


def create(**fields):
    base = {
        "type": "ledger_create",
        "cluster": "c1",
        "time": T,
        "request_id": "r1",
        "ensemble_size": 3,
        "write_quorum": 2,
        "ack_quorum": 2,
    }
    return {k: v for k, v in (base | fields).items() if v is not ...}


def replace(**fields):
    base = {
        "type": "bookie_replace",
        "cluster": "c1",
        "time": T,
        "request_id": "r1",
        "ensemble": ["a:1", "b:1", "c:1"],
        "bookie": "b:1",
        "write_quorum": 3,
        "ack_quorum": 2,
    }
    return {k: v for k, v in (base | fields).items() if v is not ...}


def check(**fields):
    base = {
        "type": "ensemble_check",
        "cluster": "c1",
        "time": T,
        "request_id": "r1",
        "ledger_id": 5,
        "ensemble": ["a:1", "b:1"],
        "write_quorum": 2,
        "ack_quorum": 2,
    }
    return {k: v for k, v in (base | fields).items() if v is not ...}


# -- quorums -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("size", "write", "ack"), [(1, 1, 1), (3, 3, 3), (5, 3, 2), (MAX_ENSEMBLE_SIZE, 1, 1)])
def test_quorums_in_order_are_accepted(size, write, ack):
    rec = ok(create(ensemble_size=size, write_quorum=write, ack_quorum=ack))
    assert (rec.ensemble_size, rec.write_quorum, rec.ack_quorum) == (size, write, ack)


@pytest.mark.parametrize(
    ("fields", "reason", "detail"),
    [
        ({"ensemble_size": 0}, Reason.INVALID_QUORUM, "ensemble_size: expected an integer >= 1, got 0"),
        ({"ensemble_size": -3}, Reason.INVALID_QUORUM, "ensemble_size: expected an integer >= 1, got -3"),
        (
            {"ensemble_size": MAX_ENSEMBLE_SIZE + 1},
            Reason.FIELD_TOO_LARGE,
            f"ensemble_size: at most {MAX_ENSEMBLE_SIZE} allowed, got {MAX_ENSEMBLE_SIZE + 1}",
        ),
        (
            {"write_quorum": 0},
            Reason.INVALID_QUORUM,
            "write_quorum: expected an integer between 1 and ensemble_size (3), got 0",
        ),
        (
            {"ack_quorum": 3},
            Reason.INVALID_QUORUM,
            "ack_quorum: expected an integer between 1 and write_quorum (2), got 3",
        ),
        (
            {"ack_quorum": 0},
            Reason.INVALID_QUORUM,
            "ack_quorum: expected an integer between 1 and write_quorum (2), got 0",
        ),
        ({"ensemble_size": 3.0}, Reason.WRONG_TYPE, "ensemble_size: expected an integer, got 3.0"),
        ({"write_quorum": False}, Reason.WRONG_TYPE, "write_quorum: expected an integer, got false"),
        ({"ack_quorum": None}, Reason.WRONG_TYPE, "ack_quorum: expected an integer, got null"),
        ({"ensemble_size": ...}, Reason.MISSING_FIELD, "ensemble_size: required for ledger_create but missing"),
    ],
)
def test_ledger_create_quorum_errors(fields, reason, detail):
    bad(create(**fields), reason, detail)


def test_replace_and_check_take_the_ensemble_size_from_the_list():
    bad(
        replace(write_quorum=4),
        Reason.INVALID_QUORUM,
        "write_quorum: expected an integer between 1 and the ensemble's size (3), got 4",
    )
    bad(
        check(ack_quorum=3),
        Reason.INVALID_QUORUM,
        "ack_quorum: expected an integer between 1 and write_quorum (2), got 3",
    )
    bad(replace(ensemble=[]), Reason.EMPTY_FIELD, "ensemble: expected a non-empty list of bookie ids, got []")
    bad(check(ensemble=[]), Reason.EMPTY_FIELD)
    bad(replace(ensemble_size=3), Reason.UNKNOWN_FIELD)  # not a field: the size is len(ensemble)
    many = [f"b{i}:1" for i in range(MAX_ENSEMBLE_SIZE + 1)]
    bad(
        check(ensemble=many),
        Reason.FIELD_TOO_LARGE,
        f"ensemble: at most {MAX_ENSEMBLE_SIZE} bookies allowed, got {MAX_ENSEMBLE_SIZE + 1}",
    )
    bad(check(ensemble="a:1,b:1"), Reason.WRONG_TYPE, 'ensemble: expected a list of bookie ids, got "a:1,b:1"')


def test_replace_bookie_must_be_a_member_even_if_excluded():
    rec = ok(replace(exclude=["b:1", "d:1"]))
    assert rec.exclude == frozenset({"b:1", "d:1"})
    bad(replace(bookie="d:1"), Reason.BOOKIE_NOT_IN_ENSEMBLE)


def test_ledger_id_rules():
    assert ok(create(ledger_id=0)).ledger_id == 0
    assert ok(create(ledger_id=MAX_LONG)).ledger_id == MAX_LONG
    assert ok(create()).ledger_id is None
    assert ok(replace(ledger_id=None)).ledger_id is None
    bad(create(ledger_id=MAX_LONG + 1), Reason.FIELD_TOO_LARGE)
    bad(create(ledger_id="42"), Reason.WRONG_TYPE, 'ledger_id: expected a non-negative integer or null, got "42"')
    bad(create(ledger_id=True), Reason.WRONG_TYPE)
    bad(check(ledger_id=...), Reason.MISSING_FIELD, "ledger_id: required for ensemble_check but missing")
    bad(check(ledger_id=None), Reason.WRONG_TYPE, "ledger_id: expected a non-negative integer, got null")
    bad(check(ledger_id=-5), Reason.INVALID_LEDGER_ID)


def test_request_id_and_cluster_rules():
    bad(create(request_id=""), Reason.EMPTY_FIELD, 'request_id: expected a non-empty string, got ""')
    bad(create(request_id=7), Reason.WRONG_TYPE, "request_id: expected a string, got 7")
    bad(create(request_id=...), Reason.MISSING_FIELD)
    assert ok(create(request_id="r" * MAX_STRING_CHARS)).request_id == "r" * MAX_STRING_CHARS
    assert ok(create(cluster="c" * MAX_CLUSTER_CHARS)).cluster == "c" * MAX_CLUSTER_CHARS
    bad(
        create(cluster="c" * (MAX_CLUSTER_CHARS + 1)),
        Reason.FIELD_TOO_LARGE,
        f"cluster: at most {MAX_CLUSTER_CHARS} characters allowed, got {MAX_CLUSTER_CHARS + 1}",
    )
    bad(create(cluster=None), Reason.WRONG_TYPE, "cluster: expected a string, got null")
    bad(create(cluster=...), Reason.MISSING_FIELD, "cluster: required for ledger_create but missing")
    assert ok(create(cluster="prod-ü-東京")).cluster == "prod-ü-東京"
    bad(create(time=...), Reason.MISSING_FIELD, "time: required for ledger_create but missing")


# -- exclude and custom metadata -----------------------------------------------------------------


def test_exclude_rules():
    assert ok(create(exclude=[])).exclude == frozenset()
    assert ok(create(exclude=["a:1", "a:1"])).exclude == frozenset({"a:1"})  # a set: duplicates are harmless
    assert len(ok(create(exclude=[f"b{i}:1" for i in range(MAX_EXCLUDE)])).exclude) == MAX_EXCLUDE
    bad(create(exclude=[f"b{i}:1" for i in range(MAX_EXCLUDE + 1)]), Reason.FIELD_TOO_LARGE)
    bad(create(exclude="a:1"), Reason.WRONG_TYPE)
    bad(create(exclude={"a:1": True}), Reason.WRONG_TYPE)
    bad(
        create(exclude=["a:1", ["b:1"]]),
        Reason.WRONG_TYPE,
        "exclude[1]: expected a bookie id string, got a list of 1 item",
    )


def test_custom_metadata_rules():
    assert ok(create(custom_metadata={})).custom_metadata == ()
    rec = ok(create(custom_metadata={"z": "1", "a": "", "m": "ß"}))
    assert rec.custom_metadata == (("a", b""), ("m", "ß".encode()), ("z", b"1"))
    bad(
        create(custom_metadata={"n": 1}),
        Reason.WRONG_TYPE,
        "custom_metadata.n: expected a string (or an object or array, stored as compact JSON), got 1",
    )
    bad(create(custom_metadata={"n": True}), Reason.WRONG_TYPE)
    bad(create(custom_metadata={"n": None}), Reason.WRONG_TYPE)
    bad(
        create(custom_metadata=["a", "b"]),
        Reason.WRONG_TYPE,
        "custom_metadata: expected an object of string values, got a list of 2 items",
    )
    bad(create(custom_metadata="EnsemblePlacementPolicyConfig"), Reason.WRONG_TYPE)
    bad(create(custom_metadata={"": "x"}), Reason.EMPTY_FIELD)
    bad(create(custom_metadata={"k" * (MAX_STRING_CHARS + 1): "x"}), Reason.FIELD_TOO_LARGE)
    entries = {f"k{i}": "v" for i in range(MAX_METADATA_ENTRIES + 1)}
    bad(create(custom_metadata=entries), Reason.FIELD_TOO_LARGE)
    assert ok(create(custom_metadata={"big": "x" * MAX_METADATA_VALUE_BYTES}))
    bad(
        create(custom_metadata={"big": "é" * (MAX_METADATA_VALUE_BYTES // 2 + 1)}),
        Reason.FIELD_TOO_LARGE,
        f"custom_metadata.big: at most {MAX_METADATA_VALUE_BYTES} bytes allowed, got {MAX_METADATA_VALUE_BYTES + 2}",
    )
    bad(parse_text_with('"custom_metadata":{"k":"\\udc00"}'), Reason.INVALID_ENCODING)


def parse_text_with(fragment):
    return (
        '{"type":"ledger_create","cluster":"c","time":0,"request_id":"r","ensemble_size":1,'
        '"write_quorum":1,"ack_quorum":1,' + fragment + "}"
    )


# -- events --------------------------------------------------------------------------------------


def test_location_rules():
    writable = {"type": "bookie_writable", "cluster": "c1", "time": T, "bookie": "a:1"}
    assert ok(writable | {"location": "/"}).location == "/"
    assert ok(writable | {"location": "/r1/"}).location == "/r1/"  # normalising is the policy's job
    bad(writable | {"location": ""}, Reason.INVALID_LOCATION)
    bad(writable | {"location": " /r1"}, Reason.INVALID_LOCATION)
    bad(writable | {"location": 1}, Reason.WRONG_TYPE, "location: expected a location string or null, got 1")
    bad(writable | {"location": "/" + "r" * MAX_STRING_CHARS}, Reason.FIELD_TOO_LARGE)
    location = {"type": "bookie_location", "cluster": "c1", "time": T, "bookie": "a:1"}
    assert ok(location | {"location": None}).location is None
    # `bookie_location` carries Pulsar rack info (CONTRACT §1 rack_info): the rack is kept as given and
    # read as Pulsar reads it by the cluster model (`rack1` is `/rack1`, "" and "/" the default).
    assert [ok(location | {"location": rack}).location for rack in ("rack1", "", "/", " /r1")] == \
        ["rack1", "", "/", " /r1"]
    bad(location | {"location": 1}, Reason.WRONG_TYPE, "location: expected a rack string or null, got 1")
    bad(location | {"location": "r" * (MAX_STRING_CHARS + 1)}, Reason.FIELD_TOO_LARGE)


def test_hostname_and_group_rules():
    writable = {"type": "bookie_writable", "cluster": "c1", "time": T, "bookie": "a:1"}
    bad(writable | {"hostname": ""}, Reason.EMPTY_FIELD, 'hostname: expected a non-empty string, got ""')
    bad(writable | {"group": 5}, Reason.WRONG_TYPE, "group: expected a string or null, got 5")
    assert ok(writable | {"hostname": "bk1", "group": "isolated-group"}).group == "isolated-group"


def test_disk_rules():
    disk = {"type": "bookie_disk", "cluster": "c1", "time": T, "bookie": "a:1"}
    assert ok(disk | {"free_disk": 0, "total_disk": 0}).total_disk == 0
    assert ok(disk | {"free_disk": MAX_LONG, "total_disk": MAX_LONG}).free_disk == MAX_LONG
    bad(
        disk | {"free_disk": 1, "total_disk": -1},
        Reason.NEGATIVE_DISK,
        "total_disk: expected a non-negative number of bytes, got -1",
    )
    bad(disk | {"free_disk": 1, "total_disk": MAX_LONG + 1}, Reason.FIELD_TOO_LARGE)
    bad(disk | {"free_disk": 1.5, "total_disk": 2}, Reason.WRONG_TYPE, "free_disk: expected an integer, got 1.5")
    bad(disk | {"free_disk": 1}, Reason.MISSING_FIELD, "total_disk: required for bookie_disk but missing")


def test_cluster_view_rules():
    view = {"type": "cluster_view", "cluster": "c1", "time": T}
    bad(view | {"writable": ["a:1"]}, Reason.MISSING_FIELD, "readonly: required for cluster_view but missing")
    bad(view | {"writable": None, "readonly": []}, Reason.WRONG_TYPE)
    bad(
        view | {"writable": ["a:1", "b:1", "a:1"], "readonly": []},
        Reason.DUPLICATE_BOOKIE,
        'writable: bookie "a:1" is listed twice (writable[0] and writable[2]); each bookie may appear once',
    )
    bad(
        view | {"writable": ["a:1", "b:1"], "readonly": ["c:1", "b:1"]},
        Reason.DUPLICATE_BOOKIE,
        'readonly: bookie "b:1" is also listed in writable; a bookie is in one list only',
    )
    bookies = [f"bk{i}:3181" for i in range(MAX_VIEW_BOOKIES)]
    assert len(ok(view | {"writable": bookies, "readonly": []}).writable) == MAX_VIEW_BOOKIES
    bad(view | {"writable": bookies, "readonly": ["x:1", bookies[0]]}, Reason.DUPLICATE_BOOKIE)
    bad(view | {"writable": [*bookies, "one-more:1"], "readonly": []}, Reason.FIELD_TOO_LARGE)


def test_feature_rules():
    feature = {"type": "feature", "cluster": "c1", "time": T, "name": "disallowBookies"}
    assert ok(feature | {"value": 0}).value == 0
    assert ok(feature | {"value": -(2**31)}).value == -(2**31)
    bad(feature | {"value": True}, Reason.WRONG_TYPE, "value: expected an integer, got true")
    bad(feature | {"value": "1"}, Reason.WRONG_TYPE)
    bad(feature | {"value": 2**31}, Reason.FIELD_TOO_LARGE)
    bad(feature | {"value": 1, "name": ""}, Reason.EMPTY_FIELD)


# -- order and mapping inputs --------------------------------------------------------------------


def test_the_first_failure_in_field_order_is_reported():
    """cluster before time before the type's fields; unknown fields before all of them."""
    bad(create(cluster="", time="yesterday", write_quorum=9), Reason.EMPTY_FIELD)
    bad(create(time="yesterday", write_quorum=9), Reason.INVALID_TIME)
    bad(create(time="yesterday", wq=9), Reason.UNKNOWN_FIELD)


def test_mapping_inputs_may_use_tuples_and_int_subclasses():
    class Size(enum.IntEnum):
        THREE = 3

    rec = ok(create(ensemble_size=Size.THREE, exclude=("a:1",)))
    assert rec == LedgerCreate(
        cluster="c1",
        time_ms=1_795_316_400_000,
        request_id="r1",
        ensemble_size=3,
        write_quorum=2,
        ack_quorum=2,
        exclude=frozenset({"a:1"}),
    )
    assert type(rec.ensemble_size) is int


def test_mapping_input_with_non_json_values_is_a_dead_letter():
    letter = bad(create(custom_metadata={"k": b"bytes"}), Reason.WRONG_TYPE)
    assert "custom_metadata.k" in letter.detail
    letter = bad(create(exclude=[{"a"}]), Reason.WRONG_TYPE)
    assert letter.detail.startswith("exclude[0]: expected a bookie id string, got a value of Python type set")
