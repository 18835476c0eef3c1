"""`placement-engine demo` as a user reads it: a summary that says what each count means and where the files
are, and a configuration written beside the input that `replay` takes to reproduce the demo's outputs."""

from __future__ import annotations

import hashlib
import shlex
from collections import Counter
from pathlib import Path

from streaming.cli import main
from streaming.config import load_conf
from streaming.demo import CONF_FILE, print_summary, write_conf
from streaming.settings import DEMO_CONF

SUMMARY = {
    "records": 420, "seconds": 20.2, "records_per_second": 20.8, "batches": 2, "clusters": 1,
    "decisions": {"total": 302, "ok": 300, "failed": 2},
    "adherence": {"FAIL": 3, "MEETS_STRICT": 297},
    "errors": {"INVALID_REQUEST": 2},
    "alerts": {"total": 3, "placement.decision.not_adhering": 3},
    "dead_letters": {"total": 2, "INVALID_QUORUM": 2},
    "status_records": 4,
}
BY_REQUEST = {
    "ledger_create": Counter(total=230, MEETS_STRICT=227, FAIL=1),
    "bookie_replace": Counter(total=57, MEETS_STRICT=57),
    "ensemble_check": Counter(total=15, MEETS_STRICT=13, FAIL=2),
}


def test_the_summary_says_what_each_adherence_count_is_about(capsys, tmp_path):
    print_summary(SUMMARY, tmp_path, kept=True, conf_file=tmp_path / CONF_FILE, by_request=BY_REQUEST)
    lines = capsys.readouterr().out.splitlines()
    start = lines.index("  decisions: 302 (300 ok, 2 failed), one per request")
    assert lines[start + 1:start + 9] == [
        "    requests: 230 ledger_create, 57 bookie_replace, 15 ensemble_check",
        "    adherence of the ensembles it placed (ledger_create, bookie_replace):",
        "      MEETS_STRICT     284  meets the placement rule",
        "      FAIL               1  placed against the rule: too few racks usable",
        "    adherence of existing ensembles it was asked to check (ensemble_check):",
        "      MEETS_STRICT      13  meets the placement rule",
        "      FAIL               2  breaks the rule, e.g. all in one rack",
        "    failed with INVALID_REQUEST   2",
    ]
    assert not any(line.lstrip().startswith("adherence FAIL") for line in lines)


def test_the_summary_says_where_the_files_are_that_a_temporary_folder_stays_and_how_to_replay(capsys, tmp_path):
    conf = tmp_path / CONF_FILE
    print_summary(SUMMARY, tmp_path, kept=False, conf_file=conf, by_request=BY_REQUEST)
    lines = capsys.readouterr().out.splitlines()
    assert lines[-3] == ("  status records (the cluster's counts when they changed): 4; the latest: "
                         f"placement-engine status --dir {tmp_path} --cluster demo")
    assert lines[-2] == (f"  files in {tmp_path} (a new temporary folder; it is not deleted: remove it when done): "
                         f"input/, decisions/, alerts/, dead-letters/, status/, summary.json, {CONF_FILE}")
    assert lines[-1] == (f"  same input again: placement-engine replay --conf {conf} --events {tmp_path / 'input'} "
                         f"--out {tmp_path / 'replay'}")
    print_summary(SUMMARY, tmp_path, kept=True, conf_file=conf, by_request=BY_REQUEST)
    assert capsys.readouterr().out.splitlines()[-2].startswith(f"  files in {tmp_path}: input/")


def test_the_written_configuration_reads_back_as_the_same_keys(tmp_path):
    conf = {**DEMO_CONF, "engine.kafka.bootstrapServers": "host-1:9092,host-2:9092", "engine.seed": "9"}
    write_conf(conf, tmp_path / CONF_FILE)
    assert load_conf(tmp_path / CONF_FILE) == conf


def _digest(folder: Path) -> tuple[int, str]:
    lines = sorted(line for path in sorted(folder.glob("*.jsonl")) for line in path.read_bytes().splitlines() if line)
    return len(lines), hashlib.sha256(b"\n".join(lines)).hexdigest()


def test_replay_with_the_written_configuration_reproduces_the_demo(spark, tmp_path, capsys):
    out = tmp_path / "demo"
    assert main(["demo", "--requests", "60", "--seed", "3", "--out", str(out), "--set", "engine.seed=4"]) == 0
    captured = capsys.readouterr()
    printed = captured.out.splitlines()
    # Progress went to stderr (not a terminal here: plain lines), ending with the whole input replayed.
    records = len((out / "input" / "events.jsonl").read_text().splitlines())
    [done] = [line for line in captured.err.splitlines() if line.startswith("demo: ")][-1:]
    assert done.startswith(f"demo: {records}/{records} records (100%), done in "), done
    assert not any(line.startswith("demo") for line in printed)
    [command] = [line.split(": ", 1)[1] for line in printed if line.startswith("  same input again: ")]
    words = shlex.split(command)
    assert words[:2] == ["placement-engine", "replay"]
    assert load_conf(out / CONF_FILE)["engine.seed"] == "4"
    assert main(words[1:]) == 0
    again = out / "replay"
    for kind in ("decisions", "alerts", "dead-letters"):
        assert _digest(again / kind) == _digest(out / kind), kind
    assert _digest(out / "decisions")[0] == 62  # 60 requests and the two malformed creates
