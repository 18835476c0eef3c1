"""Raw input -> typed record or dead letter, never an exception (CONTRACT.md §2; STYLE R7).

:func:`parse_record` is the one boundary where bad input becomes a value: it reads JSON text (str
or UTF-8 bytes) or an already decoded mapping, checks it like a strict server and returns one of the
records of :mod:`events.model` or a :class:`~events.dead_letter.DeadLetter` carrying the raw input,
its source and a precise reason. Checks run in a fixed order and the first failure is reported:

1. size (``RECORD_TOO_LARGE``), UTF-8 (``INVALID_ENCODING``), JSON (``INVALID_JSON``), object
   (``NOT_AN_OBJECT``);
2. ``type`` (``MISSING_FIELD``, ``WRONG_TYPE``, ``UNKNOWN_TYPE``);
3. unknown fields (``UNKNOWN_FIELD``): a strict server rejects typos such as ``ensemble_szie``;
4. ``cluster``, ``time``, then the type's fields in the contract's order, each checked alone
   (:mod:`events.fields`), then the cross-field rules (:mod:`events.validate`).

Cost: O(size of the record); dominated by the ``json`` decode, then straight-line checks with
precompiled patterns. Messages are built only for bad records.

Repeated keys: a JSON key given twice keeps its last value (Python's ``json``); the streaming job
routes by Spark's ``json_tuple``, which keeps the last value that is not null. Detecting repeats
exactly would decode every object as a pair list and build each mapping a second time, on every
record, so it is not done; a caller that routes on a field read by Spark must compare it with the
parsed record (``streaming`` does so for ``cluster``, and for ``type`` with shards).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from difflib import get_close_matches

from events import fields, validate
from events.dead_letter import DeadLetter, Reason
from events.errors import EventError, describe
from events.fields import MISSING, bookie_id, bookie_ids, location, optional_text, rack, text
from events.limits import (
    MAX_CLUSTER_CHARS,
    MAX_ENSEMBLE_SIZE,
    MAX_EXCLUDE,
    MAX_LONG,
    MAX_RECORD_BYTES,
    MAX_STRING_CHARS,
    MAX_VIEW_BOOKIES,
)
from events.model import (
    EVENT_TYPES,
    INLINE,
    RECORD_CLASSES,
    BookieDisk,
    BookieLocation,
    BookieLost,
    BookieReadonly,
    BookieReplace,
    BookieWritable,
    ClusterView,
    EnsembleCheck,
    FeatureSet,
    LedgerCreate,
    Origin,
    Record,
    positional_builder,
)
from events.times import parse_time_ms

_JSON_WHITESPACE = " \t\n\r"


class _NotJson(ValueError):
    """NaN, Infinity or -Infinity: Python's json reads them, strict JSON has no such values."""


def _reject_constant(name: str) -> object:
    raise _NotJson(name)


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)
_raw_decode = _DECODER.raw_decode
_decode = _DECODER.decode

_COMMON = ("type", "cluster", "time")
FIELDS: dict[str, tuple[str, ...]] = {
    "bookie_writable": (*_COMMON, "bookie", "location", "hostname", "group"),
    "bookie_readonly": (*_COMMON, "bookie"),
    "bookie_lost": (*_COMMON, "bookie"),
    "bookie_location": (*_COMMON, "bookie", "location", "hostname", "group"),
    "bookie_disk": (*_COMMON, "bookie", "free_disk", "total_disk"),
    "cluster_view": (*_COMMON, "writable", "readonly"),
    "feature": (*_COMMON, "name", "value"),
    "ledger_create": (
        *_COMMON,
        "request_id",
        "ledger_id",
        "ensemble_size",
        "write_quorum",
        "ack_quorum",
        "custom_metadata",
        "exclude",
    ),
    "bookie_replace": (
        *_COMMON,
        "request_id",
        "ledger_id",
        "ensemble",
        "bookie",
        "write_quorum",
        "ack_quorum",
        "exclude",
        "custom_metadata",
    ),
    "ensemble_check": (*_COMMON, "request_id", "ledger_id", "ensemble", "write_quorum", "ack_quorum"),
}
"""Every field each record type accepts, in the contract's order (CONTRACT.md §2)."""

_ALLOWED = {kind: frozenset(names) for kind, names in FIELDS.items()}


def parse_record(raw: str | bytes | Mapping, origin: Origin = INLINE) -> Record | DeadLetter:
    """Parse one input record into a typed record, or a dead letter saying why it cannot be used.

    Never raises for any ``raw`` (str, bytes, bytearray, memoryview, mapping or anything else) and
    never drops input: every call returns a record or a :class:`DeadLetter`.

    Cost: O(size of the record); dominated by the ``json.loads``, then one check per field.

    Args:
        raw: one JSON object as text or UTF-8 bytes (a JSON-lines line, a Kafka value), or a
            mapping already decoded from JSON. A mapping skips the ``MAX_RECORD_BYTES`` check.
        origin: where the record came from; copied into a dead letter's ``source``.

    Returns:
        A record of :data:`events.RECORD_CLASSES`, or a :class:`DeadLetter`.
    """
    obj = None
    try:
        obj = raw if type(raw) is dict else _load(raw)
        kind = obj.get("type", MISSING)
        build = _BUILDERS.get(kind) if isinstance(kind, str) else None
        if build is None:
            raise _type_error(kind)
        if not _ALLOWED[kind].issuperset(obj):
            raise _unknown_fields(obj, kind)
        try:
            return build(obj)
        except KeyError as exc:  # builders read required fields as obj[key]
            raise EventError(Reason.MISSING_FIELD, f"{exc.args[0]}: required for {kind} but missing") from None
    except EventError as exc:
        return _dead_letter(raw, origin, exc, obj)


# -- decoding ------------------------------------------------------------------------------------


def _load(raw: object) -> dict:
    """Decode ``raw`` into a JSON object (dict), or raise EventError."""
    if isinstance(raw, str):
        text_ = raw
        if len(text_) * 4 > MAX_RECORD_BYTES:  # only long strings pay for measuring their UTF-8 size
            size = len(text_.encode("utf-8", "surrogatepass"))
            if size > MAX_RECORD_BYTES:
                raise EventError(
                    Reason.RECORD_TOO_LARGE, f"record: at most {MAX_RECORD_BYTES} bytes allowed, got {size}"
                )
    elif isinstance(raw, (bytes, bytearray, memoryview)):
        data = raw if isinstance(raw, bytes) else bytes(raw)
        if len(data) > MAX_RECORD_BYTES:
            raise EventError(
                Reason.RECORD_TOO_LARGE, f"record: at most {MAX_RECORD_BYTES} bytes allowed, got {len(data)}"
            )
        try:
            text_ = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise EventError(
                Reason.INVALID_ENCODING, f"record: not valid UTF-8 at byte {exc.start} ({exc.reason})"
            ) from None
    elif isinstance(raw, Mapping):
        return dict(raw)
    else:
        raise EventError(
            Reason.NOT_AN_OBJECT,
            f"record: expected JSON text (str or bytes) or a mapping, got a Python {type(raw).__name__}",
        )
    try:
        try:
            obj, end = _raw_decode(text_)
        except json.JSONDecodeError:
            obj = _decode(text_)  # leading whitespace is fine; anything else raises the precise error
        else:
            if end != len(text_) and text_[end:].strip(_JSON_WHITESPACE):
                raise json.JSONDecodeError("Extra data", text_, len(text_) - len(text_[end:].lstrip(_JSON_WHITESPACE)))
    except _NotJson as exc:
        raise EventError(
            Reason.INVALID_JSON, f"record: {exc} is not valid JSON (strict JSON has no NaN or Infinity)"
        ) from None
    except json.JSONDecodeError as exc:
        if not text_.strip(_JSON_WHITESPACE):
            raise EventError(Reason.INVALID_JSON, "record: empty; expected one JSON object") from None
        raise EventError(Reason.INVALID_JSON, f"record: not valid JSON: {exc}") from None
    except RecursionError:
        raise EventError(Reason.INVALID_JSON, "record: JSON nested too deeply to read") from None
    except ValueError as exc:  # an integer longer than Python's int/str digit limit
        raise EventError(Reason.FIELD_TOO_LARGE, f"record: a number is too long to read ({exc})") from None
    if type(obj) is not dict:
        raise EventError(Reason.NOT_AN_OBJECT, f"record: expected a JSON object, got {describe(obj)}")
    return obj


def _type_error(kind: object) -> EventError:
    if kind is MISSING:
        return EventError(Reason.MISSING_FIELD, f"type: required but missing; one of {_type_list()}")
    if not isinstance(kind, str):
        return EventError(Reason.WRONG_TYPE, f"type: expected a string, one of {_type_list()}; got {describe(kind)}")
    guess = get_close_matches(kind, list(RECORD_CLASSES), n=1) if len(kind) <= 64 else []
    hint = f' (did you mean "{guess[0]}"?)' if guess else ""
    return EventError(Reason.UNKNOWN_TYPE, f"type: expected one of {_type_list()}, got {describe(kind)}{hint}")


def _type_list() -> str:
    return ", ".join(RECORD_CLASSES)


def _unknown_fields(obj: dict, kind: str) -> EventError:
    allowed = _ALLOWED[kind]
    unknown = [key for key in obj if key not in allowed]
    first = unknown[0]
    named = first if isinstance(first, str) and len(first) <= 64 and _is_unicode(first) else describe(first)
    guess = get_close_matches(first, FIELDS[kind], n=1) if named is first else []
    hint = f' (did you mean "{guess[0]}"?)' if guess else ""
    more = ""
    if len(unknown) > 1:
        more = f"; also unknown: {', '.join(describe(key) for key in unknown[1:6])}" + (
            ", ..." if len(unknown) > 6 else ""
        )
    return EventError(
        Reason.UNKNOWN_FIELD,
        f"{named}: not a field of {kind}{hint}{more}; {kind} has: {', '.join(FIELDS[kind])}",
    )


# -- builders, one per record type (CONTRACT.md §2) ------------------------------------------------
# Fast tests: each field has an inline fast test that accepts only values the
# careful check in events.fields / events.validate also accepts; anything else goes to that check,
# which returns the value or raises the precise error. A missing field surfaces as KeyError from
# obj[...] and parse_record turns it into MISSING_FIELD. The positional builders skip the dataclass
# __init__ (model.positional_builder): arguments follow the class's field order.
# Statements run in order, so the first failure reported is deterministic: cluster, time, then the
# type's fields as written below, then the cross-field rules.

_new_bookie_writable = positional_builder(BookieWritable)
_new_bookie_readonly = positional_builder(BookieReadonly)
_new_bookie_lost = positional_builder(BookieLost)
_new_bookie_location = positional_builder(BookieLocation)
_new_bookie_disk = positional_builder(BookieDisk)
_new_cluster_view = positional_builder(ClusterView)
_new_feature = positional_builder(FeatureSet)
_new_ledger_create = positional_builder(LedgerCreate)
_new_bookie_replace = positional_builder(BookieReplace)
_new_ensemble_check = positional_builder(EnsembleCheck)

_VALID_IDS = fields.known_bookie_ids()
_NOTHING: frozenset[str] = frozenset()


def _cluster(obj: dict) -> str:
    value = obj["cluster"]
    if type(value) is str and 0 < len(value) <= MAX_CLUSTER_CHARS and value.isascii():
        return value
    return text("cluster", value, MAX_CLUSTER_CHARS)


def _bookie(value: object, key: str = "bookie") -> str:
    if type(value) is str and value in _VALID_IDS:
        return value
    return bookie_id(key, value)


def _request_id(obj: dict) -> str:
    value = obj["request_id"]
    if type(value) is str and 0 < len(value) <= MAX_STRING_CHARS and value.isascii():
        return value
    return text("request_id", value)


def _ledger_id(value: object, *, nullable: bool = True) -> int | None:
    if (type(value) is int and 0 <= value <= MAX_LONG) or (value is None and nullable):
        return value
    return fields.ledger_id("ledger_id", value, nullable=nullable)


def _location(value: object) -> str | None:
    if value is None or (
        type(value) is str and value[:1] == "/" and len(value) <= MAX_STRING_CHARS and value.isascii()
    ):
        return value
    return location("location", value)


def _rack(value: object) -> str | None:
    if value is None or (type(value) is str and len(value) <= MAX_STRING_CHARS and value.isascii()):
        return value
    return rack("location", value)


def _optional_text(obj: dict, key: str) -> str | None:
    value = obj.get(key)
    if value is None or (type(value) is str and 0 < len(value) <= MAX_STRING_CHARS and value.isascii()):
        return value
    return optional_text(key, value)


def _bookie_list(value: object, key: str, limit: int) -> tuple[str, ...]:
    """Valid bookie ids, duplicates allowed (the caller's rule)."""
    if type(value) is list and len(value) <= limit:
        try:
            if _VALID_IDS.issuperset(value):  # one C-level scan when every id was seen before
                return tuple(value)
        except TypeError:  # an unhashable item: the careful check names it
            pass
    return bookie_ids(key, value, limit)


def _ensemble(obj: dict) -> tuple[str, ...]:
    members = _bookie_list(obj["ensemble"], "ensemble", MAX_ENSEMBLE_SIZE)
    if members and len(set(members)) == len(members):
        return members
    return validate.ensemble(members)


def _quorums(size: object, quorum: object, acks: object, size_name: str) -> tuple[int, int, int]:
    """``(ensemble_size, write_quorum, ack_quorum)`` with 1 <= ack <= write <= size <= MAX_ENSEMBLE_SIZE."""
    if (
        type(size) is int
        and type(quorum) is int
        and type(acks) is int
        and 1 <= acks <= quorum <= size <= MAX_ENSEMBLE_SIZE
    ):
        return size, quorum, acks
    if size_name == "ensemble_size":
        size = validate.ensemble_size(size)
    quorum = validate.write_quorum(quorum, size, size_name)
    return size, quorum, validate.ack_quorum(acks, quorum)


def _exclude(obj: dict) -> frozenset[str]:
    value = obj.get("exclude")
    if value is None:  # absent or null: exclude nothing
        return _NOTHING
    return frozenset(_bookie_list(value, "exclude", MAX_EXCLUDE))  # duplicates are harmless in a set


def _metadata(obj: dict) -> tuple[tuple[str, bytes], ...]:
    value = obj.get("custom_metadata")
    if value is None or (type(value) is dict and not value):
        return ()
    return fields.custom_metadata("custom_metadata", value)


def _bookie_writable(obj: dict) -> BookieWritable:
    return _new_bookie_writable(
        _cluster(obj),
        parse_time_ms(obj["time"]),
        _bookie(obj["bookie"]),
        _location(obj.get("location")),  # absent or null: keep the location the bookie has
        _optional_text(obj, "hostname"),
        _optional_text(obj, "group"),
    )


def _bookie_readonly(obj: dict) -> BookieReadonly:
    return _new_bookie_readonly(_cluster(obj), parse_time_ms(obj["time"]), _bookie(obj["bookie"]))


def _bookie_lost(obj: dict) -> BookieLost:
    return _new_bookie_lost(_cluster(obj), parse_time_ms(obj["time"]), _bookie(obj["bookie"]))


def _bookie_location(obj: dict) -> BookieLocation:
    return _new_bookie_location(
        _cluster(obj),
        parse_time_ms(obj["time"]),
        _bookie(obj["bookie"]),
        _rack(obj["location"]),  # required even to delete (null); rack info, read as Pulsar reads it
        _optional_text(obj, "hostname"),
        _optional_text(obj, "group"),
    )


def _bookie_disk(obj: dict) -> BookieDisk:
    cluster = _cluster(obj)
    time_ms = parse_time_ms(obj["time"])
    bookie = _bookie(obj["bookie"])
    free, total = obj["free_disk"], obj["total_disk"]
    if not (type(free) is int and type(total) is int and 0 <= free <= total <= MAX_LONG):
        free, total = validate.disk(free, total)
    return _new_bookie_disk(cluster, time_ms, bookie, free, total)


def _cluster_view(obj: dict) -> ClusterView:
    cluster = _cluster(obj)
    time_ms = parse_time_ms(obj["time"])
    writable = _bookie_list(obj["writable"], "writable", MAX_VIEW_BOOKIES)
    readonly = _bookie_list(obj["readonly"], "readonly", MAX_VIEW_BOOKIES)
    validate.cluster_view(writable, readonly)
    return _new_cluster_view(cluster, time_ms, writable, readonly)


def _feature(obj: dict) -> FeatureSet:
    return _new_feature(
        _cluster(obj),
        parse_time_ms(obj["time"]),
        text("name", obj["name"]),
        fields.feature_value("value", obj["value"]),
    )


def _ledger_create(obj: dict) -> LedgerCreate:
    cluster = _cluster(obj)
    time_ms = parse_time_ms(obj["time"])
    request_id = _request_id(obj)
    ledger = _ledger_id(obj.get("ledger_id"))
    size, quorum, acks = _quorums(obj["ensemble_size"], obj["write_quorum"], obj["ack_quorum"], "ensemble_size")
    metadata = _metadata(obj)
    return _new_ledger_create(cluster, time_ms, request_id, ledger, size, quorum, acks, metadata, _exclude(obj))


def _bookie_replace(obj: dict) -> BookieReplace:
    cluster = _cluster(obj)
    time_ms = parse_time_ms(obj["time"])
    request_id = _request_id(obj)
    ledger = _ledger_id(obj.get("ledger_id"))
    ensemble = _ensemble(obj)
    bookie = _bookie(obj["bookie"])
    _, quorum, acks = _quorums(len(ensemble), obj["write_quorum"], obj["ack_quorum"], "the ensemble's size")
    exclude = _exclude(obj)
    metadata = _metadata(obj)
    if bookie not in ensemble:
        validate.bookie_in_ensemble(bookie, ensemble)
    return _new_bookie_replace(cluster, time_ms, request_id, ledger, ensemble, bookie, quorum, acks, exclude, metadata)


def _ensemble_check(obj: dict) -> EnsembleCheck:
    cluster = _cluster(obj)
    time_ms = parse_time_ms(obj["time"])
    request_id = _request_id(obj)
    ledger = _ledger_id(obj["ledger_id"], nullable=False)
    ensemble = _ensemble(obj)
    _, quorum, acks = _quorums(len(ensemble), obj["write_quorum"], obj["ack_quorum"], "the ensemble's size")
    return _new_ensemble_check(cluster, time_ms, request_id, ledger, ensemble, quorum, acks)


_BUILDERS = {
    "bookie_writable": _bookie_writable,
    "bookie_readonly": _bookie_readonly,
    "bookie_lost": _bookie_lost,
    "bookie_location": _bookie_location,
    "bookie_disk": _bookie_disk,
    "cluster_view": _cluster_view,
    "feature": _feature,
    "ledger_create": _ledger_create,
    "bookie_replace": _bookie_replace,
    "ensemble_check": _ensemble_check,
}


# -- dead letters --------------------------------------------------------------------------------


def _dead_letter(raw: object, origin: Origin, exc: EventError, obj: dict | None) -> DeadLetter:
    """Build the dead letter, keeping whatever identifies the record and its requester."""
    cluster = request_id = ledger = kind = time_ms = None
    if obj is not None:
        value = obj.get("type")
        if isinstance(value, str) and 0 < len(value) <= MAX_STRING_CHARS and _is_unicode(value):
            kind = value
        cluster = _readable(text, "cluster", obj.get("cluster"), MAX_CLUSTER_CHARS)
        if kind not in EVENT_TYPES:  # a request, or a record of unknown type that may be one
            request_id = _readable(text, "request_id", obj.get("request_id"), MAX_STRING_CHARS)
            if request_id is not None:
                ledger = _readable(_nullable_ledger_id, "ledger_id", obj.get("ledger_id"))
                time_ms = _readable(parse_time_ms, obj.get("time"))
    return DeadLetter(
        raw=raw_text(raw),
        source=origin.to_record(),
        reason=exc.reason,
        detail=exc.detail,
        cluster=cluster,
        request_id=request_id,
        ledger_id=ledger,
        record_type=kind,
        time_ms=time_ms,
    )


def _nullable_ledger_id(key: str, value: object) -> int | None:
    return fields.ledger_id(key, value, nullable=True)


def _readable(check, *args):
    try:
        return check(*args)
    except EventError:
        return None


def _is_unicode(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def raw_text(raw: object) -> str:
    """The dead letter's ``raw``: the input text exactly; bytes decoded as UTF-8 with replacement
    characters; anything else (a mapping) as compact JSON with sorted keys, or its repr if it
    cannot be written as JSON."""
    if isinstance(raw, str):
        return raw
    if isinstance(raw, (bytes, bytearray, memoryview)):
        return bytes(raw).decode("utf-8", "replace")
    value = dict(raw) if isinstance(raw, Mapping) else raw
    for sort_keys in (True, False):  # sorting fails when keys mix types (a mapping from Python)
        try:
            return json.dumps(value, sort_keys=sort_keys, separators=(",", ":"), ensure_ascii=False, default=repr)
        except (TypeError, ValueError, RecursionError):
            continue
    try:
        return repr(value)
    except (TypeError, ValueError, RecursionError):
        return f"<a Python {type(value).__name__} that cannot be shown>"


__all__ = ["FIELDS", "parse_record", "raw_text"]
