"""Event-time order within a micro-batch, and the late-record rule (CONTRACT §2: "Events of one
cluster are applied in `time` order").

* Records of one batch are applied in `(time_ms, arrival index)` order: a stable sort by time, so
  records with equal times keep their arrival order.
* The cluster's clock only moves forward. A record whose time is before the clock (it arrived after
  a record with a later time, in an earlier batch) is applied *at the clock*, not at its own time,
  and is counted as late. Its own time still appears in its outputs (a decision's `time`).
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter
from typing import TypeVar

T = TypeVar("T")


def in_time_order(records: Sequence[T]) -> list[T]:
    """The records sorted by `time_ms`, ties in arrival order. Cost: O(n log n), O(n) if sorted."""
    return sorted(records, key=_time_of)


_time_of = attrgetter("time_ms")   # any record type with time_ms; C speed, no Python call per record


def effective_time(time_ms: int, clock_ms: int) -> tuple[int, bool]:
    """When a record at `time_ms` is applied on a clock at `clock_ms`: (time, is_late).

    A record never rewinds the clock: a late one is applied at the clock.
    """
    if time_ms < clock_ms:
        return clock_ms, True
    return time_ms, False


__all__ = ["effective_time", "in_time_order"]
