"""Write skew: whether a rack or bookie takes more than its share of recent placements.

Spec: bookkeeper-rackaware.md §4.5 (uniform picks) and §7 (disk weights); docs/status-and-skew.md.

Each placing decision (a ledger create, a bookie replace) adds the bookies it placed to a window of
the last `engine.skew.windowDecisions` decisions of its scope: scope `create` holds the ensembles of
new ledgers, scope `replace` the bookies chosen by replaces, so recovery concentrating on a few
bookies (a recovery hot spot) is judged on its own, not diluted by creates. A window counts the
placements per bookie; a rack's are its bookies' (`ScopeWindow.rack_counts`).

**Expected shares.** Every decision carries its *basis*: the share of one placement each bookie
should get, over the bookies the policy could place on at that moment. The policy says both (the
`PlacementPolicy` interface, never its internals): `placement_scope(ensemble_size, metadata)` names
what beyond the topology selects those bookies (the ledger's isolation groups and ensemble size under
the isolation policy, nothing otherwise), and `expected_shares(scope)` gives the shares:

* over the bookies the policy knows (writable and joined); a departed bookie or a rack that is down
  has no share from then on, while the decisions made before keep theirs;
* without the bookies of regions placement is switched off in (region-aware), and without the
  default-rack bookies when `enforceMinNumRacksPerWriteQuorum` keeps them unused (spec §4.3);
* under the isolation policy, the bookies its own isolation analysis admits for that call: the primary
  groups' writable bookies, plus the secondary groups' (or ungrouped bookies) when the primary
  groups are too small, exactly as the decision was made;
* uniform, or, when `diskWeightBasedPlacementEnabled` is on, proportional to the bookies' free disk
  with BookKeeper's cap (`bookieMaxMultipleForWeightBasedPlacement` x the median).

The caller's `exclude` is *not* removed: clients that keep excluding some bookies skew the rest,
which is what this detects. A rack's share is the sum of its bookies' (the racks where the policy
placed them, `known_location`).
Over the window, item i expects `sum_d n_d p_i(d)` placements (`n_d` bookies placed by decision d)
with variance `sum_d n_d p_i(d) (1 - p_i(d))`: the binomial of independent placements. Placements of
one decision are distinct bookies and spread over racks, so the true variance is smaller and the test
errs on the quiet side. Decisions share bases: a window builds one (O(bookies)) only at its first
decision of a placement scope after the topology version changed, and identical bases are shared; a
window keeps at most `MAX_BASES`, merging the two oldest (placement-weighted average) beyond that.

**The statistic.** For every rack and bookie with a positive expected share, the one-sided,
continuity-corrected z-score `z = (observed - 0.5 - expected) / sqrt(variance)`. With m such items the
alarm threshold is `z* = NormalDist().inv_cdf(1 - engine.skew.pValue / m)` (Bonferroni: the chance
that any item of a uniform cluster crosses it in one evaluation is at most `pValue`). An item is an
offender when `z >= z*` and its observed share is at least `engine.skew.minRatio` times its expected
share (large windows make tiny, harmless deviations significant; the ratio keeps them quiet).
A window is evaluated after every `engine.skew.checkEveryDecisions` (100) of its decisions once it holds
`engine.skew.minDecisions`. Offenders open one `placement.cluster.skew` alert per scope (the top
`TOP_OFFENDERS` by z); it is resolved (`placement.cluster.skew.resolved`, `resolves` = the opening
id) when no item is above the hysteresis bounds, `z* / 2` and `(1 + minRatio) / 2` times its share.

Each shard judges the decisions it answered (its own windows and alerts; subject
`cluster/<C>/shard/<s>` when shards > 1).

Cost: O(E) per decision to update a window, plus O(bookies) for a new basis after a topology
change; an evaluation is O(bases x bookies) every `checkEveryDecisions` decisions; the status's write
share O(bases x racks + placed bookies x bases). A window keeps its expected counts until its next
decision, so a window that did not move is not summed again.
"""

from __future__ import annotations

import math
from collections import Counter, deque
from collections.abc import Mapping, Sequence
from itertools import accumulate
from statistics import NormalDist
from typing import Any

from events.model import LedgerCreate

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
_NORMAL = NormalDist()


class Basis:
    """Expected shares of one placement, over the bookies the policy could place on.

    Attributes:
        shares: bookie -> expected share (summing to 1).
        racks: bookie -> its rack.
        rack_shares: rack -> the sum of its bookies' shares.
        placements: placements in the window made under this basis.
        terms: `(name, share, 1 - share)` of every bookie, and of every rack (what `expected` sums).
    """

    __slots__ = ("shares", "racks", "rack_shares", "placements", "content", "terms")

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
        self.terms = tuple(tuple((name, share, 1.0 - share) for name, share in items.items())
                           for items in (shares, rack_shares))


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
        # `expected()` and `expected_racks()`, kept until the window changes.
        self._expected: tuple[dict[str, tuple[float, float]], dict[str, tuple[float, float]]] | None = None
        self._expected_racks: dict[str, tuple[float, float]] | None = None

    # -- the window ----------------------------------------------------------------------------------

    def add(self, basis: Basis, bookies: tuple[str, ...]) -> None:
        """Add one decision's placements; the oldest decision leaves a full window. Cost: O(E)."""
        self._expected = self._expected_racks = None
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
        """(bookie -> (expected placements, variance), rack -> the same) over the window, sorted by name.
        The caller must not change them: they are kept until the window changes.
        Cost: O(bases x bookies), O(1) again until the next decision."""
        if self._expected is None:
            self._expected = (self._sums(0), self.expected_racks())
        return self._expected

    def expected_racks(self) -> dict[str, tuple[float, float]]:
        """`expected()[1]` (the racks' only), kept as well. Cost: O(bases x racks), O(1) again until the
        next decision."""
        if self._expected is not None:
            return self._expected[1]
        if self._expected_racks is None:
            self._expected_racks = self._sums(1)
        return self._expected_racks

    def _sums(self, level: int) -> dict[str, tuple[float, float]]:
        """The expected counts and variances of the bookies (`level` 0) or racks (1): per basis in window
        order, `n * share` and `n * share * (1 - share)` added to each item's sums (the shares and their
        complements are the basis's `terms`)."""
        sums: dict[str, list[float]] = {}
        get = sums.get
        for basis in self.bases:
            n = basis.placements
            for name, share, one_minus in basis.terms[level]:
                ns = n * share
                entry = get(name)
                if entry is None:
                    sums[name] = [0.0 + ns, 0.0 + ns * one_minus]
                else:
                    entry[0] += ns
                    entry[1] += ns * one_minus
        return {k: (v[0], v[1]) for k, v in sorted(sums.items())}

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
        self._expected = self._expected_racks = None
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
        if self._expected is not None:
            assert self._expected == (self._sums(0), self._sums(1)), "kept expected counts differ from the window's"
        if self._expected_racks is not None:
            assert self._expected_racks == self._sums(1), "kept expected rack counts differ from the window's"


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
        share; None when skew detection is off. Cost: O(bases x racks + placed bookies x bases)."""
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
            for rack, (mean, _) in window.expected_racks().items():
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
    """The key of a decision's basis: the topology version and the policy's `placement_scope` of the
    request (under the isolation policy the ledger's groups and ensemble size, which select the bookies
    the call could use; `()` for every other policy, whose basis is the same for every call of a
    version). Cost: O(1) (O(metadata) when isolating)."""
    size = request.ensemble_size if type(request) is LedgerCreate else len(request.ensemble)
    metadata = request.metadata_dict() if request.custom_metadata else None
    return (model.version, model.policy.placement_scope(size, metadata))


def build_basis(model: Any, key: tuple) -> Basis:
    """The basis a `basis_key` names, at the model's current state: the policy's `expected_shares` of
    the scope, each bookie in the rack the policy placed it in. Cost: O(bookies)."""
    policy = model.policy
    shares = policy.expected_shares(key[1])
    default = policy.default_location
    known_location = policy.known_location
    return Basis(shares, {b: known_location(b) or default for b in shares})


__all__ = ["ALERT_SKEW", "MAX_BASES", "SCOPES", "SCOPE_CREATE", "SCOPE_REPLACE", "Basis", "ScopeWindow",
           "SkewDetector", "judge"]
