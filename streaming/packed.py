"""Packed rows: how a replay moves many records per Spark row, and routes them in Python.

Spark's per-row cost (text source, shuffle, Arrow transfer, sink) would be most of a replay's time
with one row per record, while a replay already reads every line in the driver to order it by time. So the replay's
spool holds one row per (cluster, shard) and run of up to `PACK_SIZE` records, already routed; the state function
unpacks the rows (`unpack`) and hands back its outputs packed the same way (`pack_outputs`), with the
counts `summary.json` needs computed where the outputs are made.

Routing must match the `run` job's Spark expressions (`streaming.job.place`), so a replay groups a
record as `run` would: `read_fields` reads the top-level fields as Spark's `json_tuple` does (the
last non-null of duplicate keys; text of non-string values; nothing for a document Jackson cannot
read, or when one field is a string Jackson cannot write) and `spark_xxhash64` is Spark's `xxhash64`
(XXH64, seed 42) over the UTF-8 bytes. Known differences, all for records that are dead-lettered
anyway: Jackson accepts single-quoted JSON, Python does not (such a record joins the unreadable-cluster
group instead of its cluster's); Jackson writes some floats differently (`1.0E20`, Python `1e+20`);
`run` with idle ticks also reads `time`, which a replay does not (`route`).

Cost: O(record length) per record to route and pack it, in the driver; Spark then handles
O(records / PACK_SIZE) rows per batch.
"""

from __future__ import annotations

import json
import struct
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from events import REQUEST_TYPES

PACK_SIZE = 2000
"""Records per packed row at most (a row of 2,000 typical records is about 400 KB of text)."""

PACK_BYTES = 4 << 20
"""Characters of record text per packed row, about (a longer record is a row of its own): long lines
must not make rows of hundreds of megabytes, which the JVM holds whole."""

SUMMARY = "summary"
"""`kind` of the packed output row that carries a group's output counts (never written as output)."""

# -- Spark's xxhash64 -------------------------------------------------------------------------------

_M = (1 << 64) - 1
_P1, _P2, _P3 = 0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9
_P4, _P5 = 0x85EBCA77C2B2AE63, 0x27D4EB2F165667C5
SPARK_HASH_SEED = 42


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _M


def _round(acc: int, lane: int) -> int:
    return (_rotl((acc + lane * _P2) & _M, 31) * _P1) & _M


def spark_xxhash64(data: bytes, seed: int = SPARK_HASH_SEED) -> int:
    """XXH64 of `data` as a signed 64-bit integer, as Spark's `xxhash64(string)` returns it."""
    n = len(data)
    i = 0
    if n >= 32:
        v1, v2, v3, v4 = (seed + _P1 + _P2) & _M, (seed + _P2) & _M, seed & _M, (seed - _P1) & _M
        while i + 32 <= n:
            a, b, c, d = struct.unpack_from("<4Q", data, i)
            v1, v2, v3, v4 = _round(v1, a), _round(v2, b), _round(v3, c), _round(v4, d)
            i += 32
        h = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & _M
        for v in (v1, v2, v3, v4):
            h = (((h ^ _round(0, v)) * _P1) + _P4) & _M
    else:
        h = (seed + _P5) & _M
    h = (h + n) & _M
    while i + 8 <= n:
        (lane,) = struct.unpack_from("<Q", data, i)
        h = (_rotl(h ^ _round(0, lane), 27) * _P1 + _P4) & _M
        i += 8
    if i + 4 <= n:
        (lane,) = struct.unpack_from("<I", data, i)
        h = (_rotl(h ^ ((lane * _P1) & _M), 23) * _P2 + _P3) & _M
        i += 4
    while i < n:
        h = (_rotl(h ^ ((data[i] * _P5) & _M), 11) * _P1) & _M
        i += 1
    h ^= h >> 33
    h = (h * _P2) & _M
    h ^= h >> 29
    h = (h * _P3) & _M
    h ^= h >> 32
    return h - (1 << 64) if h >> 63 else h


# -- json_tuple's reading of a record -----------------------------------------------------------------


class _Pairs(list):
    """A JSON object as its (key, value) pairs in order, duplicates kept (as Jackson streams them)."""


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")  # Jackson refuses NaN and Infinity: the document is unreadable


_DECODER = json.JSONDecoder(object_pairs_hook=_Pairs, parse_constant=_reject_constant)
_WHITESPACE = " \t\n\r"


def top_level(text: str) -> _Pairs | None:
    """The record's top-level object as pairs, or None when json_tuple would read nothing.

    Like Jackson, text after the first complete value is ignored.
    """
    start = len(text) - len(text.lstrip(_WHITESPACE))
    try:
        value, _ = _DECODER.raw_decode(text, start)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, _Pairs) else None


def _spark_text(value: Any) -> str | None:
    """A JSON value as `json_tuple` returns it: strings unquoted, everything else as compact JSON."""
    if value is None or isinstance(value, str):
        return value
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, _Pairs):
        return "{" + ",".join(f"{_json(k)}:{_json(v)}" for k, v in value) + "}"
    return "[" + ",".join(_json(v) for v in value) + "]"


def _json(value: Any) -> str:
    if isinstance(value, str):
        return _escape_surrogates(json.dumps(value, ensure_ascii=False))
    return "null" if value is None else _spark_text(value)


def _escape_surrogates(text: str) -> str:
    """Jackson's generator writes every UTF-16 surrogate inside a nested value as an escape
    (`\\uD800`, a pair as two): a character beyond U+FFFF as its pair, a lone surrogate alone."""
    if text.isascii():
        return text
    return "".join(c if ord(c) < 0xD800 or 0xDFFF < ord(c) <= 0xFFFF else _surrogate_escape(ord(c)) for c in text)


def _surrogate_escape(code: int) -> str:
    if code <= 0xFFFF:
        return f"\\u{code:04X}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04X}\\u{0xDC00 + (code & 0x3FF):04X}"


def routing_names(shards: int, with_time: bool = False) -> tuple[str, ...]:
    """The top-level fields the `run` job reads from each record in one `json_tuple`
    (`streaming.job.keyed_records`): `cluster`; with shards `type`, `ledger_id`, `request_id`; and
    `time` when it keeps an event-time watermark (idle ticks)."""
    return ("cluster",) + (("type", "ledger_id", "request_id") if shards > 1 else ()) + (("time",) if with_time else ())


def _writable(text: str) -> bool:
    """Whether Jackson's `json_tuple` can copy a top-level string: not one holding a lone surrogate (a
    `\\ud800` escape), which it writes raw as UTF-8 and fails on (nested, it is escaped)."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def read_fields(pairs: _Pairs | None, names: Sequence[str]) -> dict[str, str | None]:
    """`json_tuple(record, *names)`: each top-level field's last value that is not null, as text (None
    if there is none). All are None when Jackson cannot copy one of them (a string with a lone
    surrogate): Spark's `json_tuple` then returns a row of nulls."""
    found: dict[str, Any] = {}
    if pairs is not None:
        for key, value in pairs:
            if value is not None and key in names:
                # json_tuple copies every occurrence of a field it reads, so one it cannot write
                # nulls the row even when a later one replaces it.
                if type(value) is str and not _writable(value):
                    return dict.fromkeys(names)
                found[key] = value
    return {name: _spark_text(found.get(name)) for name in names}


def last_value(pairs: _Pairs | None, name: str) -> Any:
    """The last top-level `name` (as Python's json module keeps duplicates: the last wins), or None."""
    found = None
    if pairs is not None:
        for key, value in pairs:
            if key == name:
                found = value
    return found


def route(pairs: _Pairs | None, shards: int) -> tuple[str, Sequence[int]]:
    """(cluster, shards) a record goes to, as `streaming.job.place` computes them in Spark.

    Cluster events go to every shard; a request to `pmod(xxhash64("l:" + ledger_id or "r:" +
    request_id), shards)`. The fields are read as `run` reads them without a watermark (a `time`
    Jackson cannot write nulls every field in `run` with idle ticks: README, Limits).
    """
    fields = read_fields(pairs, routing_names(shards))
    cluster = fields["cluster"] or ""
    if shards <= 1:
        return cluster, (0,)
    if fields["type"] not in REQUEST_TYPES:
        return cluster, range(shards)
    ledger = fields["ledger_id"]
    key = f"l:{ledger}" if ledger is not None else f"r:{fields['request_id'] or ''}"
    return cluster, (spark_xxhash64(key.encode("utf-8")) % shards,)


# -- packing ----------------------------------------------------------------------------------------


def pack(entries: Sequence[tuple[int, int, int, str]]) -> str:
    """One packed row's value: `[[seq, part, pos, text], ...]` as ASCII JSON (no newline, no tab)."""
    return json.dumps(entries, separators=(",", ":"))


def unpack(values: Iterable[str]) -> Iterator[tuple[int, int, int, str]]:
    """The (seq, part, pos, text) entries of packed rows, in the order given."""
    for value in values:
        yield from ((seq, part, pos, text) for seq, part, pos, text in json.loads(value))


def pack_outputs(produced: Sequence[Any]) -> dict[str, list]:
    """Columns of the packed output frame: rows per (kind, cluster) with up to `PACK_SIZE` outputs'
    JSON lines each (`id` holds their count), in order, and one `SUMMARY` row per cluster with
    `summary_counts`."""
    texts: dict[tuple[str, str], list[str]] = {}
    for output in produced:
        texts.setdefault((output.kind, output.cluster), []).append(output.to_json())
    columns: dict[str, list] = {"kind": [], "cluster": [], "id": [], "value": []}
    for (kind, cluster), lines in texts.items():
        for first in range(0, len(lines), PACK_SIZE):  # no giant strings for the JVM
            run = lines[first:first + PACK_SIZE]
            columns["kind"].append(kind)
            columns["cluster"].append(cluster)
            columns["id"].append(str(len(run)))
            columns["value"].append("\n".join(run))
    for cluster, counts in summary_counts(produced).items():
        columns["kind"].append(SUMMARY)
        columns["cluster"].append(cluster)
        columns["id"].append("")
        columns["value"].append(json.dumps(counts, sort_keys=True))
    return columns


def summary_counts(produced: Sequence[Any]) -> dict[str, dict[str, dict[str, int]]]:
    """Per cluster, what summary.json reports: `{"kind": {kind: n}, "status": {...}, "adherence": {...},
    "error": {code: n}, "alert": {type: n}, "dead_letter": {code: n}}` (empty tallies left out)."""
    per_cluster: dict[str, dict[str, Counter]] = {}
    for output in produced:
        tallies = per_cluster.setdefault(output.cluster, {})
        payload = output.payload
        _tally(tallies, "kind", output.kind)
        if output.kind == "decision":
            _tally(tallies, "status", payload.get("status"))
            _tally(tallies, "adherence", payload.get("adherence"))
            error = payload.get("error")
            _tally(tallies, "error", error.get("code") if isinstance(error, dict) else None)
        elif output.kind == "alert":
            _tally(tallies, "alert", payload.get("type"))
        else:
            _tally(tallies, "dead_letter", payload.get("code"))
    return {cluster: {name: dict(counts) for name, counts in tallies.items()}
            for cluster, tallies in per_cluster.items()}


def _tally(tallies: dict[str, Counter], name: str, value: Any) -> None:
    if value:
        tallies.setdefault(name, Counter())[str(value)] += 1
