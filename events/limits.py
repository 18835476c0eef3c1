"""Size limits for event and request records, in one place (CONTRACT.md §2; docs/events.md "Limits").

Every limit a record can exceed is a constant here, so the parser, the tests and the documentation
agree. Exceeding one turns the record into a dead letter with reason ``RECORD_TOO_LARGE`` (the whole
input) or ``FIELD_TOO_LARGE`` (one field). The bounds are generous for real clusters and exist to keep
one bad producer from exhausting memory or flooding the decision stream.
"""

from __future__ import annotations

#: Largest raw record, in bytes of UTF-8 (Kafka's default ``max.message.bytes`` is about 1 MiB).
MAX_RECORD_BYTES = 1_048_576

#: Longest ``cluster`` name, in characters.
MAX_CLUSTER_CHARS = 256

#: Longest value of every other string field (bookie ids, locations, hostnames, groups,
#: request ids, feature names, custom-metadata keys), in characters.
MAX_STRING_CHARS = 1024

#: Largest ``ensemble_size`` and longest ``ensemble`` list.
MAX_ENSEMBLE_SIZE = 1024

#: Longest ``exclude`` list of a request.
MAX_EXCLUDE = 10_000

#: Longest ``writable`` or ``readonly`` list of a ``cluster_view``.
MAX_VIEW_BOOKIES = 10_000

#: Most entries in a request's ``custom_metadata``.
MAX_METADATA_ENTRIES = 64

#: Largest custom-metadata value, in bytes after UTF-8 encoding.
MAX_METADATA_VALUE_BYTES = 65_536

#: Largest ``ledger_id``, ``free_disk`` and ``total_disk`` (Java's ``Long.MAX_VALUE``; BookKeeper
#: stores them as ``long``).
MAX_LONG = 2**63 - 1

#: Range of a ``feature`` value (Java ``int``; BookKeeper's ``Feature.availability()``).
MIN_FEATURE_VALUE = -(2**31)
MAX_FEATURE_VALUE = 2**31 - 1

#: Latest accepted time: 2262-04-11T23:47:16.854Z, in epoch milliseconds: the last millisecond a
#: signed 64-bit count of nanoseconds since 1970 holds (pandas' ``Timestamp.max``), which Spark's Arrow
#: conversion of a timestamp column needs. Every stage (parser, model, Spark's columns) can hold any
#: time from 0 to here; the earliest such time, 1677-09-21, is before the contract's 1970.
MAX_TIME_MS = 9_223_372_036_854
#: ``MAX_TIME_MS`` written as a time.
MAX_TIME_TEXT = "2262-04-11T23:47:16.854Z"

__all__ = [
    "MAX_CLUSTER_CHARS",
    "MAX_ENSEMBLE_SIZE",
    "MAX_EXCLUDE",
    "MAX_FEATURE_VALUE",
    "MAX_LONG",
    "MAX_METADATA_ENTRIES",
    "MAX_METADATA_VALUE_BYTES",
    "MAX_RECORD_BYTES",
    "MAX_STRING_CHARS",
    "MAX_TIME_MS",
    "MAX_TIME_TEXT",
    "MAX_VIEW_BOOKIES",
    "MIN_FEATURE_VALUE",
]
