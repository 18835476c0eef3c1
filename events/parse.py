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

Speed: one ``json`` decode plus straight-line checks with precompiled patterns; messages are only
built for bad records (``bench/bench_events.py`` measures it). A JSON key given twice keeps its last
value (Python's ``json``); detecting duplicates would cost about a third of the parse time.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from difflib import get_close_matches

from events import fields, validate
from events.dead_letter import DeadLetter, Reason
from events.errors import EventError, describe
from events.fields import MISSING, bookie_id, bookie_ids, location, optional_text, required, text
from events.limits import (
    MAX_CLUSTER_CHARS,
    MAX_ENSEMBLE_SIZE,
    MAX_EXCLUDE,
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
        *_COMMON, "request_id", "ledger_id", "ensemble_size", "write_quorum", "ack_quorum",
        "custom_metadata", "exclude",
    ),
    "bookie_replace": (
        *_COMMON, "request_id", "ledger_id", "ensemble", "bookie", "write_quorum", "ack_quorum",
        "exclude", "custom_metadata",
    ),
    "ensemble_check": (*_COMMON, "request_id", "ledger_id", "ensemble", "write_quorum", "ack_quorum"),
}
"""Every field each record type accepts, in the contract's order (CONTRACT.md §2)."""

_ALLOWED = {kind: frozenset(names) for kind, names in FIELDS.items()}


def parse_record(raw: str | bytes | Mapping, origin: Origin = INLINE) -> Record | DeadLetter:
    """Parse one input record into a typed record, or a dead letter saying why it cannot be used.

    Never raises for any ``raw`` (str, bytes, bytearray, memoryview, mapping or anything else) and
    never drops input: every call returns a record or a :class:`DeadLetter`.

    Cost: O(size of the record); about one ``json.loads`` plus a few microseconds of checks.

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
        return build(obj, kind)
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
        raise EventError(Reason.INVALID_JSON, f"record: {exc} is not valid JSON (strict JSON has no NaN or Infinity)") from None
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
    guess = get_close_matches(kind, list(RECORD_CLASSES), n=1)
    hint = f' (did you mean "{guess[0]}"?)' if guess else ""
    return EventError(Reason.UNKNOWN_TYPE, f"type: expected one of {_type_list()}, got {describe(kind)}{hint}")


def _type_list() -> str:
    return ", ".join(RECORD_CLASSES)


def _unknown_fields(obj: dict, kind: str) -> EventError:
    allowed = _ALLOWED[kind]
    unknown = [key for key in obj if key not in allowed]
    first = unknown[0]
    guess = get_close_matches(first, FIELDS[kind], n=1) if isinstance(first, str) else []
    hint = f' (did you mean "{guess[0]}"?)' if guess else ""
    names = ", ".join(describe(key) for key in unknown[:5]) + (", ..." if len(unknown) > 5 else "")
    return EventError(
        Reason.UNKNOWN_FIELD,
        f"{first if isinstance(first, str) else describe(first)}: not a field of {kind}{hint}; "
        f"unknown: {names}; {kind} has: {', '.join(FIELDS[kind])}",
    )


# -- builders, one per record type (CONTRACT.md §2) ------------------------------------------------


def _cluster(obj: dict, kind: str) -> str:
    return text("cluster", required(obj, "cluster", kind), MAX_CLUSTER_CHARS)


def _time(obj: dict, kind: str) -> int:
    return parse_time_ms(required(obj, "time", kind))


def _bookie_writable(obj: dict, kind: str) -> BookieWritable:
    return BookieWritable(
        cluster=_cluster(obj, kind),
        time_ms=_time(obj, kind),
        bookie=bookie_id("bookie", required(obj, "bookie", kind)),
        location=location("location", obj.get("location")),
        hostname=optional_text("hostname", obj.get("hostname")),
        group=optional_text("group", obj.get("group")),
    )


def _bookie_readonly(obj: dict, kind: str) -> BookieReadonly:
    return BookieReadonly(
        cluster=_cluster(obj, kind),
        time_ms=_time(obj, kind),
        bookie=bookie_id("bookie", required(obj, "bookie", kind)),
    )


def _bookie_lost(obj: dict, kind: str) -> BookieLost:
    return BookieLost(
        cluster=_cluster(obj, kind),
        time_ms=_time(obj, kind),
        bookie=bookie_id("bookie", required(obj, "bookie", kind)),
    )


def _bookie_location(obj: dict, kind: str) -> BookieLocation:
    return BookieLocation(
        cluster=_cluster(obj, kind),
        time_ms=_time(obj, kind),
        bookie=bookie_id("bookie", required(obj, "bookie", kind)),
        location=location("location", required(obj, "location", kind)),  # null deletes: still required
        hostname=optional_text("hostname", obj.get("hostname")),
        group=optional_text("group", obj.get("group")),
    )


def _bookie_disk(obj: dict, kind: str) -> BookieDisk:
    cluster = _cluster(obj, kind)
    time_ms = _time(obj, kind)
    bookie = bookie_id("bookie", required(obj, "bookie", kind))
    free, total = validate.disk(required(obj, "free_disk", kind), required(obj, "total_disk", kind))
    return BookieDisk(cluster=cluster, time_ms=time_ms, bookie=bookie, free_disk=free, total_disk=total)


def _cluster_view(obj: dict, kind: str) -> ClusterView:
    cluster = _cluster(obj, kind)
    time_ms = _time(obj, kind)
    writable = bookie_ids("writable", required(obj, "writable", kind), MAX_VIEW_BOOKIES)
    readonly = bookie_ids("readonly", required(obj, "readonly", kind), MAX_VIEW_BOOKIES)
    validate.cluster_view(writable, readonly)
    return ClusterView(cluster=cluster, time_ms=time_ms, writable=writable, readonly=readonly)


def _feature(obj: dict, kind: str) -> FeatureSet:
    return FeatureSet(
        cluster=_cluster(obj, kind),
        time_ms=_time(obj, kind),
        name=text("name", required(obj, "name", kind)),
        value=fields.feature_value("value", required(obj, "value", kind)),
    )


def _exclude(obj: dict) -> frozenset[str]:
    value = obj.get("exclude")
    if value is None:  # absent or null: exclude nothing
        return frozenset()
    return frozenset(bookie_ids("exclude", value, MAX_EXCLUDE))  # duplicates are harmless in a set


def _ledger_create(obj: dict, kind: str) -> LedgerCreate:
    cluster = _cluster(obj, kind)
    time_ms = _time(obj, kind)
    request_id = text("request_id", required(obj, "request_id", kind))
    ledger = fields.ledger_id("ledger_id", obj.get("ledger_id"), nullable=True)
    size = validate.ensemble_size(required(obj, "ensemble_size", kind))
    quorum = validate.write_quorum(required(obj, "write_quorum", kind), size, "ensemble_size")
    acks = validate.ack_quorum(required(obj, "ack_quorum", kind), quorum)
    return LedgerCreate(
        cluster=cluster,
        time_ms=time_ms,
        request_id=request_id,
        ledger_id=ledger,
        ensemble_size=size,
        write_quorum=quorum,
        ack_quorum=acks,
        custom_metadata=fields.custom_metadata("custom_metadata", obj.get("custom_metadata")),
        exclude=_exclude(obj),
    )


def _ensemble(obj: dict, kind: str) -> tuple[str, ...]:
    return validate.ensemble(bookie_ids("ensemble", required(obj, "ensemble", kind), MAX_ENSEMBLE_SIZE))


def _bookie_replace(obj: dict, kind: str) -> BookieReplace:
    cluster = _cluster(obj, kind)
    time_ms = _time(obj, kind)
    request_id = text("request_id", required(obj, "request_id", kind))
    ledger = fields.ledger_id("ledger_id", obj.get("ledger_id"), nullable=True)
    ensemble = _ensemble(obj, kind)
    bookie = bookie_id("bookie", required(obj, "bookie", kind))
    quorum = validate.write_quorum(required(obj, "write_quorum", kind), len(ensemble), "the ensemble's size")
    acks = validate.ack_quorum(required(obj, "ack_quorum", kind), quorum)
    exclude = _exclude(obj)
    metadata = fields.custom_metadata("custom_metadata", obj.get("custom_metadata"))
    validate.bookie_in_ensemble(bookie, ensemble)
    return BookieReplace(
        cluster=cluster,
        time_ms=time_ms,
        request_id=request_id,
        ledger_id=ledger,
        ensemble=ensemble,
        bookie=bookie,
        write_quorum=quorum,
        ack_quorum=acks,
        exclude=exclude,
        custom_metadata=metadata,
    )


def _ensemble_check(obj: dict, kind: str) -> EnsembleCheck:
    cluster = _cluster(obj, kind)
    time_ms = _time(obj, kind)
    request_id = text("request_id", required(obj, "request_id", kind))
    ledger = fields.ledger_id("ledger_id", required(obj, "ledger_id", kind), nullable=False)
    ensemble = _ensemble(obj, kind)
    quorum = validate.write_quorum(required(obj, "write_quorum", kind), len(ensemble), "the ensemble's size")
    acks = validate.ack_quorum(required(obj, "ack_quorum", kind), quorum)
    return EnsembleCheck(
        cluster=cluster,
        time_ms=time_ms,
        request_id=request_id,
        ledger_id=ledger,
        ensemble=ensemble,
        write_quorum=quorum,
        ack_quorum=acks,
    )


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
    cluster = request_id = ledger = kind = None
    if obj is not None:
        value = obj.get("type")
        if isinstance(value, str) and 0 < len(value) <= MAX_STRING_CHARS and _is_unicode(value):
            kind = value
        cluster = _readable(text, "cluster", obj.get("cluster"), MAX_CLUSTER_CHARS)
        if kind not in EVENT_TYPES:  # a request, or a record of unknown type that may be one
            request_id = _readable(text, "request_id", obj.get("request_id"), MAX_STRING_CHARS)
            if request_id is not None:
                ledger = _readable(_nullable_ledger_id, "ledger_id", obj.get("ledger_id"))
    return DeadLetter(
        raw=raw_text(raw),
        source=origin.to_record(),
        reason=exc.reason,
        detail=exc.detail,
        cluster=cluster,
        request_id=request_id,
        ledger_id=ledger,
        record_type=kind,
    )


def _nullable_ledger_id(key: str, value: object) -> int | None:
    return fields.ledger_id(key, value, nullable=True)


def _readable(check, *args):  # noqa: ANN001, ANN002, ANN202 - tiny local helper
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
