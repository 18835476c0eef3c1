"""The figures of one replayed configuration, counted from its output files (`compare`'s analysis).

One job: read a configuration's `decisions/`, `alerts/` and `dead-letters/` (the `replay` layout) and
the input's cluster events, and count, per cluster, what `comparison.json` reports (its schema is in
the README, "Compare configurations"):

* decisions by status, error code, adherence and request type;
* failed creates and replaces by the constraint that failed: the configuration key the policy's
  `explain["constraint"]` (else the error message) names, else `eligible bookies` for
  `NOT_ENOUGH_BOOKIES`, else the error code (with the dead-letter reason of an `INVALID_REQUEST`);
* the fallbacks taken (`explain["fallbacks"]`, the leading `position N: ` dropped so one rule is one
  line) and the relaxed rules (`explain["relaxed"]`);
* ledger alerts opened and resolved (`placement.ledger.not_adhering`, `placement.ledger.re_adhere_possible`,
  also read under its old name `placement.ledger.readhere_possible`) and the placement debt they describe
  over event time: ledgers not adhering and ledgers that could be re-adhered (`readherable` in
  comparison.json), a step series that changes at each open and resolve;
* write share per rack (network location) and per bookie against the expected share, with a
  chi-square skew statistic and its p-value, and the total variation distance;
* replacement concentration while some rack has lost bookies;
* the failure rate of creates and replaces over event time, and the outage intervals.

The expected write share is approximated from the input's topology events (not from the engine's
model): each new ensemble membership (a create's members, a replace's new bookie) is spread over the
bookies writable at the decision's time, uniformly, or in proportion to their capped free disk
(`policies.selection.capped_probabilities`) when `diskWeightBasedPlacementEnabled` is on. It ignores
what a placement excludes (a request's `exclude`, the ensemble's other members, default-rack bookies
under enforcement, isolation groups) and the rack rules themselves, which is why a rack-aware policy
shows a skew towards racks with few bookies. Members of one ensemble are not independent draws, so
the chi-square p-value is a measure of skew, not a test.

Cost: O(outputs + input records + topology changes x bookies); reading the JSON dominates.
"""

from __future__ import annotations

import json
import math
import re
from bisect import bisect_right
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from events import (
    BookieDisk,
    BookieLocation,
    BookieLost,
    BookieReadonly,
    BookieWritable,
    ClusterView,
    Origin,
    format_time,
    parse_record,
    parse_time_ms,
)
from policies.selection import capped_probabilities
from policies.settings import KNOWN_KEYS
from state.outputs import ALERT_LEDGER_NOT_ADHERING, ALERT_LEDGER_RE_ADHERE, ALERT_LEDGER_RE_ADHERE_OLD_NAME

PLACEMENT_TYPES = ("ledger_create", "bookie_replace")
LEDGER_ALERTS = {ALERT_LEDGER_NOT_ADHERING: "not_adhering", ALERT_LEDGER_RE_ADHERE: "readherable",
                 ALERT_LEDGER_RE_ADHERE_OLD_NAME: "readherable"}
"""Ledger alert type (and old name) -> its figures' name in comparison.json."""
TOP_TEXTS = 20
"""Distinct constraint and fallback texts kept per cluster (the rest are summed under `(other)`)."""
DEBT_POINTS = 2000
"""Most points of a debt series in comparison.json (thinned to the value at the end of equal time slices)."""
RATE_BUCKETS = 60
"""Time slices of the failure-rate series."""
TOP_REPLACEMENTS = 5
ELIGIBLE_BOOKIES = "eligible bookies"
_POSITION = re.compile(r"^position \d+: ")


def read_jsonl(folder: Path) -> Iterator[dict]:
    """Every record of a `replay` output folder, in file order."""
    for path in sorted(folder.glob("*.jsonl")):
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                if line.strip():
                    yield json.loads(line)


def chi_square(observed: Mapping[str, float], expected: Mapping[str, float]) -> dict[str, Any]:
    """Pearson's chi-square of `observed` counts against `expected` counts over the categories with
    an expected count above 0; `p_value` is the chance of a larger statistic under the expected
    distribution (chi-square with `dof` = categories - 1), `total_variation` half the sum of the
    absolute differences of the shares. Cost: O(categories)."""
    cells = [key for key, value in expected.items() if value > 0]
    total_observed = sum(observed.get(key, 0) for key in cells)
    total_expected = sum(expected[key] for key in cells)
    if len(cells) < 2 or total_observed == 0:
        return {"chi_square": None, "dof": max(len(cells) - 1, 0), "p_value": None, "total_variation": None}
    scale = total_observed / total_expected
    statistic = sum((observed.get(key, 0) - expected[key] * scale) ** 2 / (expected[key] * scale) for key in cells)
    variation = 0.5 * sum(abs(observed.get(key, 0) / total_observed - expected[key] / total_expected) for key in cells)
    dof = len(cells) - 1
    return {"chi_square": round(statistic, 3), "dof": dof, "p_value": chi_square_p_value(statistic, dof),
            "total_variation": round(variation, 4)}


def chi_square_p_value(statistic: float, dof: int) -> float:
    """P(X >= statistic) for X chi-square with `dof` degrees of freedom: the regularized upper
    incomplete gamma Q(dof/2, statistic/2), by its series below a + 1 and its continued fraction above
    (Numerical Recipes 6.2). Cost: O(sqrt(statistic)) iterations at most 500."""
    a, x = dof / 2.0, statistic / 2.0
    if x <= 0:
        return 1.0
    log_front = a * math.log(x) - x - math.lgamma(a)
    if x < a + 1:
        term = total = 1.0 / a
        n = a
        for _ in range(500):
            n += 1
            term *= x / n
            total += term
            if abs(term) < abs(total) * 1e-15:
                break
        return max(0.0, min(1.0, 1.0 - total * math.exp(log_front)))
    tiny = 1e-300
    b = x + 1 - a
    c, d = 1 / tiny, 1 / b
    h = d
    for i in range(1, 500):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1 / d
        step = d * c
        h *= step
        if abs(step - 1) < 1e-15:
            break
    return max(0.0, min(1.0, math.exp(log_front) * h))


def constraint_key(decision: Mapping[str, Any]) -> tuple[str, str]:
    """(the configuration key or cause a failed decision names, the constraint text)."""
    error = decision.get("error") or {}
    explain = decision.get("explain") or {}
    code = str(error.get("code") or "UNKNOWN")
    text = str(explain.get("constraint") or error.get("message") or code)
    reason = explain.get("dead_letter")
    if reason:
        return f"{code}: {reason}", text
    key = _key_named(text) or _key_named(str(error.get("message") or ""))
    if key is None:
        key = ELIGIBLE_BOOKIES if code == "NOT_ENOUGH_BOOKIES" else code
    return key, text


def _key_named(text: str) -> str | None:
    """The placement key `text` names: the first written with its value, else the first named."""
    with_value = [(at, key) for key in KNOWN_KEYS if (at := text.find(key + "=")) >= 0]
    if with_value:
        return min(with_value)[1]
    named = [(at, -len(key), key) for key in KNOWN_KEYS if (at := text.find(key)) >= 0]
    return min(named)[2] if named else None


def outcome(decision: Mapping[str, Any]) -> str:
    """What a request got, as compared between configurations: `ok <adherence>` or `failed <code>`."""
    if decision.get("status") == "ok":
        return f"ok {decision.get('adherence')}"
    return f"failed {(decision.get('error') or {}).get('code')}"


@dataclass
class _Topology:
    """One cluster's bookies as the input's cluster events leave them (for expected shares and outages)."""

    default_location: str
    location: dict[str, str] = field(default_factory=dict)
    writable: set[str] = field(default_factory=set)
    readonly: set[str] = field(default_factory=set)
    lost: set[str] = field(default_factory=set)
    free_disk: dict[str, int] = field(default_factory=dict)

    def apply(self, record: Any) -> None:
        if isinstance(record, BookieWritable):
            self._move(record.bookie, self.writable)
            if record.location is not None:
                self.location[record.bookie] = record.location
        elif isinstance(record, BookieReadonly):
            self._move(record.bookie, self.readonly)
        elif isinstance(record, BookieLost):
            if record.bookie in self.writable or record.bookie in self.readonly:
                self._move(record.bookie, self.lost)
        elif isinstance(record, BookieLocation):
            if record.location is None:
                self.location.pop(record.bookie, None)
            else:
                self.location[record.bookie] = record.location
        elif isinstance(record, BookieDisk):
            self.free_disk[record.bookie] = record.free_disk
        elif isinstance(record, ClusterView):
            gone = (self.writable | self.readonly) - set(record.writable) - set(record.readonly)
            self.lost = (self.lost | gone) - set(record.writable) - set(record.readonly)
            self.writable, self.readonly = set(record.writable), set(record.readonly) - set(record.writable)

    def _move(self, bookie: str, target: set[str]) -> None:
        for group in (self.writable, self.readonly, self.lost):
            group.discard(bookie)
        target.add(bookie)

    def rack(self, bookie: str) -> str:
        return self.location.get(bookie, self.default_location)

    def shares(self, disk_weighted: bool, max_multiple: int) -> dict[str, float]:
        """The chance of each writable bookie in one unconstrained pick."""
        bookies = sorted(self.writable)
        if not bookies:
            return {}
        if disk_weighted:
            masses = capped_probabilities([self.free_disk.get(b, 0) for b in bookies], max_multiple)
            total = sum(masses)
            return {b: m / total for b, m in zip(bookies, masses)}
        return dict.fromkeys(bookies, 1.0 / len(bookies))


def topology_changes(files: Sequence[str]) -> dict[str, list[tuple[int, Any]]]:
    """Each cluster's valid cluster events of the input, in the order `replay` applies them
    (time, then file, then line)."""
    found: list[tuple[int, int, int, Any]] = []
    kinds = (BookieWritable, BookieReadonly, BookieLost, BookieLocation, BookieDisk, ClusterView)
    for index, name in enumerate(files):
        with open(name, "rb") as handle:
            for number, line in enumerate(handle, start=1):
                if b'"bookie_' not in line and b'"cluster_view"' not in line:
                    continue
                record = parse_record(line.rstrip(b"\r\n"), Origin.from_file(name, number))
                if isinstance(record, kinds):
                    found.append((record.time_ms, index, number, record))
    found.sort(key=lambda item: item[:3])
    by_cluster: dict[str, list[tuple[int, Any]]] = {}
    for at, _, _, record in found:
        by_cluster.setdefault(record.cluster, []).append((at, record))
    return by_cluster


@dataclass
class _ClusterCounts:
    decisions: Counter = field(default_factory=Counter)
    status: Counter = field(default_factory=Counter)
    errors: Counter = field(default_factory=Counter)
    adherence: Counter = field(default_factory=Counter)
    by_type: dict = field(default_factory=dict)
    failed_by_key: Counter = field(default_factory=Counter)
    failed_texts: Counter = field(default_factory=Counter)
    fallback_decisions: int = 0
    fallbacks: Counter = field(default_factory=Counter)
    relaxed: Counter = field(default_factory=Counter)
    placements: list = field(default_factory=list)   # (time_ms, status, new members, type)
    alerts: list = field(default_factory=list)       # (time_ms, order, type, subject)


@dataclass
class ConfigurationFigures:
    """A configuration's figures (`clusters`, `dead_letters`) and each decision's outcome by id."""

    clusters: dict[str, dict[str, Any]]
    dead_letters: dict[str, Any]
    outcomes: dict[str, tuple[int, str, str, str, str]]
    """decision id -> (time ms, cluster, request id, request type, `outcome()`)."""


def configuration_figures(out_dir: Path, topology: Mapping[str, list[tuple[int, Any]]], *,
                          default_location: str, disk_weighted: bool, max_multiple: int) -> ConfigurationFigures:
    """Count a replayed configuration's outputs in `out_dir` (see the module docstring)."""
    counts: dict[str, _ClusterCounts] = {}
    outcomes: dict[str, tuple[int, str, str, str, str]] = {}
    for decision in read_jsonl(out_dir / "decisions"):
        cluster = str(decision.get("cluster"))
        tally = counts.setdefault(cluster, _ClusterCounts())
        _count_decision(tally, decision)
        at = parse_time_ms(decision["time"])
        outcomes[decision["id"]] = (at, cluster, str(decision.get("request_id")), str(decision.get("type")),
                                    outcome(decision))
    for order, alert in enumerate(read_jsonl(out_dir / "alerts")):
        kind = str(alert.get("type"))
        if kind.removesuffix(".resolved") in LEDGER_ALERTS:
            cluster = str((alert.get("data") or {}).get("cluster"))
            counts.setdefault(cluster, _ClusterCounts()).alerts.append(
                (parse_time_ms(alert["time"]), order, kind, str(alert.get("subject"))))
    dead = Counter(str(letter.get("code")) for letter in read_jsonl(out_dir / "dead-letters"))
    clusters = {}
    for cluster in sorted(counts):
        tally = counts[cluster]
        view = _Topology(default_location)
        clusters[cluster] = {
            "decisions": {"total": sum(tally.status.values()), "by_status": _sorted(tally.status),
                          "by_error": _sorted(tally.errors), "by_adherence": _sorted(tally.adherence),
                          "by_type": {kind: _sorted(c) for kind, c in sorted(tally.by_type.items())}},
            "failures": {"total": sum(tally.failed_by_key.values()), "by_constraint": _sorted(tally.failed_by_key),
                         "constraints": _top(tally.failed_texts)},
            "relaxed": {"decisions": tally.fallback_decisions, "fallbacks": _top(tally.fallbacks),
                        "rules": _sorted(tally.relaxed)},
            **_ledger_debt(tally.alerts),
            **_placement_figures(tally.placements, topology.get(cluster, []), view, disk_weighted, max_multiple),
        }
    return ConfigurationFigures(clusters=clusters, outcomes=outcomes,
                                dead_letters={"total": sum(dead.values()), "by_code": _sorted(dead)})


def _count_decision(tally: _ClusterCounts, decision: Mapping[str, Any]) -> None:
    status, kind = str(decision.get("status")), str(decision.get("type"))
    explain = decision.get("explain") or {}
    tally.status[status] += 1
    tally.by_type.setdefault(kind, Counter())[status] += 1
    if status == "ok":
        tally.adherence[str(decision.get("adherence"))] += 1
    else:
        tally.errors[str((decision.get("error") or {}).get("code"))] += 1
    if kind in PLACEMENT_TYPES and status == "failed":
        key, text = constraint_key(decision)
        tally.failed_by_key[key] += 1
        tally.failed_texts[text] += 1
    fallbacks = explain.get("fallbacks") or []
    if status == "ok" and fallbacks:
        tally.fallback_decisions += 1
    for sentence in fallbacks:
        tally.fallbacks[_POSITION.sub("", str(sentence))] += 1
    for entry in explain.get("relaxed") or []:
        tally.relaxed[str(entry.get("rule") if isinstance(entry, Mapping) else entry)] += 1
    if kind in PLACEMENT_TYPES:
        if status != "ok":
            members: tuple[str, ...] = ()
        elif kind == "ledger_create":
            members = tuple(decision.get("ensemble") or ())
        else:
            members = (str(decision.get("bookie")),)
        tally.placements.append((parse_time_ms(decision["time"]), status, members, kind))


def _ledger_debt(alerts: list[tuple[int, int, str, str]]) -> dict[str, Any]:
    """Ledger alerts opened and resolved, and the open ones over time (a step series)."""
    alerts.sort()
    open_now: dict[str, set[str]] = {name: set() for name in dict.fromkeys(LEDGER_ALERTS.values())}
    counts = {name: Counter() for name in open_now}
    points: list[list] = []
    area = dict.fromkeys(open_now, 0.0)
    last = None
    for at, _, kind, subject in alerts:
        name = LEDGER_ALERTS[kind.removesuffix(".resolved")]
        if last is not None and at > last:
            for key in area:
                area[key] += len(open_now[key]) * (at - last) / 1000.0
        last = at
        if kind.endswith(".resolved"):
            counts[name]["resolved"] += 1
            open_now[name].discard(subject)
        else:
            counts[name]["opened"] += 1
            open_now[name].add(subject)
        point = [at, len(open_now["not_adhering"]), len(open_now["readherable"])]
        if points and points[-1][0] == at:
            points[-1] = point
        else:
            points.append(point)
    peaks = {name: max((p[i] for p in points), default=0) for i, name in ((1, "not_adhering"), (2, "readherable"))}
    return {
        "ledger_alerts": {name: {"opened": counts[name]["opened"], "resolved": counts[name]["resolved"],
                                 "open_at_end": len(open_now[name])} for name in counts},
        "debt": {"points": [[format_time(at), a, b] for at, a, b in _thin(points)],
                 "max": peaks, "at_end": {name: len(members) for name, members in open_now.items()},
                 "ledger_seconds": {name: round(value, 3) for name, value in area.items()}},
    }


def _thin(points: list[list]) -> list[list]:
    """At most `DEBT_POINTS` points: the value at the end of each of that many equal time slices."""
    if len(points) <= DEBT_POINTS:
        return points
    first, span = points[0][0], max(points[-1][0] - points[0][0], 1)
    kept: dict[int, list] = {}
    for point in points:
        kept[min((point[0] - first) * DEBT_POINTS // span, DEBT_POINTS - 1)] = point
    return [kept[key] for key in sorted(kept)]


def _placement_figures(placements: list, changes: list[tuple[int, Any]], view: _Topology, disk_weighted: bool,
                       max_multiple: int) -> dict[str, Any]:
    """Write share, replacement concentration in outages, failure rate over time, outage intervals."""
    placements.sort(key=lambda item: item[0])
    written: Counter = Counter()
    racks_written: Counter = Counter()
    expected: Counter = Counter()
    rack_expected: Counter = Counter()
    outage_replacements: Counter = Counter()
    outage_racks: Counter = Counter()
    outages: list[dict[str, Any]] = []
    slots = 0
    shares = view.shares(disk_weighted, max_multiple)
    position = 0

    def flush() -> None:
        nonlocal slots
        if slots:
            for bookie, share in shares.items():
                expected[bookie] += slots * share
                rack_expected[view.rack(bookie)] += slots * share
        slots = 0

    def advance(until: int | None) -> None:
        nonlocal position, shares
        moved = False
        while position < len(changes) and (until is None or changes[position][0] <= until):
            at, record = changes[position]
            if not moved:
                flush()
                moved = True
            had_lost = bool(view.lost)
            view.apply(record)
            if view.lost and not had_lost:
                outages.append({"start": at, "end": None, "racks": set()})
            if view.lost:
                outages[-1]["racks"].update(view.rack(b) for b in view.lost)
            elif had_lost:
                outages[-1]["end"] = at
            position += 1
        if moved:
            shares = view.shares(disk_weighted, max_multiple)

    for at, status, members, kind in placements:
        advance(at)
        if status != "ok":
            continue
        slots += len(members)
        for bookie in members:
            written[bookie] += 1
            racks_written[view.rack(bookie)] += 1
        if kind == "bookie_replace" and view.lost:
            outage_replacements[members[0]] += 1
            outage_racks[view.rack(members[0])] += 1
    advance(None)
    flush()
    total = sum(written.values())
    expected_total = sum(expected.values())
    unexpected = sum(count for bookie, count in written.items() if expected.get(bookie, 0) == 0)

    def table(observed: Counter, wanted: Counter) -> dict[str, dict[str, float]]:
        return {key: {"writes": observed.get(key, 0), "share": _ratio(observed.get(key, 0), total),
                      "expected": round(wanted.get(key, 0) / expected_total, 6) if expected_total else None}
                for key in sorted(set(observed) | set(wanted))}

    replaced = sum(outage_replacements.values())
    top = outage_replacements.most_common(TOP_REPLACEMENTS)
    return {
        "write_share": {
            "expected_from": "capped free disk of the writable bookies" if disk_weighted
            else "uniform over the writable bookies",
            "writes": total, "unexpected_writes": unexpected,
            "racks": table(racks_written, rack_expected), "bookies": table(written, expected),
            "skew": {"racks": chi_square(racks_written, rack_expected), "bookies": chi_square(written, expected)},
        },
        "outage_replacements": {
            "replacements": replaced, "distinct_bookies": len(outage_replacements),
            "top_bookies": [[bookie, count] for bookie, count in top],
            "top_bookie_share": _ratio(top[0][1], replaced) if top else None,
            "top3_bookie_share": _ratio(sum(count for _, count in top[:3]), replaced) if top else None,
            "top_racks": [[rack, count] for rack, count in outage_racks.most_common(TOP_REPLACEMENTS)],
            "top_rack_share": _ratio(outage_racks.most_common(1)[0][1], replaced) if replaced else None,
        },
        "outages": [{"start": format_time(o["start"]), "end": format_time(o["end"]) if o["end"] is not None else None,
                     "racks": sorted(o["racks"])} for o in outages],
        "failure_rate": _failure_rate(placements),
    }


def _failure_rate(placements: list) -> dict[str, Any]:
    """Creates and replaces, and how many failed, per equal slice of event time."""
    if not placements:
        return {"bucket_seconds": None, "points": []}
    first, last = placements[0][0], placements[-1][0]
    width = max(1, math.ceil((last - first + 1) / RATE_BUCKETS))
    starts = [first + i * width for i in range(RATE_BUCKETS)]
    requests, failed = [0] * RATE_BUCKETS, [0] * RATE_BUCKETS
    for at, status, _, _ in placements:
        slot = bisect_right(starts, at) - 1
        requests[slot] += 1
        failed[slot] += status != "ok"
    return {"bucket_seconds": width / 1000.0,
            "points": [[format_time(s), n, f] for s, n, f in zip(starts, requests, failed) if n]}


def _ratio(part: float, whole: float) -> float | None:
    return round(part / whole, 6) if whole else None


def _sorted(counts: Counter) -> dict[str, int]:
    return dict(sorted(counts.items()))


def _top(counts: Counter) -> dict[str, int]:
    """The `TOP_TEXTS` most frequent texts; the rest summed under `(other)`."""
    top = dict(counts.most_common(TOP_TEXTS))
    rest = sum(counts.values()) - sum(top.values())
    if rest:
        top["(other)"] = rest
    return top


__all__ = ["ConfigurationFigures", "chi_square", "chi_square_p_value", "configuration_figures", "constraint_key",
           "outcome", "read_jsonl", "topology_changes"]
