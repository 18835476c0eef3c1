"""Every record type of CONTRACT.md §2 parses from JSON text, UTF-8 bytes and a dict into its typed record."""

from __future__ import annotations

import dataclasses
import json
from types import MappingProxyType

import pytest

from events import (
    EVENT_TYPES,
    RECORD_CLASSES,
    REQUEST_TYPES,
    BookieDisk,
    BookieLocation,
    BookieLost,
    BookieReadonly,
    BookieReplace,
    BookieWritable,
    ClusterEvent,
    ClusterView,
    DeadLetter,
    EnsembleCheck,
    FeatureSet,
    LedgerCreate,
    Origin,
    Request,
    parse_record,
)

T = "2026-11-22T03:00:00.000Z"
MS = 1_795_316_400_000
ISOLATION = {
    "policyClass": "org.apache.pulsar.bookie.rackawareness.IsolatedBookieEnsemblePlacementPolicy",
    "properties": {"isolationBookieGroups": "group-a", "secondaryIsolationBookieGroups": "group-b"},
}

# (contract JSON, the record it must become)
EXAMPLES = [
    (
        {
            "type": "bookie_writable",
            "cluster": "c1",
            "time": T,
            "bookie": "bk1:3181",
            "location": "/region-a/rack1",
            "hostname": "bk1.example.com",
            "group": "group-a",
        },
        BookieWritable(
            cluster="c1",
            time_ms=MS,
            bookie="bk1:3181",
            location="/region-a/rack1",
            hostname="bk1.example.com",
            group="group-a",
        ),
    ),
    (
        {"type": "bookie_writable", "cluster": "c1", "time": MS, "bookie": "bk1:3181"},
        BookieWritable(cluster="c1", time_ms=MS, bookie="bk1:3181"),
    ),
    (
        {"type": "bookie_readonly", "cluster": "c1", "time": T, "bookie": "bk2:3181"},
        BookieReadonly(cluster="c1", time_ms=MS, bookie="bk2:3181"),
    ),
    (
        {"type": "bookie_lost", "cluster": "c1", "time": T, "bookie": "bk3:3181"},
        BookieLost(cluster="c1", time_ms=MS, bookie="bk3:3181"),
    ),
    (
        {
            "type": "bookie_location",
            "cluster": "c1",
            "time": T,
            "bookie": "bk1:3181",
            "location": "/rack2",
            "hostname": "bk1.example.com",
            "group": "default",
        },
        BookieLocation(
            cluster="c1", time_ms=MS, bookie="bk1:3181", location="/rack2", hostname="bk1.example.com", group="default"
        ),
    ),
    (
        {"type": "bookie_location", "cluster": "c1", "time": T, "bookie": "bk1:3181", "location": None},
        BookieLocation(cluster="c1", time_ms=MS, bookie="bk1:3181", location=None),
    ),
    (
        {
            "type": "bookie_disk",
            "cluster": "c1",
            "time": T,
            "bookie": "bk1:3181",
            "free_disk": 250_000_000_000,
            "total_disk": 1_000_000_000_000,
        },
        BookieDisk(
            cluster="c1", time_ms=MS, bookie="bk1:3181", free_disk=250_000_000_000, total_disk=1_000_000_000_000
        ),
    ),
    (
        {
            "type": "cluster_view",
            "cluster": "c1",
            "time": T,
            "writable": ["bk2:3181", "bk1:3181"],
            "readonly": ["bk3:3181"],
        },
        ClusterView(cluster="c1", time_ms=MS, writable=("bk2:3181", "bk1:3181"), readonly=("bk3:3181",)),
    ),
    (
        {"type": "cluster_view", "cluster": "c1", "time": T, "writable": [], "readonly": []},
        ClusterView(cluster="c1", time_ms=MS, writable=(), readonly=()),
    ),
    (
        {"type": "feature", "cluster": "c1", "time": T, "name": "region2.disallowBookies", "value": 1},
        FeatureSet(cluster="c1", time_ms=MS, name="region2.disallowBookies", value=1),
    ),
    (
        {
            "type": "ledger_create",
            "cluster": "c1",
            "time": T,
            "request_id": "req-1",
            "ledger_id": 42,
            "ensemble_size": 3,
            "write_quorum": 2,
            "ack_quorum": 2,
            "custom_metadata": {"EnsemblePlacementPolicyConfig": ISOLATION, "app": "billing"},
            "exclude": ["bk9:3181", "bk8:3181", "bk9:3181"],
        },
        LedgerCreate(
            cluster="c1",
            time_ms=MS,
            request_id="req-1",
            ledger_id=42,
            ensemble_size=3,
            write_quorum=2,
            ack_quorum=2,
            custom_metadata=(
                ("EnsemblePlacementPolicyConfig", json.dumps(ISOLATION, separators=(",", ":")).encode()),
                ("app", b"billing"),
            ),
            exclude=frozenset({"bk8:3181", "bk9:3181"}),
        ),
    ),
    (
        {
            "type": "ledger_create",
            "cluster": "c1",
            "time": T,
            "request_id": "req-2",
            "ensemble_size": 1,
            "write_quorum": 1,
            "ack_quorum": 1,
        },
        LedgerCreate(cluster="c1", time_ms=MS, request_id="req-2", ensemble_size=1, write_quorum=1, ack_quorum=1),
    ),
    (
        {
            "type": "bookie_replace",
            "cluster": "c1",
            "time": T,
            "request_id": "req-3",
            "ledger_id": 42,
            "ensemble": ["bk1:3181", "bk2:3181", "bk3:3181"],
            "bookie": "bk2:3181",
            "write_quorum": 3,
            "ack_quorum": 2,
            "exclude": ["bk4:3181"],
            "custom_metadata": {"team": "ünïcode"},
        },
        BookieReplace(
            cluster="c1",
            time_ms=MS,
            request_id="req-3",
            ledger_id=42,
            ensemble=("bk1:3181", "bk2:3181", "bk3:3181"),
            bookie="bk2:3181",
            write_quorum=3,
            ack_quorum=2,
            exclude=frozenset({"bk4:3181"}),
            custom_metadata=(("team", "ünïcode".encode()),),
        ),
    ),
    (
        {
            "type": "ensemble_check",
            "cluster": "c1",
            "time": T,
            "request_id": "req-4",
            "ledger_id": 0,
            "ensemble": ["bk1:3181", "bk2:3181"],
            "write_quorum": 2,
            "ack_quorum": 1,
        },
        EnsembleCheck(
            cluster="c1",
            time_ms=MS,
            request_id="req-4",
            ledger_id=0,
            ensemble=("bk1:3181", "bk2:3181"),
            write_quorum=2,
            ack_quorum=1,
        ),
    ),
]
IDS = [f"{obj['type']}-{i}" for i, (obj, _) in enumerate(EXAMPLES)]


def test_examples_cover_every_record_type():
    assert {obj["type"] for obj, _ in EXAMPLES} == set(RECORD_CLASSES)


@pytest.mark.parametrize(("obj", "expected"), EXAMPLES, ids=IDS)
def test_parses_from_text(obj, expected):
    assert parse_record(json.dumps(obj)) == expected


@pytest.mark.parametrize(("obj", "expected"), EXAMPLES, ids=IDS)
def test_parses_from_bytes_and_bytearray(obj, expected):
    blob = json.dumps(obj, ensure_ascii=False).encode("utf-8")
    assert parse_record(blob) == expected
    assert parse_record(bytearray(blob)) == expected
    assert parse_record(memoryview(blob)) == expected


@pytest.mark.parametrize(("obj", "expected"), EXAMPLES, ids=IDS)
def test_parses_from_a_mapping(obj, expected):
    before = json.dumps(obj, sort_keys=True)
    assert parse_record(obj) == expected
    assert parse_record(MappingProxyType(obj)) == expected
    assert json.dumps(obj, sort_keys=True) == before  # the caller's mapping is not changed


@pytest.mark.parametrize(("obj", "expected"), EXAMPLES, ids=IDS)
def test_parsed_records_are_well_formed_values(obj, expected):
    """The fast positional builders give exactly what the dataclass constructor gives: every field
    set, right types, frozen, hashable, with the contract's type name."""
    rec = parse_record(json.dumps(obj))
    assert type(rec) is type(expected)
    assert rec.type == obj["type"] == type(rec).type
    assert dataclasses.asdict(rec) == dataclasses.asdict(expected)
    assert hash(rec) == hash(expected)
    with pytest.raises(dataclasses.FrozenInstanceError):
        rec.cluster = "other"  # type: ignore[misc]
    for field in dataclasses.fields(rec):
        value = getattr(rec, field.name)
        if field.name in ("ensemble", "writable", "readonly", "custom_metadata"):
            assert type(value) is tuple
        if field.name == "exclude":
            assert type(value) is frozenset


def test_whitespace_around_the_object_is_fine():
    obj, expected = EXAMPLES[3]
    assert parse_record("\n  " + json.dumps(obj, indent=2) + " \r\n") == expected
    assert parse_record(b"\t" + json.dumps(obj).encode() + b"\n") == expected


def test_null_optional_fields_mean_absent():
    rec = parse_record(
        {
            "type": "ledger_create",
            "cluster": "c1",
            "time": T,
            "request_id": "r",
            "ledger_id": None,
            "ensemble_size": 2,
            "write_quorum": 2,
            "ack_quorum": 1,
            "custom_metadata": None,
            "exclude": None,
        }
    )
    assert rec == LedgerCreate(cluster="c1", time_ms=MS, request_id="r", ensemble_size=2, write_quorum=2, ack_quorum=1)
    rec = parse_record(
        {
            "type": "bookie_writable",
            "cluster": "c1",
            "time": T,
            "bookie": "b",
            "location": None,
            "hostname": None,
            "group": None,
        }
    )
    assert rec == BookieWritable(cluster="c1", time_ms=MS, bookie="b")


def test_metadata_helpers():
    rec = EXAMPLES[10][1]
    assert rec.metadata_dict() == {
        "EnsemblePlacementPolicyConfig": json.dumps(ISOLATION, separators=(",", ":")).encode(),
        "app": b"billing",
    }
    assert [key for key, _ in rec.custom_metadata] == sorted(rec.metadata_dict())
    replace = EXAMPLES[12][1]
    assert replace.ensemble_size == 3
    assert replace.metadata_dict() == {"team": "ünïcode".encode()}
    assert EXAMPLES[13][1].ensemble_size == 2


def test_metadata_array_values_are_compact_json():
    rec = parse_record(
        {
            "type": "ledger_create",
            "cluster": "c1",
            "time": T,
            "request_id": "r",
            "ensemble_size": 1,
            "write_quorum": 1,
            "ack_quorum": 1,
            "custom_metadata": {"tags": ["a", 1, None, {"b": 2}]},
        }
    )
    assert rec.metadata_dict() == {"tags": b'["a",1,null,{"b":2}]'}


def test_type_sets_and_unions():
    assert EVENT_TYPES == {
        "bookie_writable",
        "bookie_readonly",
        "bookie_lost",
        "bookie_location",
        "bookie_disk",
        "cluster_view",
        "feature",
    }
    assert REQUEST_TYPES == {"ledger_create", "bookie_replace", "ensemble_check"}
    for obj, expected in EXAMPLES:
        assert isinstance(expected, ClusterEvent) == (obj["type"] in EVENT_TYPES)
        assert isinstance(expected, Request) == (obj["type"] in REQUEST_TYPES)
        assert not isinstance(expected, DeadLetter)


def test_origin_is_not_needed_for_good_records():
    obj, expected = EXAMPLES[2]
    for origin in (Origin.from_file("/data/events.jsonl", 7), Origin.from_kafka("events", 2, 42), Origin.inline()):
        assert parse_record(json.dumps(obj), origin) == expected
