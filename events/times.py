"""Record times: ISO-8601 with a zone, or epoch milliseconds, to int milliseconds and back.

CONTRACT.md §2: "Times are ISO-8601 strings with a zone or integer epoch milliseconds ... a time
without a zone is invalid." This module is the one place that reads and writes times; the rest of
the engine works in integer epoch milliseconds (UTC) and never reads the wall clock (STYLE R3).

Accepted strings (the grammar, ASCII digits only)::

    YYYY-MM-DD ( "T" | "t" | " " ) hh:mm:ss [ ("." | ",") 1-9 digits ] ( "Z" | "z" | ±hh | ±hhmm | ±hh:mm )

Fractions finer than a millisecond are truncated (towards the past). Rejected: no zone, reduced
precision (``03:00`` without seconds), leap second ``:60``, hour ``24``, impossible dates, zone
offsets of 24 hours or more, times before 1970-01-01T00:00:00Z or after 2262-04-11T23:47:16.854Z
(``MAX_TIME_MS``: the latest time a nanosecond timestamp holds, which Spark's Arrow conversion needs; a
later time would fail a whole micro-batch there instead of becoming one dead letter).

Accepted numbers: non-negative integer epoch milliseconds up to ``MAX_TIME_MS``, also written as a
float without a fraction (``1.7e12``). Rejected: booleans, fractional or non-finite floats,
negative numbers, and digits inside a string.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, date, datetime, timedelta

from events.dead_letter import Reason
from events.errors import EventError, describe
from events.limits import MAX_TIME_MS, MAX_TIME_TEXT

_ISO_TIME = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}(?:[.,][0-9]{1,9})?(?:[Zz]|[+-][0-9]{2}(?::?[0-9]{2})?)"
).fullmatch

_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
_MS_PER_DAY = 86_400_000
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_NAIVE_EPOCH = datetime(1970, 1, 1)
_ONE_MS = timedelta(milliseconds=1)
_fromisoformat = datetime.fromisoformat

_TOO_LATE = f"after {MAX_TIME_TEXT}, the latest time the engine can hold"
_EXPECTED = "expected an ISO-8601 time with a zone (like 2026-11-22T03:00:00.000Z) or epoch milliseconds"


def _invalid(field: str, value: object, why: str = "") -> EventError:
    tail = f" ({why})" if why else ""
    return EventError(Reason.INVALID_TIME, f"{field}: {_EXPECTED}, got {describe(value)}{tail}")


def parse_time_ms(value: object, field: str = "time") -> int:
    """Read a contract time into epoch milliseconds (UTC).

    Cost: O(1); one precompiled regex match for strings.

    Args:
        value: an ISO-8601 string with a zone, or integer epoch milliseconds.
        field: the field name used in the error message.

    Returns:
        Milliseconds since 1970-01-01T00:00:00Z, in ``[0, MAX_TIME_MS]``.

    Raises:
        EventError: (a ``ValueError``) with reason ``INVALID_TIME``, naming what was wrong.

    >>> parse_time_ms("2026-11-22T04:00:00.250+01:00")
    1795316400250
    """
    if type(value) is int:
        if 0 <= value <= MAX_TIME_MS:
            return value
        raise _invalid(field, value, "before 1970" if value < 0 else _TOO_LATE)
    if isinstance(value, str):
        return _parse_iso(value, field)
    if isinstance(value, bool):
        raise _invalid(field, value, "a boolean is not a time")
    if isinstance(value, int):  # an int subclass from a mapping input
        return parse_time_ms(int(value), field)
    if isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            raise _invalid(field, value, "epoch milliseconds must be a whole number")
        return parse_time_ms(int(value), field)
    raise _invalid(field, value)


# The last whole second read on the fast path and its epoch ms. Records arrive roughly in time
# order, so consecutive times usually share their second. A pure memo: one tuple, rebound at once
# (safe across threads), never changes a result.
_last_second: tuple[str, int] = ("", 0)


def _parse_iso(text: str, field: str) -> int:
    global _last_second  # noqa: PLW0603 - the one-entry memo above
    n = len(text)
    # Fast path for the two forms producers write most ("...:00Z", "...:00.000Z"): one slice pins
    # the separators at 4, 7, 10, 13, 16 (and 19); the C parser checks digits, ranges, calendar.
    if ((n == 24 and text[4:20:3] == "--T::.") or (n == 20 and text[4:17:3] == "--T::")) and text[-1] == "Z":
        fraction = text[20:23]  # "" when n == 20
        if n == 20 or (fraction.isdigit() and fraction.isascii()):
            second = text[:19]
            memo = _last_second
            if second == memo[0]:
                base = memo[1]
            else:
                try:
                    base = (_fromisoformat(second) - _NAIVE_EPOCH) // _ONE_MS
                except ValueError:
                    base = -1  # the general path below says what is wrong
                else:
                    _last_second = (second, base)
            if base >= 0:
                ms = base + int(fraction) if fraction else base
                if ms <= MAX_TIME_MS:
                    return ms
    # General path: the grammar is ours (the module docstring); datetime.fromisoformat accepts more
    # (basic and week dates, any separator, no zone), so it only runs after the match.
    if _ISO_TIME(text) is None:
        raise _invalid(field, text, _iso_hint(text))
    if text[-1] == "z":
        text = text[:-1] + "Z"
    try:
        # Flooring the whole difference equals truncating the fraction: the rest is whole seconds.
        ms = (_fromisoformat(text) - _EPOCH) // _ONE_MS
    except ValueError as exc:  # a date that does not exist, hour 24, second 60, offset >= 24h
        why = "zone offset must be less than 24 hours" if "offset" in str(exc) else str(exc)
        raise _invalid(field, text, why) from None
    if not 0 <= ms <= MAX_TIME_MS:
        raise _invalid(field, text, "before 1970" if ms < 0 else _TOO_LATE)
    return ms


_HINT = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}(?:[.,]([0-9]+))?(.*)", re.ASCII | re.DOTALL
).fullmatch


def _iso_hint(text: str) -> str:
    """Say why a string is not an accepted time (error path only)."""
    if text.strip() != text:
        return "surrounding whitespace"
    if text.isascii() and text.isdigit():
        return "epoch milliseconds must be a JSON number, not a string"
    m = _HINT(text)
    if m is None:
        return "not in the accepted form YYYY-MM-DDThh:mm:ss[.fff]<zone>"
    fraction, zone = m.groups()
    if fraction is not None and len(fraction) > 9:
        return "at most 9 fraction digits"
    if not zone:
        return "no zone; add Z or an offset such as +00:00"
    if zone[:1] in ".,":
        return "a fraction of a second must be 1 to 9 ASCII digits"
    return f"the zone must be Z, +hh, +hhmm or +hh:mm (or with -), got {describe(zone)}"


def format_time(ms: int) -> str:
    """Render epoch milliseconds as ISO-8601 UTC with milliseconds and ``Z``.

    Args:
        ms: epoch milliseconds in ``[0, MAX_TIME_MS]`` (a valid ``time_ms``).

    Returns:
        For example ``"2026-11-22T03:00:00.000Z"``; ``parse_time_ms(format_time(ms)) == ms``.

    Raises:
        EventError: (a ``ValueError``) with reason ``INVALID_TIME`` when ``ms`` is not an int in range.
    """
    if isinstance(ms, bool) or not isinstance(ms, int) or not 0 <= ms <= MAX_TIME_MS:
        raise EventError(
            Reason.INVALID_TIME,
            f"ms: expected integer epoch milliseconds between 0 and {MAX_TIME_MS}, got {describe(ms)}",
        )
    days, rest = divmod(int(ms), _MS_PER_DAY)
    d = date.fromordinal(days + _EPOCH_ORDINAL)
    hour, rest = divmod(rest, 3_600_000)
    minute, rest = divmod(rest, 60_000)
    second, milli = divmod(rest, 1000)
    return f"{d.year:04d}-{d.month:02d}-{d.day:02d}T{hour:02d}:{minute:02d}:{second:02d}.{milli:03d}Z"


__all__ = ["format_time", "parse_time_ms"]
