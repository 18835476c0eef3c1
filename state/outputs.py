"""What the cluster model emits: decisions, alerts and dead letters (CONTRACT §2 "Outputs").

Every output is an `Output(kind, cluster, id, payload)`; `to_json()` gives compact JSON with sorted
keys. Ids are stable: a BLAKE2b digest of the output's identity, never of wall-clock time or a
salted `hash()`, so replaying the same input yields the same ids and consumers can drop duplicates.
A decision's id covers what was asked, not only the `request_id`: a request sent again unchanged keeps
its id, a different request that reuses a `request_id` gets another one (no two answers share an id).

| kind | id is the digest of |
|---|---|
| `decision` | ("decision", cluster, request_id, the request's content: `request_content`) |
| `alert` | ("alert", type, cluster, subject, triggering record's time, decision or bookie id) |
| `dead_letter` | ("dead_letter", cluster, source, raw text) |

An alert type that was renamed keeps the id its first name gave (`ALERT_ID_TYPES`): the same input
gives the same ids across the rename, so a consumer drops an alert delivered once under each name.

Alerts are CloudEvents 1.0 objects; `data.severity` is `info`, `warning` or `error`.
"""

from __future__ import annotations

import enum
import functools
import hashlib
import json
import re
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, fields
from json.encoder import c_make_encoder, encode_basestring_ascii
from typing import Any

import orjson

from events.dead_letter import DeadLetter
from events.model import positional_builder
from events.times import format_time

DECISION = "decision"
ALERT = "alert"
DEAD_LETTER = "dead_letter"
KINDS = (DECISION, ALERT, DEAD_LETTER)

OK = "ok"
FAILED = "failed"
INVALID_REQUEST = "INVALID_REQUEST"

# Alert types emitted by the model (CloudEvents `type`).
ALERT_NOT_ADHERING = "placement.decision.not_adhering"
ALERT_DECISION_FAILED = "placement.decision.failed"
ALERT_JOIN_FAILED = "placement.bookie.join_failed"
ALERT_FLAPPING = "placement.bookie.flapping"
ALERT_TYPES = (ALERT_NOT_ADHERING, ALERT_DECISION_FAILED, ALERT_JOIN_FAILED, ALERT_FLAPPING)
# The ledger audit's types (state.audit raises them).
ALERT_LEDGER_NOT_ADHERING = "placement.ledger.not_adhering"
ALERT_LEDGER_RE_ADHERE = "placement.ledger.re_adhere_possible"
#: What `ALERT_LEDGER_RE_ADHERE` was called before (it read as "read here"). Kept for one release as an
#: alias: the `alerts` and `compare` commands read both names, and a restored model's alerts opened
#: under it resolve under the new name (`state.registry`).
ALERT_LEDGER_RE_ADHERE_OLD_NAME = "placement.ledger.readhere_possible"
# More types: state.health (placement.bookie.default_rack, placement.bookie.departure_pending); an
# alert that clears is followed by `<type>.resolved`.
RESOLVED_SUFFIX = ".resolved"

#: Old alert type -> its current name, for the opening and the resolving event.
ALERT_TYPE_ALIASES: Mapping[str, str] = {
    ALERT_LEDGER_RE_ADHERE_OLD_NAME: ALERT_LEDGER_RE_ADHERE,
    ALERT_LEDGER_RE_ADHERE_OLD_NAME + RESOLVED_SUFFIX: ALERT_LEDGER_RE_ADHERE + RESOLVED_SUFFIX,
}
#: Renamed alert type -> the name its ids are computed from (its first one).
ALERT_ID_TYPES: Mapping[str, str] = {new: old for old, new in ALERT_TYPE_ALIASES.items()}


def current_alert_type(alert_type: str) -> str:
    """`alert_type` under its current name (an old name of `ALERT_TYPE_ALIASES` renamed, any other as it is)."""
    return ALERT_TYPE_ALIASES.get(alert_type, alert_type)

INFO = "info"
WARNING = "warning"
ERROR = "error"


@dataclass(frozen=True, slots=True)
class Output:
    """One output record.

    Attributes:
        kind: `decision`, `alert` or `dead_letter`.
        cluster: the cluster it concerns ("" when a dead letter's cluster could not be read).
        id: the stable id (also inside `payload`).
        payload: the JSON object written out.
    """

    kind: str
    cluster: str
    id: str
    payload: dict[str, Any]

    def to_json(self) -> str:
        """Compact JSON, keys sorted, ASCII only (so any sink can carry it).

        The text is `json.dumps(payload, sort_keys=True, separators=(",", ":"))` byte for byte. orjson
        writes it (much faster than the standard library's C encoder); the few payloads where orjson's
        text could differ go through the standard encoder instead (see `_fast_json`).
        """
        text = _fast_json(self.payload)
        if text is not None:
            return text
        if _encode is not None:
            try:
                return "".join(_encode(self.payload, 0))
            except RecursionError:
                pass            # a cycle (the fast encoder does not look for them) or very deep nesting
        return json.dumps(self.payload, sort_keys=True, separators=(",", ":"))


def _fast_json(payload: dict[str, Any]) -> str | None:
    """orjson's text of `payload` when it is the standard library's text, else None.

    orjson sorts keys the same way and writes the same compact separators, integers, strings and
    escapes, except where these checks send the payload to `json` instead: text that is not ASCII
    or holds DEL (orjson writes them raw, `json` escapes them); a float under 1e-4 in magnitude
    (`1e-05` against `0.00001`, `1.5e-07` against `1.5e-7`: orjson's text then holds `0.0000` or a
    digit followed by `e-`; a string holding those goes to `json` too); what orjson refuses (integers
    beyond 64 bits, keys that are not strings, lone surrogates, nesting deeper than 254). One
    difference is left: a NaN or infinite float becomes `null` where `json` writes `NaN`, which is not
    JSON; no output holds one (a record with a float is a dead letter).
    """
    try:
        data = _orjson_dumps(payload, option=_SORT_KEYS)
    except TypeError:          # orjson.JSONEncodeError
        return None
    if not data.isascii() or b"\x7f" in data or b"0.0000" in data or (b"e-" in data and _EXPONENT.search(data)):
        return None
    return data.decode("ascii")


# `Output(kind, cluster, id, payload)` without the frozen dataclass `__init__` (one `object.__setattr__`
# per field): every decision and alert is built through it.
_new_output = positional_builder(Output)

_orjson_dumps = orjson.dumps
_SORT_KEYS = orjson.OPT_SORT_KEYS
_EXPONENT = re.compile(rb"[0-9]e-")


# The encoder `json.dumps(..., sort_keys=True, separators=(",", ":"))` builds on every call, built once.
# No cycle markers (a shared markers dict would keep stale entries after an error): a cycle surfaces
# as RecursionError and `to_json` repeats the call through `json.dumps`, which reports it as usual.
_encode = None if c_make_encoder is None else c_make_encoder(
    None, json.JSONEncoder().default, encode_basestring_ascii, None, ":", ",", True, False, True)


def _part(part: str) -> bytes:
    data = part.encode("utf-8", "surrogatepass")
    return len(data).to_bytes(8, "big") + data


def stable_id(*parts: str) -> str:
    """32 hex digits of BLAKE2b over the parts, each length-prefixed (so no two part lists collide)."""
    chunks = []
    for part in parts:
        data = part.encode("utf-8", "surrogatepass")
        chunks += (len(data).to_bytes(8, "big"), data)
    return hashlib.blake2b(b"".join(chunks), digest_size=16).hexdigest()


# Encoded leading parts of ids ((kind, cluster), (kind, alert type, cluster)): most outputs of a
# batch share them. Bounded: cleared when full (a pure memo, never changes an id).
_PREFIXES: dict[tuple[str, ...], bytes] = {}
_MAX_PREFIXES = 4096


def _prefix(parts: tuple[str, ...]) -> bytes:
    encoded = _PREFIXES.get(parts)
    if encoded is None:
        if len(_PREFIXES) >= _MAX_PREFIXES:
            _PREFIXES.clear()
        encoded = _PREFIXES[parts] = b"".join([_part(part) for part in parts])
    return encoded


_DAYS: dict[int, str] = {}
_MS_PER_DAY = 86_400_000
# The last minute rendered and its text up to the seconds: outputs of one record (and records close
# in time) share it. One tuple, rebound at once (safe across threads); never changes a result.
_last_minute: tuple[int, str] = (-1, "")


def iso_time(ms: int) -> str:
    """`events.format_time(ms)` (ISO-8601 UTC with milliseconds); the text up to the minute is
    remembered for the last minute seen, the date part per day.

    Cost: O(1); a repeated minute (nearly always) costs a comparison and a string join, a new minute
    one `format_time` call.
    """
    global _last_minute  # noqa: PLW0603 - the one-entry memo above
    minute, rest = divmod(ms, 60_000)
    memo = _last_minute
    if memo[0] != minute:
        memo = _last_minute = (minute, _iso_minute(minute * 60_000))
    second, milli = divmod(rest, 1000)
    return f"{memo[1]}{second:02d}.{milli:03d}Z"


def _iso_minute(ms: int) -> str:
    """`format_time(ms)` up to the minute's colon, for `ms` a whole minute."""
    days, rest = divmod(ms, _MS_PER_DAY)
    day = _DAYS.get(days)
    if day is None:
        if len(_DAYS) > 64:
            _DAYS.clear()
        day = _DAYS[days] = format_time(days * _MS_PER_DAY)[:10]
    hour, rest = divmod(rest, 3_600_000)
    return f"{day}T{hour:02d}:{rest // 60_000:02d}:"


_PLAIN = (str, int, float, bool, type(None))
_SCALARS = frozenset(_PLAIN)


def jsonable(value: Any) -> Any:
    """A JSON-ready copy: sets become sorted lists, tuples lists, enums their names, bytes text.

    Cost: one pass; plain dicts, lists and JSON scalars (what the policies' explanations hold) are
    dispatched on their exact type, everything else through `_jsonable_other`. A dict is copied in a
    loop that also copies its plain lists, without a call per value (a decision's explanation is a
    dict of lists and small dicts).
    """
    kind = type(value)
    if kind is dict:
        copied = {}
        for key, item in value.items():
            kind = type(item)
            copied[key if type(key) is str else str(key)] = item if kind in _SCALARS else (
                [v if type(v) in _SCALARS else jsonable(v) for v in item] if kind is list else jsonable(item))
        return copied
    if kind in _SCALARS:
        return value
    if kind is list:
        return [v if type(v) in _SCALARS else jsonable(v) for v in value]
    return _jsonable_other(value)


def _jsonable_other(value: Any) -> Any:
    """`jsonable` of anything but a plain dict, a plain list or an exact JSON scalar."""
    if isinstance(value, Mapping):
        return {k if type(k) is str else str(k): v if (type(v) is str or v is None) else jsonable(v)
                for k, v in value.items()}
    if type(value) is list and all(type(v) is str for v in value):
        return list(value)
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, _PLAIN):
        return value
    if isinstance(value, (set, frozenset)):
        return sorted((jsonable(v) for v in value), key=lambda v: (str(type(v)), str(v)))
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "replace")
    return str(value)


# -- decisions ---------------------------------------------------------------------------------------


def decision_id(cluster: str, request_id: str, content: str | None = None) -> str:
    """`stable_id(DECISION, cluster, request_id, content)`; without `content`,
    `stable_id(DECISION, cluster, request_id)` (a requester whose request could not be read)."""
    key = _prefix((DECISION, cluster)) + _part(request_id)
    if content is not None:
        key += _part(content)
    return hashlib.blake2b(key, digest_size=16).hexdigest()


# Per request class: the fields that make up its content (everything but the cluster and the
# request_id, which are parts of the id on their own).
_CONTENT_FIELDS: dict[type, tuple[str, ...]] = {}


def request_content(request: Any) -> str:
    """What a parsed request asks, as canonical text: compact JSON, keys sorted, of its `type` and every
    field but `cluster` and `request_id` (time, ledger id, quorums, ensemble and bookie, `exclude`
    sorted, custom-metadata values as hex). Where the record came from is not part of it.

    Two requests have the same content exactly when they are equal records, so an unchanged request
    sent again gets the same decision id and any change (a quorum, an excluded bookie, the time) a new one.

    Cost: O(fields + exclude log exclude) per request; one orjson encoding.
    """
    names = _CONTENT_FIELDS.get(type(request))
    if names is None:
        names = _CONTENT_FIELDS[type(request)] = tuple(
            f.name for f in fields(request) if f.name not in ("cluster", "request_id"))
    content: dict[str, Any] = {"type": request.type}
    for name in names:
        value = getattr(request, name)
        kind = type(value)
        if kind is frozenset:
            value = sorted(value)
        elif kind is tuple and value and type(value[0]) is tuple:     # custom_metadata: (key, bytes) pairs
            value = [[key, item.hex()] for key, item in value]
        content[name] = value
    try:
        return _orjson_dumps(content, option=_SORT_KEYS).decode("utf-8")
    except TypeError:          # a hand-built record holding what orjson refuses (a lone surrogate)
        return json.dumps(content, sort_keys=True, separators=(",", ":"))


def dead_letter_content(letter: DeadLetter) -> str:
    """The content of a request that became a dead letter: its code and raw text, as a JSON array (a
    parsed request's content is a JSON object, so the two never coincide)."""
    return json.dumps(["dead_letter", letter.reason.name, letter.raw], separators=(",", ":"))


def decision(*, cluster: str, request_id: str, request_type: str | None, ledger_id: int | None,
             time_ms: int | None, policy: str, topology_version: int | None, ensemble: list[str] | None = None,
             bookie: str | None = None, adherence: str | None = None, error: Mapping[str, str] | None = None,
             explain: Mapping[str, Any] | None = None, explain_ready: bool = False,
             content: str | None = None) -> Output:
    """A decision (CONTRACT §2): `status` is `failed` exactly when `error` is given.

    `content` is the request's content (`request_content`, or `dead_letter_content` for a request that
    could not be used), part of the decision's id; None only when nothing of the request is known.

    `explain_ready=True`: `explain` is a new dict of JSON values of their exact types (str keys; str,
    int, float, bool, None, and lists and dicts of them) that nobody changes afterwards; it becomes the
    decision's `explain` as it is, without the `jsonable` copy (otherwise most of a decision's cost). The
    built-in policies' explanations are such values (tests/state/test_explain_ownership.py).
    """
    ident = decision_id(cluster, request_id, content)
    if explain_ready and type(explain) is dict:
        explained = explain
    else:
        explained = jsonable(explain) if explain else {}
    explained["topology_version"] = topology_version
    payload = {
        "id": ident,
        "request_id": request_id,
        "cluster": cluster,
        "ledger_id": ledger_id,
        "type": request_type,
        "status": FAILED if error else OK,
        "ensemble": list(ensemble or ()),
        "bookie": bookie,
        "adherence": None if error else adherence,
        "error": dict(error) if error else None,
        "policy": policy,
        "time": iso_time(time_ms) if time_ms is not None else None,
        "topology_version": topology_version,
        "explain": explained,
    }
    return _new_output(DECISION, cluster, ident, payload)


# -- alerts ------------------------------------------------------------------------------------------


def alert(*, alert_type: str, cluster: str, subject: str, time_ms: int, key: str, severity: str,
          data: Mapping[str, Any], ready: bool = False) -> Output:
    """A CloudEvents 1.0 alert. `key` is the triggering request id or bookie id (part of the id).

    `ready=True`: `data` is a new dict holding JSON values only (str keys; exact str, int, float,
    bool, None, and lists and dicts of them) that the caller hands over; it becomes the body as it
    is, without the `jsonable` copy (the audit's alerts, built field by field).
    """
    ident = alert_id(ALERT_ID_TYPES.get(alert_type, alert_type), cluster, subject, time_ms, key)
    body = data if ready else jsonable(data)
    body["severity"] = severity
    body["cluster"] = cluster
    payload = {
        "specversion": "1.0",
        "id": ident,
        "source": alert_source(cluster),
        "type": alert_type,
        "subject": subject,
        "time": iso_time(time_ms),
        "datacontenttype": "application/json",
        "data": body,
    }
    return _new_output(ALERT, cluster, ident, payload)


@functools.lru_cache(maxsize=4096)
def alert_source(cluster: str) -> str:
    """CloudEvents `source`: `placement-engine/<cluster>`, the cluster percent-encoded (RFC 3986) so the
    attribute is a URI-reference whatever the name holds (`prod east` gives `placement-engine/prod%20east`;
    letters, digits, `-`, `.`, `_` and `~` stay as they are)."""
    return "placement-engine/" + urllib.parse.quote(cluster, safe="")


def alert_id(alert_type: str, cluster: str, subject: str, time_ms: int, key: str) -> str:
    """`stable_id(ALERT, alert_type, cluster, subject, str(time_ms), key)`."""
    return hashlib.blake2b(_prefix((ALERT, alert_type, cluster)) + _part(subject) + _part(str(time_ms)) + _part(key),
                           digest_size=16).hexdigest()


# -- dead letters ------------------------------------------------------------------------------------


def dead_letter(letter: DeadLetter, cluster: str) -> Output:
    """A dead letter: `DeadLetter.to_record()` plus its stable `id`."""
    record = letter.to_record()
    where = letter.cluster if letter.cluster is not None else cluster
    source = json.dumps(record["source"], sort_keys=True, separators=(",", ":"))
    ident = stable_id(DEAD_LETTER, where or "", source, letter.raw)
    record["id"] = ident
    return Output(DEAD_LETTER, where or "", ident, record)


__all__ = [
    "ALERT",
    "ALERT_DECISION_FAILED",
    "ALERT_FLAPPING",
    "ALERT_ID_TYPES",
    "ALERT_JOIN_FAILED",
    "ALERT_LEDGER_NOT_ADHERING",
    "ALERT_LEDGER_RE_ADHERE",
    "ALERT_LEDGER_RE_ADHERE_OLD_NAME",
    "ALERT_NOT_ADHERING",
    "ALERT_TYPES",
    "ALERT_TYPE_ALIASES",
    "DEAD_LETTER",
    "DECISION",
    "Output",
    "RESOLVED_SUFFIX",
    "alert",
    "alert_id",
    "current_alert_type",
    "dead_letter",
    "decision",
    "dead_letter_content",
    "decision_id",
    "jsonable",
    "request_content",
    "stable_id",
]
