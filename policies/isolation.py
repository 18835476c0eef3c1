"""Pulsar's bookie isolation groups on top of the rack-aware policy
(`org.apache.pulsar.bookie.rackawareness.IsolatedBookieEnsemblePlacementPolicy`, newest behaviour).

Spec: bookkeeper-region-zone-isolation.md §4 (§4.4 where groups come from, §4.5 the excluded set,
§4.7 fallbacks, §4.9 version notes), §5 (keys); CONTRACT §1 (isolation applies only when
`bookkeeperClientIsolationGroups` / `isolationBookieGroups` is configured).

Before every `new_ensemble` / `replace_bookie` the policy works out which bookies the ledger may
not use, adds them to (a copy of) the caller's exclusions and lets the rack-aware policy place:

* groups: the ledger's custom metadata `EnsemblePlacementPolicyConfig` when present and readable,
  else the client's configured groups;
* group membership: Pulsar rack info, `{group: {bookie: {"rack", "hostname"}}}`;
* eligible: bookies of the primary groups; if fewer than `ensemble_size` of them are writable, also
  the secondary groups' bookies; if primary + secondary are still fewer, also writable bookies that
  belong to no group. Bookies of any other group are never eligible (unless also in a primary group).

A group named by the ledger or the client that rack info does not have holds no bookies, as in
Pulsar: with no groups in rack info nothing is excluded, otherwise the fallbacks above admit other
bookies (the explanation says which group was missing). `placement.isolation.failClosed=true` raises
`IsolationGroupError` instead, so that a typo never places an isolated ledger outside its groups.
Always refused (differences from Pulsar, which logs and uses what it built so far): group names
that cannot be read, and a rack-info bookie id that is not a valid bookie id.

Cost: the analysis of a (primary, secondary) pair is cached until membership or group membership
changes (a whole `update_rack_info` counts as one; a rack change alone through `update_rack_entries`
does not), so a call costs O(excluded bookies) for the set union, not a scan of rack info.
"""

from __future__ import annotations

import json
import random
from collections.abc import Collection, Hashable, Iterable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any

from .api import PlacementResult
from .errors import NotEnoughBookiesError, PlacementError
from .provenance import RULE_ISOLATION, failed, fixed, no_fix
from .rackaware import Clock, RackawarePolicy
from .resolver import LocationResolver, RackInfo, is_valid_bookie_id  # noqa: F401 - also public here
from .settings import ISOLATION_POLICY_CLASS, PlacementSettings

POLICY_CONFIG_KEY = "EnsemblePlacementPolicyConfig"
PRIMARY_PROPERTY = "isolationBookieGroups"
SECONDARY_PROPERTY = "secondaryIsolationBookieGroups"
ANY_GROUP = "*"  # Pulsar's system-topic group: no isolation at all
_CACHE_LIMIT = 256


class IsolationGroupError(PlacementError):
    """Isolation groups that cannot be applied: unknown group, unreadable names or rack info.

    Raised instead of placing without isolation (Pulsar would silently exclude nothing).
    """

    code = "ISOLATION_GROUP_ERROR"


# -- where the groups come from (spec §4.4) ----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class IsolationGroups:
    """The groups that apply to one call.

    Attributes:
        primary: groups whose bookies the ledger should use.
        secondary: groups admitted when the primary groups have too few writable bookies.
        source: "client" (configured defaults) or "ledger" (custom metadata).
        note: why the source was chosen when that is worth telling (e.g. undecodable metadata).
    """

    primary: frozenset[str]
    secondary: frozenset[str]
    source: str
    note: str | None = None


def group_names(value: Any, what: str) -> frozenset[str]:
    """Group names from a comma-separated string or a list of strings (Pulsar's castToString + split).

    Raises:
        IsolationGroupError: any other value (a number, null, an object).
    """
    if isinstance(value, str):
        items = value.split(",")
    elif isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        items = ",".join(value).split(",")
    else:
        raise IsolationGroupError(
            f"{what}: expected a comma-separated string of isolation group names, got {value!r}; "
            "fix the ledger's EnsemblePlacementPolicyConfig or the client configuration")
    return frozenset(item.strip() for item in items if item.strip())


def groups_from_metadata(custom_metadata: Mapping[str, Any] | None, default: IsolationGroups) -> IsolationGroups:
    """The groups of one call: the ledger's `EnsemblePlacementPolicyConfig`, else `default`.

    * absent key: the client defaults;
    * not UTF-8 / not JSON / not `{"policyClass": str, "properties": {...}}`: the client defaults
      (as Pulsar, which logs and ignores such metadata), with a note for the explanation;
    * another `policyClass`: no groups at all (Pulsar newest, apache/pulsar#25825);
    * the isolation policy class: its `isolationBookieGroups` / `secondaryIsolationBookieGroups`
      (missing or empty: no groups).

    Raises:
        IsolationGroupError: the properties name groups in a form that cannot be read.
    """
    if not custom_metadata:
        return default
    raw = custom_metadata.get(POLICY_CONFIG_KEY)
    if raw is None:
        return default
    try:
        text = raw if isinstance(raw, str) else bytes(raw).decode("utf-8")
        config = json.loads(text)
    except (TypeError, ValueError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        return _undecodable(default, f"not UTF-8 JSON ({exc})")
    except RecursionError:
        return _undecodable(default, "JSON nested too deeply to read")
    if not isinstance(config, dict) or not isinstance(config.get("policyClass"), str):
        return _undecodable(default, "no policyClass string")
    properties = config.get("properties") or {}
    if not isinstance(properties, dict):
        return _undecodable(default, "properties is not an object")
    if config["policyClass"] != ISOLATION_POLICY_CLASS:
        return IsolationGroups(frozenset(), frozenset(), "ledger",
                               f"ledger metadata names policy {config['policyClass']}: no isolation groups")
    primary = group_names(properties.get(PRIMARY_PROPERTY, ""), f"{POLICY_CONFIG_KEY}.{PRIMARY_PROPERTY}")
    secondary = group_names(properties.get(SECONDARY_PROPERTY, ""), f"{POLICY_CONFIG_KEY}.{SECONDARY_PROPERTY}")
    return IsolationGroups(primary, secondary, "ledger")


def _undecodable(default: IsolationGroups, why: str) -> IsolationGroups:
    return IsolationGroups(default.primary, default.secondary, default.source,
                           f"ledger {POLICY_CONFIG_KEY} could not be decoded ({why}): used the client's groups")


# -- the excluded set (spec §4.5) --------------------------------------------------------------------


#: What each level admits (the `scope` of the isolation step, the `admitted` of the relaxed rule).
ADMITTED = ("primary", "secondary", "ungrouped")


@dataclass(frozen=True, slots=True)
class IsolationExclusion:
    """Bookies one call may not use, and why more bookies than the primary groups were admitted.

    Attributes:
        level: 0 primary groups only, 1 secondary groups admitted too, 2 ungrouped bookies admitted too.
        counts: the isolation step's counts, `(name, value)` pairs (built once per analysis level).
    """

    excluded: frozenset[str]
    excluded_sorted: tuple[str, ...]
    fallbacks: tuple[str, ...]
    level: int = 0
    counts: tuple[tuple[str, int], ...] = ()

    def step(self) -> dict[str, Any]:
        """The `steps` record of the group filtering."""
        return {"step": "isolation groups", "scope": "+".join(ADMITTED[:self.level + 1]), **dict(self.counts)}


_NO_EXCLUSION = IsolationExclusion(frozenset(), (), ())


class _GroupAnalysis:
    """§4.5 for one (primary, secondary) pair against the current membership and rack info.

    Three possible answers, by how many bookies the ensemble needs:
    primary only; primary + secondary; primary + secondary + writable bookies in no group.
    """

    __slots__ = ("primary", "secondary", "available_primary", "admitted_total", "_levels", "_parts", "_known",
                 "missing")

    def __init__(self, primary: frozenset[str], secondary: frozenset[str], members: Mapping[str, Sequence[str]],
                 known: Iterable[str], missing: str = "") -> None:
        primary_bookies: set[str] = set()
        other_bookies: set[str] = set()
        for group in sorted(members):
            (primary_bookies if group in primary else other_bookies).update(members[group])
        known_set = set(known)
        self.primary = primary
        self.secondary = secondary
        self.available_primary = len(primary_bookies & known_set)
        not_primary_known = known_set - primary_bookies
        # Bookies of other groups and writable bookies of no group are out; the overlap fix
        # (apache/pulsar#3919) keeps any bookie that is also in a primary group.
        base = (other_bookies | not_primary_known) - primary_bookies
        secondary_bookies: set[str] = set()
        for group in sorted(secondary):
            secondary_bookies.update(members.get(group, ()))
        # Secondary bookies count when listed, writable or not (spec App. A #8).
        admitted_secondary = secondary_bookies & base
        ungrouped = not_primary_known - other_bookies
        self.admitted_total = self.available_primary + len(admitted_secondary)
        self._parts = (frozenset(base), frozenset(admitted_secondary), frozenset(ungrouped))
        self._known = known_set
        self._levels: dict[tuple[int, int], IsolationExclusion] = {}
        self.missing = missing      # the note naming groups rack info does not have, or ""

    def for_size(self, ensemble_size: int) -> IsolationExclusion:
        level = 0 if self.available_primary >= ensemble_size else (1 if self.admitted_total >= ensemble_size else 2)
        # Keyed by the size too: the explanation names this call's ensemble_size (decisions must not
        # depend on which request came first).
        found = self._levels.get((level, ensemble_size))
        if found is None:
            found = self._levels[(level, ensemble_size)] = self._build(level, ensemble_size)
        return found

    def _build(self, level: int, ensemble_size: int) -> IsolationExclusion:
        base, admitted_secondary, ungrouped = self._parts
        excluded = base
        notes: list[str] = []
        primary = ", ".join(sorted(self.primary)) or "(none)"
        secondary = ", ".join(sorted(self.secondary)) or "(none)"
        if level >= 1:
            excluded = excluded - admitted_secondary
        if level >= 1 and self.secondary:
            notes.append(f"primary isolation groups [{primary}] have {self.available_primary} writable "
                         f"bookie(s), fewer than ensemble_size={ensemble_size}: admitted secondary groups "
                         f"[{secondary}] ({len(admitted_secondary)} bookie(s))")
        if level >= 2:
            excluded = excluded - ungrouped
            notes.append(f"primary and secondary isolation groups have {self.admitted_total} bookie(s), "
                         f"fewer than ensemble_size={ensemble_size}: admitted {len(ungrouped)} writable "
                         "bookie(s) that belong to no isolation group")
        # Counts of the isolation step: candidates are the writable bookies the groups admit.
        known = self._known
        counts = (("candidates", len(known) - len(excluded & known)), ("primary", self.available_primary),
                  ("secondary", len(admitted_secondary & known)), ("ungrouped", len(ungrouped)),
                  ("excluded", len(excluded & known)))
        # A level whose notes are empty admitted nothing more than the primary groups (no secondary group).
        admitted = level if notes else 0
        if self.missing:
            notes.insert(0, self.missing)
        return IsolationExclusion(excluded, tuple(sorted(excluded)), tuple(notes), admitted, counts)


# -- the policy ---------------------------------------------------------------------------------------


class IsolatedPolicy(RackawarePolicy):
    """Rack-aware placement restricted to Pulsar isolation groups (spec §4).

    Args:
        settings: parsed configuration; `isolation_groups` None means isolation is not configured and
            the policy behaves exactly as rack-aware (CONTRACT §1).
        resolver: locations and group membership (rack info).
        clock, features: as for the rack-aware policy.
    """

    name = "isolated"

    def __init__(self, settings: PlacementSettings, resolver: LocationResolver, clock: Clock,
                 features: MutableMapping[str, int]) -> None:
        self._analyses: dict[tuple[frozenset[str], frozenset[str]], _GroupAnalysis] = {}
        self._primary_sets: dict[frozenset[str], frozenset[str]] = {}   # primary groups -> their bookies
        super().__init__(settings, resolver, clock, features)
        self.isolation_enabled = settings.isolation_groups is not None
        self.default_groups = IsolationGroups(frozenset(settings.isolation_groups or ()),
                                              frozenset(settings.secondary_isolation_groups), "client")

    # -- cache invalidation: membership and rack info ------------------------------------------------

    def on_cluster_changed(self, writable: Iterable[str], readonly: Iterable[str], *,
                           changed: Collection[str] | None = None) -> set[str]:
        dead = super().on_cluster_changed(writable, readonly, changed=changed)
        self._analyses = {}
        self._primary_sets = {}
        return dead

    def update_rack_info(self, rack_info: RackInfo) -> None:
        """Replace rack info (locations and group membership)."""
        super().update_rack_info(rack_info)
        self._analyses = {}
        self._primary_sets = {}

    def update_rack_entries(self, entries: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> bool:
        """Rack info changed for some bookies only (see `RackawarePolicy.update_rack_entries`).

        The group analyses depend on group membership, not on racks: they are kept unless a bookie
        joined or left a group, so a rack change costs O(1) here, a group change a new analysis
        (O(bookies)) at the next call.
        """
        membership_changed = super().update_rack_entries(entries)
        if membership_changed:
            self._analyses = {}
            self._primary_sets = {}
        return membership_changed

    def import_state(self, state: Mapping[str, Any]) -> None:
        super().import_state(state)
        self._analyses = {}
        self._primary_sets = {}

    # -- expected shares ---------------------------------------------------------------------------

    def placement_scope(self, ensemble_size: int, custom_metadata: Mapping[str, Any] | None) -> Hashable:
        """With isolation on, the call's groups (`groups_for`: primary, secondary, where they came from)
        and `ensemble_size`, which select the bookies it may use (`isolation_exclusion`); `()` otherwise.

        Raises:
            IsolationGroupError: the metadata names groups in a form that cannot be read.

        Cost: O(metadata).
        """
        if not self.isolation_enabled:
            return ()
        groups = self.groups_for(custom_metadata)
        return (tuple(sorted(groups.primary)), tuple(sorted(groups.secondary)), groups.source, ensemble_size)

    def expected_shares(self, scope: Hashable) -> dict[str, float]:
        """As the rack-aware policy's, over the bookies the isolation analysis admits for a call in `scope`
        (the primary groups' writable bookies, plus the secondary groups' or ungrouped ones when the
        primary groups are too small, exactly as such a call is placed now). Groups that cannot be
        applied now (a change since the call) exclude nothing. Cost: O(bookies)."""
        if not scope:
            return self.placeable_shares(())
        primary, secondary, source, ensemble_size = scope  # type: ignore[misc]
        try:
            excluded: Collection[str] = self.isolation_exclusion(
                ensemble_size, IsolationGroups(frozenset(primary), frozenset(secondary), source)).excluded
        except PlacementError:
            excluded = ()
        return self.placeable_shares(excluded)

    # -- the exclusion ------------------------------------------------------------------------------

    def groups_for(self, custom_metadata: Mapping[str, Any] | None) -> IsolationGroups:
        """The groups that apply to a call with this custom metadata (spec §4.4)."""
        return groups_from_metadata(custom_metadata, self.default_groups)

    def isolation_exclusion(self, ensemble_size: int, groups: IsolationGroups) -> IsolationExclusion:
        """The bookies a call needing `ensemble_size` bookies may not use (spec §4.5).

        Raises:
            IsolationGroupError: a named group is not in rack info, or rack info lists an invalid id.
        """
        if ANY_GROUP in groups.primary:
            return _NO_EXCLUSION
        analysis = self._analysis(groups)
        return _NO_EXCLUSION if analysis is None else analysis.for_size(ensemble_size)

    def _analysis(self, groups: IsolationGroups) -> _GroupAnalysis | None:
        """The cached §4.5 analysis of a (primary, secondary) pair; None when rack info has no groups.

        Cached per source too: its note on missing groups says who named them (the ledger or the client).

        Raises:
            IsolationGroupError: as `isolation_exclusion`.
        """
        key = (groups.primary, groups.secondary, groups.source)
        analysis = self._analyses.get(key)
        if analysis is None:
            members = self.resolver.group_members()
            missing = self._check(groups, members)
            if not members and not missing:
                return None     # no group named, none in rack info: every bookie is ungrouped and eligible
            analysis = _GroupAnalysis(groups.primary, groups.secondary, members, self.known, missing)
            if len(self._analyses) >= _CACHE_LIMIT:
                self._analyses = {}
            self._analyses[key] = analysis
        return analysis

    def _check(self, groups: IsolationGroups, members: Mapping[str, Sequence[str]]) -> str:
        """The note naming the groups rack info does not have ("" when none is missing).

        Raises:
            IsolationGroupError: a group is missing and `placement.isolation.failClosed` is on, or rack
                info lists an invalid bookie id.
        """
        named = (groups.primary | groups.secondary) - {ANY_GROUP}
        missing = sorted(named - set(members))
        note = ""
        if missing:
            where = ("the ledger's EnsemblePlacementPolicyConfig" if groups.source == "ledger" else
                     "bookkeeperClientIsolationGroups / bookkeeperClientSecondaryIsolationGroups")
            known = ", ".join(sorted(members)) or "none"
            if self.settings.isolation_fail_closed:
                raise IsolationGroupError(
                    f"isolation group(s) {', '.join(missing)} named by {where} do not exist in rack info "
                    f"(groups: {known}); refusing to place without isolation (placement.isolation.failClosed). "
                    "Add the bookies to the group (pulsar-admin bookies set-bookie-rack --group ...) or fix the "
                    "group names")
            note = (f"isolation group(s) {', '.join(missing)} named by {where} do not exist in rack info "
                    f"(groups: {known}): they hold no bookies, as in Pulsar (placement.isolation.failClosed=true "
                    "refuses instead)")
        # The resolver indexes invalid ids as rack info changes: O(invalid ids), not a scan of rack info.
        invalid = self.resolver.invalid_members()
        if invalid:
            group, bad = next(iter(invalid.items()))       # the first such group in name order
            raise IsolationGroupError(
                f"rack info group {group!r} lists invalid bookie id(s) {', '.join(map(repr, bad))}: "
                "isolation cannot be applied; fix the rack info (bookie ids are host:port)")
        return note

    def _prepare(self, ensemble_size: int, custom_metadata: Mapping[str, Any] | None,
                 exclude: Iterable[str], groups: IsolationGroups | None = None,
                 ) -> tuple[set[str], set[str] | frozenset[str], IsolationGroups | None, IsolationExclusion]:
        caller = set(exclude)
        if not self.isolation_enabled:
            return caller, caller, None, _NO_EXCLUSION
        try:
            if groups is None:
                groups = self.groups_for(custom_metadata)
            isolation = self.isolation_exclusion(ensemble_size, groups)
        except IsolationGroupError as exc:
            explain: dict[str, Any] = {"policy": self.name, "steps": [], "fallbacks": [],
                                       "excluded": {"caller": sorted(caller)} if caller else {}}
            if groups is not None:
                explain["isolation"] = {"primary": sorted(groups.primary), "secondary": sorted(groups.secondary),
                                        "source": groups.source}
            failed(exc, explain, "isolation groups must exist in rack info and list valid bookie ids")
            raise
        if not isolation.excluded:
            combined: set[str] | frozenset[str] = caller
        else:
            combined = caller | isolation.excluded if caller else isolation.excluded
        return caller, combined, groups, isolation

    def _isolation_step(self, isolation: IsolationExclusion) -> dict[str, Any]:
        if isolation.counts:
            return isolation.step()
        return {"step": "isolation groups", "scope": "all bookies", "candidates": len(self.known)}

    def _explain(self, result: PlacementResult, caller: set[str], groups: IsolationGroups | None,
                 isolation: IsolationExclusion) -> PlacementResult:
        return PlacementResult(result.ensemble, result.adherence, result.bookie,
                               self._explained(result.explain, caller, groups, isolation))

    def _explained(self, inner: Mapping[str, Any], caller: set[str], groups: IsolationGroups | None,
                   isolation: IsolationExclusion) -> dict[str, Any]:
        """The rack-aware explanation with the isolation step first, the isolation exclusion named
        apart from the caller's, the groups, and the isolation fallbacks (and rule) first."""
        explain = dict(inner)
        explain["policy"] = self.name
        excluded = dict(explain.get("excluded", {}))
        if caller:
            excluded["caller"] = sorted(caller)
        else:
            excluded.pop("caller", None)
        if isolation.excluded_sorted:
            excluded["isolation_group"] = list(isolation.excluded_sorted)
        explain["excluded"] = excluded
        notes = list(isolation.fallbacks)
        if groups is not None:
            if groups.note:
                notes.insert(0, groups.note)
            explain["isolation"] = {"primary": sorted(groups.primary), "secondary": sorted(groups.secondary),
                                    "source": groups.source}
            explain["steps"] = [self._isolation_step(isolation), *explain.get("steps", ())]
            # Every rule names the ledger's groups: a later fix must stay inside them.
            named = {"primary": sorted(groups.primary), "secondary": sorted(groups.secondary)}
            rules = [{**rule, **named} for rule in explain.get("relaxed", ())]
            if isolation.level:
                rules.insert(0, {"rule": RULE_ISOLATION, "admitted": ADMITTED[isolation.level], **named})
            if rules:
                explain["relaxed"] = rules
        explain["fallbacks"] = notes + list(explain.get("fallbacks", ()))
        return explain

    def _not_enough(self, exc: NotEnoughBookiesError, groups: IsolationGroups | None,
                    combined: set[str] | frozenset[str], caller: set[str],
                    isolation: IsolationExclusion) -> NotEnoughBookiesError:
        if groups is None:
            return exc
        eligible = sum(1 for b in self.known if b not in combined)
        primary = ", ".join(sorted(groups.primary)) or "(none)"
        secondary = ", ".join(sorted(groups.secondary)) or "(none)"
        explain = self._explained(exc.explain or {"policy": self.name, "steps": [], "fallbacks": [], "excluded": {}},
                                  caller, groups, isolation)
        explain.pop("relaxed", None)
        explain["constraint"] = (f"isolation groups (primary [{primary}], secondary [{secondary}], admitted: "
                                 f"{ADMITTED[isolation.level]}) allow {eligible} writable bookie(s) not excluded by "
                                 f"the caller; {exc.explain.get('constraint') or exc}")
        return NotEnoughBookiesError(
            f"{exc} [isolation groups from {groups.source}: primary [{primary}], secondary [{secondary}] "
            f"allow {eligible} writable bookie(s) not excluded by the caller; add bookies to these groups or "
            "name more secondary groups]", explain=explain)

    # -- placement -------------------------------------------------------------------------------------

    def new_ensemble(self, ensemble_size: int, write_quorum: int, ack_quorum: int,
                     custom_metadata: Mapping[str, bytes] | None = None, exclude: Iterable[str] | None = (), *,
                     rng: random.Random | None = None) -> PlacementResult:
        """Rack-aware `new_ensemble` among the bookies the isolation groups allow (spec §4.5-§4.7).

        `explain.steps` starts with the group filtering (`isolation groups`: candidates admitted, the
        primary / secondary / ungrouped counts, the bookies excluded); `explain.relaxed` names the
        secondary or ungrouped admission when it happened.

        Raises:
            IsolationGroupError: the groups cannot be applied (see the module docstring).
            NotEnoughBookiesError: the allowed bookies cannot form the ensemble.
        """
        if exclude is None:
            exclude = ()
        caller, combined, groups, isolation = self._prepare(ensemble_size, custom_metadata, exclude)
        try:
            result = super().new_ensemble(ensemble_size, write_quorum, ack_quorum, custom_metadata, combined,
                                          rng=rng)
        except NotEnoughBookiesError as exc:
            raise self._not_enough(exc, groups, combined, caller, isolation) from exc
        return self._explain(result, caller, groups, isolation)

    def replace_bookie(self, ensemble_size: int, write_quorum: int, ack_quorum: int,
                       custom_metadata: Mapping[str, bytes] | None, current_ensemble: Sequence[str],
                       bookie_to_replace: str, exclude: Iterable[str] | None = (), *,
                       rng: random.Random | None = None) -> PlacementResult:
        """Rack-aware `replace_bookie` among the bookies the isolation groups allow.

        The secondary/ungrouped thresholds compare with `ensemble_size`, although one bookie is
        needed (BK quirk kept, spec §4.5 and App. A #8).

        Raises:
            IsolationGroupError: the groups cannot be applied.
            NotEnoughBookiesError: no allowed bookie can replace it.
        """
        if exclude is None:
            exclude = ()
        return self._replace(ensemble_size, write_quorum, ack_quorum, custom_metadata, current_ensemble,
                             bookie_to_replace, exclude, rng, None)

    def _replace(self, ensemble_size: int, write_quorum: int, ack_quorum: int,
                 custom_metadata: Mapping[str, bytes] | None, current_ensemble: Sequence[str],
                 bookie_to_replace: str, exclude: Iterable[str], rng: random.Random | None,
                 groups: IsolationGroups | None) -> PlacementResult:
        caller, combined, groups, isolation = self._prepare(ensemble_size, custom_metadata, exclude, groups)
        try:
            result = super().replace_bookie(ensemble_size, write_quorum, ack_quorum, custom_metadata,
                                            current_ensemble, bookie_to_replace, combined, rng=rng)
        except NotEnoughBookiesError as exc:
            raise self._not_enough(exc, groups, combined, caller, isolation) from exc
        return self._explain(result, caller, groups, isolation)

    # -- relaxation fixes ----------------------------------------------------------------------------

    @staticmethod
    def _rule_groups(rule: Mapping[str, Any]) -> IsolationGroups:
        return IsolationGroups(frozenset(rule.get("primary", ())), frozenset(rule.get("secondary", ())), "ledger")

    def is_relaxed(self, ensemble: Sequence[str], write_quorum: int, ack_quorum: int,
                   rule: Mapping[str, Any]) -> bool:
        """Whether `ensemble` still depends on the relaxation `rule` (an `explain.relaxed` entry).

        Isolation: some member is outside the primary groups (rack info now). Other rules: as the
        rack-aware policy. Cost: O(E) (the group analysis is cached).
        """
        if rule.get("rule") != RULE_ISOLATION:
            return super().is_relaxed(ensemble, write_quorum, ack_quorum, rule)
        if not self.isolation_enabled:
            return False
        groups = frozenset(rule.get("primary", ()))
        primary = self._primary_sets.get(groups)
        if primary is None:
            # Groups that no longer exist have no members (a vanished secondary group is no error here).
            members = self.resolver.group_members()
            primary = frozenset(b for group in sorted(groups) for b in members.get(group, ()))
            if len(self._primary_sets) >= _CACHE_LIMIT:
                self._primary_sets = {}
            self._primary_sets[groups] = primary
        return any(member not in primary for member in ensemble)

    def relaxation_fix(self, ensemble_size: int, write_quorum: int, ack_quorum: int,
                       current_ensemble: Sequence[str], rule: Mapping[str, Any], exclude: Iterable[str] = (), *,
                       rng: random.Random | None = None) -> PlacementResult | None:
        """The fewest replacements that stop `current_ensemble` depending on the relaxation `rule`.

        Isolation: when the groups now admit fewer kinds of bookies for `ensemble_size` than when the
        ledger was placed (the primary groups have enough writable bookies again, or primary +
        secondary do), every member the groups no longer admit is replaced, in position order, by
        `replace_bookie` under the same groups. Other rules: as the rack-aware policy, inside the groups.

        Returns:
            None when the ensemble no longer depends on the rule; the fixed ensemble (with its adherence
            and `explain.replaced`); or an empty FAIL result whose `explain.fallbacks` say why no fix
            exists now.
        """
        if rule.get("rule") != RULE_ISOLATION:
            if not self.isolation_enabled or "primary" not in rule:
                return super().relaxation_fix(ensemble_size, write_quorum, ack_quorum, current_ensemble, rule,
                                              exclude, rng=rng)
            try:
                outside = self.isolation_exclusion(ensemble_size, self._rule_groups(rule)).excluded
            except IsolationGroupError as exc:
                return no_fix(self.name, str(exc))
            if not self.is_relaxed(current_ensemble, write_quorum, ack_quorum, rule):
                return None
            return self.spread_over_racks(write_quorum, ack_quorum, current_ensemble, tuple(exclude), outside, rng)
        if not self.is_relaxed(current_ensemble, write_quorum, ack_quorum, rule):
            return None
        rng = rng if rng is not None else random.Random(0)
        groups = self._rule_groups(rule)
        placed_level = ADMITTED.index(rule.get("admitted", ADMITTED[-1])) if rule.get("admitted") in ADMITTED else 2
        try:
            isolation = self.isolation_exclusion(ensemble_size, groups)
        except IsolationGroupError as exc:
            return no_fix(self.name, str(exc))
        if isolation.level >= placed_level:
            return no_fix(self.name, f"the isolation groups still need {ADMITTED[isolation.level]} bookies for "
                                      f"ensemble_size={ensemble_size}")
        current = list(current_ensemble)
        avoid = tuple(exclude)
        replaced: dict[str, str] = {}
        for position, member in enumerate(current_ensemble):
            if member not in isolation.excluded:
                continue
            try:
                placed = self._replace(ensemble_size, write_quorum, ack_quorum, None, current, member, avoid, rng,
                                       groups)
            except (NotEnoughBookiesError, IsolationGroupError) as exc:
                return no_fix(self.name, f"no bookie of the admitted groups can replace {member}: {exc}")
            current = list(placed.ensemble)
            replaced[str(position)] = current[position]
        if not replaced:
            return None
        return fixed(self.name, current, self.is_ensemble_adhering(current, write_quorum, ack_quorum), replaced,
                     avoid, isolation.fallbacks)

