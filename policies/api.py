"""Value types of the placement API (CONTRACT §1): results, adherence, disk and health info."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


class Adherence(enum.IntEnum):
    """BookKeeper's `PlacementPolicyAdherence`; ordered so that `min()` gives the worst."""

    FAIL = 1
    MEETS_SOFT = 3
    MEETS_STRICT = 5

    def __str__(self) -> str:
        return self.name

    def __format__(self, spec: str) -> str:
        return format(self.name, spec)


@dataclass(frozen=True, slots=True)
class PlacementResult:
    """What a placement call returns.

    Attributes:
        ensemble: the full, ordered list of bookie ids.
        adherence: how the ensemble meets the policy.
        bookie: the chosen replacement (`replace_bookie` only).
        explain: provenance: which fallback paths were taken, what was excluded and why.
    """

    ensemble: list[str]
    adherence: Adherence
    bookie: str | None = None
    explain: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class BookieInfo:
    """Disk usage reported by a bookie (BookKeeper's `BookieInfoReader.BookieInfo`).

    The placement weight is the free disk space in bytes (spec §7.1).
    """

    total_disk: int = 0
    free_disk: int = 0

    @property
    def weight(self) -> int:
        return self.free_disk


@dataclass(frozen=True, slots=True)
class HealthInfo:
    """Per-bookie read health: last failed entry id and pending requests (spec §8.1).

    Bookies missing from `failures` have no failure (-1); missing from `pending` have 0 requests.
    """

    failures: Mapping[str, int] = field(default_factory=dict)
    pending: Mapping[str, int] = field(default_factory=dict)

    def failure_of(self, bookie: str) -> int:
        return self.failures.get(bookie, -1)

    def pending_of(self, bookie: str) -> int:
        return self.pending.get(bookie, 0)
