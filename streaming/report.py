"""`compare`'s `report.html`: one self-contained page (no external URL; images inline as base64 PNG).

One job: render a comparison (`streaming.compare`) for a person. Per cluster: a summary table with
the configurations side by side; plots drawn with matplotlib's Agg backend (placement debt over
event time per configuration; the failure rate of creates and replaces over event time with the
outages shaded, an outage starting when a bookie is lost and ending at its recovery; the write share
per rack against the expected share); then the requests whose outcome differs between the
configurations, each with every configuration's outcome and the decision's `explain`.

A small inline script checks on `load` that every image decoded and the tables exist, and writes
the result into `body[data-report-check]` (`ok` or `broken: ...`), which the browser test reads.

Cost: O(clusters x configurations x plotted points) to draw, plus O(shown requests) of HTML; drawing
dominates.
"""

from __future__ import annotations

import base64
import html
import io
import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

RACKS_PLOTTED = 24
"""Racks in a write-share plot (the most written); the table in comparison.json has them all."""

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; max-width: 1400px; }
h1 { font-size: 1.5em; } h2 { font-size: 1.25em; margin-top: 1.6em; } h3 { font-size: 1.05em; }
table { border-collapse: collapse; margin: 0.6em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
td { overflow-wrap: anywhere; }
th { background: #f0f0f0; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.group th { background: #e4e9f2; }
img { max-width: 100%; display: block; margin: 0.6em 0; }
pre { font-size: 0.8em; max-height: 24em; overflow: auto; background: #f7f7f7; padding: 0.4em; }
.ok { color: #1a7f37; } .failed { color: #b42318; font-weight: 600; } .muted { color: #666; }
"""

_CHECK_SCRIPT = """
window.addEventListener("load", function () {
  var broken = [];
  var images = document.images;
  for (var i = 0; i < images.length; i++) {
    if (!images[i].complete || images[i].naturalWidth === 0) { broken.push(images[i].alt || ("image " + i)); }
  }
  var tables = document.querySelectorAll("table").length;
  if (tables === 0) { broken.push("no table"); }
  document.body.setAttribute("data-report-check", broken.length === 0 ?
      "ok " + images.length + " images " + tables + " tables" : "broken: " + broken.join(", "));
});
"""


def write_report(path: Path, comparison: Mapping[str, Any], differing: Mapping[str, Any],
                 labels: Sequence[str]) -> None:
    """Write the page for `comparison` (label -> figures) to `path`; `labels` are the configurations
    compared (the complete-search replays are the other keys of `comparison`)."""
    columns = list(comparison)
    clusters = sorted({cluster for figures in comparison.values() for cluster in figures["clusters"]})
    parts = [f"<h1>placement-engine compare: {_e(', '.join(labels))}</h1>",
             _configurations_table(comparison, columns)]
    for cluster in clusters:
        parts.append(f"<h2>Cluster {_e(cluster)}</h2>")
        parts.append(_summary_table(comparison, columns, cluster))
        parts.append(_image(_debt_plot(comparison, columns, cluster), f"placement debt, cluster {cluster}"))
        parts.append(_image(_failure_plot(comparison, columns, cluster), f"failure rate, cluster {cluster}"))
        parts.append(_image(_share_plot(comparison, columns, cluster), f"write share per rack, cluster {cluster}"))
    parts.append(_differences(differing, labels))
    page = ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>placement-engine compare: {_e(', '.join(labels))}</title><style>{_STYLE}</style></head>\n"
            f"<body>\n{''.join(parts)}\n<script>{_CHECK_SCRIPT}</script>\n</body></html>\n")
    path.write_text(page, encoding="utf-8")


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _configurations_table(comparison: Mapping[str, Any], columns: Sequence[str]) -> str:
    rows = [("file", lambda f: f["conf"]), ("overrides", lambda f: " ".join(f["overrides"]) or "none"),
            ("policy", lambda f: f["policy"]), ("search", lambda f: f["search"]), ("seed", lambda f: f["seed"]),
            ("records", lambda f: f["records"]), ("replay seconds", lambda f: f["seconds"]),
            ("dead letters", lambda f: f["dead_letters"]["total"]),
            ("outputs", lambda f: f["outputs"])]
    head = "".join(f"<th>{_e(label)}</th>" for label in columns)
    body = "".join(f"<tr><th>{_e(name)}</th>" + "".join(f"<td>{_e(get(comparison[label]))}</td>" for label in columns)
                   + "</tr>" for name, get in rows)
    return f"<h2>Configurations</h2><table><tr><th></th>{head}</tr>{body}</table>"


def _summary_rows(figures: Mapping[str, Any], cluster: str) -> list[tuple[str, str, object]]:
    """(group, row name, value) of one configuration's figures for one cluster."""
    c = figures["clusters"].get(cluster)
    if c is None:
        return []
    decisions = c["decisions"]
    placed = {kind: decisions["by_type"].get(kind, {}) for kind in ("ledger_create", "bookie_replace")}
    requests = sum(sum(counts.values()) for counts in placed.values())
    failed = sum(counts.get("failed", 0) for counts in placed.values())
    rows: list[tuple[str, str, object]] = [
        ("decisions", "decisions", decisions["total"]),
        ("decisions", "creates and replaces failed", f"{failed} of {requests}"
         + (f" ({100 * failed / requests:.1f}%)" if requests else "")),
    ]
    rows += [("decisions", f"error {code}", n) for code, n in decisions["by_error"].items()]
    rows += [("decisions", f"adherence {name}", n) for name, n in decisions["by_adherence"].items()]
    rows += [("failed creates and replaces by constraint", key, n) for key, n in c["failures"]["by_constraint"].items()]
    rows.append(("relaxed rules", "ok decisions with a fallback", c["relaxed"]["decisions"]))
    rows += [("relaxed rules", f"relaxed rule {rule}", n) for rule, n in c["relaxed"]["rules"].items()]
    for name, title in (("not_adhering", "ledgers not adhering"), ("readherable", "ledgers that can be re-adhered")):
        alerts, debt = c["ledger_alerts"][name], c["debt"]
        rows += [("placement debt", f"{title}: opened / resolved", f"{alerts['opened']} / {alerts['resolved']}"),
                 ("placement debt", f"{title}: most at once / at the end",
                  f"{debt['max'][name]} / {debt['at_end'][name]}"),
                 ("placement debt", f"{title}: ledger-seconds", debt["ledger_seconds"][name])]
    share = c["write_share"]
    for level in ("racks", "bookies"):
        skew = share["skew"][level]
        rows.append(("write share", f"{level}: chi-square (dof) / p-value",
                     f"{skew['chi_square']} ({skew['dof']}) / {_number(skew['p_value'])}"))
        rows.append(("write share", f"{level}: total variation from expected", skew["total_variation"]))
    outage = c["outage_replacements"]
    top_rack = f" ({outage['top_racks'][0][0]})" if outage["top_racks"] else ""
    rows += [("replacements during outages", "replacements / distinct bookies",
              f"{outage['replacements']} / {outage['distinct_bookies']}"),
             ("replacements during outages", "top bookie / top 3 bookies share",
              f"{_number(outage['top_bookie_share'])} / {_number(outage['top3_bookie_share'])}"),
             ("replacements during outages", "top rack share",
              f"{_number(outage['top_rack_share'])}{top_rack}")]
    search = figures.get("complete_search")
    if search is not None:
        text = (f"{search['avoided']} of {search['failures']} avoided ({search['label']})" if search["label"]
                else f"{search['failures']} failure(s); not replayed: {search['status']}")
        rows.append(("complete search", "NOT_ENOUGH_BOOKIES failures the complete search avoids", text))
    return rows


def _number(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.3g}"
    return "n/a" if value is None else str(value)


def _summary_table(comparison: Mapping[str, Any], columns: Sequence[str], cluster: str) -> str:
    groups: dict[str, dict[str, dict[str, object]]] = {}
    for label in columns:
        for group, name, value in _summary_rows(comparison[label], cluster):
            groups.setdefault(group, {}).setdefault(name, {})[label] = value
    head = "".join(f"<th>{_e(label)}</th>" for label in columns)
    body = []
    for group, rows in groups.items():
        body.append(f"<tr class=\"group\"><th colspan=\"{len(columns) + 1}\">{_e(group)}</th></tr>")
        for name, by_label in rows.items():
            cells = "".join(f"<td class=\"num\">{_e(by_label.get(label, ''))}</td>" for label in columns)
            body.append(f"<tr><th>{_e(name)}</th>{cells}</tr>")
    return f"<h3>Summary</h3><table><tr><th></th>{head}</tr>{''.join(body)}</table>"


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _times(texts: Sequence[str]) -> list[datetime]:
    return [datetime.fromisoformat(text) for text in texts]


def _png(figure) -> str:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=90, bbox_inches="tight")
    _pyplot().close(figure)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _image(png: str, alt: str) -> str:
    return f"<img alt=\"{_e(alt)}\" src=\"data:image/png;base64,{png}\">"


def _style(label: str, comparison: Mapping[str, Any]) -> dict[str, Any]:
    return {"linestyle": "--" if comparison[label].get("derived_from") else "-", "linewidth": 1.4}


def _debt_plot(comparison: Mapping[str, Any], columns: Sequence[str], cluster: str) -> str:
    plt = _pyplot()
    figure, axes = plt.subplots(2, 1, figsize=(11, 5.2), sharex=True)
    for row, (index, title) in enumerate(((1, "ledgers not adhering"), (2, "ledgers that can be re-adhered"))):
        for label in columns:
            c = comparison[label]["clusters"].get(cluster)
            points = c["debt"]["points"] if c else []
            if points:
                axes[row].step(_times([p[0] for p in points]), [p[index] for p in points], where="post", label=label,
                               **_style(label, comparison))
        axes[row].set_ylabel(title)
        axes[row].grid(alpha=0.3)
    axes[0].set_title(f"Placement debt over event time (open ledger alerts), cluster {cluster}")
    axes[0].legend(loc="upper left", fontsize="small")
    axes[1].set_xlabel("event time (UTC)")
    figure.autofmt_xdate()
    return _png(figure)


def _failure_plot(comparison: Mapping[str, Any], columns: Sequence[str], cluster: str) -> str:
    plt = _pyplot()
    figure, axis = plt.subplots(figsize=(11, 3.8))
    outages: list[dict[str, Any]] = []
    for label in columns:
        c = comparison[label]["clusters"].get(cluster)
        if not c:
            continue
        outages = outages or c["outages"]
        points = c["failure_rate"]["points"]
        axis.plot(_times([p[0] for p in points]), [100.0 * p[2] / p[1] for p in points], marker=".", label=label,
                  **_style(label, comparison))
    last = max((datetime.fromisoformat(p[0]) for label in columns
                for p in (comparison[label]["clusters"].get(cluster) or {}).get("failure_rate", {}).get("points", [])),
               default=None)
    for number, outage in enumerate(outages):
        start = datetime.fromisoformat(outage["start"])
        end = datetime.fromisoformat(outage["end"]) if outage["end"] else last or start
        axis.axvspan(start, end, color="tab:red", alpha=0.12, label="some rack lost bookies" if number == 0 else None)
        if outage["end"]:
            axis.axvline(end, color="tab:green", linewidth=0.8, alpha=0.6,
                         label="recovery" if number == 0 else None)
    axis.set_ylabel("creates and replaces failed (%)")
    axis.set_xlabel("event time (UTC)")
    axis.set_title(f"Failure rate over event time with outages, cluster {cluster}")
    axis.grid(alpha=0.3)
    axis.legend(loc="upper left", fontsize="small")
    figure.autofmt_xdate()
    return _png(figure)


def _share_plot(comparison: Mapping[str, Any], columns: Sequence[str], cluster: str) -> str:
    plt = _pyplot()
    writes: dict[str, int] = {}
    for label in columns:
        c = comparison[label]["clusters"].get(cluster)
        for rack, entry in (c["write_share"]["racks"] if c else {}).items():
            writes[rack] = writes.get(rack, 0) + entry["writes"]
    racks = sorted(sorted(writes), key=lambda rack: -writes[rack])[:RACKS_PLOTTED]
    racks.sort()
    figure, axis = plt.subplots(figsize=(11, 3.8))
    width = 0.8 / max(len(columns), 1)
    for number, label in enumerate(columns):
        c = comparison[label]["clusters"].get(cluster)
        table = c["write_share"]["racks"] if c else {}
        xs = [i - 0.4 + width * (number + 0.5) for i in range(len(racks))]
        axis.bar(xs, [100.0 * (table.get(r, {}).get("share") or 0) for r in racks], width=width, label=label)
        axis.scatter(xs, [100.0 * (table.get(r, {}).get("expected") or 0) for r in racks], marker="_", s=160,
                     color="black", zorder=3, label="expected" if number == 0 else None)
    axis.set_xticks(range(len(racks)))
    axis.set_xticklabels(racks, rotation=30, ha="right", fontsize="small")
    axis.set_ylabel("share of new ensemble members (%)")
    axis.set_title(f"Write share per rack against the expected share, cluster {cluster}")
    axis.grid(alpha=0.3, axis="y")
    axis.legend(loc="upper right", fontsize="small")
    return _png(figure)


def _differences(differing: Mapping[str, Any], labels: Sequence[str]) -> str:
    shown = differing["shown"]
    intro = (f"<h2>Requests whose outcome differs</h2><p>{differing['total']} request(s) got a different outcome "
             f"(status, adherence or error code) under {_e(', '.join(labels))}"
             + (f"; the first {len(shown)} in event time:" if shown else ".") + "</p>")
    if not shown:
        return intro + "<table><tr><td class=\"muted\">none</td></tr></table>"
    head = "".join(f"<th>{_e(label)}</th>" for label in labels)
    rows = []
    for by_label in shown:
        first = next(iter(by_label.values()))
        cells = []
        for label in labels:
            decision = by_label.get(label)
            if decision is None:
                cells.append("<td class=\"muted\">no decision</td>")
                continue
            cells.append(f"<td>{_outcome_cell(decision)}</td>")
        rows.append(f"<tr><td>{_e(first.get('request_id'))}<br><span class=\"muted\">{_e(first.get('type'))}, "
                    f"{_e(first.get('time'))}, cluster {_e(first.get('cluster'))}</span></td>{''.join(cells)}</tr>")
    return intro + f"<table><tr><th>request</th>{head}</tr>{''.join(rows)}</table>"


def _outcome_cell(decision: Mapping[str, Any]) -> str:
    if decision.get("status") == "ok":
        what = f"<span class=\"ok\">ok</span> {_e(decision.get('adherence'))}"
        placed = decision.get("bookie") or ", ".join(decision.get("ensemble") or [])
        detail = f"<br>{_e(placed)}" if placed else ""
    else:
        error = decision.get("error") or {}
        what = f"<span class=\"failed\">failed</span> {_e(error.get('code'))}"
        detail = f"<br>{_e(error.get('message'))}"
    explain = json.dumps(decision.get("explain"), indent=1, sort_keys=True)
    return f"{what}{detail}<details><summary>explain</summary><pre>{_e(explain)}</pre></details>"


__all__ = ["write_report"]
