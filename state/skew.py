"""Write skew: whether a rack or bookie takes more than its share of recent placements.

Spec: bookkeeper-rackaware.md §4.5 (uniform picks) and §7 (disk weights); docs/status-and-skew.md.

Each placing decision (a ledger create, a bookie replace) adds the bookies it placed to a window of
the last `engine.skew.windowDecisions` decisions of its scope: scope `create` holds the ensembles of
new ledgers, scope `replace` the bookies chosen by replaces, so recovery concentrating on a few
bookies (a recovery hot spot) is judged on its own, not diluted by creates. A window counts the
placements per bookie; a rack's are its bookies' (`ScopeWindow.rack_counts`).

**Expected shares.** Every decision carries its *basis*: the share of one placement each bookie
should get, over the bookies the policy could place on at that moment (`eligible_bookies`):

* the bookies the policy knows (writable and joined); a departed bookie or a rack that is down has
  no share from then on, while the decisions made before keep theirs;
* without the bookies of regions placement is switched off in (region-aware), and without the
  default-rack bookies when `enforceMinNumRacksPerWriteQuorum` keeps them unused (spec §4.3);
* under the isolation policy, the bookies the policy's own isolation analysis admits for that call
  (`IsolatedPolicy.isolation_exclusion` with the ledger's groups and ensemble size): the primary
  groups' writable bookies, plus the secondary groups' (or ungrouped bookies) when the primary
  groups are too small, exactly as the decision was made;
* the caller's `exclude` is *not* removed: clients that keep excluding some bookies skew the rest,
  which is what this detects.

Shares are uniform over that set, or, when `diskWeightBasedPlacementEnabled` is on, proportional to
the bookies' free disk with BookKeeper's cap (`policies.selection.capped_probabilities`, the cap
`bookieMaxMultipleForWeightBasedPlacement` x the median). A rack's share is the sum of its bookies'.
Over the window, item i expects `sum_d n_d p_i(d)` placements (`n_d` bookies placed by decision d)
with variance `sum_d n_d p_i(d) (1 - p_i(d))`: the binomial of independent placements. Placements of
one decision are distinct bookies and spread over racks, so the true variance is smaller and the test
errs on the quiet side. Decisions share bases: one is built (O(bookies)) only at the first decision
after the topology version changed, and identical bases are shared; a window keeps at most
`MAX_BASES`, merging the two oldest (placement-weighted average) beyond that.

**The statistic.** For every rack and bookie with a positive expected share, the one-sided,
continuity-corrected z-score `z = (observed - 0.5 - expected) / sqrt(variance)`. With m such items the
alarm threshold is `z* = NormalDist().inv_cdf(1 - engine.skew.pValue / m)` (Bonferroni: the chance
that any item of a uniform cluster crosses it in one evaluation is at most `pValue`). An item is an
offender when `z >= z*` and its observed share is at least `engine.skew.minRatio` times its expected
share (large windows make tiny, harmless deviations significant; the ratio keeps them quiet).
A window is evaluated after every `engine.skew.checkEveryDecisions` of its decisions once it holds
`engine.skew.minDecisions`. Offenders open one `placement.cluster.skew` alert per scope (the top
`TOP_OFFENDERS` by z); it is resolved (`placement.cluster.skew.resolved`, `resolves` = the opening
id) when no item is above the hysteresis bounds, `z* / 2` and `(1 + minRatio) / 2` times its share.

Each shard judges the decisions it answered (its own windows and alerts; subject
`cluster/<C>/shard/<s>` when shards > 1).

Cost: O(E) per decision to update a window, plus O(bookies) for a new basis after a topology
change; an evaluation is O(bases x bookies) every `checkEveryDecisions` decisions.
"""

from __future__ import annotations

import math
from collections import Counter, deque
from collections.abc import Iterable, Mapping, Sequence
from itertools import accumulate
from statistics import NormalDist
from typing import Any

from events.model import LedgerCreate
from policies import PlacementError
from policies.isolation import IsolatedPolicy, IsolationGroups
from policies.selection import capped_probabilities

from . import outputs
from .outputs import RESOLVED_SUFFIX, Output

ALERT_SKEW = "placement.cluster.skew"
SCOPE_CREATE = "create"
SCOPE_REPLACE = "replace"
SCOPES = (SCOPE_CREATE, SCOPE_REPLACE)
STATISTIC = "one-sided binomial z-score, continuity-corrected, Bonferroni over racks and bookies"
#: Distinct bases a window keeps; beyond, the two oldest are merged.
MAX_BASES = 8
TOP_OFFENDERS = 5
#: Policies whose `enforceMinNumRacksPerWriteQuorum` keeps default-rack bookies unused (spec §4.3).
_ENFORCING_POLICIES = frozenset({"rackaware", "isolated", "regionaware"})
_NORMAL = NormalDist()


class Basis:
    """Expected shares of one placement, over the bookies the policy could place on.

    Attributes:
        shares: bookie -> expected share (summing to 1).
        racks: bookie -> its rack.
        rack_shares: rack -> the sum of its bookies' shares.
        placements: placements in the window made under this basis.
    """

    __slots__ = ("shares", "racks", "rack_shares", "placements", "content")

    def __init__(self, shares: dict[str, float], racks: dict[str, str]) -> None:
        self.shares = shares
        self.racks = racks
        rack_shares: dict[str, float] = {}
        for bookie, share in shares.items():
            rack = racks[bookie]
            rack_shares[rack] = rack_shares.get(rack, 0.0) + share
        self.rack_shares = rack_shares
        self.placements = 0
        self.content = (tuple(shares.items()), tuple(racks.items()))


class ScopeWindow:
    """The last decisions of one scope, their counts, bases, and the scope's open alert.

    Args:
        size: `engine.skew.windowDecisions`.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self.decisions: deque[tuple[Basis, tuple[str, ...]]] = deque()
        self.bookie_counts: dict[str, int] = {}
        self.placements = 0
        self.bases: list[Basis] = []                 # live bases, oldest first
        self.by_content: dict[tuple, Basis] = {}     # content -> live basis
        self.cache: dict[tuple, Basis] = {}          # basis key (topology version first) -> basis
        self.since_check = 0
        self.open: str | None = None                 # id of the open skew alert

    # -- the window ----------------------------------------------------------------------------------

    def add(self, basis: Basis, bookies: tuple[str, ...]) -> None:
        """Add one decision's placements; the oldest decision leaves a full window. Cost: O(E)."""
        if basis.placements == 0 and basis not in self.bases:
            # A cached basis whose decisions all left: a live one of the same content stands for it
            # (live bases have distinct contents, so a restored window, which has no cache, picks the same).
            live = self.by_content.get(basis.content)
            if live is not None:
                basis = live
            else:
                self._adopt(basis)
        self.decisions.append((basis, bookies))
        basis.placements += len(bookies)
        self.placements += len(bookies)
        counts = self.bookie_counts
        for bookie in bookies:
            counts[bookie] = counts.get(bookie, 0) + 1
        if len(self.decisions) > self.size:
            self._drop_oldest()
        self.since_check += 1

    def _drop_oldest(self) -> None:
        basis, bookies = self.decisions.popleft()
        basis.placements -= len(bookies)
        self.placements -= len(bookies)
        counts = self.bookie_counts
        for bookie in bookies:
            left = counts[bookie] - 1
            if left:
                counts[bookie] = left
            else:
                del counts[bookie]
        if basis.placements == 0:
            self.bases.remove(basis)
            if self.by_content.get(basis.content) is basis:
                del self.by_content[basis.content]
                for other in self.bases:          # a merged basis may share the content
                    if other.content == basis.content:
                        self.by_content[other.content] = other
                        break

    def _adopt(self, basis: Basis) -> None:
        """Make `basis` live; beyond `MAX_BASES` the two oldest become one."""
        self.bases.append(basis)
        self.by_content.setdefault(basis.content, basis)
        if len(self.bases) > MAX_BASES:
            self._merge_oldest()

    def _merge_oldest(self) -> None:
        """Merge the two oldest bases into one whose shares are their placement-weighted average.
        Cost: O(window + bookies); only when a window would need more than `MAX_BASES` bases."""
        first, second = self.bases[0], self.bases[1]
        total = first.placements + second.placements
        shares: dict[str, float] = {}
        for basis in (first, second):
            weight = basis.placements / total if total else 0.5
            for bookie, share in basis.shares.items():
                shares[bookie] = shares.get(bookie, 0.0) + weight * share
        racks = {**first.racks, **second.racks}
        merged = Basis(dict(sorted(shares.items())), dict(sorted(racks.items())))
        merged.placements = total
        for old in (first, second):
            if self.by_content.get(old.content) is old:
                del self.by_content[old.content]
        self.bases[0:2] = [merged]
        self.by_content.setdefault(merged.content, merged)
        self.decisions = deque((merged if b is first or b is second else b, bookies) for b, bookies in self.decisions)
        # Cached bases may be the merged ones: the next decision builds its basis afresh.
        self.cache.clear()

    def share_for(self, key: tuple, model: Any) -> Basis:
        """The basis under `key` (`basis_key`): cached, or built (`build_basis`) and shared with a live
        basis of the same content. Cost: O(1) on a hit, O(bookies) otherwise."""
        basis = self.cache.get(key)
        if basis is not None:
            return basis
        if self.cache and next(iter(self.cache))[0] != key[0]:
            self.cache.clear()                       # another topology version: its bases are stale
        fresh = build_basis(model, key)
        basis = self.by_content.get(fresh.content, fresh)
        self.cache[key] = basis
        return basis

    # -- the statistic ---------------------------------------------------------------------------------

    def expected(self) -> tuple[dict[str, tuple[float, float]], dict[str, tuple[float, float]]]:
        """(bookie -> (expected placements, variance), rack -> the same) over the window.
        Cost: O(bases x bookies)."""
        bookies: dict[str, list[float]] = {}
        racks: dict[str, list[float]] = {}
        for basis in self.bases:
            n = basis.placements
            for items, shares in ((bookies, basis.shares), (racks, basis.rack_shares)):
                for name, share in shares.items():
                    entry = items.get(name)
                    if entry is None:
                        entry = items[name] = [0.0, 0.0]
                    entry[0] += n * share
                    entry[1] += n * share * (1.0 - share)
        return ({k: (v[0], v[1]) for k, v in sorted(bookies.items())},
                {k: (v[0], v[1]) for k, v in sorted(racks.items())})

    def rack_counts(self, model: Any) -> dict[str, int]:
        """Placements per rack: each bookie's count under the rack its newest basis gives it (where the
        policy placed it), else where the model locates it now (a bookie outside every basis: a last
        resort, or one that left). Cost: O(placed bookies x bases)."""
        counts: dict[str, int] = {}
        newest_first = self.bases[::-1]
        location_of = model.location_of
        default = model.default_location
        for bookie, count in self.bookie_counts.items():
            rack = None
            for basis in newest_first:
                rack = basis.racks.get(bookie)
                if rack is not None:
                    break
            if rack is None:
                rack = location_of(bookie) or default
            counts[rack] = counts.get(rack, 0) + count
        return counts

    # -- snapshots -------------------------------------------------------------------------------------

    def export_state(self) -> dict[str, Any]:
        """JSON-able, as flat integer lists: bookie and rack names tabled once; each basis as its
        bookies, shares and racks; each decision as its basis and how many of `placed` it placed.
        Cost: O(window x E + bases x bookies)."""
        names: dict[str, int] = {}
        setdefault = names.setdefault
        for bookie in self.bookie_counts:
            setdefault(bookie, len(names))
        bases = []
        for basis in self.bases:
            bookies = [setdefault(b, len(names)) for b in basis.shares]
            racks = [setdefault(r, len(names)) for r in basis.racks.values()]
            bases.append({"bookies": bookies, "shares": list(basis.shares.values()), "racks": racks})
        basis_index = {id(b): i for i, b in enumerate(self.bases)}
        decisions = self.decisions
        return {"names": list(names), "bases": bases,
                "decision_bases": [basis_index[id(basis)] for basis, _ in decisions],
                "decision_sizes": [len(bookies) for _, bookies in decisions],
                "placed": [names[b] for _, bookies in decisions for b in bookies],
                "since_check": self.since_check, "open": self.open}

    def import_state(self, state: Mapping[str, Any]) -> None:
        """Restore `export_state()` output; a smaller window drops its oldest decisions.
        Cost: O(window x E + bases x bookies)."""
        names = state["names"]
        name_of = names.__getitem__
        self.bases = []
        for row in state["bases"]:
            bookies = list(map(name_of, row["bookies"]))
            basis = Basis(dict(zip(bookies, map(float, row["shares"]))),
                          dict(zip(bookies, map(name_of, row["racks"]))))
            self.bases.append(basis)
            self.by_content.setdefault(basis.content, basis)
        placed = list(map(name_of, state["placed"]))
        bases = self.bases
        which, sizes = state["decision_bases"], state["decision_sizes"]
        ends = list(accumulate(sizes))
        self.decisions = deque(zip(map(bases.__getitem__, which),
                                   [tuple(placed[end - size:end]) for size, end in zip(sizes, ends)]))
        per_basis = [0] * len(bases)
        for basis_at, size in zip(which, sizes):
            per_basis[basis_at] += size
        for basis, count in zip(bases, per_basis):
            basis.placements = count
        self.placements = len(placed)
        self.bookie_counts = dict(Counter(placed))
        while len(self.decisions) > self.size:
            self._drop_oldest()
        self.since_check = int(state.get("since_check", 0))
        self.open = state.get("open")

    def check_invariants(self) -> None:
        """Assert the counts, the bases' placements and the bound agree with the decisions (tests only)."""
        counts: dict[str, int] = {}
        per_basis: dict[int, int] = {}
        for basis, bookies in self.decisions:
            per_basis[id(basis)] = per_basis.get(id(basis), 0) + len(bookies)
            for bookie in bookies:
                counts[bookie] = counts.get(bookie, 0) + 1
        assert counts == self.bookie_counts, "window counts differ from its decisions"
        assert self.placements == sum(counts.values())
        assert {id(b): b.placements for b in self.bases} == per_basis, "live bases differ from the decisions'"
        assert len(self.decisions) <= self.size and len(self.bases) <= MAX_BASES
        for basis in self.bases:
            assert abs(sum(basis.shares.values()) - 1.0) < 1e-6 or not basis.shares


class SkewDetector:
    """The create and replace windows of one cluster (or shard), and their alerts.

    Args:
        settings: the model settings (`engine.skew.*`).
    """

    def __init__(self, settings: Any) -> None:
        self.settings = settings
        self.windows = {scope: ScopeWindow(settings.skew_window) for scope in SCOPES}
        self.decisions_seen = 0          # placing decisions added (part of the status's change signature)

    @property
    def enabled(self) -> bool:
        return self.settings.skew_window > 0

    def open_scopes(self) -> list[str]:
        return [scope for scope in SCOPES if self.windows[scope].open is not None]

    # -- decisions -------------------------------------------------------------------------------------

    def on_decision(self, model: Any, scope: str, request: Any, placed: Sequence[str], request_id: str, *,
                    shard: int = 0, shards: int = 1) -> list[Output]:
        """Count one placing decision and, when due, judge its window.

        Args:
            model: the `ClusterModel` the decision was made against (at its clock).
            scope: `create` or `replace`.
            request: the request (its ensemble size and custom metadata select the isolation groups).
            placed: the bookies it placed (a create's ensemble, a replace's new bookie).
            request_id: the request's id (part of an alert's id).

        Returns:
            The skew alert opened or resolved, if any. Cost: see the module docstring.
        """
        if not self.enabled or not placed:
            return []
        window = self.windows[scope]
        window.add(window.share_for(basis_key(model, request), model), tuple(placed))
        self.decisions_seen += 1
        settings = self.settings
        if window.since_check < settings.skew_check_every or len(window.decisions) < settings.skew_min_decisions:
            return []
        window.since_check = 0
        return self.evaluate(model, scope, request_id, shard=shard, shards=shards)

    def evaluate(self, model: Any, scope: str, request_id: str, *, shard: int = 0, shards: int = 1) -> list[Output]:
        """Judge a window now: open its alert on offenders, resolve it within the hysteresis bounds."""
        window = self.windows[scope]
        verdict = judge(window, self.settings.skew_p_value, self.settings.skew_min_ratio, model)
        subject = f"cluster/{model.cluster}" if shards == 1 else f"cluster/{model.cluster}/shard/{shard}"
        time_ms = model.clock_ms
        common = {"scope": scope, "window_decisions": len(window.decisions), "placements": window.placements,
                  "basis": "weights" if model.placement.disk_weighted else "bookies",
                  "statistic": STATISTIC, "threshold": _rounded(verdict.threshold, 3),
                  "resolve_threshold": _rounded(verdict.threshold / 2, 3), "min_ratio": self.settings.skew_min_ratio,
                  "p_value": self.settings.skew_p_value, "items": verdict.items}
        if window.open is None and verdict.offenders:
            data = {**common, "offenders": verdict.offenders[:TOP_OFFENDERS],
                    "message": _message(scope, verdict.offenders, len(window.decisions)),
                    "action": "look for what steers placements there: disk weights reported wrongly, clients "
                              "excluding other bookies, a rack or isolation group that shrank; see "
                              "docs/status-and-skew.md",
                    "state": "firing"}
            alert = outputs.alert(alert_type=ALERT_SKEW, cluster=model.cluster, subject=subject, time_ms=time_ms,
                                  key=f"{scope}:{request_id}", severity=outputs.WARNING, data=data)
            window.open = alert.id
            return [alert]
        if window.open is not None and not verdict.lingering:
            return [self._resolved(model, scope, subject, time_ms, f"{scope}:{request_id}",
                                   {**common, "reason": "every rack's and bookie's share is back within the "
                                    "hysteresis bounds"})]
        return []

    def _resolved(self, model: Any, scope: str, subject: str, time_ms: int, key: str,
                  data: dict[str, Any]) -> Output:
        window = self.windows[scope]
        opened, window.open = window.open, None
        return outputs.alert(alert_type=ALERT_SKEW + RESOLVED_SUFFIX, cluster=model.cluster, subject=subject,
                             time_ms=time_ms, key=key, severity=outputs.INFO,
                             data={**data, "resolves": opened, "state": "resolved"})

    def keep_bound(self, model: Any, *, shard: int = 0, shards: int = 1) -> list[Output]:
        """Resolve the open alerts of a model restored with skew detection turned off
        (`engine.skew.windowDecisions=0`): nothing would ever judge them again. O(1) otherwise."""
        if self.enabled or not (self.windows[SCOPE_CREATE].open or self.windows[SCOPE_REPLACE].open):
            return []
        subject = f"cluster/{model.cluster}" if shards == 1 else f"cluster/{model.cluster}/shard/{shard}"
        return [self._resolved(model, scope, subject, model.clock_ms, f"{scope}:off",
                               {"scope": scope, "reason": "skew detection was turned off "
                                "(engine.skew.windowDecisions=0)"})
                for scope in self.open_scopes()]

    # -- write share -------------------------------------------------------------------------------------

    def write_share(self, model: Any) -> dict[str, Any] | None:
        """The status record's `write_share`: placements per rack over both windows against the expected
        share; None when skew detection is off. Cost: O(bases x bookies)."""
        if not self.enabled:
            return None
        placements = 0
        decisions = 0
        observed: dict[str, int] = {}
        expected: dict[str, float] = {}
        for window in self.windows.values():
            placements += window.placements
            decisions += len(window.decisions)
            for rack, count in window.rack_counts(model).items():
                observed[rack] = observed.get(rack, 0) + count
            for rack, (mean, _) in window.expected()[1].items():
                expected[rack] = expected.get(rack, 0.0) + mean
        racks = []
        for rack in sorted(observed.keys() | expected.keys()):
            count = observed.get(rack, 0)
            racks.append({"rack": rack, "placements": count,
                          "observed": _rounded(count / placements, 6) if placements else 0.0,
                          "expected": _rounded(expected.get(rack, 0.0) / placements, 6) if placements else 0.0})
        return {"window_decisions": self.settings.skew_window, "decisions": decisions, "placements": placements,
                "basis": "weights" if model.placement.disk_weighted else "bookies", "racks": racks}

    # -- snapshots ---------------------------------------------------------------------------------------

    def export_state(self) -> dict[str, Any]:
        return {"windows": {scope: window.export_state() for scope, window in self.windows.items()},
                "decisions_seen": self.decisions_seen}

    def import_state(self, state: Mapping[str, Any]) -> None:
        for scope, window_state in state.get("windows", {}).items():
            if scope in self.windows:
                self.windows[scope].import_state(window_state)
        self.decisions_seen = int(state.get("decisions_seen", 0))

    def check_invariants(self) -> None:
        for window in self.windows.values():
            window.check_invariants()


class Verdict:
    """One evaluation: offenders (sorted, most significant first), whether any item is still above the
    hysteresis bounds, the alarm threshold and the number of items judged."""

    __slots__ = ("offenders", "lingering", "threshold", "items")

    def __init__(self, offenders: list[dict[str, Any]], lingering: bool, threshold: float, items: int) -> None:
        self.offenders = offenders
        self.lingering = lingering
        self.threshold = threshold
        self.items = items


def judge(window: ScopeWindow, p_value: float, min_ratio: float, model: Any) -> Verdict:
    """The statistic of the module docstring over one window of `model`. Cost: O(bases x bookies)."""
    bookies, racks = window.expected()
    n = window.placements
    levels = (("rack", racks, window.rack_counts(model)), ("bookie", bookies, window.bookie_counts))
    judged = [(level, name, mean, variance, counts.get(name, 0)) for level, items, counts in levels
              for name, (mean, variance) in items.items() if mean > 0 and variance > 0]
    items = len(judged)
    if not items or not n:
        return Verdict([], False, math.inf, items)
    threshold = _NORMAL.inv_cdf(1.0 - p_value / items)
    resolve_z, resolve_ratio = threshold / 2, (1.0 + min_ratio) / 2
    offenders = []
    lingering = False
    for level, name, mean, variance, count in judged:
        z = (count - 0.5 - mean) / math.sqrt(variance)
        ratio = count / mean
        if z >= resolve_z and ratio >= resolve_ratio:
            lingering = True
            if z >= threshold and ratio >= min_ratio:
                offenders.append({"level": level, "name": name, "placements": count,
                                  "observed_share": _rounded(count / n, 6), "expected_share": _rounded(mean / n, 6),
                                  "z": _rounded(z, 3)})
    offenders.sort(key=lambda o: (-o["z"], o["level"], o["name"]))
    return Verdict(offenders, lingering, threshold, items)


def _message(scope: str, offenders: list[dict[str, Any]], decisions: int) -> str:
    top = offenders[0]
    what = "new ledgers'" if scope == SCOPE_CREATE else "replacements'"
    more = f" (and {len(offenders) - 1} more)" if len(offenders) > 1 else ""
    return (f"{top['level']} {top['name']} took {top['observed_share']:.1%} of the last {decisions} {what} "
            f"placements against an expected {top['expected_share']:.1%} (z={top['z']}){more}")


def _rounded(value: float, digits: int) -> float:
    return round(value, digits) if math.isfinite(value) else 0.0


# -- the basis of a decision ---------------------------------------------------------------------------


def basis_key(model: Any, request: Any) -> tuple:
    """The key of a decision's basis: the topology version, and under the isolation policy the
    ledger's groups and ensemble size (they select which bookies the call could use); every other
    policy's basis is the same for every call of a version. Cost: O(1) (O(metadata) when isolating)."""
    policy = model.policy
    if isinstance(policy, IsolatedPolicy) and policy.isolation_enabled:
        size = request.ensemble_size if type(request) is LedgerCreate else len(request.ensemble)
        groups = policy.groups_for(request.metadata_dict())
        return (model.version, tuple(sorted(groups.primary)), tuple(sorted(groups.secondary)), groups.source, size)
    return (model.version,)


def build_basis(model: Any, key: tuple) -> Basis:
    """The basis a `basis_key` names, at the model's current state. Cost: O(bookies)."""
    if len(key) > 1:
        _, primary, secondary, source, size = key
        groups = IsolationGroups(frozenset(primary), frozenset(secondary), source)
        return _basis(model, eligible_bookies(model, groups, size))
    return _basis(model, eligible_bookies(model))


def eligible_bookies(model: Any, groups: Any = None, ensemble_size: int = 0) -> list[str]:
    """The bookies the policy can place on now, sorted (see the module docstring). Cost: O(bookies)."""
    policy = model.policy
    known = policy.known
    excluded: Iterable[str] = ()
    if groups is not None:
        try:
            excluded = policy.isolation_exclusion(ensemble_size, groups).excluded
        except PlacementError:
            excluded = ()      # the groups cannot be applied now (the decision was made before a change)
    excluded = set(excluded)
    disallowed = set(policy.disallowed_regions())
    if disallowed:
        excluded |= {b for b in known if policy.region_of_bookie(b) in disallowed}
    topology = policy.topology
    if topology is not None and model.placement.enforce_min_racks and model.policy_name in _ENFORCING_POLICIES:
        excluded |= set(topology.bookies_in(policy.default_location))
    return sorted(b for b in known if b not in excluded)


def _basis(model: Any, eligible: list[str]) -> Basis:
    policy = model.policy
    if model.placement.disk_weighted and eligible:
        disk = model.disk
        weights = [disk[b].free_disk if b in disk else 0 for b in eligible]
        mass = capped_probabilities(weights, model.placement.max_weight_multiple)
        total = sum(mass)
        shares = {b: m / total for b, m in zip(eligible, mass)}
    else:
        share = 1.0 / len(eligible) if eligible else 0.0
        shares = dict.fromkeys(eligible, share)
    default = policy.default_location
    known_location = policy.known_location
    racks = {b: known_location(b) or default for b in eligible}
    return Basis(shares, racks)


__all__ = ["ALERT_SKEW", "MAX_BASES", "SCOPES", "SCOPE_CREATE", "SCOPE_REPLACE", "Basis", "ScopeWindow",
           "SkewDetector", "eligible_bookies", "judge"]
