"""Dead letters: the value an unusable input record becomes (CONTRACT.md §2 "Dead letters"; STYLE R7).

``parse_record`` never raises; every input it cannot turn into a record comes back as a
:class:`DeadLetter` that keeps the raw input text, where it came from, one :class:`Reason` code and a
human message naming the field, what was expected and what arrived. A malformed *request* whose
``cluster`` and ``request_id`` can be read keeps them, so the caller can answer it with a ``failed``
decision (error code ``INVALID_REQUEST``) and the requester hears back.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Reason(enum.Enum):
    """One code per way a record can fail. The value is the code's meaning, for documentation.

    ``str(reason)`` and ``reason.name`` give the code as written in a dead letter's ``code`` field.
    """

    RECORD_TOO_LARGE = "the raw record is larger than MAX_RECORD_BYTES"
    INVALID_ENCODING = "the bytes are not UTF-8, or a string holds an unpaired surrogate (\\ud800)"
    INVALID_JSON = "the text is not exactly one strict JSON value (NaN and Infinity are not JSON)"
    NOT_AN_OBJECT = "the JSON value is not an object"
    MISSING_FIELD = "a required field is absent (`type` included)"
    UNKNOWN_TYPE = "`type` is a string that names no record type of the contract"
    UNKNOWN_FIELD = "the record has a field its type does not define (typos such as `ensemble_szie`)"
    WRONG_TYPE = "a field has the wrong JSON type (a boolean where an integer belongs, null where a value is required)"
    EMPTY_FIELD = "a string or list that must not be empty is empty"
    FIELD_TOO_LARGE = "a string, list or number is above its limit"
    INVALID_TIME = (
        "`time` is not ISO-8601 with a zone, nor non-negative integer epoch milliseconds, or is outside "
        "1970-01-01T00:00:00Z .. 2262-04-11T23:47:16.854Z"
    )
    TIME_TOO_FAR_AHEAD = (
        "`time` is more than `engine.maxFutureSkewSeconds` ahead of its cluster's latest record; the cluster "
        "model sets it, never the parser"
    )
    INVALID_BOOKIE_ID = "a bookie id that BookKeeper would reject (spec bookkeeper-rackaware.md §1.1)"
    INVALID_LOCATION = "a network location that does not start with `/`"
    INVALID_LEDGER_ID = "`ledger_id` is negative"
    NEGATIVE_DISK = "`free_disk` or `total_disk` is negative"
    INVALID_DISK = "`free_disk` is greater than `total_disk`"
    INVALID_QUORUM = "the quorums break 1 <= ack_quorum <= write_quorum <= ensemble_size"
    BOOKIE_NOT_IN_ENSEMBLE = "a `bookie_replace` names a bookie that is not in its `ensemble`"
    DUPLICATE_BOOKIE = (
        "a bookie is listed twice in an ensemble or a cluster_view list, or in both writable and readonly"
    )
    INTERNAL_ERROR = (
        "the engine failed on this valid-looking record (a bug): it is kept here so nothing is lost; "
        "the streaming job sets it, never the parser"
    )

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True, kw_only=True)
class DeadLetter:
    """An input record that could not be used, with the reason (CONTRACT.md §2 "Dead letters").

    Attributes:
        raw: the input text exactly; bytes are decoded as UTF-8 with ``errors="replace"``, and a
            mapping input is dumped as compact JSON with sorted keys.
        source: where the record came from, ``Origin.to_record()`` (file and line, or topic,
            partition and offset).
        reason: the failure code.
        detail: the human message: field, what was expected, what arrived.
        cluster: the record's ``cluster`` when it is a valid cluster name, else None.
        request_id: the record's ``request_id`` when it is a valid string and the record is not a
            cluster event, else None.
        ledger_id: the request's ``ledger_id`` when it is a valid ledger id, else None.
        record_type: the record's ``type`` when it is a string of sane length (also an unknown
            one, so a requester can be answered), else None.
        time_ms: the request's ``time`` when it is valid (the failed decision's ``time``), else None.
    """

    raw: str
    source: dict
    reason: Reason
    detail: str
    cluster: str | None = None
    request_id: str | None = None
    ledger_id: int | None = None
    record_type: str | None = None
    time_ms: int | None = None

    @property
    def needs_failed_decision(self) -> bool:
        """True when the contract asks for a ``failed`` decision with code ``INVALID_REQUEST``.

        That is when ``cluster`` and ``request_id`` could be read (CONTRACT.md §2). ``request_id``
        is only ever filled for records that are not cluster events.
        """
        return self.cluster is not None and self.request_id is not None

    def to_record(self) -> dict:
        """The contract's dead-letter record, a JSON-ready dict.

        Returns:
            ``{"raw", "source", "reason", "code", "cluster", "request_id", "ledger_id", "type"}``,
            where ``reason`` is the human message and ``code`` the :class:`Reason` name.
        """
        return {
            "raw": self.raw,
            "source": dict(self.source),
            "reason": self.detail,
            "code": self.reason.name,
            "cluster": self.cluster,
            "request_id": self.request_id,
            "ledger_id": self.ledger_id,
            "type": self.record_type,
        }


__all__ = ["DeadLetter", "Reason"]
