"""`placement-engine compare`: enforcement on against off over generated traffic with a rack outage.

The numbers in comparison.json are checked against counts taken here, independently, from each
configuration's output files.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from streaming.compare import plan, run_compare
from streaming.compare_stats import chi_square, chi_square_p_value, configuration_figures
from streaming.config import ConfigError
from tests.streaming.compare_scenario import write_scenario

ROOT = Path(__file__).resolve().parents[2]
REQUESTS = 2000
LABELS = ("enforcement-off", "enforcement-on")


@pytest.fixture(scope="module")
def compared(spark, tmp_path_factory):
    folder = tmp_path_factory.mktemp("compare")
    events, off, on = write_scenario(folder, REQUESTS)
    configurations = plan([str(off), str(on)])
    progress = io.StringIO()
    comparison = run_compare(spark, configurations, [events], folder / "out", stream=progress)
    return comparison, folder / "out", progress.getvalue()


def _lines(folder: Path) -> list[dict]:
    return [json.loads(line) for path in sorted(folder.glob("*.jsonl"))
            for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_enforcement_adds_failures_and_avoids_debt(compared):
    comparison, _, _ = compared
    off, on = (comparison[label]["clusters"]["demo"] for label in LABELS)
    assert off["decisions"]["by_error"].get("NOT_ENOUGH_BOOKIES", 0) == 0
    assert on["decisions"]["by_error"]["NOT_ENOUGH_BOOKIES"] > 100
    assert on["failures"]["by_constraint"]["minNumRacksPerWriteQuorum"] > 100
    # Without enforcement the same creates are placed on too few racks: relaxed, and readherable later.
    assert off["relaxed"]["rules"]["racks"] > 100 and not on["relaxed"]["rules"]
    assert off["ledger_alerts"]["readherable"]["opened"] > on["ledger_alerts"]["readherable"]["opened"]
    assert off["debt"]["ledger_seconds"]["readherable"] > on["debt"]["ledger_seconds"]["readherable"]
    assert off["debt"]["max"]["readherable"] > on["debt"]["max"]["readherable"]
    # The failures cluster in the outage: the failure rate there is far above the rest.
    outage = off["outages"][-1]
    assert outage["racks"] == ["/rack-out"] and outage["end"] is not None
    inside = [p for p in on["failure_rate"]["points"] if outage["start"] <= p[0] < outage["end"]]
    outside = [p for p in on["failure_rate"]["points"] if p[0] >= outage["end"]]
    assert sum(p[2] for p in inside) / sum(p[1] for p in inside) > 2 * sum(p[2] for p in outside) / sum(
        p[1] for p in outside)
    assert comparison["enforcement-off"]["outcome_differences"]["enforcement-on"] > 100


def test_comparison_equals_counts_from_the_outputs(compared):
    comparison, out, _ = compared
    for label, figures in comparison.items():
        decisions = _lines(out / label / "decisions")
        alerts = _lines(out / label / "alerts")
        letters = _lines(out / label / "dead-letters")
        cluster = figures["clusters"]["demo"]
        summary = json.loads((out / label / "summary.json").read_text(encoding="utf-8"))
        assert cluster["decisions"]["total"] == len(decisions) == summary["decisions"]["total"]
        assert cluster["decisions"]["by_status"] == dict(Counter(d["status"] for d in decisions))
        assert cluster["decisions"]["by_error"] == dict(Counter(d["error"]["code"] for d in decisions if d["error"]))
        assert cluster["decisions"]["by_adherence"] == dict(Counter(d["adherence"] for d in decisions
                                                                    if d["status"] == "ok"))
        failed = [d for d in decisions if d["status"] == "failed" and d["type"] != "ensemble_check"]
        assert cluster["failures"]["total"] == len(failed)
        texts = Counter(d["explain"].get("constraint") or d["error"]["message"] for d in failed)
        assert cluster["failures"]["constraints"] == dict(texts)
        assert cluster["relaxed"]["decisions"] == sum(1 for d in decisions if d["status"] == "ok"
                                                      and d["explain"]["fallbacks"])
        assert cluster["relaxed"]["rules"] == dict(Counter(r["rule"] for d in decisions
                                                           for r in d["explain"].get("relaxed", [])))
        for name, kind in (("not_adhering", "placement.ledger.not_adhering"),
                           ("readherable", "placement.ledger.re_adhere_possible")):
            opened = [a for a in alerts if a["type"] == kind]
            resolved = [a for a in alerts if a["type"] == kind + ".resolved"]
            assert cluster["ledger_alerts"][name]["opened"] == len(opened) == summary["alerts"].get(kind, 0)
            assert cluster["ledger_alerts"][name]["resolved"] == len(resolved)
            still_open = Counter(a["subject"] for a in opened) - Counter(a["subject"] for a in resolved)
            assert cluster["ledger_alerts"][name]["open_at_end"] == cluster["debt"]["at_end"][name] == len(still_open)
        written = Counter(b for d in decisions if d["status"] == "ok" and d["type"] == "ledger_create"
                          for b in d["ensemble"])
        written.update(d["bookie"] for d in decisions if d["status"] == "ok" and d["type"] == "bookie_replace")
        share = cluster["write_share"]
        assert {b: e["writes"] for b, e in share["bookies"].items() if e["writes"]} == dict(written)
        assert share["writes"] == sum(written.values())
        assert sum(e["expected"] for e in share["racks"].values()) == pytest.approx(1.0, abs=1e-4)
        assert figures["dead_letters"]["by_code"] == dict(Counter(letter["code"] for letter in letters))
        search = figures.get("complete_search")
        if search is not None:
            not_enough = sum(1 for d in failed if d["error"]["code"] == "NOT_ENOUGH_BOOKIES")
            assert search["failures"] == not_enough


def test_alerts_under_the_old_name_of_re_adhere_possible_count_alike(compared, tmp_path):
    _, out, _ = compared
    renamed = tmp_path / "renamed"
    for folder in ("decisions", "alerts", "dead-letters"):
        (renamed / folder).mkdir(parents=True)
        for path in sorted((out / LABELS[0] / folder).glob("*.jsonl")):
            text = path.read_text(encoding="utf-8")
            (renamed / folder / path.name).write_text(
                text.replace('"placement.ledger.re_adhere_possible', '"placement.ledger.readhere_possible'),
                encoding="utf-8")
    assert "placement.ledger.readhere_possible" in "".join(
        path.read_text(encoding="utf-8") for path in (renamed / "alerts").glob("*.jsonl"))

    def figures(where: Path) -> dict:
        cluster = configuration_figures(where, {}, default_location="/default-rack", disk_weighted=False,
                                        max_multiple=3).clusters["demo"]
        return {"ledger_alerts": cluster["ledger_alerts"], "debt": cluster["debt"]}

    counted = figures(out / LABELS[0])
    assert counted["ledger_alerts"]["readherable"]["opened"] > 0
    assert figures(renamed) == counted


def test_the_complete_search_replays_only_the_configuration_that_failed(compared):
    comparison, out, _ = compared
    assert set(comparison) == {*LABELS, "enforcement-on+complete"}
    assert comparison["enforcement-off"]["complete_search"]["label"] is None
    search = comparison["enforcement-on"]["complete_search"]
    complete = comparison["enforcement-on+complete"]
    assert complete["derived_from"] == "enforcement-on" and complete["search"] == "complete"
    assert "placement.search=complete" in complete["overrides"]
    failed_before = search["failures"]
    assert search["failures_with_complete"] == complete["clusters"]["demo"]["decisions"]["by_error"].get(
        "NOT_ENOUGH_BOOKIES", 0)
    assert 0 <= search["avoided"] <= failed_before
    assert (out / "enforcement-on+complete" / "summary.json").is_file()


def test_bad_input_lines_are_dead_letters_of_every_configuration(compared):
    comparison, out, _ = compared
    for label in comparison:
        letters = _lines(out / label / "dead-letters")
        assert Counter(letter["code"] for letter in letters) == {"INVALID_JSON": 2, "INVALID_QUORUM": 2}
        assert any(letter["raw"] == "this line is not an event" for letter in letters)


def test_progress_names_each_replay_and_its_batches(compared):
    _, out, progress = compared
    assert "compare [1/2] enforcement-off" in progress and "compare [2/2] enforcement-on" in progress
    assert "compare [complete search] enforcement-on+complete" in progress
    # Each replay's progress under its label (a log, not a terminal: its last line says done).
    for label in ("enforcement-off", "enforcement-on", "enforcement-on+complete"):
        assert any(line.startswith(f"{label}: ") and "(100%), done in" in line for line in progress.splitlines()), \
            progress
    assert "comparison.json" in progress
    report = (out / "report.html").read_text(encoding="utf-8")
    assert "Requests whose outcome differs" in report and "http://" not in report and "https://" not in report


def test_a_configuration_error_names_the_file_and_the_key_with_exit_code_2(tmp_path):
    events, off, _ = write_scenario(tmp_path, 20)
    bad = tmp_path / "bad.properties"
    bad.write_text("ensemblePlacementPolicy=rackaware\nminNumRacksPerWriteQuorum=three\n", encoding="utf-8")
    run = subprocess.run([sys.executable, "-m", "streaming.compare", "--events", str(events), "--conf", str(off),
                          "--conf", str(bad), "--out", str(tmp_path / "out")],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 2, run.stderr
    assert str(bad) in run.stderr and "minNumRacksPerWriteQuorum" in run.stderr
    assert not (tmp_path / "out").exists()


def test_labels_and_seeds_are_checked_before_any_replay(tmp_path):
    _, off, on = write_scenario(tmp_path, 5)
    with pytest.raises(ConfigError, match="--label"):
        plan([str(off), str(on)], ["same", "same"])
    with pytest.raises(ConfigError, match="at least two"):
        plan([str(off)])
    with pytest.raises(ConfigError, match="engine.seed"):
        other = tmp_path / "other.properties"
        other.write_text(on.read_text(encoding="utf-8").replace("engine.seed=1", "engine.seed=2"), encoding="utf-8")
        plan([str(off), str(other)])
    assert [c.label for c in plan([str(off), str(on)], overrides=["engine.seed=5"])] == list(LABELS)


def test_chi_square_p_values_match_the_tables():
    assert chi_square_p_value(3.841, 1) == pytest.approx(0.05, abs=1e-4)
    assert chi_square_p_value(18.307, 10) == pytest.approx(0.05, abs=1e-4)
    assert chi_square_p_value(0.5, 3) == pytest.approx(0.9189, abs=1e-4)
    even = chi_square({"a": 50, "b": 50}, {"a": 1, "b": 1})
    assert even["chi_square"] == 0 and even["p_value"] == 1.0 and even["total_variation"] == 0
    skewed = chi_square({"a": 90, "b": 10}, {"a": 1, "b": 1})
    assert skewed["chi_square"] == 64 and skewed["p_value"] < 1e-10 and skewed["total_variation"] == 0.4
