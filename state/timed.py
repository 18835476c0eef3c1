"""The cluster model's timed changes: stabilization delays, flap windows and bookie-history TTLs.

`TimedChanges` is the part of `state.cluster.ClusterModel` that keeps what falls due later, each kind
on its own expiry heap of `(due, bookie, stamp)` entries:

* **pending leaves** (`pending`: bookie -> when it left, in seconds): a writable bookie that departs
  under a stabilizing policy stays placeable for `networkTopologyStabilizePeriodSeconds`
  (`_pending_heap`, due in seconds). `pending_serial` counts every change of `pending` and
  `pending_log` names the bookies of the latest ones, so the health checks read the changes only
  (`pending_changes_since`, O(changes)).
* **flaps** (`flaps`: bookie -> departure times inside the window, `flapping`: at or over the
  threshold): `_flap_heap`, due when a departure leaves `engine.flapWindowSeconds`.
* **history** (`absent_since`, `lost`): what the model knows of a bookie that is gone expires
  `engine.bookieHistoryTtlSeconds` after it left (`_history_heap`); the model's `_forget` hook drops it.

A heap entry is stale once the state it indexes moved on (the bookie returned, left again, or its
departure left the window); stale entries are dropped when they reach the top, so every change
costs O(log n) and finding the next due time O(1) amortised. The heaps are a function of the state
alone (`rebuild_expiry_heaps`, after a snapshot restore).

The class is a mixin: `ClusterModel.__init__` creates the attributes it declares, and it calls the
model's `location_of`, `_forget` and `policy`.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from typing import TYPE_CHECKING

from . import outputs
from .outputs import Output

if TYPE_CHECKING:
    from policies import PlacementPolicy

    from .audit import LedgerAudit
    from .settings import ModelSettings


class TimedChanges:
    """Pending leaves, flap windows and bookie history of one cluster, on expiry heaps."""

    cluster: str
    settings: ModelSettings
    policy: PlacementPolicy
    audit: LedgerAudit
    clock_ms: int
    version: int
    stabilize_period_s: int
    lost: set[str]
    absent_since: dict[str, int]
    pending: dict[str, float]
    pending_serial: int
    pending_log: list[str]
    flaps: dict[str, deque[int]]
    flapping: set[str]
    _pending_heap: list[tuple[float, str, float]]
    _history_heap: list[tuple[int, str, int]]
    _flap_heap: list[tuple[int, str, int]]

    @property
    def now_s(self) -> float:
        """The cluster clock in seconds: the policy's clock (event time, never the wall clock)."""
        return self.clock_ms / 1000

    # -- when, and what, falls due ----------------------------------------------------------------

    def next_expiry_ms(self) -> int | None:
        """When the next timed change falls due, or None when nothing waits.

        Timed changes: a stabilization delay that ends, a departure leaving the flap window, a bookie's
        history TTL, an audited ledger's TTL. Entries made stale by later events are dropped on the way.
        Cost: O(1) amortised.
        """
        due = self.next_departure_due_ms()
        history = self._next_history_ms()
        if history is not None and (due is None or history < due):
            due = history
        oldest = self.audit.entries.oldest_seen_ms()
        if oldest is not None:         # `LedgerAudit.next_expiry_ms`, inlined: it runs once per record
            ledger = oldest + self.audit.ttl_ms
            if due is None or ledger < due:
                due = ledger
        return due

    def next_departure_due_ms(self) -> int | None:
        """When the next stabilization delay or flap window ends (what an idle tick is armed for)."""
        due = None
        pending = self._pending_heap
        if pending:
            while pending and self.pending.get(pending[0][1]) != pending[0][2]:
                heapq.heappop(pending)
            if pending:
                due = _seconds_to_ms(pending[0][0])
        flaps = self._flap_heap
        if flaps:
            while flaps and _flap_entry_is_stale(self.flaps.get(flaps[0][1]), flaps[0][2]):
                heapq.heappop(flaps)
            if flaps and (due is None or flaps[0][0] < due):
                due = flaps[0][0]
        return due

    def _next_history_ms(self) -> int | None:
        history = self._history_heap
        while history and self.absent_since.get(history[0][1]) != history[0][2]:
            heapq.heappop(history)
        return history[0][0] if history else None

    def expire_due(self, time_ms: int) -> list[Output]:
        """Move the clock to `time_ms` (never back) and apply every timed change due by then.

        Each expiry counts one version of its own, so the version does not depend on which records
        (batch, shard) a model happened to see. Returns the join-failure alerts a forgotten location
        causes. Cost: O(log n) per expiry.
        """
        self.clock_ms = max(self.clock_ms, time_ms)
        if self.pending_log:
            self.pending_log.clear()   # observed after the previous record or expiry (`state.health`)
        if self._pending_heap:
            self._expire_pending()
        if self._flap_heap and self._flap_heap[0][0] <= self.clock_ms:
            self._expire_flaps()
        if self._history_heap and self._history_heap[0][0] <= self.clock_ms:
            return self._expire_history()
        return []

    def _expire_pending(self) -> None:
        now_s = self.now_s
        heap = self._pending_heap
        while heap and heap[0][0] <= now_s:
            _, bookie, left_s = heapq.heappop(heap)
            if self.pending.get(bookie) == left_s:
                self._end_pending(bookie)
                self.version += 1

    def _expire_history(self) -> list[Output]:
        heap = self._history_heap
        alerts: list[Output] = []
        while heap and heap[0][0] <= self.clock_ms:
            _, bookie, since = heapq.heappop(heap)
            if self.absent_since.get(bookie) == since:
                alerts += self._forget(bookie)
        return alerts

    def _expire_flaps(self) -> None:
        """Departures leave the flap window one by one; a bookie stops flapping below the threshold."""
        heap = self._flap_heap
        horizon = self.clock_ms - self.settings.flap_window_ms
        while heap and heap[0][0] <= self.clock_ms:
            _, bookie, departed = heapq.heappop(heap)
            times = self.flaps.get(bookie)
            if _flap_entry_is_stale(times, departed):
                continue
            while times and times[0] <= horizon:
                times.popleft()
            if not times:
                del self.flaps[bookie]
            if len(times) < self.settings.flap_threshold:
                self.flapping.discard(bookie)

    # -- presence, departures, flaps ----------------------------------------------------------------

    def _present(self, bookie: str) -> None:
        if self.absent_since.pop(bookie, None) is not None:
            self.lost.discard(bookie)

    def _absent(self, bookie: str, *, lost: bool) -> None:
        since = self.clock_ms
        self.absent_since[bookie] = since
        if lost:
            self.lost.add(bookie)
        heapq.heappush(self._history_heap, (since + self.settings.history_ttl_ms, bookie, since))

    def _departure(self, bookie: str) -> list[Output]:
        """A writable bookie leaves the writable set now: stabilization and flap counting.

        Call before the policy hears of it (the policy still knows it).
        """
        if self.stabilize_period_s and bookie in self.policy.known and bookie not in self.pending:
            left_s = self.now_s
            self.pending[bookie] = left_s
            self.pending_serial += 1
            self.pending_log.append(bookie)
            heapq.heappush(self._pending_heap, (left_s + self.stabilize_period_s, bookie, left_s))
        return self._count_flap(bookie)

    def _end_pending(self, bookie: str) -> None:
        del self.pending[bookie]
        self.pending_serial += 1
        self.pending_log.append(bookie)

    def replace_pending(self, pending: dict[str, float]) -> None:
        """Put `pending` in place wholesale (a snapshot restore): readers compare the whole dicts next."""
        self.pending = pending
        self.pending_serial += 1
        self.pending_log.clear()

    def pending_changes_since(self, serial: int) -> list[str] | None:
        """The bookies that entered or left `pending` after change number `serial` (repeats possible),
        or None when the log no longer reaches back that far (the caller compares the whole dicts).

        A reader that looks after every record and expiry always gets the list. Cost: O(changes).
        """
        missed = self.pending_serial - serial
        log = self.pending_log
        if missed < 0 or missed > len(log):
            return None
        return log[len(log) - missed:] if missed else []

    def _count_flap(self, bookie: str) -> list[Output]:
        """Departures inside the window (now - window, now]; alert when the threshold is reached."""
        now = self.clock_ms
        window = self.settings.flap_window_ms
        times = self.flaps.get(bookie)
        if times is None:
            times = self.flaps[bookie] = deque()
        while times and times[0] <= now - window:
            times.popleft()
        times.append(now)
        heapq.heappush(self._flap_heap, (now + window, bookie, now))
        count = len(times)
        if count < self.settings.flap_threshold:
            self.flapping.discard(bookie)
            return []
        if bookie in self.flapping:
            return []
        self.flapping.add(bookie)
        return [outputs.alert(
            alert_type=outputs.ALERT_FLAPPING, cluster=self.cluster, subject=bookie, time_ms=now, key=bookie,
            severity=outputs.WARNING,
            data={"bookie": bookie, "departures": count, "window_seconds": self.settings.flap_window_s,
                  "threshold": self.settings.flap_threshold, "location": self.location_of(bookie)})]

    def flap_count(self, bookie: str) -> int:
        """Departures of `bookie` inside the flap window ending at the clock."""
        times = self.flaps.get(bookie, ())
        horizon = self.clock_ms - self.settings.flap_window_ms
        return sum(1 for t in times if t > horizon)

    def pending_leaves(self) -> dict[str, float]:
        """bookie -> time (s) at which its stabilization delay ends, in bookie order."""
        period = self.stabilize_period_s
        return {bookie: self.pending[bookie] + period for bookie in sorted(self.pending)}

    def rebuild_expiry_heaps(self) -> None:
        """Expiry heaps from the state they index (their order is a function of the state alone)."""
        period = self.stabilize_period_s
        self._pending_heap = [(left + period, b, left) for b, left in self.pending.items()]
        ttl = self.settings.history_ttl_ms
        self._history_heap = [(since + ttl, b, since) for b, since in self.absent_since.items()]
        window = self.settings.flap_window_ms
        self._flap_heap = [(t + window, b, t) for b, times in self.flaps.items() for t in times]
        for heap in (self._pending_heap, self._history_heap, self._flap_heap):
            heapq.heapify(heap)


def _seconds_to_ms(seconds: float) -> int:
    """The first whole millisecond m with m / 1000 >= seconds (the model's clock is in ms, delays in s)."""
    ms = math.ceil(seconds * 1000)
    while (ms - 1) / 1000 >= seconds:
        ms -= 1
    while ms / 1000 < seconds:
        ms += 1
    return ms


def _flap_entry_is_stale(times: deque[int] | None, departed: int) -> bool:
    """Whether a flap-heap entry no longer stands for a departure inside some bookie's window."""
    return not times or departed < times[0]


__all__ = ["TimedChanges"]
