"""Continuous placement audit: remember the ledgers a cluster placed or was asked to check, re-check
them when the topology changes, and raise one alert per transition (CONTRACT §2 "Alerts").

Spec: bookkeeper-rackaware.md §5.2 (`replace_to_adhere`), §6 (adherence); the region-aware adherence
and disallowed regions of bookkeeper-region-zone-isolation.md. BookKeeper's own auditor re-checks
closed ledgers on a timer (off by default) and counts non-adhering ensembles; this audit re-checks a
ledger when a change touches one of its bookies, and says why and how to fix it.

What a ledger's state is (`LedgerAudit.evaluate`), over its ensemble as remembered:

* **unsettled**: a member left the writable set less than `networkTopologyStabilizePeriodSeconds`
  ago (a pending leave). Nothing is decided until the bookie returns or its delay ends, so a
  flapping bookie raises no ledger alerts (the health checks report the pending departure itself).
* **not adhering**: a member is lost, read-only, writable without a usable location (its join
  failed), or in a region placement is disallowed in; or the policy's `is_ensemble_adhering` says
  FAIL. Each cause is one entry of `problems`.
* **adhering** otherwise (MEETS_STRICT, or MEETS_SOFT under region/zone-aware rules).

Alerts (subject `ledger/<ledger_id>`, or `request/<request_id>` for a create without a ledger id):

* `placement.ledger.not_adhering`: an adhering (or never settled) ledger stops adhering. Clears
  when it adheres again, is re-placed or checked adhering, or is forgotten.
* `placement.ledger.re_adhere_possible`: a ledger placed or checked under a relaxed rule (FAIL,
  MEETS_SOFT), or one whose alert had no fix, can now be fixed; or a ledger that adheres but was placed
  under a fallback the policy tags in `explain.relaxed` (a secondary isolation group, fewer racks,
  regions or zones than the rules want) no longer needs it: the fix removes the fallback. Clears as
  above; for a fallback, once the ensemble no longer depends on it (moved, or its bookies regrouped).
  Its earlier name, `placement.ledger.readhere_possible`, is an alias for one release: a registry
  restored from such a snapshot holds its open alerts under the new name (`state.registry`), so they
  resolve under it with `resolves` naming the alert as opened.

Opening alerts carry `relaxed` (sentences for people) and `relaxed_rules` (the tags the ledger still
depends on, as objects; `AuditEntry.rules`).

A clearing is a `<type>.resolved` event with the same subject.

A ledger registered non-adhering already had its decision alert (`placement.decision.*`), so the
audit opens nothing for it at registration; it is tagged `relaxed` and re-checked when the topology
improves. Every open alert carries a suggested minimal fix (`fix`): the unavailable members replaced
one by one (`replace_bookie`), then `replace_to_adhere` when the rules still fail.

Costs: the registry is indexed by bookie, so a change touching bookies `B` re-checks only the
ledgers holding one of them (each O(E x WQ) plus a fix search on a transition). A change of a feature
switch re-checks every ledger (O(ledgers)), as does nothing else. Ledgers waiting for a fix are
re-examined after an improving change (a bookie joins or returns, a location or feature changes), at
most `RE_ADHERE_BUDGET` of them per change, in key order from where the last pass stopped. The
registry holds at most `engine.audit.maxLedgers` ledgers (least recently placed or checked go first)
and forgets a ledger `engine.audit.ttlSeconds` after it was last placed or checked. Between
micro-batches the registry is stored packed (`state.registry`); after a load an entry is built only
when a change or request touches its ledger.

Everything is deterministic: ledgers are visited in sorted key order, fixes draw from a generator
seeded by (seed, cluster, ledger, topology version), and alert ids are `outputs.alert` ids keyed by the
topology version and the trigger.

The sentences of the alerts (problems, reasons, actions) are worded in `state.alert_text`; the policy
is read only through the `policies.PlacementPolicy` interface.
"""

from __future__ import annotations

import bisect
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from events.model import positional_builder
from policies import Adherence, PlacementError, PlacementPolicy

from . import alert_text, outputs
from .alert_text import relaxed_notes
from .outputs import ALERT_LEDGER_NOT_ADHERING, ALERT_LEDGER_RE_ADHERE, RESOLVED_SUFFIX, Output, jsonable
from .registry import AuditEntry, LedgerRegistry, canonical_rule, new_entry
from .seeding import seeded_random

LEDGER_ALERT_TYPES = (ALERT_LEDGER_NOT_ADHERING, ALERT_LEDGER_RE_ADHERE)

_STRICT = Adherence.MEETS_STRICT.name

#: Ledgers waiting for a fix examined per improving change (the rest wait for the next change).
RE_ADHERE_BUDGET = 512


class MembershipView(Protocol):
    """What the audit reads of a cluster (a `ClusterModel` is one)."""

    policy: PlacementPolicy
    writable: set[str]
    readonly: set[str]
    pending: Mapping[str, float]
    version: int
    rack_info_stale: bool

    def prepare_request(self) -> None:
        """Hand deferred state (rack info, disk reports) to the policy."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """One settled evaluation of a ledger.

    Attributes:
        adhering: no problem found.
        adherence: the policy's answer (`MEETS_STRICT`, `MEETS_SOFT`, `FAIL`; None if it refused).
        problems: one sentence per cause, in ensemble order.
        unavailable: members that cannot take writes (lost, read-only, not placed, disallowed region).
        severity: `error` when a member is lost/unplaced or the rules FAIL, else `warning`.
    """

    adhering: bool
    adherence: str | None
    problems: tuple[str, ...] = ()
    unavailable: tuple[str, ...] = ()
    severity: str = outputs.INFO


# `Verdict(...)` with every field given in order, without the frozen dataclass `__init__` (one re-check
# builds one).
_new_verdict = positional_builder(Verdict)


def ledger_key(ledger_id: int | None, request_id: str) -> str:
    """The registry key and alert subject of a ledger."""
    return f"ledger/{ledger_id}" if ledger_id is not None else f"request/{request_id}"


def relaxation_rules(explain: Mapping[str, Any] | None) -> tuple[dict[str, Any], ...]:
    """The machine-readable relaxations of a decision (`explain.relaxed` entries with a string `rule`:
    fallbacks a better topology can make unnecessary), in order, as JSON-ready copies. Cost: O(rules)."""
    rules = []
    for rule in (explain or {}).get("relaxed", ()) or ():
        if isinstance(rule, Mapping) and isinstance(rule.get("rule"), str):
            rules.append(canonical_rule(rule))
    return tuple(rules)


class LedgerAudit:
    """The placed/checked ledger registry of one cluster (or shard), with transition alerts.

    Args:
        cluster: the cluster name (alert source and id).
        max_ledgers: `engine.audit.maxLedgers`; 0 turns the audit off.
        ttl_ms: `engine.audit.ttlSeconds` in milliseconds.
        seed: `engine.seed` (fix searches draw from generators seeded with it).
    """

    def __init__(self, cluster: str, max_ledgers: int = 100_000, ttl_ms: int = 604_800_000, seed: int = 0) -> None:
        self.cluster = cluster
        self.max_ledgers = max_ledgers
        self.ttl_ms = ttl_ms
        self.seed = seed
        self.entries = LedgerRegistry()    # least recently seen first, indexed by bookie
        self.waiting: set[str] = set()     # not adhering (or MEETS_SOFT) and no fix reported yet
        self.cursor = ""                   # where the last bounded pass over `waiting` stopped

    def __len__(self) -> int:
        return len(self.entries)

    # -- registration ------------------------------------------------------------------------------

    def remember(self, view: MembershipView, *, ledger_id: int | None, request_id: str, ensemble: Sequence[str],
                 write_quorum: int, ack_quorum: int, time_ms: int, adherence: str | None = None,
                 explain: Mapping[str, Any] | None = None) -> list[Output]:
        """Register (or refresh) a ledger after a decision placed or checked `ensemble`.

        No alert is opened here (the decision has its own); alerts already open for the ledger are
        resolved when the new ensemble adheres (the operator re-placed it). Cost: O(E x WQ).

        Returns:
            Resolving events, and those of ledgers forgotten to stay within the bounds.
        """
        entries = self.entries
        # `expire` does something only when the least recently seen ledger is out of the TTL.
        oldest = entries.oldest_seen_ms()
        if oldest is not None and oldest <= time_ms - self.ttl_ms:
            produced = self.expire(time_ms, view.version)
        else:
            produced = []
        if self.max_ledgers <= 0 or not ensemble:
            return produced
        key = f"ledger/{ledger_id}" if ledger_id is not None else f"request/{request_id}"
        entry = entries.get(key)
        members = tuple(ensemble)
        if adherence == _STRICT and not (explain and (explain.get("fallbacks") or explain.get("relaxed"))) \
                and self._plainly_placed(view, members):
            # Fast path (every placement or check that needed no fallback): what the general path below
            # gives for it, without its steps: no relaxation notes or rules, `evaluate` finds no
            # problem (every member writable and placed, none pending), so the ledger adheres and
            # waits for nothing.
            if entry is None:
                entries.add(new_entry(key, ledger_id, request_id, members, write_quorum, ack_quorum, time_ms,
                                      (), (), True, _STRICT, False, {}))
            else:
                entries.refresh(entry, members)
                entry.request_id = request_id
                entry.write_quorum, entry.ack_quorum, entry.seen_ms = write_quorum, ack_quorum, time_ms
                entry.relaxed, entry.rules, entry.fix_known = (), (), False
                entry.adhering, entry.adherence = True, _STRICT
                if entry.open:
                    produced += self._resolve(entry, time_ms, view.version, request_id,
                                              alert_text.replaced_reason(request_id))
                self.waiting.discard(key)
            if len(entries) > self.max_ledgers:
                produced += self._trim(time_ms, view.version)
            return produced
        if entry is None:
            entry = AuditEntry(key=key, ledger_id=ledger_id, request_id=request_id, ensemble=members,
                               write_quorum=write_quorum, ack_quorum=ack_quorum, seen_ms=time_ms)
            entries.add(entry)
        else:
            entries.refresh(entry, members)
            entry.request_id = request_id
            entry.write_quorum, entry.ack_quorum, entry.seen_ms = write_quorum, ack_quorum, time_ms
        entry.relaxed = relaxed_notes(adherence, explain)
        entry.rules = relaxation_rules(explain)
        entry.fix_known = False
        verdict = self.evaluate(view, entry, adherence)
        if verdict is not None:
            entry.adhering, entry.adherence = verdict.adhering, verdict.adherence
            if verdict.adhering and entry.open:
                produced += self._resolve(entry, time_ms, view.version, request_id,
                                          alert_text.replaced_reason(request_id))
        self._update_waiting(entry)
        if len(entries) > self.max_ledgers:
            produced += self._trim(time_ms, view.version)
        return produced

    def keep_bound(self, time_ms: int, version: int) -> list[Output]:
        """Forget the least recently seen ledgers beyond `max_ledgers`, resolving their open alerts.

        Only a registry restored under a lower `engine.audit.maxLedgers` (a restart with another
        configuration) is over its bound; 0 then forgets every ledger. Cost: O(1) within the bound.
        """
        return self._trim(time_ms, version) if len(self.entries) > self.max_ledgers else []

    def _trim(self, time_ms: int, version: int) -> list[Output]:
        produced: list[Output] = []
        entries = self.entries
        while len(entries) > self.max_ledgers:
            key = entries.drop_oldest_unread()
            if key is not None:  # never read since the load, no open alert: nothing to resolve
                self.waiting.discard(key)
                continue
            oldest = entries.oldest()
            produced += self._forget(oldest, time_ms, version, alert_text.over_bound_reason(self.max_ledgers))
        return produced

    @staticmethod
    def _plainly_placed(view: MembershipView, members: tuple[str, ...]) -> bool:
        """Every member writable and placed, none pending, no region disallowed. O(E)."""
        writable = view.writable
        known = view.policy.known
        pending = view.pending
        for member in members:
            if member not in writable or member not in known or (pending and member in pending):
                return False
        return not _disallowed_regions(view.policy)

    # -- re-checks ---------------------------------------------------------------------------------

    def on_topology_change(self, view: MembershipView, touched: Iterable[str], time_ms: int, *,
                           improving: bool = False, wide: bool = False, trigger: str = "") -> list[Output]:
        """Re-check the ledgers a change touched; return the transition alerts.

        Args:
            view: the cluster after the change.
            touched: bookies whose membership or location changed (their ledgers are re-checked).
            time_ms: the change's time (the cluster clock).
            improving: the change can make placements possible again (a join, a return, a location
                or feature change): ledgers waiting for a fix are re-examined (bounded).
            wide: the change concerns every ledger (a feature switch): all are re-checked.
            trigger: a short description of the change (part of the alert data and ids).

        Cost: O(touched ledgers x E x WQ) (O(ledgers) when `wide`), plus a fix search per transition;
        ledgers on the same ensemble and quorums share one evaluation (`_verdicts`).
        """
        produced = self.expire(time_ms, view.version)
        if not self.entries:
            return produced
        verdicts = _verdicts(view)
        if wide:
            keys = sorted(self.entries.keys())
            done = set(keys)
        else:
            found: set[str] = set()
            unsettled: set[str] = set()
            keys_on, pending = self.entries.keys_on, view.pending
            for bookie in touched:
                keys_of = keys_on(bookie)
                if keys_of:
                    if pending and bookie in pending:
                        # A ledger holding a bookie whose leave is pending is not evaluated (`evaluate`
                        # gives None, `_recheck` changes nothing): a departure skips all of its ledgers.
                        unsettled |= keys_of
                    else:
                        found |= keys_of
            done = found | unsettled
            keys = sorted(found - unsettled)
        for key in keys:
            produced += self._recheck(self.entries[key], view, time_ms, trigger, improving, verdicts)
        if improving and self.waiting:
            produced += self._waiting_pass(view, time_ms, trigger, done, verdicts)
        return produced

    def _waiting_pass(self, view: MembershipView, time_ms: int, trigger: str, done: set[str],
                      verdicts: dict[tuple, Verdict | None] | None) -> list[Output]:
        ordered = sorted(self.waiting - done)
        if not ordered:
            return []
        start = bisect.bisect_right(ordered, self.cursor)
        batch = (ordered[start:] + ordered[:start])[:RE_ADHERE_BUDGET]
        self.cursor = batch[-1] if len(batch) < len(ordered) else ""
        produced: list[Output] = []
        for key in batch:
            produced += self._recheck(self.entries[key], view, time_ms, trigger, True, verdicts)
        return produced

    def _recheck(self, entry: AuditEntry, view: MembershipView, time_ms: int, trigger: str,
                 improving: bool, verdicts: dict[tuple, Verdict | None] | None = None) -> list[Output]:
        if verdicts is None:
            verdict = self.evaluate(view, entry)
        else:
            shape = (entry.ensemble, entry.write_quorum, entry.ack_quorum)
            verdict = verdicts.get(shape, _UNJUDGED)
            if verdict is _UNJUDGED:
                verdict = verdicts[shape] = self.evaluate(view, entry)
        if verdict is None:
            return []                                  # a member's departure is not settled yet
        produced: list[Output] = []
        was = entry.adhering
        entry.adhering, entry.adherence = verdict.adhering, verdict.adherence
        strict = verdict.adherence == Adherence.MEETS_STRICT.name
        # Relaxations the ledger still depends on (a secondary isolation group, fewer racks/regions/zones
        # than the rules want); those it no longer depends on are dropped from `entry.rules`.
        relaxed = self._still_relaxed(view, entry) if entry.rules and verdict.adhering else ()
        if verdict.adhering:
            # A re-adhere alert stays open while the ledger still depends on a relaxation it offers to remove.
            closing = sorted(t for t in entry.open
                             if t == ALERT_LEDGER_NOT_ADHERING or (strict and not relaxed))
            if closing:
                produced += self._resolve(entry, time_ms, view.version, trigger, alert_text.ADHERES_AGAIN, closing)
            if strict:
                entry.fix_known = False
        elif was is not False and ALERT_LEDGER_NOT_ADHERING not in entry.open:
            fix = self.suggest_fix(view, entry, verdict)
            entry.fix_known = bool(fix.get("possible"))
            produced.append(self._open(entry, ALERT_LEDGER_NOT_ADHERING, verdict, fix, time_ms, view.version,
                                       trigger))
            self._update_waiting(entry)
            return produced
        if (improving and not entry.fix_known and ALERT_LEDGER_RE_ADHERE not in entry.open
                and (not verdict.adhering or not strict or relaxed)):
            fix = self.suggest_fix(view, entry, verdict)
            if fix.get("possible") and (not verdict.adhering or fix.get("adherence") == Adherence.MEETS_STRICT.name):
                entry.fix_known = True
                produced.append(self._open(entry, ALERT_LEDGER_RE_ADHERE, verdict, fix, time_ms, view.version,
                                           trigger))
        self._update_waiting(entry)
        return produced

    @staticmethod
    def _still_relaxed(view: MembershipView, entry: AuditEntry) -> list[Mapping[str, Any]]:
        """The ledger's relaxations (`entry.rules`) that its ensemble still depends on, asking the
        policy (`is_relaxed`); the others are removed from `entry.rules` (its sentences stay: they
        say how it was placed). Cost: O(E) per rule."""
        rules = list(entry.rules)
        if not rules:
            return []
        _current_rack_info(view)
        check = view.policy.is_relaxed
        members = list(entry.ensemble)
        kept = []
        for rule in rules:
            try:
                still = check(members, entry.write_quorum, entry.ack_quorum, rule)
            except (PlacementError, ValueError):
                still = True
            if still:
                kept.append(rule)
        if len(kept) < len(rules):
            entry.rules = tuple(kept)
        return kept

    # -- evaluation --------------------------------------------------------------------------------

    def evaluate(self, view: MembershipView, entry: AuditEntry, adherence: str | None = None) -> Verdict | None:
        """The ledger's state now (see the module docstring); None while a member's leave is pending.

        Args:
            adherence: the policy's answer when the caller already has it (a decision just made);
                computed otherwise.

        Cost: O(E x WQ).
        """
        members = entry.ensemble
        pending = view.pending
        if pending and any(m in pending for m in members):
            return None
        policy = view.policy
        writable, readonly = view.writable, view.readonly
        known = policy.known
        problems: list[str] = []
        unavailable: list[str] = []
        severe = False
        disallowed = _disallowed_regions(policy)
        for member in dict.fromkeys(members):
            if member in writable:
                if member not in known:
                    problems.append(alert_text.unplaced_problem(member))
                    unavailable.append(member)
                    severe = True
                elif disallowed:
                    region = policy.region_of_bookie(member)
                    if region in disallowed:
                        problems.append(alert_text.disallowed_problem(member, region,
                                                                      policy.settings.disallow_region_feature))
                        unavailable.append(member)
            elif member in readonly:
                problems.append(alert_text.readonly_problem(member))
                unavailable.append(member)
            else:
                problems.append(alert_text.lost_problem(member))
                unavailable.append(member)
                severe = True
        if adherence is None:
            try:
                adherence = Adherence(policy.is_ensemble_adhering(list(members), entry.write_quorum,
                                                                   entry.ack_quorum)).name
            except ValueError as exc:
                problems.append(alert_text.unjudged_problem(exc))
                severe = True
        if adherence == Adherence.FAIL.name:
            problems.append(alert_text.describe_fail(policy, members, entry.write_quorum))
            severe = True
        return _new_verdict(not problems, adherence, tuple(problems), tuple(unavailable),
                            outputs.ERROR if severe else outputs.WARNING if problems else outputs.INFO)

    def suggest_fix(self, view: MembershipView, entry: AuditEntry, verdict: Verdict) -> dict[str, Any]:
        """A minimal fix: replace the unavailable members one by one, then remove each relaxation the
        ledger was placed under when the policy can now (`relaxation_fix`: primary-group bookies for
        secondary ones, more racks/regions/zones), then `replace_to_adhere` if the rules still fail.
        Never changes the registry or the policy's state.

        Returns:
            `{"possible": True, "ensemble", "replace": [{"position", "bookie", "with"}], "adherence"}`,
            or `{"possible": False, "reason"}`.
        """
        _current_rack_info(view)
        policy = view.policy
        rng = _fix_rng(self.seed, self.cluster, entry.key, view.version)
        current = list(entry.ensemble)
        size, write_quorum, ack_quorum = len(current), entry.write_quorum, entry.ack_quorum
        avoid = tuple(sorted(set(verdict.unavailable)))
        try:
            for member in entry.ensemble:
                if member in verdict.unavailable:
                    placed = policy.replace_bookie(size, write_quorum, ack_quorum, None, current, member, avoid,
                                                   rng=rng)
                    current = list(placed.ensemble)
            current = self._without_relaxations(policy, entry, current, avoid, rng)
            adherence = Adherence(policy.is_ensemble_adhering(current, write_quorum, ack_quorum))
            if adherence == Adherence.FAIL or (adherence == Adherence.MEETS_SOFT and not verdict.unavailable):
                placed = policy.replace_to_adhere(size, write_quorum, ack_quorum, avoid, current, rng=rng)
                if not placed.ensemble or placed.adherence == Adherence.FAIL:
                    return {"possible": False,
                            "reason": alert_text.no_relocation_reason(placed.explain.get("fallbacks", ()))}
                current, adherence = list(placed.ensemble), Adherence(placed.adherence)
        except (PlacementError, ValueError) as exc:
            return {"possible": False, "reason": str(exc)}
        changes = [{"position": i, "bookie": old, "with": new}
                   for i, (old, new) in enumerate(zip(entry.ensemble, current)) if old != new]
        if not changes:
            return {"possible": False, "reason": alert_text.NO_IMPROVING_CHANGE}
        return {"possible": True, "ensemble": current, "replace": changes, "adherence": adherence.name}

    @staticmethod
    def _without_relaxations(policy: PlacementPolicy, entry: AuditEntry, current: list[str], avoid: tuple[str, ...],
                             rng: random.Random) -> list[str]:
        """`current` after each of the ledger's relaxations that the policy can remove now, in order."""
        if not entry.rules:
            return current
        for rule in entry.rules:
            placed = policy.relaxation_fix(len(current), entry.write_quorum, entry.ack_quorum, current, rule, avoid,
                                           rng=rng)
            if placed is not None and placed.ensemble:
                current = list(placed.ensemble)
        return current

    # -- alerts ------------------------------------------------------------------------------------

    def _open(self, entry: AuditEntry, alert_type: str, verdict: Verdict, fix: Mapping[str, Any], time_ms: int,
              version: int, trigger: str) -> Output:
        if alert_type == ALERT_LEDGER_RE_ADHERE:
            severity = outputs.INFO
            action = alert_text.RE_ADHERE_ACTION
        else:
            severity = verdict.severity
            action = alert_text.fix_action(fix)
        alert = outputs.alert(
            alert_type=alert_type, cluster=self.cluster, subject=entry.key, time_ms=time_ms,
            key=f"v{version}:{trigger}", severity=severity,
            data={"ledger_id": entry.ledger_id, "request_id": entry.request_id, "ensemble": list(entry.ensemble),
                  "write_quorum": entry.write_quorum, "ack_quorum": entry.ack_quorum,
                  "adherence": verdict.adherence, "problems": list(verdict.problems),
                  "unavailable": list(verdict.unavailable), "relaxed": list(entry.relaxed),
                  "relaxed_rules": [jsonable(rule) for rule in entry.rules], "fix": dict(fix),
                  "action": action, "trigger": trigger, "topology_version": version, "state": "firing"},
            ready=True)   # built here from strings, ints and lists of them (`fix` is the caller's own)
        entry.open[alert_type] = alert.id
        return alert

    def _resolve(self, entry: AuditEntry, time_ms: int, version: int, trigger: str, reason: str,
                 types: Iterable[str] | None = None) -> list[Output]:
        produced = []
        for alert_type in sorted(entry.open if types is None else types):
            opened = entry.open.pop(alert_type)
            produced.append(outputs.alert(
                alert_type=alert_type + RESOLVED_SUFFIX, cluster=self.cluster, subject=entry.key, time_ms=time_ms,
                key=f"v{version}:{trigger}", severity=outputs.INFO,
                data={"ledger_id": entry.ledger_id, "ensemble": list(entry.ensemble), "adherence": entry.adherence,
                      "reason": reason, "resolves": opened, "trigger": trigger, "topology_version": version,
                      "state": "resolved"}, ready=True))
        return produced

    # -- bounds ------------------------------------------------------------------------------------

    def next_expiry_ms(self) -> int | None:
        """When the least recently seen ledger falls out of the TTL (None: no ledger, or audit off)."""
        oldest = self.entries.oldest_seen_ms()
        return None if oldest is None else oldest + self.ttl_ms

    def expire(self, time_ms: int, version: int = 0) -> list[Output]:
        """Forget ledgers last placed or checked `ttl_ms` or longer ago. Cost: O(1) per forgotten ledger.

        A forgotten ledger's resolving alert carries the time its TTL ended, not `time_ms`, so it is the
        same whichever record or idle-cluster tick observes it.
        """
        produced: list[Output] = []
        horizon = time_ms - self.ttl_ms
        entries = self.entries
        while entries:
            seen_ms = entries.oldest_seen_ms()
            if seen_ms > horizon:
                break
            oldest = entries.oldest()
            produced += self._forget(oldest, oldest.seen_ms + self.ttl_ms, version,
                                     alert_text.expired_reason(self.ttl_ms // 1000))
        return produced

    def _forget(self, entry: AuditEntry, time_ms: int, version: int, reason: str) -> list[Output]:
        produced = self._resolve(entry, time_ms, version, "forget", reason) if entry.open else []
        self.entries.remove(entry.key)
        self.waiting.discard(entry.key)
        return produced

    def _update_waiting(self, entry: AuditEntry) -> None:
        # A ledger placed under a relaxation the topology may later make unnecessary waits too.
        waits = (entry.adhering is False or entry.adherence == Adherence.MEETS_SOFT.name
                 or entry.rules) and not entry.fix_known and ALERT_LEDGER_RE_ADHERE not in entry.open
        if waits:
            self.waiting.add(entry.key)
        else:
            self.waiting.discard(entry.key)

    # -- snapshots and checks ------------------------------------------------------------------------

    def export_state(self) -> dict[str, Any]:
        """JSON-able registry in its packed form (`state.registry`), least recently seen first (the
        order eviction follows), with the waiting ledgers and the cursor of the bounded pass over them.
        Cost: O(ledgers) in array copies plus O(ledgers read or placed since the last import)."""
        return {**self.entries.pack(self.waiting), "cursor": self.cursor}

    def import_state(self, state: Mapping[str, Any]) -> None:
        """Restore `export_state()` output into this registry (replacing it). Entries are built when
        first read. Snapshots of older engines (list columns; rows written before `AuditEntry.rules`
        existed keep the rules as `rule {json}` notes, moved into `rules` here) load as well."""
        self.waiting.clear()
        waiting = self.entries.unpack(state)
        if waiting is None:
            for entry in self.entries.values():
                self._update_waiting(entry)
        else:
            self.waiting |= waiting
        self.cursor = str(state.get("cursor", ""))

    def open_alerts(self) -> dict[str, dict[str, str]]:
        """subject -> {alert type: opening id}, for every ledger with an open alert."""
        return {key: dict(entry.open) for key, entry in self.entries.items() if entry.open}

    def check_invariants(self) -> None:
        """Assert the index, the order and the bounds agree with the entries (tests only)."""
        expected: dict[str, set[str]] = {}
        last = None
        for key, entry in self.entries.items():
            assert entry.key == key
            for bookie in entry.ensemble:
                expected.setdefault(bookie, set()).add(key)
            assert last is None or entry.seen_ms >= last, "audit entries out of recency order"
            last = entry.seen_ms
            assert set(entry.open) <= set(LEDGER_ALERT_TYPES)
        assert expected == self.entries.bookie_index(), "audit bookie index differs from the entries"
        assert self.waiting <= set(self.entries.keys())
        assert len(self.entries) <= max(self.max_ledgers, 0)


_UNJUDGED: Any = object()


def _verdicts(view: MembershipView) -> dict[tuple, Verdict | None] | None:
    """A memo of `evaluate` for one re-check pass, keyed by (ensemble, write quorum, ack quorum).

    A verdict depends only on those and on the cluster, which a pass does not change (fixes never
    change the policy's state), so ledgers on the same bookies share one: after a `bookie_lost` in a
    12-bookie cluster, 25,000 ledgers hold a few hundred distinct ensembles. None (no memo) when rack
    info is still deferred (a snapshot of an earlier engine): the pass's first fix hands it over, and
    verdicts before and after could differ.
    """
    return None if view.rack_info_stale else {}


def _current_rack_info(view: MembershipView) -> None:
    """Hand deferred rack info (isolation-group membership) to the policy before asking it about groups.

    The model defers it until a request needs it (`ClusterModel.prepare_request`); a fix or a
    relaxation check needs it too. Cost: O(1) when nothing is deferred.
    """
    view.prepare_request()


def _fix_rng(seed: int, cluster: str, key: str, version: int) -> random.Random:
    return seeded_random(int(outputs.stable_id("audit-fix", str(seed), cluster, key, str(version)), 16))


def _disallowed_regions(policy: PlacementPolicy) -> frozenset[str]:
    return frozenset(policy.disallowed_regions())


__all__ = [
    "ALERT_LEDGER_NOT_ADHERING",
    "ALERT_LEDGER_RE_ADHERE",
    "LEDGER_ALERT_TYPES",
    "RE_ADHERE_BUDGET",
    "RESOLVED_SUFFIX",
    "AuditEntry",
    "LedgerAudit",
    "MembershipView",
    "Verdict",
    "ledger_key",
    "relaxation_rules",
]
