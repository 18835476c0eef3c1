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

Live bookies come before departed leaves. A rack change moves a bookie's leaf at once (it is not a
departure), and a live bookie whose location has another depth than the departed leaves still in
the tree takes the tree over: those leaves are *set aside* (out of the tree, so no placement can use
them) while their delay keeps running, so `expiries` and snapshots still report them until it ends.
BookKeeper instead refuses the live bookie (`InvalidTopologyException`) until the departed leaves
expire, so the stabilized instance does not know a bookie the primary does (policies-rackaware.md,
"Differences").
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping

from .errors import InvalidTopologyError
from .location import normalize
from .topology import NetworkTopology


class StabilizedTopology(NetworkTopology):
    """A `NetworkTopology` whose removals wait `period_s` seconds on the policy's clock.

    Args:
        period_s: `networkTopologyStabilizePeriodSeconds` (> 0).

    Attributes:
        pending: bookie -> event time (s) at which it left; its leaf is still in the tree unless it
            was set aside.
        set_aside: bookie -> location of a pending departure whose leaf was taken out of the tree
            because a live bookie of another depth arrived; it leaves `pending` when its delay ends.
    """

    __slots__ = ("period_s", "pending", "set_aside", "_now", "_due")

    def __init__(self, period_s: float) -> None:
        super().__init__()
        if period_s <= 0:
            raise ValueError(f"networkTopologyStabilizePeriodSeconds: a stabilized topology needs a period > 0, "
                             f"got {period_s!r}")
        self.period_s = period_s
        self.pending: dict[str, float] = {}
        self.set_aside: dict[str, str] = {}
        self._now: float | None = None
        # (departed_at, bookie) of every pending departure, a heap; entries of departures cancelled
        # or restarted since stay until their time comes and are skipped then.
        self._due: list[tuple[float, str]] = []

    # -- time ------------------------------------------------------------------------------------

    def advance(self, now: float) -> frozenset[str]:
        """Take the clock reading of the current public call; drop expired leaves; return them.

        Cost: O(1) until the earliest pending departure is due, then O(log departures) for each due
        (or cancelled) one: every public call of the policy advances it, so it must not walk them all.
        """
        self._now = now
        due, pending, period = self._due, self.pending, self.period_s
        if not due or now < due[0][0] + period:
            return frozenset()
        expired: list[str] = []
        while due and due[0][0] + period <= now:
            left_at, bookie = heapq.heappop(due)
            if pending.get(bookie) != left_at:
                continue                       # cancelled, or departed again later
            del pending[bookie]
            expired.append(bookie)
            if self.set_aside.pop(bookie, None) is None:
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
        """Add (or move) a leaf now; a pending departure of the same bookie is cancelled.

        A location of another depth than the leaves present is accepted when every other leaf is a
        pending departure: those leaves are set aside (see the module docstring).

        Raises:
            InvalidLocationError, InvalidTopologyError: as `NetworkTopology.add` (a live leaf of
                another depth is present); the tree is then unchanged.
        """
        # BK bug fixed (spec bookkeeper-rackaware.md App. A #10): a rejoin under another rack moves the
        # leaf (NetworkTopology.add) instead of leaving a stale copy under the old rack.
        try:
            super().add(bookie, location)
        except InvalidTopologyError:
            if not self._set_aside_departed(bookie):
                raise
            super().add(bookie, location)
        self.pending.pop(bookie, None)
        self.set_aside.pop(bookie, None)

    def _set_aside_departed(self, bookie: str) -> bool:
        """Take every pending leaf but `bookie`'s out of the tree, if no other leaf is live.

        Difference from BookKeeper (policies-rackaware.md): Java's stabilized tree refuses a live
        bookie of another depth while departed leaves remain. Returns whether anything was set aside.
        Cost: O(leaves).
        """
        pending = self.pending
        others = [b for b in self.bookies() if b != bookie]
        if not others or any(b not in pending for b in others):
            return False
        for other in sorted(others):
            self.set_aside[other] = self.rack_of(other)  # type: ignore[assignment]
            NetworkTopology.remove(self, other)
        return True

    def remove(self, bookie: str) -> None:
        """Mark the bookie as departed at the last clock reading; its leaf stays until it expires.

        A bookie that is not in the tree is ignored. A bookie already pending keeps its first
        departure time (in Java the first timer removes it).
        """
        if bookie not in self or bookie in self.pending:
            return
        left_at = self.pending[bookie] = self._now if self._now is not None else 0.0
        heapq.heappush(self._due, (left_at, bookie))

    def remove_now(self, bookie: str) -> None:
        """Remove a leaf immediately, pending or not (state restore, tests)."""
        self.pending.pop(bookie, None)
        self.set_aside.pop(bookie, None)
        NetworkTopology.remove(self, bookie)

    def add_pending(self, bookie: str, location: str, departed_at: float, set_aside: bool = False) -> None:
        """Restore a pending departure: the leaf is present (or, `set_aside`, kept out of the tree)
        and leaves at `departed_at + period_s`."""
        if set_aside:
            NetworkTopology.remove(self, bookie)
            self.set_aside[bookie] = normalize(location)
        else:
            NetworkTopology.add(self, bookie, location)
        self.pending[bookie] = departed_at
        heapq.heappush(self._due, (departed_at, bookie))

    def copy(self) -> StabilizedTopology:
        other = StabilizedTopology(self.period_s)
        base = NetworkTopology.copy(self)
        for name in ("_members", "_rack_of", "_depth", "_sorted_racks"):
            setattr(other, name, getattr(base, name))
        other.pending = dict(self.pending)
        other.set_aside = dict(self.set_aside)
        other._now = self._now
        other._due = list(self._due)
        return other

    # -- snapshots -------------------------------------------------------------------------------

    def export_pending(self) -> dict[str, dict[str, object]]:
        """JSON-able pending departures: bookie -> {"location", "departed_at"}, plus `"set_aside": true`
        for a departure whose leaf was set aside."""
        exported: dict[str, dict[str, object]] = {}
        for bookie in sorted(self.pending):
            rack = self.set_aside.get(bookie)
            if rack is None:
                exported[bookie] = {"location": self.rack_of(bookie), "departed_at": self.pending[bookie]}
            else:
                exported[bookie] = {"location": rack, "departed_at": self.pending[bookie], "set_aside": True}
        return exported

    def import_pending(self, pending: Mapping[str, Mapping[str, object]]) -> None:
        """Restore what `export_pending` produced (the leaves are added if missing; a missing
        `set_aside` means the leaf was in the tree)."""
        for bookie, entry in sorted(pending.items()):
            self.add_pending(bookie, str(entry["location"]), float(entry["departed_at"]),  # type: ignore[arg-type]
                             bool(entry.get("set_aside", False)))

    def check_invariants(self) -> None:
        """Assert the tree is consistent and every pending bookie has its leaf, or had it set aside
        for a live leaf of another depth (tests only)."""
        super().check_invariants()
        assert self.set_aside.keys() <= self.pending.keys(), "a set-aside leaf is not a pending departure"
        assert set(self.pending.items()) <= {(b, t) for t, b in self._due}, "a departure the heap does not hold"
        for bookie in self.pending:
            if bookie in self.set_aside:
                assert bookie not in self, f"set-aside departure {bookie} is still in the tree"
            else:
                assert bookie in self, f"pending departure {bookie} has no leaf"
