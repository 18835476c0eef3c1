"""Records back to contract-shaped JSON (the inverse of :func:`events.parse_record`; CONTRACT.md §2).

``to_json(record)`` gives a dict that ``parse_record`` reads back into an equal record, so tests can
round-trip and generators (the demo) can emit records. Every field is written, optional ones as
null (or ``[]``/``{}``); times as :func:`events.format_time`; ``exclude`` sorted; custom-metadata
values decoded back to strings.
"""

from __future__ import annotations

import json

from events.dead_letter import Reason
from events.errors import EventError
from events.model import (
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
    Record,
)
from events.times import format_time

_RECORD_CLASSES = tuple(RECORD_CLASSES.values())


def to_json(record: Record) -> dict:
    """The contract's JSON object for ``record``.

    Raises:
        EventError: (a ``ValueError``) when ``record`` is not a record, its time is out of range,
            or a custom-metadata value is not UTF-8 (possible only for a hand-built record).
    """
    if not isinstance(record, _RECORD_CLASSES):
        raise EventError(Reason.UNKNOWN_TYPE, f"record: expected an events record, got a {type(record).__name__}")
    head = {"type": record.type, "cluster": record.cluster, "time": format_time(record.time_ms)}
    if isinstance(record, BookieWritable | BookieLocation):
        return head | {
            "bookie": record.bookie,
            "location": record.location,
            "hostname": record.hostname,
            "group": record.group,
        }
    if isinstance(record, BookieReadonly | BookieLost):
        return head | {"bookie": record.bookie}
    if isinstance(record, BookieDisk):
        return head | {"bookie": record.bookie, "free_disk": record.free_disk, "total_disk": record.total_disk}
    if isinstance(record, ClusterView):
        return head | {"writable": list(record.writable), "readonly": list(record.readonly)}
    if isinstance(record, FeatureSet):
        return head | {"name": record.name, "value": record.value}
    if isinstance(record, LedgerCreate):
        return head | {
            "request_id": record.request_id,
            "ledger_id": record.ledger_id,
            "ensemble_size": record.ensemble_size,
            "write_quorum": record.write_quorum,
            "ack_quorum": record.ack_quorum,
            "custom_metadata": _metadata(record.custom_metadata),
            "exclude": sorted(record.exclude),
        }
    if isinstance(record, BookieReplace):
        return head | {
            "request_id": record.request_id,
            "ledger_id": record.ledger_id,
            "ensemble": list(record.ensemble),
            "bookie": record.bookie,
            "write_quorum": record.write_quorum,
            "ack_quorum": record.ack_quorum,
            "exclude": sorted(record.exclude),
            "custom_metadata": _metadata(record.custom_metadata),
        }
    if isinstance(record, EnsembleCheck):
        return head | {
            "request_id": record.request_id,
            "ledger_id": record.ledger_id,
            "ensemble": list(record.ensemble),
            "write_quorum": record.write_quorum,
            "ack_quorum": record.ack_quorum,
        }
    raise AssertionError(f"unreachable: no encoder for {type(record).__name__}")  # every class is handled above


def to_json_text(record: Record) -> str:
    """``to_json(record)`` as one compact JSON line (no newline), UTF-8 safe."""
    return json.dumps(to_json(record), separators=(",", ":"), ensure_ascii=False)


def _metadata(pairs: tuple[tuple[str, bytes], ...]) -> dict[str, str]:
    out = {}
    for key, value in pairs:
        try:
            out[key] = value.decode("utf-8")
        except (UnicodeDecodeError, AttributeError):
            raise EventError(
                Reason.INVALID_ENCODING,
                f"custom_metadata.{key}: the value is not UTF-8 bytes, so it has no JSON string form",
            ) from None
    return out


__all__ = ["to_json", "to_json_text"]
