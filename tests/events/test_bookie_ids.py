"""Bookie ids follow BookKeeper's BookieId.validateBookieId exactly (spec bookkeeper-rackaware.md §1.1).

The Java regex ``[a-zA-Z0-9:-_.\\-]+`` holds the RANGE ':'..'_' (0x3A-0x5F), so ``; < = > ? @ [ \\ ] ^ _``
are allowed, while '/', space, '#', ',' and non-ASCII letters are not; ``readonly`` in any letter case is
reserved.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from events import DeadLetter, Reason, fields, is_valid_bookie_id, parse_record
from events.limits import MAX_STRING_CHARS

# An independent statement of the rule, straight from the spec, to compare against.
JAVA_RULE = re.compile(r"[a-zA-Z0-9:-_.\-]+")


def lost(bookie):
    return {"type": "bookie_lost", "cluster": "c1", "time": "2026-11-22T03:00:00Z", "bookie": bookie}


@pytest.mark.parametrize(
    "bookie",
    [
        "bk1:3181",
        "127.0.0.2:3181",
        "bookie-1.example.com:0",
        "a",
        "BK_1",
        "bk@rack",
        "bk[1]",
        "x;y",
        "a<b>c",
        "a=b",
        "what?",
        "back\\slash",
        "caret^",
        "readonly1",
        "read-only",
        "readonl",
        ":",
        "_",
        "@",
        "0",
    ],
)
def test_accepted_ids(bookie):
    assert is_valid_bookie_id(bookie)
    assert parse_record(lost(bookie)).bookie == bookie


@pytest.mark.parametrize(
    ("bookie", "why"),
    [
        ("bk1/3181", 'character "/" at position 3'),
        ("bk 1:3181", 'character " " at position 2'),
        ("bk#1", 'character "#"'),
        ("bk,1", 'character ","'),
        ("bk1:3181 ", "position 8"),
        ("bücher:3181", 'character "ü"'),
        ("bk`1", 'character "`"'),  # 0x60, one past the range
        ("bk{1}", 'character "{"'),
        ("bk\t1", "position 2"),
        ("", "empty"),
        ("readonly", "reserved"),
        ("ReadOnly", "reserved"),
        ("READONLY", "reserved"),
    ],
)
def test_rejected_ids(bookie, why):
    assert not is_valid_bookie_id(bookie)
    dead = parse_record(lost(bookie))
    assert isinstance(dead, DeadLetter)
    assert dead.reason is Reason.INVALID_BOOKIE_ID
    assert dead.detail.startswith("bookie: ")
    assert why in dead.detail


def test_every_bookie_field_is_checked():
    """ensemble, exclude, bookie and both cluster_view lists all apply the rule, naming the position."""
    base = {"cluster": "c1", "time": 0, "request_id": "r1"}
    cases = [
        (
            {
                **base,
                "type": "ensemble_check",
                "ledger_id": 1,
                "ensemble": ["a:1", "b/1"],
                "write_quorum": 1,
                "ack_quorum": 1,
            },
            "ensemble[1]: ",
        ),
        (
            {
                **base,
                "type": "ledger_create",
                "ensemble_size": 1,
                "write_quorum": 1,
                "ack_quorum": 1,
                "exclude": ["ok:1", "ok:2", "readonly"],
            },
            "exclude[2]: ",
        ),
        (
            {
                **base,
                "type": "bookie_replace",
                "ensemble": ["a:1"],
                "bookie": "a 1",
                "write_quorum": 1,
                "ack_quorum": 1,
            },
            "bookie: ",
        ),
        ({"type": "cluster_view", "cluster": "c1", "time": 0, "writable": ["#1"], "readonly": []}, "writable[0]: "),
        (
            {"type": "cluster_view", "cluster": "c1", "time": 0, "writable": [], "readonly": ["a", "b", "c d"]},
            "readonly[2]: ",
        ),
    ]
    for record, prefix in cases:
        dead = parse_record(record)
        assert isinstance(dead, DeadLetter), record
        assert dead.reason is Reason.INVALID_BOOKIE_ID
        assert dead.detail.startswith(prefix), dead.detail


def test_non_string_ids_are_wrong_type():
    for bad in (3181, None, True, ["bk1:3181"], {"host": "bk1"}):
        dead = parse_record(lost(bad))
        assert dead.reason is Reason.WRONG_TYPE, bad
        assert dead.detail.startswith("bookie: expected a bookie id string")


def test_overlong_id_is_too_large_every_time():
    """An id over MAX_STRING_CHARS is rejected even though its characters are fine (and is never memoised)."""
    long_id = "b" * (MAX_STRING_CHARS + 1)
    assert is_valid_bookie_id(long_id)  # BookKeeper's rule has no length limit
    for _ in range(2):
        dead = parse_record(lost(long_id))
        assert dead.reason is Reason.FIELD_TOO_LARGE
        assert dead.detail == f"bookie: at most {MAX_STRING_CHARS} characters allowed, got {MAX_STRING_CHARS + 1}"


@given(st.text(alphabet=st.characters(max_codepoint=0x7F) | st.sampled_from("üλ€"), max_size=12))
def test_matches_the_java_rule(candidate):
    """For any short string, the validator agrees with the spec's regex and the readonly exception."""
    expected = JAVA_RULE.fullmatch(candidate) is not None and candidate.lower() != "readonly"
    assert is_valid_bookie_id(candidate) == expected
    assert is_valid_bookie_id(candidate) == expected  # the memo does not change the answer


def test_a_full_memo_is_cleared_and_answers_stay_right(monkeypatch):
    """The memo of valid ids is bounded; clearing it changes no answer."""
    monkeypatch.setattr(fields, "_VALID_IDS_MAX", 3)
    ids = [f"bk{i}:3181" for i in range(10)]
    for _ in range(2):
        assert all(is_valid_bookie_id(b) for b in ids)
        assert [parse_record(lost(b)).bookie for b in ids] == ids
        assert len(fields.known_bookie_ids()) <= 3
    assert not is_valid_bookie_id("bk 1")
