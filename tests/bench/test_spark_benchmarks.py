"""The Spark benchmarks run end to end at a tiny size, so a change to the job cannot break them unseen.

Each runs as a user would run it (its command line, in a fresh interpreter, with its own SparkSession;
`bench_streaming.py` starts its own tansu broker on 127.0.0.1) and its JSON report is checked for what
makes its figures mean something: every request answered, every record replayed. No timing is
asserted (speed is measured by the benchmarks, never by tests).
"""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(script: str, tmp_path: Path, *args: str) -> dict:
    report = tmp_path / "report.json"
    done = subprocess.run([sys.executable, str(ROOT / "bench" / script), *args, "--json", str(report)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{script} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert "# re-run (from the repository root):" in done.stdout          # it says how to measure again
    return json.loads(report.read_text())


def test_bench_streaming_answers_every_request_of_both_pipelines_and_phases(tmp_path):
    report = _run("bench_streaming.py", tmp_path, "--clusters", "2", "--backlog", "300", "--warmup", "100",
                  "--repeat", "1", "--rate", "200", "--duration", "2", "--drain-timeout", "120")
    runs = {run["pipeline"]: run for run in report["runs"]}
    assert set(runs) == {"placement", "passthrough"}
    for name, run in runs.items():
        assert "error" not in run, (name, run.get("error"))
        assert run["clusters"] == 2
        throughput, latency = run["throughput"], run["latency"][0]
        # On failure, `missing` says whether the decisions were never written or the reader missed them.
        assert throughput["complete"] and throughput["answered"] == throughput["backlog"] == 300, (
            name, throughput.get("missing"))
        assert latency["complete"] and latency["answered"] == latency["produced"] > 0, (name, latency.get("missing"))
        assert 0 < latency["p50_ms"] <= latency["p99_ms"] <= latency["max_ms"], name


def test_bench_replay_replays_every_record_and_breaks_the_engine_down(tmp_path):
    report = _run("bench_replay.py", tmp_path, "--requests", "2000", "--breakdown-records", "500")
    replay, counts = report["replay"], report["counts"]
    assert replay["records"] == counts["records"] == counts["events"] + 2000
    assert replay["decisions"] == 2000 and replay["dead_letters"] == 0
    assert replay["records_per_s_command"] > 0
    assert report["breakdown"]                                              # the in-process stages ran


def test_bench_growth_replays_each_cluster_count_and_shard_count(tmp_path):
    report = _run("bench_growth.py", tmp_path, "--parts", "clusters,shards", "--clusters", "1,3",
                  "--shards", "1,2", "--requests", "600")
    assert [row["clusters"] for row in report["clusters"]] == [1, 3]
    assert [row["shards"] for row in report["shards"]] == [1, 2]
    for row in report["clusters"] + report["shards"]:
        assert row["failed"] == 0 and row["decisions"] == 600, row
