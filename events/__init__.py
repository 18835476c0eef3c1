"""Parse and validate the engine's input records (CONTRACT.md §2). Pure Python, stdlib only.

One call turns raw input into a typed, frozen record or a dead letter, and never raises::

    from events import parse_record, Origin, DeadLetter
    rec = parse_record(line, Origin.from_file("/data/events.jsonl", 7))
    if isinstance(rec, DeadLetter):
        ...  # rec.to_record() is the contract's dead-letter record

Layout (STYLE §3): ``model`` (records, Origin), ``times`` (time parsing), ``fields`` (one field
at a time), ``validate`` (cross-field rules), ``parse`` (the boundary), ``dead_letter`` (DeadLetter,
Reason), ``encode`` (records back to JSON), ``limits`` (size limits), ``errors`` (EventError).
User documentation: docs/events.md.
"""

from events.dead_letter import DeadLetter, Reason
from events.encode import to_json, to_json_text
from events.errors import EventError
from events.fields import is_valid_bookie_id
from events.limits import (
    MAX_CLUSTER_CHARS,
    MAX_ENSEMBLE_SIZE,
    MAX_EXCLUDE,
    MAX_METADATA_ENTRIES,
    MAX_METADATA_VALUE_BYTES,
    MAX_RECORD_BYTES,
    MAX_STRING_CHARS,
    MAX_VIEW_BOOKIES,
)
from events.model import (
    EVENT_TYPES,
    RECORD_CLASSES,
    REQUEST_TYPES,
    BookieDisk,
    BookieLocation,
    BookieLost,
    BookieReadonly,
    BookieReplace,
    BookieWritable,
    ClusterEvent,
    ClusterView,
    EnsembleCheck,
    FeatureSet,
    LedgerCreate,
    Origin,
    Record,
    Request,
)
from events.parse import FIELDS, parse_record
from events.times import format_time, parse_time_ms

__all__ = [
    "EVENT_TYPES",
    "FIELDS",
    "MAX_CLUSTER_CHARS",
    "MAX_ENSEMBLE_SIZE",
    "MAX_EXCLUDE",
    "MAX_METADATA_ENTRIES",
    "MAX_METADATA_VALUE_BYTES",
    "MAX_RECORD_BYTES",
    "MAX_STRING_CHARS",
    "MAX_VIEW_BOOKIES",
    "RECORD_CLASSES",
    "REQUEST_TYPES",
    "BookieDisk",
    "BookieLocation",
    "BookieLost",
    "BookieReadonly",
    "BookieReplace",
    "BookieWritable",
    "ClusterEvent",
    "ClusterView",
    "DeadLetter",
    "EnsembleCheck",
    "EventError",
    "FeatureSet",
    "LedgerCreate",
    "Origin",
    "Reason",
    "Record",
    "Request",
    "format_time",
    "is_valid_bookie_id",
    "parse_record",
    "parse_time_ms",
    "to_json",
    "to_json_text",
]
