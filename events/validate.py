"""Cross-field rules of requests and events (CONTRACT.md §1-2; spec bookkeeper-rackaware.md "Notation").

Each check raises :class:`~events.errors.EventError` with the dead-letter reason and a message that
names the field, what was expected and what arrived:

* quorums: ``1 <= ack_quorum <= write_quorum <= ensemble_size <= MAX_ENSEMBLE_SIZE`` (BookKeeper's
  ``E >= WQ >= AQ >= 1``); for ``bookie_replace`` and ``ensemble_check`` ``E = len(ensemble)``;
* an ensemble lists each bookie once, and a ``bookie_replace`` names one of its members;
* a ``cluster_view`` lists each bookie once, in one list only;
* disk sizes are non-negative with ``free_disk <= total_disk``.
"""

from __future__ import annotations

from events.dead_letter import Reason
from events.errors import EventError, describe
from events.fields import integer
from events.limits import MAX_ENSEMBLE_SIZE, MAX_LONG


def ensemble_size(value: object) -> int:
    """``ensemble_size``: an integer in ``[1, MAX_ENSEMBLE_SIZE]``."""
    size = integer("ensemble_size", value)
    if size < 1:
        raise EventError(Reason.INVALID_QUORUM, f"ensemble_size: expected an integer >= 1, got {size}")
    if size > MAX_ENSEMBLE_SIZE:
        raise EventError(
            Reason.FIELD_TOO_LARGE, f"ensemble_size: at most {MAX_ENSEMBLE_SIZE} allowed, got {describe(size)}"
        )
    return size


def write_quorum(value: object, size: int, size_name: str) -> int:
    """``write_quorum``: an integer in ``[1, size]``; ``size_name`` says where ``size`` came from."""
    quorum = integer("write_quorum", value)
    if not 1 <= quorum <= size:
        raise EventError(
            Reason.INVALID_QUORUM,
            f"write_quorum: expected an integer between 1 and {size_name} ({size}), got {describe(quorum)}",
        )
    return quorum


def ack_quorum(value: object, quorum: int) -> int:
    """``ack_quorum``: an integer in ``[1, write_quorum]``."""
    acks = integer("ack_quorum", value)
    if not 1 <= acks <= quorum:
        raise EventError(
            Reason.INVALID_QUORUM,
            f"ack_quorum: expected an integer between 1 and write_quorum ({quorum}), got {describe(acks)}",
        )
    return acks


def ensemble(members: tuple[str, ...]) -> tuple[str, ...]:
    """An ensemble: non-empty, each bookie once (the list length is checked when it is read)."""
    if not members:
        raise EventError(Reason.EMPTY_FIELD, "ensemble: expected a non-empty list of bookie ids, got []")
    if len(set(members)) != len(members):
        raise EventError(Reason.DUPLICATE_BOOKIE, f"ensemble: {_first_duplicate('ensemble', members)}")
    return members


def bookie_in_ensemble(bookie: str, members: tuple[str, ...]) -> str:
    """The bookie to replace must be a member of the ensemble."""
    if bookie not in members:
        raise EventError(
            Reason.BOOKIE_NOT_IN_ENSEMBLE,
            f"bookie: expected one of the ensemble's {len(members)} bookies, got {describe(bookie)}",
        )
    return bookie


def cluster_view(writable: tuple[str, ...], readonly: tuple[str, ...]) -> None:
    """No bookie twice in one list, and none in both lists. Cost: O(n)."""
    writable_set = set(writable)
    if len(writable_set) != len(writable):
        raise EventError(Reason.DUPLICATE_BOOKIE, f"writable: {_first_duplicate('writable', writable)}")
    readonly_set = set(readonly)
    if len(readonly_set) != len(readonly):
        raise EventError(Reason.DUPLICATE_BOOKIE, f"readonly: {_first_duplicate('readonly', readonly)}")
    both = writable_set & readonly_set
    if both:
        first = min(both)
        more = f" (and {len(both) - 1} more)" if len(both) > 1 else ""
        raise EventError(
            Reason.DUPLICATE_BOOKIE,
            f"readonly: bookie {describe(first)}{more} is also listed in writable; a bookie is in one list only",
        )


def disk(free_value: object, total_value: object) -> tuple[int, int]:
    """``free_disk`` and ``total_disk``: integers in ``[0, MAX_LONG]`` with ``free <= total``."""
    free = integer("free_disk", free_value)
    total = integer("total_disk", total_value)
    for name, size in (("free_disk", free), ("total_disk", total)):
        if size < 0:
            raise EventError(Reason.NEGATIVE_DISK, f"{name}: expected a non-negative number of bytes, got {size}")
        if size > MAX_LONG:
            raise EventError(
                Reason.FIELD_TOO_LARGE, f"{name}: at most {MAX_LONG} bytes (a Java long), got {describe(size)}"
            )
    if free > total:
        raise EventError(Reason.INVALID_DISK, f"free_disk: expected at most total_disk ({total}), got {free}")
    return free, total


def _first_duplicate(name: str, members: tuple[str, ...]) -> str:
    seen: dict[str, int] = {}
    for position, bookie in enumerate(members):
        if bookie in seen:
            return (
                f"bookie {describe(bookie)} is listed twice ({name}[{seen[bookie]}] and {name}[{position}]); "
                "each bookie may appear once"
            )
        seen[bookie] = position
    return "a bookie is listed twice"  # unreachable when called on a list with a duplicate


__all__ = [
    "ack_quorum",
    "bookie_in_ensemble",
    "cluster_view",
    "disk",
    "ensemble",
    "ensemble_size",
    "write_quorum",
]
