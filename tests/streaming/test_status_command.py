"""`placement-engine status` as an operator reads it: the latest status of each cluster, its shards combined,
from a replay's folder or the status topic of a real broker; a clear line and exit 1 when there is none, one
line and exit 2 when the broker cannot be reached."""

from __future__ import annotations

import argparse
import io
import json
import socket
import subprocess
import sys

from events import format_time
from streaming.alert_consumer import CONNECT_TIMEOUT_S
from streaming.demo import generate, write_input
from streaming.replay import run_replay
from streaming.settings import engine_settings
from streaming.status_command import add_parser, run_status
from tests.kafka_broker import produce_records

T0 = 1_795_000_000_000  # 2026-11-18T11:06:40Z
COMMAND = [sys.executable, "-m", "streaming.status_command"]


def _status(cluster: str, shard: int, shards: int, seconds: int, *, not_adhering: int = 0, remembered: int = 0,
            placements: tuple[int, int] = (0, 0), expected: tuple[float, float] = (0.5, 0.5), writable: int = 6,
            skew: tuple[str, ...] = (), version: int = 3) -> dict:
    """A status record as the engine writes it (state/status.py), for racks /r1 and /r2."""
    total = sum(placements)
    return {
        "id": f"{cluster}-{shard}-{seconds}", "type": "placement.cluster.status", "cluster": cluster,
        "shard": shard, "shards": shards, "time": format_time(T0 + seconds * 1000), "time_ms": T0 + seconds * 1000,
        "policy": "rackaware", "topology_version": version,
        "bookies": {"writable": writable, "readonly": 1, "pending_departure": 2, "default_rack": 1,
                    "join_failures": 0, "flapping": 0},
        "ledgers": {"remembered": remembered, "not_adhering": not_adhering, "re_adhere_possible": 1},
        "racks": [{"rack": "/r1", "writable": writable // 2, "readonly": 1},
                  {"rack": "/r2", "writable": writable - writable // 2, "readonly": 0}],
        "write_share": {"window_decisions": 1000, "decisions": total // 3, "placements": total, "basis": "bookies",
                        "racks": [{"rack": rack, "placements": count, "observed": count / total if total else 0.0,
                                   "expected": share if total else 0.0}
                                  for rack, count, share in zip(("/r1", "/r2"), placements, expected)]},
        "skew": {"open": bool(skew), "scopes": list(skew)},
    }


RECORDS = [
    _status("east", 0, 2, 10, not_adhering=4, remembered=100, placements=(60, 30), version=2),
    _status("east", 1, 2, 20, not_adhering=1, remembered=50, placements=(40, 20), skew=("create",)),
    _status("east", 0, 2, 30, not_adhering=2, remembered=120, placements=(70, 50), writable=7, version=4),
    _status("west", 0, 3, 40, remembered=9, placements=(3, 3)),
    {"type": "placement.ledger.not_adhering", "cluster": "east"},  # not a status record: skipped
]
"""east: two shards, shard 0 written twice (the newer one counts); west: one of its three shards reported."""


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="placement-engine")
    add_parser(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(["status", *argv])


def _write_dir(folder, records) -> None:
    (folder / "status").mkdir(parents=True)
    (folder / "status" / "part-000000.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records[:2]))
    (folder / "status" / "part-000001.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records[2:]))


def _run(*argv: str, now_ms: int | None = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run_status(_args(*argv), out, err, now_ms=now_ms)
    return code, out.getvalue(), err.getvalue()


TABLE = [
    "CLUSTER            POLICY     WRITABLE  READ-ONLY  PENDING  DEFAULT-RACK  JOIN-FAILED  NOT-ADHERING  "
    "RE-ADHERABLE  TOPOLOGY            EVENT TIME   AGE  SKEW",
    "east               rackaware         7          1        2             1            0             3  "
    "           2         4  2026-11-18T11:07:10Z  10 s  open: create",
    "west (1/3 shards)  rackaware         6          1        2             1            0             0  "
    "           1         3  2026-11-18T11:07:20Z   0 s  -",
]
"""east: bookies and topology version from shard 0's newer record, ledger counts of both shards summed, the
skew open on shard 1; ages count back from west's record, the latest."""


def test_one_row_per_cluster_with_ledger_counts_summed_over_shards_and_bookies_from_the_newest(tmp_path):
    _write_dir(tmp_path, RECORDS)
    code, out, err = _run("--dir", str(tmp_path))
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == (f"placement-engine status: 2 clusters from {tmp_path / 'status'} (AGE: before the latest "
                        "record, 2026-11-18T11:07:20Z)")
    assert lines[2:] == TABLE


def test_one_cluster_in_full_with_its_racks_write_share_observed_against_expected(tmp_path):
    _write_dir(tmp_path, RECORDS)
    code, out, _ = _run("--dir", str(tmp_path), "--cluster", "east")
    assert code == 0
    lines = out.splitlines()
    assert lines[2:4] == [  # the columns as wide as this one cluster needs
        "CLUSTER  POLICY     WRITABLE  READ-ONLY  PENDING  DEFAULT-RACK  JOIN-FAILED  NOT-ADHERING  RE-ADHERABLE  "
        "TOPOLOGY            EVENT TIME   AGE  SKEW",
        "east     rackaware         7          1        2             1            0             3             2  "
        "       4  2026-11-18T11:07:10Z  10 s  open: create"]
    # Placements per rack summed over shards 0 (70, 50) and 1 (40, 20): 110 and 70 of 180; both expect half.
    assert lines[5:] == [
        "cluster east: policy rackaware, topology version 4, status of 2026-11-18T11:07:10Z (2 of 2 shards reported)",
        "  bookies: 7 writable, 1 read-only, 2 pending departure, 1 on the default rack, 0 failed to join, 0 flapping",
        "  ledgers: 170 remembered, 3 not adhering to the placement rule, 2 placed under a relaxed rule and "
        "re-adherable now",
        "  write skew: open: create (placement-engine alerts --type placement.cluster.skew names the offenders)",
        "  write share by rack over the last 60 placing decisions (180 bookies placed; expected share by writable "
        "bookies):",
        "    RACK  WRITABLE  READ-ONLY  PLACEMENTS  OBSERVED  EXPECTED  OBSERVED/EXPECTED",
        "    /r1          3          1         110     61.1%     50.0%               1.22",
        "    /r2          4          0          70     38.9%     50.0%               0.78",
    ]


def test_json_gives_scripts_the_combined_status_and_its_age(tmp_path):
    _write_dir(tmp_path, RECORDS)
    code, out, _ = _run("--dir", str(tmp_path), "--json", "--cluster", "west")
    assert code == 0
    document = json.loads(out)
    [west] = document["clusters"]
    assert (west["cluster"], west["shards"], west["shards_reported"], west["age_seconds"]) == ("west", 3, 1, 0.0)
    assert west["ledgers"] == {"remembered": 9, "not_adhering": 0, "re_adhere_possible": 1}
    assert [(r["rack"], r["placements"], r["observed"], r["expected"]) for r in west["write_share"]["racks"]] == \
        [("/r1", 3, 0.5, 0.5), ("/r2", 3, 0.5, 0.5)]


def test_no_status_record_is_a_clear_line_and_exit_1(tmp_path):
    (tmp_path / "status").mkdir()
    code, out, err = _run("--dir", str(tmp_path))
    assert (code, out) == (1, "")
    assert err.startswith(f"placement-engine status: no status record in {tmp_path / 'status'} (the job writes a "
                          "cluster's status when it changes")
    _write_dir(tmp_path / "other", RECORDS)
    code, out, err = _run("--dir", str(tmp_path / "other"), "--cluster", "north")
    assert (code, out) == (1, "")
    assert err == (f"placement-engine status: no status record of cluster 'north' in {tmp_path / 'other' / 'status'} "
                   "(clusters with one: east, west)\n")


def test_a_folder_that_is_no_replay_output_is_one_line_and_exit_2(tmp_path):
    done = subprocess.run([*COMMAND, "--dir", str(tmp_path)], capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [f"placement-engine: configuration error: --dir {tmp_path}: no status/ folder "
                                        "in it; name the --out folder of a replay or demo"]


def test_the_status_topic_read_to_its_end_gives_the_same_table(kafka_bootstrap, kafka_topic, tmp_path):
    topic = kafka_topic(partitions=3, prefix="status")
    produce_records(kafka_bootstrap, topic, [(r["cluster"], json.dumps(r)) for r in RECORDS],
                    headers=[("content-type", b"application/json")])
    conf = tmp_path / "status.properties"
    conf.write_text(f"engine.kafka.bootstrapServers={kafka_bootstrap}\nengine.kafka.statusTopic={topic}\n")
    now = T0 + 100_000  # a minute after west's record
    code, out, err = _run("--conf", str(conf), now_ms=now)
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == (f"placement-engine status: 2 clusters from topic {topic} at {kafka_bootstrap} (AGE: before "
                        "the wall clock, 2026-11-18T11:08:20Z)")
    assert lines[2:] == [TABLE[0], TABLE[1].replace("  10 s  ", "  70 s  "), TABLE[2].replace("   0 s  ", "  60 s  ")]


def test_an_empty_status_topic_is_a_clear_line_and_exit_1(kafka_bootstrap, kafka_topic, tmp_path):
    topic = kafka_topic(partitions=2, prefix="status")
    conf = tmp_path / "status.properties"
    conf.write_text(f"engine.kafka.bootstrapServers={kafka_bootstrap}\nengine.kafka.statusTopic={topic}\n")
    code, out, err = _run("--conf", str(conf))
    assert (code, out) == (1, "")
    assert err.startswith(f"placement-engine status: no status record in topic {topic} at {kafka_bootstrap} ")


def test_a_missing_status_topic_is_one_line_naming_the_key(kafka_bootstrap, tmp_path):
    conf = tmp_path / "status.properties"
    conf.write_text(f"engine.kafka.bootstrapServers={kafka_bootstrap}\nengine.kafka.statusTopic=no-such-topic\n")
    done = subprocess.run([*COMMAND, "--conf", str(conf)], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        f"placement-engine: configuration error: engine.kafka.statusTopic: topic 'no-such-topic' does not exist on "
        f"{kafka_bootstrap}; create it (placement-engine topics --create) or name an existing topic"]


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_an_unreachable_broker_is_one_line_and_exit_2(tmp_path):
    conf = tmp_path / "status.properties"
    conf.write_text(f"engine.kafka.bootstrapServers=127.0.0.1:{_closed_port()}\n")
    done = subprocess.run([*COMMAND, "--conf", str(conf)], capture_output=True, text=True,
                          timeout=CONNECT_TIMEOUT_S + 60, check=False)
    assert done.returncode == 2
    assert done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith("placement-engine: configuration error: engine.kafka.bootstrapServers: cannot reach "
                           "127.0.0.1:"), line
    assert line.endswith("check the address and that the broker runs"), line


def test_after_a_real_replay_the_status_shows_what_the_shards_last_wrote(spark, tmp_path):
    source = tmp_path / "in" / "events.jsonl"
    write_input(generate(400, seed=11), source)
    conf = {"ensemblePlacementPolicy": "rackaware", "minNumRacksPerWriteQuorum": "2", "engine.seed": "5",
            "engine.shardsPerCluster": "2", "engine.statusIntervalSeconds": "5"}
    out = tmp_path / "out"
    run_replay(spark, engine_settings(conf), [source], out)
    written = [json.loads(line) for path in sorted((out / "status").glob("*.jsonl"))
               for line in path.read_text().splitlines()]
    last = {shard: max((r for r in written if r["shard"] == shard), key=lambda r: r["time_ms"]) for shard in (0, 1)}
    code, text, _ = _run("--dir", str(out), "--json")
    assert code == 0
    [demo] = json.loads(text)["clusters"]
    assert demo["shards_reported"] == demo["shards"] == 2
    for count in ("remembered", "not_adhering", "re_adhere_possible"):
        assert demo["ledgers"][count] == last[0]["ledgers"][count] + last[1]["ledgers"][count], count
    newest = max(last.values(), key=lambda r: r["time_ms"])
    assert demo["bookies"] == newest["bookies"] and demo["racks"] == newest["racks"]
    assert demo["ledgers"]["remembered"] > 0
    placed = sum(r["write_share"]["placements"] for r in last.values())
    assert demo["write_share"]["placements"] == placed > 0
    code, text, _ = _run("--dir", str(out), "--cluster", "demo")
    assert code == 0
    assert f"  ledgers: {demo['ledgers']['remembered']} remembered, " in text
