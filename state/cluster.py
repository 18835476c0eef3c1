"""`ClusterModel`: one cluster's state between parsed records and the placement policy.

Spec: bookkeeper-rackaware.md §2 (membership, stabilization, rack change), §7.2 (disk weights);
CONTRACT §1 (`resolver`, `rack_info`, `features`, `clock`) and §2 (what each event means).

The model owns the policy instance and everything the policy reads: the resolver mapping, Pulsar
rack info, the features dict and the clock (event time). It applies cluster events one at a time, at
the time the step gives it (`advance`), and keeps:

* membership: `writable`, `readonly`, `lost` (registered once, now gone);
* what it knows of each bookie (`facts`: location, hostname, isolation group, whether rack info was
  set by `bookie_location`), the disk reports (`disk`) and the feature switches (`features`);
* `record_clock_ms`, the latest time of a record applied (None before the first): the clock without
  the timed changes, which only move `clock_ms`. `engine.maxFutureSkewSeconds` is measured from it, so
  whether a record is refused does not depend on when idle ticks ran (`state.step`);
* `pending` leaves (stabilization), `flaps` (departures inside the flap window), `late_records`,
  `join_failures`, and `version`, the topology version, bumped by every change that can affect
  placement;
* `pending_serial` and `pending_log`: which bookies entered or left `pending` lately, so the health
  checks, which compare `pending` with what they last saw, read only the changes (O(changes) per
  observation, not O(pending); see `pending_changes_since`).

Where a bookie's location lives (how the isolation policy sees the right membership):

* A bookie **without a group** that has a location is an entry of the resolver mapping
  (`mapping[bookie] = location`, CONTRACT §1 resolver semantics: "", "/" or a relative path make its
  join fail). Without a location it has no entry and resolves like any unmapped bookie. A
  `bookie_location` event is rack info, so its rack is read as Pulsar reads racks before it is stored
  (`rack0` is `/rack0`, empty or `/` the policy's default location), grouped or not.
* A bookie **with a group** is an entry of `rack_info[group][bookie] = {"rack", "hostname"}` (Pulsar's
  `/bookies`; one group per bookie, as Pulsar's `set-bookie-rack`), so only the isolation policy sees
  it as a group member. Its rack is *also* written to the mapping, read as Pulsar reads racks (`/` or
  empty = the policy's default location). The mapping answers before rack info, by bookie id, and a
  listed bookie never falls back to its host in rack info, so this changes no resolution.

Costs: every event is O(1) dict work plus at most one policy call; membership calls hand the policy
the current sets and the bookies that changed (`membership_changed`), so `on_cluster_changed`, a
snapshot API, costs O(changed + join failures) instead of O(bookies); a cluster view, and the first
call after a restore, let it compare the whole sets. The disk map (`update_bookie_info`) is handed
over when a request needs it, which is exact because only placement reads weights. Rack info
(`update_rack_info`) is handed over at the event that changed it, as Pulsar's watch fires: besides
group membership it retries the moves of listed bookies that failed, and whether a retry succeeds
depends on who is there at that moment, so it cannot wait for a request (a shard of the cluster that
gets no request would retry later than one that does). The policy gets the listings that changed
(`update_rack_entries`): O(changed bookies) for the rack-aware and isolation policies, which take
them alone, O(rack info) for the others; the first hand-over after a snapshot restore is of the
whole rack info (O(rack info)).

It also carries the status record's state (`status`: `state.status`) and the write-skew windows
(`skew`: `state.skew`), which the step feeds.

The model reads its policy only through the `policies.PlacementPolicy` interface. Its timed changes
(stabilization delays, flap windows, bookie-history TTLs and their expiry heaps) live in
`state.timed.TimedChanges`, which the model extends.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from events.model import (
    BookieDisk,
    BookieLocation,
    BookieLost,
    BookieReadonly,
    BookieWritable,
    ClusterView,
    FeatureSet,
)
from policies import BookieInfo, PlacementPolicy
from policies.factory import policy_from_settings
from policies.resolver import host_of, pulsar_rack
from policies.settings import PlacementSettings

from . import outputs
from .audit import LedgerAudit
from .health import TopologyHealth
from .outputs import Output
from .settings import ModelSettings
from .skew import SkewDetector
from .status import StatusState
from .timed import TimedChanges

_KEEP: Any = object()

#: Policies that keep departed bookies for `networkTopologyStabilizePeriodSeconds` (spec §2.4).
STABILIZING_POLICIES = frozenset({"rackaware", "isolated", "regionaware", "zoneaware"})


@dataclass(frozen=True, slots=True)
class BookieFacts:
    """What the events said about one bookie.

    Attributes:
        location: its own location (None: none of its own; it resolves like an unmapped bookie).
        hostname: the host name rack info lists for it (Pulsar resolves other bookies on that host).
        group: its isolation group (None: ungrouped).
        pinned: set by `bookie_location` (admin rack info): kept until deleted, never expired.
    """

    location: str | None = None
    hostname: str | None = None
    group: str | None = None
    pinned: bool = False

    def is_empty(self) -> bool:
        return self.location is None and self.hostname is None and self.group is None and not self.pinned


class ClusterModel(TimedChanges):
    """One cluster: membership, locations, disk, features, stabilization, flaps; owns its policy.

    Args:
        cluster: the cluster name.
        settings: the model settings (seed, history TTL, flap window and threshold), and the placement
            settings the policy is created from (`settings.placement`).
    """

    def __init__(self, cluster: str, settings: ModelSettings) -> None:
        self.cluster = cluster
        self.settings = settings
        self.placement: PlacementSettings = settings.placement
        self.policy_name = self.placement.policy
        period = self.placement.stabilize_period_s
        self.stabilize_period_s = period if self.policy_name in STABILIZING_POLICIES else 0
        self.clock_ms = 0
        self.record_clock_ms: int | None = None
        self.version = 0
        self.late_records = 0
        self.writable: set[str] = set()
        self.readonly: set[str] = set()
        # Bookies whose writable/read-only membership changed since the policy last saw it, handed to
        # `on_cluster_changed(changed=...)` so the policy need not compare whole sets (O(bookies) per
        # event); None: unknown (a new or restored model, a cluster view): the policy compares them.
        self.membership_changed: set[str] | None = None
        self.lost: set[str] = set()
        self.facts: dict[str, BookieFacts] = {}
        self.mapping: dict[str, str] = {}
        self.rack_info: dict[str, dict[str, dict[str, Any]]] = {}
        self.features: dict[str, int] = {}
        self.disk: dict[str, BookieInfo] = {}
        self.absent_since: dict[str, int] = {}
        self.pending: dict[str, float] = {}
        # Changes to `pending` (a bookie added or removed): `pending_serial` counts them all, and
        # `pending_log` holds the bookies of the last len(pending_log) ones. The log is cleared at the
        # start of each event and expiry; a reader that fell further behind compares the whole dicts.
        self.pending_serial = 0
        self.pending_log: list[str] = []
        self.flaps: dict[str, deque[int]] = {}
        self.flapping: set[str] = set()
        self.join_failures: dict[str, str] = {}
        self.rack_info_stale = False
        # Bookies whose rack-info listing changed since the policy last got rack info (handed over
        # alone when the policy takes `update_rack_entries`); None: unknown, hand over all of it.
        self.rack_info_dirty: set[str] | None = set()
        self.disk_stale = False
        self._pending_heap: list[tuple[float, str, float]] = []
        self._history_heap: list[tuple[int, str, int]] = []
        self._flap_heap: list[tuple[int, str, int]] = []
        self.policy: PlacementPolicy = self.new_policy()
        # The ledger audit and the topology-health alerts (fed by `health.after_record`).
        self.audit = LedgerAudit(cluster, settings.audit_max_ledgers, settings.audit_ttl_s * 1000, settings.seed)
        self.health = TopologyHealth(cluster)
        # Open ledger-alert counts and the status record's emission state (`state.status`); the write
        # share windows and skew alerts (`state.skew`).
        self.status = StatusState()
        self.skew = SkewDetector(settings)

    # -- the policy ------------------------------------------------------------------------------

    def _clock(self) -> float:
        return self.clock_ms / 1000

    def new_policy(self) -> PlacementPolicy:
        """A policy over the model's mapping, rack info and features (as they are now)."""
        return policy_from_settings(self.placement, resolver=self.mapping, clock=self._clock,
                                    rack_info=self.rack_info, features=self.features)

    @property
    def default_location(self) -> str:
        return self.policy.default_location

    def next_status_due_ms(self) -> int | None:
        """When a status record is due at an interval's end (None: none due). An idle tick at or after
        it emits the record (`state.step.settle`); see `state.status`."""
        return self.status.due_ms

    # -- time ------------------------------------------------------------------------------------

    def advance(self, time_ms: int) -> bool:
        """Move the clock to a record's time (never back).

        Timed changes up to that time must be applied first, observed, by `state.step.settle`.

        Returns:
            True when the record is late (older than the clock); it is then applied at the clock.
        """
        latest = self.record_clock_ms
        if latest is None or time_ms > latest:
            self.record_clock_ms = time_ms
        if time_ms < self.clock_ms:    # `state.ordering.effective_time`, inlined (once per record)
            self.late_records += 1
            return True
        self.clock_ms = time_ms
        return False

    def _forget(self, bookie: str) -> list[Output]:
        """History TTL ended for an absent bookie: drop its disk report and its unpinned facts.

        Returns the join-failure alerts the change of location causes.
        """
        del self.absent_since[bookie]
        self.lost.discard(bookie)
        self.disk.pop(bookie, None)
        facts = self.facts.get(bookie)
        if facts is not None and not facts.pinned:
            mapping_changed, rack_changed = self._set_facts(bookie, BookieFacts())
            if mapping_changed or rack_changed:
                self.version += 1
                return self._locations_changed(bookie, mapping_changed, rack_changed)
        return []

    # -- events ----------------------------------------------------------------------------------

    def apply(self, event) -> list[Output]:  # noqa: ANN001 - any cluster event record
        """Apply one cluster event at the current clock; return the alerts it raised.

        Call `advance(event.time_ms)` first. Cost: O(1) dict work plus at most one policy call
        (`on_cluster_changed` with the changed bookies: O(1) for a one-bookie event; a cluster view
        is O(bookies)).
        """
        before = self.version
        if self.pending_log:
            self.pending_log.clear()   # observed after the previous record or expiry (`state.health`)
        alerts = _HANDLERS[type(event)](self, event)
        if self.version > before:
            self.version = before + 1        # one version per event, however many parts it changed
        return alerts

    def _on_writable(self, event: BookieWritable) -> list[Output]:
        bookie = event.bookie
        alerts = self._change_facts(
            bookie,
            location=_KEEP if event.location is None else event.location,
            hostname=_KEEP if event.hostname is None else event.hostname,
            group=_KEEP if event.group is None else event.group,
            registering=True)
        if bookie in self.writable:
            return alerts
        self.readonly.discard(bookie)
        self.writable.add(bookie)
        self._membership_touched(bookie)
        self._present(bookie)
        self.version += 1
        return alerts + self._cluster_changed((bookie,))

    def _on_readonly(self, event: BookieReadonly) -> list[Output]:
        bookie = event.bookie
        if bookie in self.readonly:
            return []
        alerts: list[Output] = []
        if bookie in self.writable:
            # One change, not a transient death: a single on_cluster_changed call with the bookie
            # moved from writable to read-only (Java's watcher makes two, spec §2.1).
            alerts = self._departure(bookie)
            self.writable.discard(bookie)
        self.readonly.add(bookie)
        self._membership_touched(bookie)
        self._present(bookie)
        self.version += 1
        return alerts + self._cluster_changed(())

    def _on_lost(self, event: BookieLost) -> list[Output]:
        bookie = event.bookie
        alerts: list[Output] = []
        if bookie in self.writable:
            alerts = self._departure(bookie)
            self.writable.discard(bookie)
        elif bookie in self.readonly:
            self.readonly.discard(bookie)
        else:
            return []
        self._membership_touched(bookie)
        self._absent(bookie, lost=True)
        self.version += 1
        return alerts + self._cluster_changed(())

    def _on_view(self, event: ClusterView) -> list[Output]:
        new_writable = set(event.writable)
        new_readonly = set(event.readonly)
        if new_writable == self.writable and new_readonly == self.readonly:
            return []
        old_writable = self.writable
        alerts: list[Output] = []
        for bookie in sorted(old_writable - new_writable):
            alerts += self._departure(bookie)
        registered = new_writable | new_readonly
        for bookie in sorted((old_writable | self.readonly) - registered):
            self._absent(bookie, lost=True)
        for bookie in registered & self.absent_since.keys():
            self._present(bookie)
        self.writable = new_writable
        self.readonly = new_readonly
        self.membership_changed = None         # the whole view is new: the policy compares the sets
        self.version += 1
        return alerts + self._cluster_changed(sorted(new_writable - old_writable))

    def _on_location(self, event: BookieLocation) -> list[Output]:
        if event.location is None:
            # Pulsar's delete-bookie-rack: the bookie leaves rack info (and its group) entirely.
            return self._change_facts(event.bookie, location=None, hostname=None, group=None, pinned=False)
        # Rack info, read as Pulsar reads it (CONTRACT §1): `rack0` is `/rack0`; empty or `/` is the
        # default location, and the bookie joins.
        return self._change_facts(
            event.bookie, location=pulsar_rack(event.location) or self.default_location,
            hostname=_KEEP if event.hostname is None else event.hostname,
            group=_KEEP if event.group is None else event.group, pinned=True)

    def _on_disk(self, event: BookieDisk) -> list[Output]:
        bookie = event.bookie
        info = BookieInfo(total_disk=event.total_disk, free_disk=event.free_disk)
        if self.disk.get(bookie) == info:
            return []
        self.disk[bookie] = info
        if bookie not in self.writable and bookie not in self.readonly and bookie not in self.absent_since:
            self._absent(bookie, lost=False)
        if self.placement.disk_weighted:
            self.disk_stale = True
            self.version += 1
        return []

    def _on_feature(self, event: FeatureSet) -> list[Output]:
        if self.features.get(event.name) == event.value:
            return []
        self.features[event.name] = event.value
        self.version += 1
        return []

    # -- membership helpers ----------------------------------------------------------------------

    def _cluster_changed(self, joined: Iterable[str], *, report: bool = True) -> list[Output]:
        """Hand the current membership to the policy (one call) and report new join failures."""
        if self.rack_info_stale and self._resolves_through_rack_info(joined):
            self.flush_rack_info()
        # The policy retries the bookies whose join failed: one that left before, and was writable
        # again without a usable location, joins now, and returns as surely as a plain joiner.
        retried = tuple(self.policy.join_failures)
        changed, self.membership_changed = self.membership_changed, set()
        self.policy.on_cluster_changed(self.writable, self.readonly, changed=changed)
        known = self.policy.known
        for bookie in (*joined, *retried):
            if bookie in self.pending and bookie in known:
                self._end_pending(bookie)    # back inside the window: the pending leave is cancelled
        if self.placement.disk_weighted and not self.disk_stale:
            # A joiner starts at weight 0 in the policy; it gets its reported disk at the next request.
            # Bookies whose join had failed are retried by this call: they may join now too.
            disk = self.disk
            self.disk_stale = any(bookie in disk and disk[bookie].free_disk
                                  for bookie in (*joined, *self.join_failures))
        return self._join_failure_alerts() if report else []

    def _membership_touched(self, bookie: str) -> None:
        if self.membership_changed is not None:
            self.membership_changed.add(bookie)

    def _resolves_through_rack_info(self, joined: Iterable[str]) -> bool:
        """Whether the policy will resolve a bookie that has no mapping entry (a joiner or a retry)."""
        mapping = self.mapping
        if any(bookie not in mapping for bookie in joined):
            return True
        return any(bookie not in mapping for bookie in self.policy.join_failures)

    def _join_failure_alerts(self) -> list[Output]:
        current = self.policy.join_failures
        if not current and not self.join_failures:
            return []
        alerts = []
        for bookie, reason in sorted(current.items()):
            if self.join_failures.get(bookie) != reason:
                alerts.append(outputs.alert(
                    alert_type=outputs.ALERT_JOIN_FAILED, cluster=self.cluster, subject=bookie,
                    time_ms=self.clock_ms, key=bookie, severity=outputs.ERROR,
                    data={"bookie": bookie, "location": self.mapping.get(bookie), "reason": reason,
                          "writable": bookie in self.writable}))
        self.join_failures = dict(current)
        return alerts

    # -- locations -------------------------------------------------------------------------------

    def _change_facts(self, bookie: str, *, location: Any = _KEEP, hostname: Any = _KEEP, group: Any = _KEEP,
                      pinned: Any = _KEEP, registering: bool = False) -> list[Output]:
        old = self.facts.get(bookie, BookieFacts())
        new = BookieFacts(
            location=old.location if location is _KEEP else location,
            hostname=old.hostname if hostname is _KEEP else hostname,
            group=old.group if group is _KEEP else group,
            pinned=old.pinned if pinned is _KEEP else (pinned or False))
        mapping_changed, rack_changed = self._set_facts(bookie, new)
        if not registering and not new.pinned and bookie in self.facts and bookie not in self.writable \
                and bookie not in self.readonly and bookie not in self.absent_since:
            self._absent(bookie, lost=False)   # facts of an unregistered bookie expire like history
        if not (mapping_changed or rack_changed):
            return []
        self.version += 1
        return self._locations_changed(bookie, mapping_changed, rack_changed)

    def _set_facts(self, bookie: str, new: BookieFacts) -> tuple[bool, bool]:
        """Store new facts and derive the mapping and rack-info entries: (mapping changed, rack info changed)."""
        old = self.facts.get(bookie, BookieFacts())
        if new.is_empty():
            self.facts.pop(bookie, None)
        else:
            self.facts[bookie] = new
        rack_changed = False
        old_entry = _rack_entry(old)
        new_entry = _rack_entry(new)
        if old.group != new.group or old_entry != new_entry:
            rack_changed = True
            if self.rack_info_dirty is not None:
                self.rack_info_dirty.add(bookie)
            if old.group is not None:
                members = self.rack_info[old.group]
                del members[bookie]
                if not members:
                    del self.rack_info[old.group]
            if new.group is not None:
                self.rack_info.setdefault(new.group, {})[bookie] = new_entry
        return self._set_mapping(bookie, self._mapping_entry(new)), rack_changed

    def _mapping_entry(self, facts: BookieFacts) -> str | None:
        if facts.group is not None:
            # Read as Pulsar reads rack info: "/" or empty is the default location (the bookie joins).
            return pulsar_rack(facts.location) or self.default_location
        return facts.location

    def _set_mapping(self, bookie: str, entry: str | None) -> bool:
        old = self.mapping.get(bookie)
        if old == entry:
            return False
        if entry is None:
            del self.mapping[bookie]
        else:
            self.mapping[bookie] = entry
        return True

    def _locations_changed(self, bookie: str, mapping_changed: bool, rack_changed: bool, *,
                           report: bool = True) -> list[Output]:
        """Tell the policy (spec §2.5): the rack-change callback applies at once to writable bookies.

        Rack info follows at once (see the module docstring). A writable bookie whose join had failed
        is retried at once (BookKeeper would retry it at the next membership change).
        """
        if rack_changed:
            self.rack_info_stale = True
        alerts = self._notify_location(bookie, report) if mapping_changed else []
        if self.rack_info_stale:
            # Handing rack info over also retries the listed bookies whose last move failed, and whether
            # that succeeds depends on who is there: done at the event, as Pulsar's watch fires, not at
            # the next request (which a shard without requests never reaches). O(changed bookies) for
            # the policies that take `update_rack_entries`, O(rack info) for the others.
            self.flush_rack_info()
            if report:
                alerts += self._join_failure_alerts()
        return alerts

    def _notify_location(self, bookie: str, report: bool) -> list[Output]:
        affected = [bookie] if bookie in self.writable else []
        if ":" not in bookie:
            # A mapping key without a port is also a host: unmapped bookies on it resolve through it.
            affected += sorted(w for w in self.writable
                               if w != bookie and w not in self.mapping and host_of(w) == bookie)
        if not affected:
            return []
        if self.rack_info_stale and any(b not in self.mapping for b in affected):
            self.flush_rack_info()
        known = self.policy.known
        if any(b not in known for b in affected):
            return self._cluster_changed((), report=report)
        self.policy.on_bookie_rack_change(affected)
        return self._join_failure_alerts() if report else []

    def location_of(self, bookie: str) -> str | None:
        """Where the bookie is placed: the policy's answer for a known bookie, else its own mapping entry."""
        location = self.policy.known_location(bookie)
        return location if location is not None else self.mapping.get(bookie)

    # -- deferred whole-map updates ----------------------------------------------------------------

    def flush_rack_info(self) -> None:
        """Hand the current rack info to the policy (Pulsar's `/bookies` watch firing).

        The policy gets only the listings that changed (`update_rack_entries`), with the effect of the
        whole rack info: O(changed bookies + join failures) for the rack-aware and isolation policies,
        which take them alone, O(rack info) for the others. The first hand-over after a snapshot
        restore is of the whole rack info: O(rack info).
        """
        self.rack_info_stale = False
        dirty, self.rack_info_dirty = self.rack_info_dirty, set()
        if dirty is None:
            self.policy.update_rack_info(self.rack_info)
            return
        entries = {}
        for bookie in sorted(dirty):
            facts = self.facts.get(bookie)
            group = facts.group if facts is not None else None
            entries[bookie] = {} if group is None else {group: self.rack_info[group][bookie]}
        self.policy.update_rack_entries(entries)

    def flush_disk(self) -> None:
        """Hand the full disk map to the policy (`updateBookieInfo`, spec §7.2). O(bookies)."""
        self.disk_stale = False
        self.policy.update_bookie_info(self.disk)

    def prepare_request(self) -> None:
        """Bring deferred state into the policy before it answers a request: the disk map, and rack info
        still marked stale by a snapshot of an earlier engine (events hand it over at once now)."""
        if self.rack_info_stale:
            self.flush_rack_info()
        if self.disk_stale:
            self.flush_disk()

    # -- views -----------------------------------------------------------------------------------

    @property
    def dead(self) -> frozenset[str]:
        """Bookies that were registered and are gone, until their history expires."""
        return frozenset(self.lost)

    def describe(self) -> dict[str, Any]:
        """A small summary (for logs and tests)."""
        return {"cluster": self.cluster, "clock_ms": self.clock_ms, "version": self.version,
                "writable": len(self.writable), "readonly": len(self.readonly), "lost": len(self.lost),
                "pending": len(self.pending), "flapping": sorted(self.flapping), "late_records": self.late_records}

    # -- self-check (STYLE R13; tests only, never on the hot path) -----------------------------------

    def check_invariants(self) -> None:
        """Assert every internal invariant of the model and of its policy."""
        writable, readonly = self.writable, self.readonly
        assert not (writable & readonly), f"writable and read-only: {sorted(writable & readonly)}"
        registered = writable | readonly
        assert not (self.absent_since.keys() & registered), "a registered bookie is marked absent"
        assert self.lost <= self.absent_since.keys(), "a lost bookie has no absence time"
        policy = self.policy
        known = policy.known
        for bookie in set(self.pending) & writable:
            assert bookie not in known, f"pending leave of {bookie}, which is writable and known"
        assert len(self.pending_log) <= self.pending_serial, "more logged pending changes than changes"
        unseen = self.pending_changes_since(self.health.pending_serial) \
            if self.health.pending_serial is not None else None
        if unseen is not None:
            differ = self.pending.keys() ^ self.health.pending.keys()
            assert differ <= set(unseen), f"pending changes missing from the log: {sorted(differ - set(unseen))}"
        assert self.clock_ms >= 0 and self.version >= 0 and self.late_records >= 0
        assert self.record_clock_ms is None or 0 <= self.record_clock_ms <= self.clock_ms, "record clock ahead"
        expected_mapping = {}
        expected_racks: dict[str, dict[str, dict[str, Any]]] = {}
        for bookie, facts in self.facts.items():
            assert not facts.is_empty(), f"empty facts kept for {bookie}"
            entry = self._mapping_entry(facts)
            if entry is not None:
                expected_mapping[bookie] = entry
            if facts.group is not None:
                expected_racks.setdefault(facts.group, {})[bookie] = _rack_entry(facts)
            if not facts.pinned:
                assert bookie in registered or bookie in self.absent_since, f"unpinned facts of {bookie} never expire"
        assert self.mapping == expected_mapping, "mapping differs from the bookies' facts"
        assert self.rack_info == expected_racks, "rack info differs from the bookies' facts"
        assert self.rack_info_stale or not self.rack_info_dirty, "rack-info changes recorded, none pending"
        resolver = policy.resolver
        if self.rack_info_dirty is not None:
            # What the policy holds is the model's rack info but for the listings still to hand over.
            dirty = self.rack_info_dirty
            theirs, mine = ({group: {b: entry for b, entry in members.items() if b not in dirty}
                             for group, members in info.items()} for info in (resolver.rack_info, self.rack_info))
            assert {g: m for g, m in theirs.items() if m} == {g: m for g, m in mine.items() if m}, \
                "the policy's rack info differs from the model's beyond the changes to hand over"
        resolver.check_invariants()
        for bookie in self.disk:
            assert bookie in registered or bookie in self.absent_since, f"disk report of {bookie} never expires"
        assert self.flapping <= self.flaps.keys(), "a flapping bookie has no departures"
        for times in self.flaps.values():
            assert list(times) == sorted(times), "flap times out of order"
        known_set = set(known)
        assert known_set <= writable, f"policy knows non-writable bookies {sorted(known_set - writable)}"
        missing = writable - known_set
        assert missing <= policy.join_failures.keys(), f"writable bookies neither known nor failed: {sorted(missing)}"
        if not self.placement.keep_stale_readonly_set:
            assert set(policy.readonly) == readonly, "policy's read-only set differs"
        if self.stabilize_period_s:
            theirs = policy.pending_leaves()
            mine = self.pending_leaves()
            assert theirs.keys() == mine.keys(), f"pending leaves differ: policy {sorted(theirs)} model {sorted(mine)}"
            for bookie, expiry in mine.items():
                assert abs(theirs[bookie] - expiry) < 1e-6, f"{bookie}: expiry {theirs[bookie]} != {expiry}"
        policy.check_invariants()
        self.audit.check_invariants()
        expected = StatusState()
        expected.recount(self.audit.open_alerts())
        assert self.status.open_ledger_alerts == expected.open_ledger_alerts, \
            f"open ledger-alert counts {self.status.open_ledger_alerts} differ from the audit's " \
            f"{expected.open_ledger_alerts}"
        self.skew.check_invariants()
        due = self.status.due_ms
        assert due is None or (self.status.last_ms is not None and due == self.status.last_ms
                               + self.settings.status_interval_ms), "status due off the interval's end"


def _rack_entry(facts: BookieFacts) -> dict[str, Any] | None:
    if facts.group is None:
        return None
    return {"rack": facts.location, "hostname": facts.hostname}


_HANDLERS = {
    BookieWritable: ClusterModel._on_writable,
    BookieReadonly: ClusterModel._on_readonly,
    BookieLost: ClusterModel._on_lost,
    ClusterView: ClusterModel._on_view,
    BookieLocation: ClusterModel._on_location,
    BookieDisk: ClusterModel._on_disk,
    FeatureSet: ClusterModel._on_feature,
}

__all__ = ["BookieFacts", "ClusterModel", "STABILIZING_POLICIES"]
