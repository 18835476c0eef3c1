"""`placement-engine replay` end to end on a real local Spark session and real files."""

import json
from pathlib import Path

import pytest

from events import format_time
from streaming.cli import main
from streaming.demo import generate, write_input
from streaming.replay import run_replay
from streaming.session import CHECKPOINT_FILE_MANAGER, LOCAL_CHECKPOINT_FILE_MANAGER
from streaming.settings import engine_settings

T0 = 1_790_000_000_000


def _t(seconds: float) -> int:
    return T0 + int(seconds * 1000)


def _lines(records):
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records)


def _read(out: Path, kind: str) -> list[dict]:
    rows = []
    for path in sorted((out / kind).glob("*.jsonl")):
        rows.extend(json.loads(line) for line in path.read_text().splitlines())
    return rows


def _replay(spark, tmp_path, inputs, name, **overrides):
    conf = {"ensemblePlacementPolicy": "rackaware", "minNumRacksPerWriteQuorum": "2", "engine.seed": "5"}
    conf.update({k: str(v) for k, v in overrides.items()})
    out = tmp_path / name
    summary = run_replay(spark, engine_settings(conf), inputs, out)
    return out, summary


SMALL = [
    *[{"type": "bookie_writable", "cluster": "c1", "time": _t(0), "bookie": f"bk{i}:3181",
       "location": f"/rack{i % 3}"} for i in range(6)],
    {"type": "ledger_create", "cluster": "c1", "time": _t(1), "request_id": "r1", "ledger_id": 1,
     "ensemble_size": 3, "write_quorum": 3, "ack_quorum": 2},
    {"type": "ledger_create", "cluster": "c1", "time": _t(2), "request_id": "r2", "ensemble_size": 7,
     "write_quorum": 3, "ack_quorum": 2},
    {"type": "bookie_replace", "cluster": "c1", "time": _t(3), "request_id": "r3",
     "ensemble": ["bk0:3181", "bk1:3181", "bk2:3181"], "bookie": "bk1:3181", "write_quorum": 3, "ack_quorum": 2},
    {"type": "ensemble_check", "cluster": "c1", "time": _t(4), "request_id": "r4", "ledger_id": 9,
     "ensemble": ["bk0:3181", "bk3:3181", "bk1:3181"], "write_quorum": 2, "ack_quorum": 2},
    {"type": "ledger_create", "cluster": "c1", "time": _t(5), "request_id": "bad", "ensemble_size": 2,
     "write_quorum": 3, "ack_quorum": 2},
    "not json at all",
    {"type": "bookie_writable", "cluster": "c2", "time": _t(0), "bookie": "other:1"},
]


def test_replay_answers_every_request_and_dead_letters_bad_input(unset_manager, tmp_path):
    spark = unset_manager
    source = tmp_path / "in" / "events.jsonl"
    source.parent.mkdir()
    source.write_text(_lines(SMALL))
    out, summary = _replay(spark, tmp_path, [source.parent], "out")
    # Its checkpoint is local: written through the FileSystem API (no process per renamed file).
    assert spark.conf.get(CHECKPOINT_FILE_MANAGER) == LOCAL_CHECKPOINT_FILE_MANAGER
    decisions = {d["request_id"]: d for d in _read(out, "decisions")}
    assert set(decisions) == {"r1", "r2", "r3", "r4", "bad"}
    r1 = decisions["r1"]
    assert r1["status"] == "ok" and r1["adherence"] == "MEETS_STRICT" and r1["ledger_id"] == 1
    assert len(set(r1["ensemble"])) == 3 and r1["policy"] == "rackaware"
    assert r1["time"].endswith("Z")
    assert decisions["r2"]["status"] == "failed"
    assert decisions["r2"]["error"]["code"] == "NOT_ENOUGH_BOOKIES"
    r3 = decisions["r3"]
    assert r3["status"] == "ok" and r3["bookie"] not in ("bk0:3181", "bk1:3181", "bk2:3181")
    assert r3["ensemble"] == ["bk0:3181", r3["bookie"], "bk2:3181"]
    # bk0 and bk3 share /rack0: the write set {bk0, bk3} spans one rack.
    assert decisions["r4"]["adherence"] == "FAIL"
    assert decisions["bad"]["status"] == "failed" and decisions["bad"]["error"]["code"] == "INVALID_REQUEST"
    letters = _read(out, "dead-letters")
    assert {d["code"] for d in letters} == {"INVALID_JSON", "INVALID_QUORUM"}
    not_json = next(d for d in letters if d["code"] == "INVALID_JSON")
    assert not_json["raw"] == "not json at all"
    assert not_json["source"] == {"file": str(source.resolve()), "line": 12}
    assert summary["decisions"] == {"total": 5, "ok": 3, "failed": 2}
    assert json.loads((out / "summary.json").read_text())["dead_letters"]["total"] == 2


def _outputs(out):
    return (sorted(_read(out, "decisions"), key=lambda d: d["id"]),
            sorted(_read(out, "alerts"), key=lambda a: a["id"]),
            sorted(_read(out, "dead-letters"), key=lambda d: d["id"]),
            sorted(_read(out, "status"), key=lambda s: s["id"]))


def test_replay_is_deterministic_across_runs_batch_sizes_files_and_shards(spark, tmp_path):
    records = generate(150, seed=3)
    single = tmp_path / "single" / "all.jsonl"
    write_input(records, single)
    reference = _outputs(_replay(spark, tmp_path, [single], "ref", **{"engine.replay.recordsPerTrigger": 100000})[0])
    assert len(reference[0]) >= 150
    assert reference[3] and {s["type"] for s in reference[3]} == {"placement.cluster.status"}
    # Small batches: the same decisions, alerts, dead letters and status records, with the same ids.
    assert _outputs(_replay(spark, tmp_path, [single], "small", **{"engine.replay.recordsPerTrigger": 40})[0]) \
        == reference
    # The same records split over two files (events in one, requests in the other) merge back in time order.
    split = tmp_path / "split"
    write_input([r for r in records if r.get("type", "").startswith(("bookie", "cluster", "feature"))],
                split / "a-events.jsonl")
    write_input([r for r in records if not r.get("type", "").startswith(("bookie", "cluster", "feature"))],
                split / "b-requests.jsonl")
    decisions, alerts, _, status = _outputs(_replay(spark, tmp_path, [split], "split")[0])
    assert decisions == reference[0] and alerts == reference[1] and status == reference[3]
    # Sharding one cluster's requests over 3 keys gives the same decisions and alerts. Status records are
    # compared only between runs with equal shard counts: each shard writes its own (its requests' ledger
    # counts and write share), so 3 shards write other records than 1 does, by design.
    sharded = _outputs(_replay(spark, tmp_path, [single], "sharded", **{"engine.shardsPerCluster": 3})[0])
    assert sharded[0] == reference[0] and sharded[1] == reference[1]
    assert {(s["shard"], s["shards"]) for s in sharded[3]} == {(0, 3), (1, 3), (2, 3)}


def test_the_end_of_a_replay_reports_a_delay_that_ended_after_a_cluster_went_quiet(spark, tmp_path):
    """c1's last record is a lost bookie; the recording goes on (c2) past the end of c1's 30 s delay."""
    records = [*[{"type": "bookie_writable", "cluster": c, "time": _t(0), "bookie": f"bk{i}:3181",
                  "location": f"/rack{i % 3}"} for c in ("c1", "c2") for i in range(6)],
               {"type": "bookie_lost", "cluster": "c1", "time": _t(10), "bookie": "bk0:3181"},
               *[{"type": "ledger_create", "cluster": "c2", "time": _t(20 + n), "request_id": f"r{n}",
                  "ensemble_size": 3, "write_quorum": 3, "ack_quorum": 2} for n in range(30)]]
    source = tmp_path / "quiet.jsonl"
    source.write_text(_lines(records))
    runs = [_outputs(_replay(spark, tmp_path, [source], f"quiet-{size}", networkTopologyStabilizePeriodSeconds=30,
                             **{"engine.replay.recordsPerTrigger": size})[0]) for size in (7, 1000)]
    assert runs[0] == runs[1]
    ended = [a for a in runs[0][1] if a["type"] == "placement.bookie.departure_pending.resolved"]
    assert [(a["subject"], a["time"], a["data"]["outcome"]) for a in ended] == \
        [("bk0:3181", format_time(_t(40)), "expired")]


def test_a_record_refused_as_too_far_ahead_does_not_move_the_end_of_the_replay(spark, tmp_path):
    """A bookie lost 10 s before the recording ends stays pending; a far-future line adds only its dead letter."""
    records = [*[{"type": "bookie_writable", "cluster": "c1", "time": _t(0), "bookie": f"bk{i}:3181",
                  "location": f"/rack{i % 3}"} for i in range(6)],
               {"type": "bookie_lost", "cluster": "c1", "time": _t(10), "bookie": "bk0:3181"},
               {"type": "ledger_create", "cluster": "c1", "time": _t(20), "request_id": "r1",
                "ensemble_size": 3, "write_quorum": 3, "ack_quorum": 2}]
    far = {"type": "bookie_lost", "cluster": "c1", "time": _t(3 * 86_400), "bookie": "bk1:3181"}
    plain, refused = tmp_path / "plain.jsonl", tmp_path / "far.jsonl"
    plain.write_text(_lines(records))
    refused.write_text(_lines([*records, far]))
    runs = [_outputs(_replay(spark, tmp_path, [source], source.stem, networkTopologyStabilizePeriodSeconds=30)[0])
            for source in (plain, refused)]
    assert runs[1][:2] == runs[0][:2]           # the same decisions and alerts: nothing expired at the far time
    assert [letter["code"] for letter in runs[1][2]] == ["TIME_TOO_FAR_AHEAD"]
    assert not [a for a in runs[0][1] if a["type"] == "placement.bookie.departure_pending.resolved"]


def test_cli_replay_writes_the_contract_layout(spark, tmp_path, capsys):
    source = tmp_path / "e.jsonl"
    source.write_text(_lines(SMALL[:10]))
    conf = Path(__file__).resolve().parents[2] / "conf" / "rackaware.properties"
    out = tmp_path / "cli-out"
    assert main(["replay", "--conf", str(conf), "--events", str(source), "--out", str(out),
                 "--set", "enforceMinNumRacksPerWriteQuorum=false"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["decisions"]["total"] == 4
    assert summary["status_records"] == len(_read(out, "status"))
    for sub in ("decisions", "alerts", "dead-letters", "status"):
        assert (out / sub).is_dir()
    assert (out / "summary.json").is_file()


@pytest.mark.parametrize("missing", ["nothing-here"])
def test_cli_replay_of_a_missing_path_is_a_config_error(tmp_path, capsys, missing):
    conf = Path(__file__).resolve().parents[2] / "conf" / "rackaware.properties"
    assert main(["replay", "--conf", str(conf), "--events", str(tmp_path / missing), "--out", str(tmp_path)]) == 2
    assert "--events" in capsys.readouterr().err


def test_a_replayed_line_that_is_not_utf8_is_an_encoding_dead_letter(spark, tmp_path):
    """Bad input is never used nor lost: the line's bytes are not repaired into a record."""
    source = tmp_path / "in.jsonl"
    bookies = [{"type": "bookie_writable", "cluster": "c1", "time": _t(0), "bookie": f"bk{i}:3181",
                "location": f"/rack{i % 3}"} for i in range(3)]
    bad = json.dumps({"type": "bookie_writable", "cluster": "c1", "time": _t(0), "bookie": "bk9:3181",
                      "hostname": "hX"}).encode().replace(b"hX", b"h\xff")
    create = {"type": "ledger_create", "cluster": "c1", "time": _t(1), "request_id": "r1", "ensemble_size": 3,
              "write_quorum": 3, "ack_quorum": 2}
    source.write_bytes(_lines(bookies).encode() + bad + b"\n" + _lines([create]).encode())
    out, _ = _replay(spark, tmp_path, [source], "out")
    [letter] = _read(out, "dead-letters")
    assert letter["code"] == "INVALID_ENCODING" and '"h\ufffd"' in letter["raw"]
    assert letter["source"] == {"file": str(source.resolve()), "line": 4}
    [decision] = _read(out, "decisions")
    assert decision["status"] == "ok" and "bk9:3181" not in decision["ensemble"]


@pytest.mark.parametrize("shards", [1, 2])
def test_lone_surrogate_escapes_in_routed_fields_are_dead_letters_reported_once_not_a_crash(spark, tmp_path, shards):
    """`\\ud800` is valid JSON text for a character UTF-8 cannot hold. Python's json reads it, Jackson
    cannot write it, so Spark reads no field of such a record and groups it with the unreadable ones;
    the replay's routing does the same (it crashed encoding the cluster before)."""
    source = tmp_path / "in.jsonl"
    bookies = [{"type": "bookie_writable", "cluster": "c1", "time": _t(0), "bookie": f"bk{i}:3181",
                "location": f"/rack{i % 3}"} for i in range(3)]
    bad = [f'{{"type":"bookie_writable","cluster":"c1\\ud800","time":{_t(1)},"bookie":"bk7:3181"}}',
           f'{{"type":"ledger_create","cluster":"c1","time":{_t(1)},"request_id":"\\ud800x","ensemble_size":3,'
           '"write_quorum":3,"ack_quorum":2}',
           f'{{"type":"ensemble_check","cluster":"c1","time":{_t(1)},"request_id":"r9","ledger_id":"\\udc00",'
           '"ensemble":["bk0:3181"],"write_quorum":1,"ack_quorum":1}']
    create = {"type": "ledger_create", "cluster": "c1", "time": _t(2), "request_id": "r1", "ensemble_size": 3,
              "write_quorum": 3, "ack_quorum": 2}
    source.write_text(_lines(bookies + bad + [create]))
    out, _ = _replay(spark, tmp_path, [source], "out", **{"engine.shardsPerCluster": shards})
    letters = _read(out, "dead-letters")
    assert sorted(letter["raw"] for letter in letters) == sorted(bad)     # each once, with either shard count
    assert [d["request_id"] for d in _read(out, "decisions") if d["status"] == "ok"] == ["r1"]
