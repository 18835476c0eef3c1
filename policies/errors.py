"""Typed errors of the placement core (CONTRACT §1).

`PlacementError` is the root; `NotEnoughBookiesError` is raised exactly where BookKeeper raises
`BKNotEnoughBookiesException` and its message names the constraint that could not be met.
Invalid arguments and impossible configurations raise the built-in `ValueError` (BookKeeper's
`IllegalArgumentException`), never a `PlacementError`.

Every `PlacementError` carries `explain`, the provenance of the failed call: a policy
that raises during `new_ensemble` / `replace_bookie` fills it with the same keys a successful
result's `PlacementResult.explain` has (`policy`, `steps` reached, `excluded`, `fallbacks` tried) plus
`constraint`, a short statement of the rule that could not be met (docs/policies-rackaware.md,
"Provenance"). It is empty for errors raised outside a placement call.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class PlacementError(RuntimeError):
    """Root of every error the placement core raises on purpose.

    Args:
        *args: the message (what was wrong and what to do), as for any exception.
        explain: the failed call's provenance (see the module docstring); default empty.

    Attributes:
        explain: a JSON-able dict, filled by the policy that raised (empty otherwise). Policies may
            replace it while the error travels up (a wrapper adds what it tried); callers only read it.
    """

    code = "PLACEMENT_ERROR"

    def __init__(self, *args: object, explain: Mapping[str, Any] | None = None) -> None:
        super().__init__(*args)
        self.explain: dict[str, Any] = dict(explain) if explain else {}


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
