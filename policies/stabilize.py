"""Pending departures on the injected clock, and the stabilized topology built on them.

Spec: bookkeeper-rackaware.md §2.4 ("Stabilized tree mechanics"); bookkeeper-region-zone-isolation.md
§3.8 (the zone-aware stabilization wrapper).

BookKeeper's `StabilizeNetworkTopology` keeps a departed bookie for
`networkTopologyStabilizePeriodSeconds` after it leaves. `PendingDepartures` is that one rule for
every policy: a departure records where the bookie was and when it left, and stays pending while
`now < departed_at + period_s`. The owning policy reads its injected clock once per public call and
passes the reading in; `expire(now)` drops what is due. That is exactly what BookKeeper's one-shot
timer does (it fires `period` seconds after the departure), including its rejoin rules:

* a bookie that comes back before its departure expired cancels it;
* if it leaves again, the new departure time counts (the old timer in Java finds the bookie present
  since then and does nothing).

The rack-aware policy keeps its departures as leaves of a `StabilizedTopology`; the zone-aware
policy keeps them beside its live topology and indexes them for its second attempts.

`StabilizedTopology`: when a bookie leaves, `remove` does not take its leaf out of the tree; it
records a pending departure. The leaf goes away once the departure expires, which `advance(now)`
checks. A bookie that comes back under another rack is moved, not duplicated (BK bug fixed, spec
bookkeeper-rackaware.md App. A #10; `NetworkTopology.add` moves same-id leaves).

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
from collections.abc import Container, Mapping

from .errors import InvalidTopologyError
from .location import normalize
from .topology import NetworkTopology


class PendingDepartures:
    """Departed bookies waiting out `period_s` seconds of the injected clock.

    Args:
        period_s: `networkTopologyStabilizePeriodSeconds` (0 when stabilization is off: the owning
            policy then records nothing).

    Attributes:
        departed_at: bookie -> event time (s) at which it left, for every departure not yet
            expired or cancelled (read it; change it only through the methods).
    """

    __slots__ = ("period_s", "departed_at", "_locations", "_due")

    def __init__(self, period_s: float) -> None:
        self.period_s = period_s
        self.departed_at: dict[str, float] = {}
        self._locations: dict[str, str] = {}
        # (departed_at, bookie) of every departure, a heap; entries of departures cancelled or
        # restarted since stay until their time comes and are skipped then.
        self._due: list[tuple[float, str]] = []

    def depart(self, bookie: str, location: str, now: float) -> None:
        """Record that `bookie` left `location` at `now`; a pending departure of it restarts from `now`."""
        self.departed_at[bookie] = now
        self._locations[bookie] = location
        heapq.heappush(self._due, (now, bookie))

    def cancel(self, bookie: str) -> None:
        """Forget the departure of `bookie` (it came back, or leaves at once); nothing if it has none."""
        self.departed_at.pop(bookie, None)
        self._locations.pop(bookie, None)

    def clear(self) -> None:
        """Forget every departure."""
        self.departed_at = {}
        self._locations = {}
        self._due = []

    def expire(self, now: float) -> tuple[str, ...]:
        """Forget every departure whose delay has run out at `now`; return them in the order they fell due.

        Cost: O(1) until the earliest departure is due, then O(log departures) for each due (or
        cancelled) one: the owning policy calls it on every public call, so it must not walk them all.
        """
        due, period = self._due, self.period_s
        if not due or now < due[0][0] + period:
            return ()
        departed_at, locations = self.departed_at, self._locations
        expired: list[str] = []
        while due and due[0][0] + period <= now:
            left_at, bookie = heapq.heappop(due)
            if departed_at.get(bookie) != left_at:
                continue                       # cancelled, or departed again later
            del departed_at[bookie]
            del locations[bookie]
            expired.append(bookie)
        return tuple(expired)

    def usable(self, now: float) -> dict[str, str]:
        """bookie -> location of the departures still pending at `now`, in bookie order.

        Cost: O(departures log departures).
        """
        period, locations = self.period_s, self._locations
        return {b: locations[b] for b, left in sorted(self.departed_at.items()) if left + period > now}

    def expiries(self, now: float | None = None) -> dict[str, float]:
        """bookie -> time (s) at which its departure expires, in bookie order; with `now`, only the
        departures still pending at `now`."""
        period = self.period_s
        if now is None:
            return {b: left + period for b, left in sorted(self.departed_at.items())}
        return {b: left + period for b, left in sorted(self.departed_at.items()) if left + period > now}

    def location_of(self, bookie: str) -> str | None:
        """Where `bookie` was when it left, or None when it has no departure."""
        return self._locations.get(bookie)

    def __contains__(self, bookie: object) -> bool:
        return bookie in self.departed_at

    def __len__(self) -> int:
        return len(self.departed_at)

    def copy(self) -> PendingDepartures:
        other = PendingDepartures(self.period_s)
        other.departed_at = dict(self.departed_at)
        other._locations = dict(self._locations)
        other._due = list(self._due)
        return other

    # -- snapshots ---------------------------------------------------------------------------------

    def to_json(self, set_aside: Container[str] = ()) -> dict[str, dict[str, object]]:
        """JSON-able departures: bookie -> {"location", "departed_at"} in bookie order, plus
        `"set_aside": true` for the bookies in `set_aside`."""
        exported: dict[str, dict[str, object]] = {}
        locations = self._locations
        for bookie, left in sorted(self.departed_at.items()):
            if bookie in set_aside:
                exported[bookie] = {"location": locations[bookie], "departed_at": left, "set_aside": True}
            else:
                exported[bookie] = {"location": locations[bookie], "departed_at": left}
        return exported

    @staticmethod
    def entries_from_json(data: Mapping[str, Mapping[str, object]]) -> list[tuple[str, str, float, bool]]:
        """(bookie, location, departed_at, set_aside) of each entry `to_json` wrote, in bookie order
        (a missing `set_aside` is false)."""
        return [(str(bookie), str(entry["location"]), float(entry["departed_at"]),  # type: ignore[arg-type]
                 bool(entry.get("set_aside", False))) for bookie, entry in sorted(data.items())]

    def load_json(self, data: Mapping[str, Mapping[str, object]]) -> None:
        """Replace every departure with those `to_json` wrote."""
        self.clear()
        for bookie, location, departed_at, _ in self.entries_from_json(data):
            self.depart(bookie, location, departed_at)

    def check_invariants(self) -> None:
        """Assert every departure has its location and its place in the heap (tests only)."""
        assert self.departed_at.keys() == self._locations.keys(), "a departure without its location"
        assert set(self.departed_at.items()) <= {(b, t) for t, b in self._due}, "a departure the heap does not hold"


class StabilizedTopology(NetworkTopology):
    """A `NetworkTopology` whose removals wait `period_s` seconds on the policy's clock.

    Args:
        period_s: `networkTopologyStabilizePeriodSeconds` (> 0).

    Attributes:
        departures: the pending departures; a departed leaf is still in the tree unless it was set
            aside.
        set_aside: bookie -> location of a pending departure whose leaf was taken out of the tree
            because a live bookie of another depth arrived; it leaves `departures` when its delay ends.
    """

    __slots__ = ("departures", "set_aside", "_now")

    def __init__(self, period_s: float) -> None:
        super().__init__()
        if period_s <= 0:
            raise ValueError(f"networkTopologyStabilizePeriodSeconds: a stabilized topology needs a period > 0, "
                             f"got {period_s!r}")
        self.departures = PendingDepartures(period_s)
        self.set_aside: dict[str, str] = {}
        self._now: float | None = None

    @property
    def period_s(self) -> float:
        """`networkTopologyStabilizePeriodSeconds`."""
        return self.departures.period_s

    @property
    def pending(self) -> dict[str, float]:
        """bookie -> event time (s) at which it left, for every pending departure (read only)."""
        return self.departures.departed_at

    # -- time ------------------------------------------------------------------------------------

    def advance(self, now: float) -> frozenset[str]:
        """Take the clock reading of the current public call; drop expired leaves; return them.

        Cost: as `PendingDepartures.expire`, plus O(log leaves) per expired leaf.
        """
        self._now = now
        expired = self.departures.expire(now)
        if not expired:
            return frozenset()
        for bookie in expired:
            if self.set_aside.pop(bookie, None) is None:
                NetworkTopology.remove(self, bookie)
        return frozenset(expired)

    @property
    def now(self) -> float | None:
        """The last clock reading given to `advance` (None before the first)."""
        return self._now

    def expiries(self) -> dict[str, float]:
        """bookie -> time (s) at which its leaf leaves the tree, in bookie order."""
        return self.departures.expiries()

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
        self.departures.cancel(bookie)
        self.set_aside.pop(bookie, None)

    def _set_aside_departed(self, bookie: str) -> bool:
        """Take every pending leaf but `bookie`'s out of the tree, if no other leaf is live.

        Difference from BookKeeper (policies-rackaware.md): Java's stabilized tree refuses a live
        bookie of another depth while departed leaves remain. Returns whether anything was set aside.
        Cost: O(leaves).
        """
        departures = self.departures
        others = [b for b in self.bookies() if b != bookie]
        if not others or any(b not in departures for b in others):
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
        if bookie not in self or bookie in self.departures:
            return
        self.departures.depart(bookie, self.rack_of(bookie),  # type: ignore[arg-type]
                               self._now if self._now is not None else 0.0)

    def remove_now(self, bookie: str) -> None:
        """Remove a leaf immediately, pending or not (state restore, tests)."""
        self.departures.cancel(bookie)
        self.set_aside.pop(bookie, None)
        NetworkTopology.remove(self, bookie)

    def add_pending(self, bookie: str, location: str, departed_at: float, set_aside: bool = False) -> None:
        """Restore a pending departure: the leaf is present (or, `set_aside`, kept out of the tree)
        and leaves at `departed_at + period_s`."""
        if set_aside:
            NetworkTopology.remove(self, bookie)
            self.set_aside[bookie] = location = normalize(location)
        else:
            NetworkTopology.add(self, bookie, location)
            location = self.rack_of(bookie)  # type: ignore[assignment]
        self.departures.depart(bookie, location, departed_at)

    def copy(self) -> StabilizedTopology:
        other = StabilizedTopology(self.period_s)
        base = NetworkTopology.copy(self)
        for name in ("_members", "_rack_of", "_depth", "_sorted_racks"):
            setattr(other, name, getattr(base, name))
        other.departures = self.departures.copy()
        other.set_aside = dict(self.set_aside)
        other._now = self._now
        return other

    # -- snapshots -------------------------------------------------------------------------------

    def export_pending(self) -> dict[str, dict[str, object]]:
        """JSON-able pending departures: bookie -> {"location", "departed_at"}, plus `"set_aside": true`
        for a departure whose leaf was set aside."""
        return self.departures.to_json(self.set_aside)

    def import_pending(self, pending: Mapping[str, Mapping[str, object]]) -> None:
        """Restore what `export_pending` produced (the leaves are added if missing; a missing
        `set_aside` means the leaf was in the tree)."""
        for bookie, location, departed_at, set_aside in PendingDepartures.entries_from_json(pending):
            self.add_pending(bookie, location, departed_at, set_aside)

    def check_invariants(self) -> None:
        """Assert the tree is consistent and every pending bookie has its leaf, or had it set aside
        for a live leaf of another depth, at the location its departure records (tests only)."""
        super().check_invariants()
        departures = self.departures
        departures.check_invariants()
        assert self.set_aside.keys() <= departures.departed_at.keys(), "a set-aside leaf is not a pending departure"
        for bookie in departures.departed_at:
            if bookie in self.set_aside:
                assert bookie not in self, f"set-aside departure {bookie} is still in the tree"
                assert self.set_aside[bookie] == departures.location_of(bookie), f"{bookie} set aside elsewhere"
            else:
                assert bookie in self, f"pending departure {bookie} has no leaf"
                assert self.rack_of(bookie) == departures.location_of(bookie), f"{bookie}'s leaf moved"
