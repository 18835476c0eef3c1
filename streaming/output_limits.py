"""Outputs every sink can carry: a dead letter's `raw` cut to size, with what was cut said in the record.

A dead letter keeps the input's text, and an input can be large: a 300,000-character record of control
characters is about 1.8 MB once JSON escapes them (each becomes `\\u0001`), more than a Kafka producer
sends by default (`message.max.bytes`, 1,000,000), and a dead letter the sink cannot deliver would fail
its batch on every start. So before a dead letter leaves the state function:

* its `raw` keeps the longest prefix whose JSON text is at most `engine.deadLetter.maxRawBytes` bytes;
* when the whole record (and its Kafka key) would still be larger than the sink's limit
  (`record_budget`: the smaller of the producer's `message.max.bytes` and the topic's
  `max.message.bytes`, less room for the record's framing), `raw` is cut further, then `reason`.

A cut record says so: `raw_truncated: true`, `raw_length` (the whole raw text's length in UTF-8 bytes)
and `raw_sha256` (hex SHA-256 of those bytes), so the input can still be identified and matched. Its
`id` is the one the whole text gave (`state.outputs.dead_letter`), so duplicates keep one id. A dead
letter that fits keeps its record as it was, without these fields. An over-long Kafka key (a `cluster`
Spark read that is longer than any valid cluster name, `events.limits.MAX_CLUSTER_CHARS`) becomes "".

Decisions and alerts are never cut: a request of at most `events.limits.MAX_RECORD_BYTES` gives a
decision well under the producer's default limit unless it lists near a thousand bookie ids of near a
thousand characters each; should one exceed the limit, the sink stops with an error naming the size, the
limit and the keys to raise (`streaming.kafka_sink`).

Cost: O(1) per output that is not a dead letter; O(raw length) per dead letter whose raw is longer than
the cap (a binary search over prefixes, each JSON-escaped: O(cap log cap)).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from json.encoder import encode_basestring_ascii

from events.limits import MAX_CLUSTER_CHARS
from state.outputs import DEAD_LETTER, Output

DEFAULT_MAX_RAW_BYTES = 65_536
"""`engine.deadLetter.maxRawBytes`'s default: the JSON text of `raw` a dead letter keeps at most."""

FRAMING_BYTES = 1024
"""Room left in the sink's limit for what Kafka adds to a record's key and value (record and batch
headers, the `content-type` header)."""

MIN_REASON_CHARS = 200
"""`reason` is cut to no fewer characters than this (and `raw` to nothing) before a record is given up
as too large for the budget."""


def record_budget(producer_limit: int, topic_limit: int | None, key_bytes: int = MAX_CLUSTER_CHARS * 4) -> int:
    """The largest dead letter (its JSON text, in bytes) a Kafka sink with these limits delivers.

    `key_bytes` is room for the record's key (a cluster name, at most `MAX_CLUSTER_CHARS` characters of
    up to 4 UTF-8 bytes each).
    """
    limit = producer_limit if topic_limit is None else min(producer_limit, topic_limit)
    return max(limit - FRAMING_BYTES - key_bytes, 0)


def _json_bytes(text: str) -> int:
    """Bytes of `text` as a JSON string in an output (ASCII escapes, quotes included)."""
    return len(encode_basestring_ascii(text))


def _prefix_within(text: str, budget: int) -> str:
    """The longest prefix of `text` whose JSON string is at most `budget` bytes (quotes included)."""
    if _json_bytes(text) <= budget:
        return text
    low, high = 0, min(len(text), max(budget - 2, 0))  # every character takes at least one byte
    while low < high:
        middle = (low + high + 1) // 2
        if _json_bytes(text[:middle]) <= budget:
            low = middle
        else:
            high = middle - 1
    return text[:low]


def capped_dead_letter(output: Output, max_raw_bytes: int, budget: int | None = None) -> Output:
    """`output` (a dead letter) with `raw` cut to `max_raw_bytes` of JSON text and the whole record to
    `budget` bytes (`record_budget`; None: no sink limit, as in a replay); unchanged when it fits."""
    cluster = output.cluster if len(output.cluster) <= MAX_CLUSTER_CHARS else ""
    payload = output.payload
    raw = payload.get("raw")
    fits = not isinstance(raw, str) or _json_bytes(raw) <= max_raw_bytes
    if fits and (budget is None or len(output.to_json()) <= budget):
        return output if cluster == output.cluster else Output(output.kind, cluster, output.id, payload)
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else b""
    capped = {**payload, "raw": _prefix_within(raw, max_raw_bytes) if isinstance(raw, str) else raw,
              "raw_truncated": True, "raw_length": len(data), "raw_sha256": hashlib.sha256(data).hexdigest()}
    if budget is not None:
        excess = len(Output(output.kind, cluster, output.id, capped).to_json()) - budget
        if excess > 0 and isinstance(raw, str):
            capped["raw"] = _prefix_within(capped["raw"], max(_json_bytes(capped["raw"]) - excess, 2))
            excess = len(Output(output.kind, cluster, output.id, capped).to_json()) - budget
        reason = capped.get("reason")
        if excess > 0 and isinstance(reason, str):
            capped["reason"] = _prefix_within(reason, max(_json_bytes(reason) - excess, MIN_REASON_CHARS))
    return Output(output.kind, cluster, output.id, capped)


def deliverable(produced: Sequence[Output], max_raw_bytes: int, budget: int | None = None) -> list[Output]:
    """`produced` with every dead letter passed through `capped_dead_letter`, in order."""
    return [capped_dead_letter(o, max_raw_bytes, budget) if o.kind == DEAD_LETTER else o for o in produced]
