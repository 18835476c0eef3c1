"""The stabilized topology: a departed bookie's leaf stays for a grace period (BookKeeper's
`StabilizeNetworkTopology`).

Spec: bookkeeper-rackaware.md §2.4 ("Stabilized tree mechanics").

When a bookie leaves, `remove` does not take its leaf out of the tree; it records a *pending
departure* with the time it left. The leaf goes away once `departed_at + period_s <= now`, which
`advance(now)` checks lazily: the owning policy reads its injected clock once per public call and
calls `advance` with that reading. That is exactly what BookKeeper's one-shot timer does (it fires
`period` seconds after the departure), including its rejoin rules:

* a bookie that comes back before its leaf expired cancels the pending departure (`add`);
* if it leaves again, the new departure time counts (the old timer in Java finds the bookie present
  since then and does nothing);
* a bookie that comes back under another rack is moved, not duplicated
  (BK bug fixed, spec bookkeeper-rackaware.md App. A #10; `NetworkTopology.add` moves same-id leaves).

Queries (leaves, racks, counts) see the departed leaves until they expire: that is the point. Only
the removal from the tree is delayed; the owning policy removes the bookie from its known bookies at
once.
"""

from __future__ import annotations

from collections.abc import Mapping

from .topology import NetworkTopology


class StabilizedTopology(NetworkTopology):
    """A `NetworkTopology` whose removals wait `period_s` seconds on the policy's clock.

    Args:
        period_s: `networkTopologyStabilizePeriodSeconds` (> 0).

    Attributes:
        pending: bookie -> event time (s) at which it left; its leaf is still in the tree.
    """

    __slots__ = ("period_s", "pending", "_now")

    def __init__(self, period_s: float) -> None:
        super().__init__()
        if period_s <= 0:
            raise ValueError(f"networkTopologyStabilizePeriodSeconds: a stabilized topology needs a period > 0, "
                             f"got {period_s!r}")
        self.period_s = period_s
        self.pending: dict[str, float] = {}
        self._now: float | None = None

    # -- time ------------------------------------------------------------------------------------

    def advance(self, now: float) -> frozenset[str]:
        """Take the clock reading of the current public call; drop expired leaves; return them.

        Cost: O(pending departures).
        """
        self._now = now
        if not self.pending:
            return frozenset()
        period = self.period_s
        expired = [b for b, left_at in self.pending.items() if left_at + period <= now]
        for bookie in expired:
            del self.pending[bookie]
            NetworkTopology.remove(self, bookie)
        return frozenset(expired)

    @property
    def now(self) -> float | None:
        """The last clock reading given to `advance` (None before the first)."""
        return self._now

    def expiries(self) -> dict[str, float]:
        """bookie -> time (s) at which its leaf leaves the tree, in bookie order."""
        period = self.period_s
        return {b: self.pending[b] + period for b in sorted(self.pending)}

    # -- changes ---------------------------------------------------------------------------------

    def add(self, bookie: str, location: str) -> None:
        """Add (or move) a leaf now; a pending departure of the same bookie is cancelled."""
        # BK bug fixed (spec bookkeeper-rackaware.md App. A #10): a rejoin under another rack moves the
        # leaf (NetworkTopology.add) instead of leaving a stale copy under the old rack.
        super().add(bookie, location)
        self.pending.pop(bookie, None)

    def remove(self, bookie: str) -> None:
        """Mark the bookie as departed at the last clock reading; its leaf stays until it expires.

        A bookie that is not in the tree is ignored. A bookie already pending keeps its first
        departure time (in Java the first timer removes it).
        """
        if bookie not in self or bookie in self.pending:
            return
        self.pending[bookie] = self._now if self._now is not None else 0.0

    def remove_now(self, bookie: str) -> None:
        """Remove a leaf immediately, pending or not (state restore, tests)."""
        self.pending.pop(bookie, None)
        NetworkTopology.remove(self, bookie)

    def add_pending(self, bookie: str, location: str, departed_at: float) -> None:
        """Restore a pending departure: the leaf is present and leaves at `departed_at + period_s`."""
        NetworkTopology.add(self, bookie, location)
        self.pending[bookie] = departed_at

    def copy(self) -> StabilizedTopology:
        other = StabilizedTopology(self.period_s)
        base = NetworkTopology.copy(self)
        for name in ("_members", "_rack_of", "_depth", "_sorted_racks"):
            setattr(other, name, getattr(base, name))
        other.pending = dict(self.pending)
        other._now = self._now
        return other

    # -- snapshots -------------------------------------------------------------------------------

    def export_pending(self) -> dict[str, dict[str, object]]:
        """JSON-able pending departures: bookie -> {"location", "departed_at"}."""
        return {b: {"location": self.rack_of(b), "departed_at": self.pending[b]} for b in sorted(self.pending)}

    def import_pending(self, pending: Mapping[str, Mapping[str, object]]) -> None:
        """Restore what `export_pending` produced (the leaves are added if missing)."""
        for bookie, entry in sorted(pending.items()):
            self.add_pending(bookie, str(entry["location"]), float(entry["departed_at"]))  # type: ignore[arg-type]

    def check_invariants(self) -> None:
        """Assert the tree is consistent and every pending bookie still has its leaf (tests only)."""
        super().check_invariants()
        for bookie in self.pending:
            assert bookie in self, f"pending departure {bookie} has no leaf"
