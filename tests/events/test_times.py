"""Times: ISO-8601 with a zone or epoch milliseconds in, epoch ms out (CONTRACT.md §2, events/times.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from events import EventError, Reason, format_time, parse_time_ms
from events.limits import MAX_TIME_MS, MAX_TIME_TEXT

BASE = 1_795_316_400_000  # 2026-11-22T03:00:00Z


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-11-22T03:00:00Z", BASE),
        ("2026-11-22T03:00:00.000Z", BASE),
        ("2026-11-22T03:00:00.250Z", BASE + 250),
        ("2026-11-22T03:00:00.5Z", BASE + 500),
        ("2026-11-22T03:00:00.123456Z", BASE + 123),  # microseconds truncated
        ("2026-11-22T03:00:00.999999999Z", BASE + 999),  # nanoseconds truncated, never rounded up
        ("2026-11-22T03:00:00,250Z", BASE + 250),  # ISO-8601 allows a decimal comma
        ("2026-11-22t03:00:00z", BASE),
        ("2026-11-22 03:00:00Z", BASE),
        ("2026-11-22T04:00:00+01:00", BASE),
        ("2026-11-22T04:00:00+0100", BASE),
        ("2026-11-22T04:00:00+01", BASE),
        ("2026-11-22T04:30:00.250+01:30", BASE + 250),
        ("2026-11-21T22:00:00-05:00", BASE),
        ("2026-11-22T03:00:00-00:00", BASE),
        ("1970-01-01T00:00:00Z", 0),
        ("1970-01-01T01:00:00+01:00", 0),
        ("2024-02-29T00:00:00Z", 1_709_164_800_000),
        ("2262-04-11T23:47:16.854Z", MAX_TIME_MS),
        ("2262-04-11T23:47:16.854999999Z", MAX_TIME_MS),  # truncated to the last millisecond held
        ("2262-04-12T00:47:16.854+01:00", MAX_TIME_MS),
    ],
)
def test_accepts_iso_8601_with_a_zone(text, expected):
    assert parse_time_ms(text) == expected


@pytest.mark.parametrize("value", [0, 1, BASE, MAX_TIME_MS, 1.7e12, float(BASE)])
def test_accepts_epoch_milliseconds(value):
    assert parse_time_ms(value) == int(value)
    assert type(parse_time_ms(value)) is int


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("2026-11-22T03:00:00", "no zone"),
        ("2026-11-22T03:00:00.250", "no zone"),
        ("2026-11-22", "accepted form"),
        ("2026-11-22T03:00Z", "accepted form"),  # seconds are required
        ("20261122T030000Z", "accepted form"),  # basic format: datetime.fromisoformat takes it, we do not
        ("2026-W47-7T03:00:00Z", "accepted form"),
        ("2026-11-22X03:00:00Z", "accepted form"),
        ("2026-11-22T03:00:00 UTC", "zone must be"),
        ("2026-11-22T03:00:00+1", "zone must be"),
        ("2026-11-22T03:00:00.1234567891Z", "at most 9 fraction digits"),
        (" 2026-11-22T03:00:00Z", "whitespace"),
        ("2026-11-22T03:00:00Z\n", "whitespace"),
        ("２０２６-11-22T03:00:00.000Z", "accepted form"),  # full-width digits
        ("2026-11-22T03:00:00.٣٣٣Z", "ASCII digits"),  # Arabic-Indic digits in the fraction
        ("2026-11-22T03:00:00.Z", "ASCII digits"),  # a dot without digits
        ("2026-02-29T00:00:00Z", "day is out of range"),
        ("2026-02-29T00:00:00.000Z", "day is out of range"),
        ("2026-13-01T00:00:00Z", "month"),
        ("2026-11-22T24:00:00Z", "hour"),
        ("2026-11-22T23:59:60Z", "second"),  # leap seconds are not accepted
        ("2026-11-22T03:00:00+24:00", "less than 24 hours"),
        ("1969-12-31T23:59:59.999Z", "before 1970"),
        ("1970-01-01T00:30:00+01:00", "before 1970"),
        ("9999-12-31T23:59:59.999Z", "after 2262-04-11T23:47:16.854Z, the latest time the engine can hold"),
        ("2262-04-11T23:47:16.855Z", "after 2262-04-11T23:47:16.854Z"),
        ("2262-04-11T23:47:16.854-00:01", "after 2262-04-11T23:47:16.854Z"),
        ("0001-01-01T00:00:00Z", "before 1970"),
        ("1677-09-21T00:12:43.145Z", "before 1970"),
        ("1795316400000", "JSON number, not a string"),
        ("", "accepted form"),
        (True, "boolean"),
        (False, "boolean"),
        (-1, "before 1970"),
        (MAX_TIME_MS + 1, "after 2262-04-11T23:47:16.854Z"),
        (253_402_300_799_999, "after 2262-04-11T23:47:16.854Z"),  # 9999-12-31T23:59:59.999Z
        (2**63, "after 2262-04-11T23:47:16.854Z"),
        (1.5, "whole number"),
        (float("nan"), "whole number"),
        (float("inf"), "whole number"),
        (None, "got null"),
        ([BASE], "got a list"),
        ({"ms": BASE}, "got an object"),
    ],
)
def test_rejects_with_a_reason(value, why):
    with pytest.raises(EventError) as caught:
        parse_time_ms(value)
    assert caught.value.reason is Reason.INVALID_TIME
    assert isinstance(caught.value, ValueError)
    assert why in str(caught.value)
    assert str(caught.value).startswith("time: expected an ISO-8601 time with a zone")


def test_message_names_the_field_given():
    with pytest.raises(EventError, match=r"^start: "):
        parse_time_ms("yesterday", field="start")


def test_the_second_memo_never_changes_a_result():
    """Alternating seconds and fractions read back exactly (the fast path keeps one second in memory)."""
    texts = [
        "2026-11-22T03:00:00.001Z",
        "2026-11-22T03:00:01.002Z",
        "2026-11-22T03:00:00.003Z",
        "2026-11-22T03:00:00Z",
        "2026-11-22T03:00:01Z",
        "2026-11-22T03:00:00.010Z",
    ]
    assert [parse_time_ms(t) for t in texts] == [BASE + 1, BASE + 1002, BASE + 3, BASE, BASE + 1000, BASE + 10]
    with pytest.raises(EventError):  # a bad date after a good one on the same fast path
        parse_time_ms("2026-02-30T03:00:00.001Z")
    assert parse_time_ms("2026-11-22T03:00:00.001Z") == BASE + 1


@pytest.mark.parametrize(
    ("ms", "text"),
    [
        (0, "1970-01-01T00:00:00.000Z"),
        (BASE, "2026-11-22T03:00:00.000Z"),
        (BASE + 7, "2026-11-22T03:00:00.007Z"),
        (MAX_TIME_MS, "2262-04-11T23:47:16.854Z"),
    ],
)
def test_format_time(ms, text):
    assert format_time(ms) == text


@pytest.mark.parametrize("bad", [-1, MAX_TIME_MS + 1, True, 1.0, "0", None])
def test_format_time_rejects_what_is_not_a_time_ms(bad):
    with pytest.raises(EventError) as caught:
        format_time(bad)
    assert caught.value.reason is Reason.INVALID_TIME


@given(st.integers(0, MAX_TIME_MS))
def test_format_then_parse_is_identity(ms):
    """Every valid time_ms survives format_time and parse_time_ms unchanged."""
    assert parse_time_ms(format_time(ms)) == ms


@given(
    st.datetimes(min_value=datetime(1971, 1, 1), max_value=datetime(2262, 4, 10)),
    st.integers(-23 * 60 - 59, 23 * 60 + 59),
    st.sampled_from(["seconds", "milliseconds", "microseconds"]),
)
def test_agrees_with_datetime_for_any_offset(naive, offset_minutes, timespec):
    """Python's own isoformat() output, with any zone offset, reads as the exact instant (floored to ms)."""
    text = naive.replace(tzinfo=timezone(timedelta(minutes=offset_minutes))).isoformat(timespec=timespec)
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    assert parse_time_ms(text) == (datetime.fromisoformat(text) - epoch) // timedelta(milliseconds=1)


def test_every_accepted_time_fits_a_nanosecond_timestamp():
    """Spark's Arrow conversion casts timestamps to nanoseconds in a signed 64-bit integer (pandas'
    Timestamp range): the latest accepted millisecond fits, the next one does not."""
    assert MAX_TIME_MS * 1_000_000 <= 2**63 - 1 < (MAX_TIME_MS + 1) * 1_000_000
    assert format_time(MAX_TIME_MS) == MAX_TIME_TEXT
