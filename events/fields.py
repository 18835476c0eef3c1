"""Single-field checks: each reads one JSON value and returns it typed, or raises EventError.

CONTRACT.md §2 (field types), spec bookkeeper-rackaware.md §1.1 (bookie ids) and §1.2 (locations),
limits from :mod:`events.limits`. Cross-field rules live in :mod:`events.validate`.

Messages follow one shape: ``"<field>: expected <what>, got <value>"``. Hot paths are straight-line
checks with precompiled patterns; messages are only built when a check fails.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

from events.dead_letter import Reason
from events.errors import EventError, describe
from events.limits import (
    MAX_FEATURE_VALUE,
    MAX_LONG,
    MAX_METADATA_ENTRIES,
    MAX_METADATA_VALUE_BYTES,
    MAX_STRING_CHARS,
    MIN_FEATURE_VALUE,
)

MISSING = object()
"""Sentinel for an absent key (``obj.get(key, MISSING)``)."""

# Spec bookkeeper-rackaware.md §1.1: BookKeeper's regex is [a-zA-Z0-9:-_.\-]+ where ":-_" is the
# RANGE 0x3A..0x5F (: ; < = > ? @ A-Z [ \ ] ^ _). Written out here so the range is explicit.
_BOOKIE_ID = re.compile(r"[A-Za-z0-9.\-\x3a-\x5f]+").fullmatch
_BOOKIE_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789.-" + "".join(chr(c) for c in range(0x3A, 0x60)))
_LIST_TYPES = (list, tuple)
_compact_json = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


# Ids already found valid. A cluster has at most thousands of bookies and every event names one,
# so a set lookup replaces most regex matches. Bounded: cleared when full. It memoises a pure
# function, so results never depend on what was seen before.
_VALID_IDS: set[str] = set()
_VALID_IDS_MAX = 65_536


def is_valid_bookie_id(value: object) -> bool:
    """True when BookKeeper's ``BookieId.validateBookieId`` would accept ``value`` (spec §1.1).

    Non-empty, only letters, digits, ``.``, ``-`` and the characters 0x3A-0x5F
    (``: ; < = > ? @ [ \\ ] ^ _``), and not ``readonly`` in any letter case. Length is not part
    of BookKeeper's rule (the parser also applies ``MAX_STRING_CHARS``).
    """
    if not isinstance(value, str):
        return False
    if value in _VALID_IDS:
        return True
    if _BOOKIE_ID(value) is None or (len(value) == 8 and value.lower() == "readonly"):
        return False
    if len(value) <= MAX_STRING_CHARS:  # the parser's fast paths trust the set for length too
        if len(_VALID_IDS) >= _VALID_IDS_MAX:
            _VALID_IDS.clear()
        _VALID_IDS.add(str(value))
    return True


def known_bookie_ids() -> set[str]:
    """The memo of valid ids of at most MAX_STRING_CHARS characters (for the parser's fast paths).

    Membership implies validity; absence means nothing. Never add to it from outside.
    """
    return _VALID_IDS


def _surrogate_error(key: str, value: str) -> EventError:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        where = f" at character {exc.start}"
    else:
        where = ""
    return EventError(
        Reason.INVALID_ENCODING, f"{key}: holds an unpaired surrogate{where}; strings must be valid Unicode"
    )


def _check_unicode(key: str, value: str) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise _surrogate_error(key, value) from None


def text(key: str, value: object, limit: int = MAX_STRING_CHARS) -> str:
    """A non-empty string of at most ``limit`` characters, valid Unicode."""
    if isinstance(value, str):
        if 0 < len(value) <= limit:
            if not value.isascii():
                _check_unicode(key, value)
            return value
        if not value:
            raise EventError(Reason.EMPTY_FIELD, f'{key}: expected a non-empty string, got ""')
        raise EventError(Reason.FIELD_TOO_LARGE, f"{key}: at most {limit} characters allowed, got {len(value)}")
    raise EventError(Reason.WRONG_TYPE, f"{key}: expected a string, got {describe(value)}")


def optional_text(key: str, value: object, limit: int = MAX_STRING_CHARS) -> str | None:
    """Like :func:`text`, but absent (``MISSING``) or null gives None."""
    if value is None or value is MISSING:
        return None
    if not isinstance(value, str):
        raise EventError(Reason.WRONG_TYPE, f"{key}: expected a string or null, got {describe(value)}")
    return text(key, value, limit)


def integer(key: str, value: object) -> int:
    """A JSON integer; booleans (Python ints) and floats are rejected."""
    if type(value) is int:
        return value
    if isinstance(value, int) and not isinstance(value, bool):  # an int subclass from a mapping
        return int(value)
    raise EventError(Reason.WRONG_TYPE, f"{key}: expected an integer, got {describe(value)}")


def ledger_id(key: str, value: object, *, nullable: bool) -> int | None:
    """A ledger id: an integer in ``[0, MAX_LONG]``; null or absent allowed when ``nullable``."""
    if value is None or value is MISSING:
        if nullable:
            return None
        raise EventError(Reason.WRONG_TYPE, f"{key}: expected a non-negative integer, got null")
    if type(value) is not int:
        if isinstance(value, bool) or not isinstance(value, int):
            expected = "a non-negative integer or null" if nullable else "a non-negative integer"
            raise EventError(Reason.WRONG_TYPE, f"{key}: expected {expected}, got {describe(value)}")
        value = int(value)
    if value < 0:
        raise EventError(Reason.INVALID_LEDGER_ID, f"{key}: expected a non-negative integer, got {value}")
    if value > MAX_LONG:
        raise EventError(Reason.FIELD_TOO_LARGE, f"{key}: at most {MAX_LONG} (a Java long), got {describe(value)}")
    return value


def bookie_id(key: str, value: object) -> str:
    """A bookie id BookKeeper accepts (spec bookkeeper-rackaware.md §1.1), at most MAX_STRING_CHARS."""
    if isinstance(value, str):
        if len(value) <= MAX_STRING_CHARS and is_valid_bookie_id(value):
            return value
        if len(value) > MAX_STRING_CHARS:
            raise EventError(
                Reason.FIELD_TOO_LARGE, f"{key}: at most {MAX_STRING_CHARS} characters allowed, got {len(value)}"
            )
        raise EventError(Reason.INVALID_BOOKIE_ID, f"{key}: {_bookie_id_problem(value)}")
    raise EventError(Reason.WRONG_TYPE, f"{key}: expected a bookie id string, got {describe(value)}")


def _bookie_id_problem(value: str) -> str:
    """Say why BookKeeper rejects ``value`` (error path only)."""
    if not value:
        return 'expected a bookie id such as "bk1:3181", got "" (empty)'
    if value.lower() == "readonly":
        return f'{describe(value)} is reserved by BookKeeper ("readonly" in any letter case is not a bookie id)'
    for i, ch in enumerate(value):
        if ch.lower() not in _BOOKIE_CHARS:
            return (
                f"{describe(value)} is not a valid bookie id: character {describe(ch)} at position {i} "
                "is not allowed (allowed: letters, digits, '.', '-' and ':' to '_' (0x3A-0x5F); "
                "spec bookkeeper-rackaware.md §1.1)"
            )
    return f"{describe(value)} is not a valid bookie id"  # unreachable while the rule and the set agree


def bookie_ids(key: str, value: object, limit: int) -> tuple[str, ...]:
    """A list of valid bookie ids of at most ``limit`` items (duplicates are the caller's rule).

    Cost: O(n) regex matches.
    """
    if not isinstance(value, _LIST_TYPES):
        raise EventError(Reason.WRONG_TYPE, f"{key}: expected a list of bookie ids, got {describe(value)}")
    if len(value) > limit:
        raise EventError(Reason.FIELD_TOO_LARGE, f"{key}: at most {limit} bookies allowed, got {len(value)}")
    for item in value:
        if not (isinstance(item, str) and len(item) <= MAX_STRING_CHARS and is_valid_bookie_id(item)):
            for position, bad in enumerate(value):
                bookie_id(f"{key}[{position}]", bad)  # raises at the first bad item, with its position
    return tuple(value)


def location(key: str, value: object) -> str | None:
    """A network location starting with ``/`` (spec bookkeeper-rackaware.md §1.2), or None for null."""
    if isinstance(value, str):
        if value[:1] == "/" and len(value) <= MAX_STRING_CHARS:
            if not value.isascii():
                _check_unicode(key, value)
            return value
        if len(value) > MAX_STRING_CHARS:
            raise EventError(
                Reason.FIELD_TOO_LARGE, f"{key}: at most {MAX_STRING_CHARS} characters allowed, got {len(value)}"
            )
        raise EventError(
            Reason.INVALID_LOCATION,
            f'{key}: expected a network location starting with "/" (like "/region-a/rack1"), got {describe(value)}',
        )
    if value is None or value is MISSING:
        return None
    raise EventError(Reason.WRONG_TYPE, f"{key}: expected a location string or null, got {describe(value)}")


def rack(key: str, value: object) -> str | None:
    """Pulsar rack info's rack (CONTRACT.md §1 `rack_info`): any string, kept as given, or None for null.

    The cluster model reads it as Pulsar reads rack info: `rack0` is `/rack0`, and an empty rack or
    `/` is the policy's default location.
    """
    if isinstance(value, str):
        if len(value) > MAX_STRING_CHARS:
            raise EventError(
                Reason.FIELD_TOO_LARGE, f"{key}: at most {MAX_STRING_CHARS} characters allowed, got {len(value)}"
            )
        if not value.isascii():
            _check_unicode(key, value)
        return value
    if value is None or value is MISSING:
        return None
    raise EventError(Reason.WRONG_TYPE, f"{key}: expected a rack string or null, got {describe(value)}")


def custom_metadata(key: str, value: object) -> tuple[tuple[str, bytes], ...]:
    """Request custom metadata as ``(key, UTF-8 bytes)`` pairs sorted by key (CONTRACT.md §1, §2).

    A string value is encoded as UTF-8. An object or array value is serialised as compact JSON and
    encoded, so Pulsar's ``EnsemblePlacementPolicyConfig`` may be written inline as an object.
    Null or absent gives ``()``.
    """
    if value is None or value is MISSING:
        return ()
    if not isinstance(value, Mapping):
        raise EventError(Reason.WRONG_TYPE, f"{key}: expected an object of string values, got {describe(value)}")
    if len(value) > MAX_METADATA_ENTRIES:
        raise EventError(
            Reason.FIELD_TOO_LARGE, f"{key}: at most {MAX_METADATA_ENTRIES} entries allowed, got {len(value)}"
        )
    pairs = []
    for name, item in value.items():
        if not (isinstance(name, str) and 0 < len(name) <= MAX_STRING_CHARS and name.isascii()):
            text(f"{key} key", name)  # raises unless the key is a fine non-ASCII string
        where = f"{key}.{name}"
        if isinstance(item, str):
            try:
                encoded = item.encode("utf-8")
            except UnicodeEncodeError:
                raise _surrogate_error(where, item) from None
        elif isinstance(item, (dict, list)):
            try:
                encoded = _compact_json(item).encode("utf-8")
            except UnicodeEncodeError:
                raise EventError(
                    Reason.INVALID_ENCODING, f"{where}: holds an unpaired surrogate; strings must be valid Unicode"
                ) from None
            except (TypeError, ValueError, RecursionError) as exc:  # only from mapping input
                raise EventError(Reason.WRONG_TYPE, f"{where}: the value cannot be written as JSON ({exc})") from None
        else:
            raise EventError(
                Reason.WRONG_TYPE,
                f"{where}: expected a string (or an object or array, stored as compact JSON), got {describe(item)}",
            )
        if len(encoded) > MAX_METADATA_VALUE_BYTES:
            raise EventError(
                Reason.FIELD_TOO_LARGE,
                f"{where}: at most {MAX_METADATA_VALUE_BYTES} bytes allowed, got {len(encoded)}",
            )
        pairs.append((name, encoded))
    pairs.sort()  # keys are unique, so the bytes are never compared
    return tuple(pairs)


def feature_value(key: str, value: object) -> int:
    """A feature value: an integer in Java's ``int`` range (BookKeeper's ``Feature.availability()``)."""
    number = integer(key, value)
    if not MIN_FEATURE_VALUE <= number <= MAX_FEATURE_VALUE:
        raise EventError(
            Reason.FIELD_TOO_LARGE,
            f"{key}: expected an integer between {MIN_FEATURE_VALUE} and {MAX_FEATURE_VALUE} (a Java int), "
            f"got {describe(number)}",
        )
    return number


__all__ = [
    "MISSING",
    "bookie_id",
    "bookie_ids",
    "custom_metadata",
    "feature_value",
    "integer",
    "is_valid_bookie_id",
    "known_bookie_ids",
    "ledger_id",
    "location",
    "optional_text",
    "text",
]
