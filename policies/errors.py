"""Typed errors of the placement core (CONTRACT §1).

`PlacementError` is the root; `NotEnoughBookiesError` is raised exactly where BookKeeper raises
`BKNotEnoughBookiesException` and its message names the constraint that could not be met.
Invalid arguments and impossible configurations raise the built-in `ValueError` (BookKeeper's
`IllegalArgumentException`), never a `PlacementError`.
"""

from __future__ import annotations


class PlacementError(RuntimeError):
    """Root of every error the placement core raises on purpose."""

    code = "PLACEMENT_ERROR"


class NotEnoughBookiesError(PlacementError):
    """Not enough eligible bookies to satisfy the request (BookKeeper error code -6)."""

    code = "NOT_ENOUGH_BOOKIES"


class UnsupportedOperationError(PlacementError):
    """The policy does not implement this operation (BookKeeper's UnsupportedOperationException)."""

    code = "UNSUPPORTED_OPERATION"


class InvalidLocationError(PlacementError, ValueError):
    """A network location BookKeeper would reject (spec bookkeeper-rackaware.md §1.2, §1.4)."""

    code = "INVALID_LOCATION"


class InvalidTopologyError(PlacementError):
    """A leaf whose depth differs from the other leaves of the topology (spec §1.5)."""

    code = "INVALID_TOPOLOGY"
