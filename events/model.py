"""Typed event and request records, and where a record came from (CONTRACT.md §2; STYLE R6, R11).

Every record type of the contract is a frozen, slotted, keyword-only dataclass. All records carry
``cluster`` and ``time_ms`` (epoch milliseconds, UTC) and a class-level ``type`` equal to the
contract's ``type`` value. Inner collections are tuples (ordered lists: ``ensemble``, ``writable``,
``readonly``, ``custom_metadata`` sorted by key) or frozensets (``exclude``).

Records built by :func:`events.parse_record` are valid; code past ``events/`` may rely on that
(STYLE R7). Building a record by hand does no validation: round-trip it through
``parse_record(to_json(record))`` to check one.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any, ClassVar, TypeAlias

from events.dead_letter import Reason
from events.errors import EventError, describe

# -- cluster events (CONTRACT.md §2 "Cluster events") ------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class BookieWritable:
    """The bookie is registered writable: it joins, or returns from read-only.

    ``location`` None keeps the location the bookie already has (CONTRACT.md §2).
    """

    type: ClassVar[str] = "bookie_writable"
    cluster: str
    time_ms: int
    bookie: str
    location: str | None = None
    hostname: str | None = None
    group: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class BookieReadonly:
    """The bookie is registered read-only."""

    type: ClassVar[str] = "bookie_readonly"
    cluster: str
    time_ms: int
    bookie: str


@dataclass(frozen=True, slots=True, kw_only=True)
class BookieLost:
    """The bookie's registration is gone (session expiry, shutdown)."""

    type: ClassVar[str] = "bookie_lost"
    cluster: str
    time_ms: int
    bookie: str


@dataclass(frozen=True, slots=True, kw_only=True)
class BookieLocation:
    """Rack info set (``location`` a path) or deleted (``location`` None), as Pulsar's
    ``set-bookie-rack`` / ``delete-bookie-rack``; applies at once (CONTRACT.md §2)."""

    type: ClassVar[str] = "bookie_location"
    cluster: str
    time_ms: int
    bookie: str
    location: str | None
    hostname: str | None = None
    group: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class BookieDisk:
    """A disk usage report in bytes (BookKeeper's ``GET_BOOKIE_INFO``); ``free_disk <= total_disk``."""

    type: ClassVar[str] = "bookie_disk"
    cluster: str
    time_ms: int
    bookie: str
    free_disk: int
    total_disk: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterView:
    """A full registration snapshot; no bookie is in both lists, none twice in one."""

    type: ClassVar[str] = "cluster_view"
    cluster: str
    time_ms: int
    writable: tuple[str, ...]
    readonly: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class FeatureSet:
    """A runtime feature switch (contract type ``feature``; CONTRACT.md §1 ``features``); 0 = off."""

    type: ClassVar[str] = "feature"
    cluster: str
    time_ms: int
    name: str
    value: int


# -- requests (CONTRACT.md §2 "Requests") --------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class LedgerCreate:
    """Place a new ensemble (BookKeeper's ``newEnsemble``).

    ``custom_metadata`` holds ``(key, value)`` pairs sorted by key, values UTF-8 bytes as
    BookKeeper passes them to the policy; :meth:`metadata_dict` gives the mapping.
    """

    type: ClassVar[str] = "ledger_create"
    cluster: str
    time_ms: int
    request_id: str
    ledger_id: int | None = None
    ensemble_size: int
    write_quorum: int
    ack_quorum: int
    custom_metadata: tuple[tuple[str, bytes], ...] = ()
    exclude: frozenset[str] = field(default_factory=frozenset)

    def metadata_dict(self) -> dict[str, bytes]:
        """``custom_metadata`` as a new ``{key: bytes}`` dict (what the policy takes)."""
        return dict(self.custom_metadata)


@dataclass(frozen=True, slots=True, kw_only=True)
class BookieReplace:
    """Replace ``bookie`` in ``ensemble`` (BookKeeper's ``replaceBookie``); ensemble size is
    ``len(ensemble)``, and ``bookie`` is one of its members."""

    type: ClassVar[str] = "bookie_replace"
    cluster: str
    time_ms: int
    request_id: str
    ledger_id: int | None = None
    ensemble: tuple[str, ...]
    bookie: str
    write_quorum: int
    ack_quorum: int
    exclude: frozenset[str] = field(default_factory=frozenset)
    custom_metadata: tuple[tuple[str, bytes], ...] = ()

    @property
    def ensemble_size(self) -> int:
        """``len(ensemble)``."""
        return len(self.ensemble)

    def metadata_dict(self) -> dict[str, bytes]:
        """``custom_metadata`` as a new ``{key: bytes}`` dict (what the policy takes)."""
        return dict(self.custom_metadata)


@dataclass(frozen=True, slots=True, kw_only=True)
class EnsembleCheck:
    """Check a placed ensemble (BookKeeper's ``isEnsembleAdheringToPlacementPolicy``)."""

    type: ClassVar[str] = "ensemble_check"
    cluster: str
    time_ms: int
    request_id: str
    ledger_id: int
    ensemble: tuple[str, ...]
    write_quorum: int
    ack_quorum: int

    @property
    def ensemble_size(self) -> int:
        """``len(ensemble)``."""
        return len(self.ensemble)


ClusterEvent: TypeAlias = (
    BookieWritable | BookieReadonly | BookieLost | BookieLocation | BookieDisk | ClusterView | FeatureSet
)
Request: TypeAlias = LedgerCreate | BookieReplace | EnsembleCheck
Record: TypeAlias = ClusterEvent | Request

_EVENT_CLASSES = (BookieWritable, BookieReadonly, BookieLost, BookieLocation, BookieDisk, ClusterView, FeatureSet)
_REQUEST_CLASSES = (LedgerCreate, BookieReplace, EnsembleCheck)

#: The contract's cluster-event ``type`` values.
EVENT_TYPES: frozenset[str] = frozenset(cls.type for cls in _EVENT_CLASSES)
#: The contract's request ``type`` values.
REQUEST_TYPES: frozenset[str] = frozenset(cls.type for cls in _REQUEST_CLASSES)
#: ``type`` value -> record class, for every record type (read-only).
RECORD_CLASSES = MappingProxyType({cls.type: cls for cls in _EVENT_CLASSES + _REQUEST_CLASSES})


def positional_builder(cls: type) -> Callable[..., object]:
    """A fast constructor taking every field positionally, in declaration order, without checks.

    The parser calls it after it has validated every value: the dataclass ``__init__`` of a frozen
    class sets each field through the generic ``object.__setattr__``, while this builder calls each
    slot's own setter directly. The result is equal to ``cls(**fields)``; tests check that for every
    record type.

    Cost: O(fields) per record, one slot-setter call per field and no loop.
    """
    setters = [getattr(cls, f.name).__set__ for f in fields(cls)]
    # One straight-line function per class (as `dataclasses` writes `__init__`): a call per field, no
    # loop over the setters. Only generated names and the class's own slot setters go into the source.
    params = ", ".join(f"v{i}" for i in range(len(setters)))
    body = "".join(f"    s{i}(record, v{i})\n" for i in range(len(setters)))
    namespace: dict[str, Any] = {"new": object.__new__, "cls": cls}
    namespace.update((f"s{i}", setter) for i, setter in enumerate(setters))
    exec(f"def build({params}):\n    record = new(cls)\n{body}    return record\n", namespace)  # noqa: S102
    build = namespace["build"]
    build.__qualname__ = build.__name__ = f"build_{cls.__name__}"
    return build


# -- origin --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Origin:
    """Where a record came from: a file line, a Kafka offset, or inline (tests, generated input).

    Build it with :meth:`from_file`, :meth:`from_kafka` or :meth:`inline`; the constructor does not
    validate. The factories are cheap enough to call once per record.
    """

    file: str | None = None
    line: int | None = None
    topic: str | None = None
    partition: int | None = None
    offset: int | None = None
    label: str | None = None

    @classmethod
    def from_file(cls, path: str, line: int) -> Origin:
        """A record read from ``path`` at 1-based ``line``.

        Raises:
            EventError: ``line`` is not an integer >= 1 or ``path`` is not a string.
        """
        if not isinstance(path, str):
            raise EventError(Reason.WRONG_TYPE, f"path: expected a string, got {describe(path)}")
        return _new_origin(path, _count("line", line, 1), None, None, None, None)

    @classmethod
    def from_kafka(cls, topic: str, partition: int, offset: int) -> Origin:
        """A record read from Kafka ``topic``/``partition`` at ``offset``.

        Integers of other types (numpy's, from a pandas frame) are accepted and stored as ``int``.

        Raises:
            EventError: ``partition`` or ``offset`` is not an integer >= 0, or ``topic`` is not a string.
        """
        if not isinstance(topic, str):
            raise EventError(Reason.WRONG_TYPE, f"topic: expected a string, got {describe(topic)}")
        return _new_origin(None, None, topic, _count("partition", partition, 0), _count("offset", offset, 0), None)

    @classmethod
    def inline(cls, label: str = "inline") -> Origin:
        """A record given directly (tests, generators); ``label`` says which."""
        return cls(label=label)

    def to_record(self) -> dict:
        """The contract's dead-letter ``source`` object.

        Returns:
            ``{"file": path, "line": n}``, ``{"topic": t, "partition": p, "offset": o}`` or
            ``{"inline": label}``.
        """
        if self.file is not None:
            return {"file": self.file, "line": self.line}
        if self.topic is not None:
            return {"topic": self.topic, "partition": self.partition, "offset": self.offset}
        return {"inline": self.label if self.label is not None else "inline"}


def _count(name: str, value: object, minimum: int) -> int:
    """``value`` as an int >= ``minimum``; any integer type but bool (``operator.index``)."""
    if type(value) is int and value >= minimum:
        return value
    if not isinstance(value, bool):
        try:
            number = operator.index(value)  # numpy integers from pandas frames
        except TypeError:
            pass
        else:
            if number >= minimum:
                return number
    raise EventError(Reason.WRONG_TYPE, f"{name}: expected an integer >= {minimum}, got {describe(value)}")


_new_origin = positional_builder(Origin)
INLINE = Origin.inline()

__all__ = [
    "EVENT_TYPES",
    "INLINE",
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
    "EnsembleCheck",
    "FeatureSet",
    "LedgerCreate",
    "Origin",
    "Record",
    "Request",
    "positional_builder",
]
