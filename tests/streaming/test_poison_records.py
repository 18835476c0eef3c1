"""Single records that once stopped the job for good: each goes through `run` against a real broker
and through `replay`, and must become a dead letter while every other record of its batch is decided."""

import hashlib
import json

import pytest

from streaming.job import start_kafka_job
from streaming.replay import batch_bounds, run_replay
from streaming.settings import engine_settings
from tests.kafka_broker import consume_all, produce_records
from tests.streaming.test_run_kafka import _bookies, _caught_up, _conf, _creates, _keyed, _wait_for

VALID_REQUESTS = 100


@pytest.fixture
def topics(kafka_topic):
    """Fresh events, requests and output topics (2 partitions each)."""
    return {name: kafka_topic(partitions=2, prefix=name)
            for name in ("events", "requests", "decisions", "alerts", "dead", "status")}


def _run_until_caught_up(spark, conf, name):
    """`run` (idle ticks on, the default) until it has consumed both topics, then stop."""
    query = start_kafka_job(spark, engine_settings(conf), query_name=name)
    try:
        _wait_for(lambda: _caught_up(query), query, "the job consuming both topics")
    finally:
        query.stop()


def _outputs(bootstrap, topics):
    decisions = {}
    for record in consume_all(bootstrap, topics["decisions"]):
        decision = json.loads(record.value)
        decisions.setdefault(decision["request_id"], decision)
    letters = {}
    for record in consume_all(bootstrap, topics["dead"]):
        letter = json.loads(record.value)
        letters.setdefault(letter["id"], letter)
    return decisions, list(letters.values())


def _replayed(spark, tmp_path, records, name, **overrides):
    conf = {"ensemblePlacementPolicy": "rackaware", "minNumRacksPerWriteQuorum": "2", "engine.seed": "11",
            **overrides}
    source = tmp_path / f"{name}.jsonl"
    source.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records),
                      encoding="utf-8")
    out = tmp_path / name
    summary = run_replay(spark, engine_settings(conf), [source], out)
    decisions = {}
    letters = []
    for kind, target in (("decisions", decisions), ("dead-letters", letters)):
        for path in sorted((out / kind).glob("*.jsonl")):
            for line in path.read_text(encoding="utf-8").splitlines():
                item = json.loads(line)
                if kind == "decisions":
                    target.setdefault(item["request_id"], item)
                else:
                    target.append(item)
    return summary, decisions, letters


def _year_one_batch():
    valid = _creates("c1", 0, VALID_REQUESTS)
    ancient = {**valid[0], "request_id": "ancient", "ledger_id": 10_000, "time": "0001-01-01T00:00:00Z"}
    return valid, ancient


def _assert_year_one_outcome(decisions, letters, valid):
    assert all(decisions[r["request_id"]]["status"] == "ok" for r in valid), "every valid request is decided"
    assert decisions["ancient"]["status"] == "failed"
    assert decisions["ancient"]["error"]["code"] == "INVALID_REQUEST"
    [letter] = [d for d in letters if d["request_id"] == "ancient"]
    assert letter["code"] == "INVALID_TIME"
    assert "0001-01-01T00:00:00Z" in letter["raw"]


def test_run_decides_a_batch_holding_a_request_dated_year_one(spark, kafka_bootstrap, topics, tmp_path):
    """Regression: with idle ticks on, the watermark column held year 1, and pyspark's conversion of it
    to pandas (`datetime64[ns]`) failed the batch on every start: 0 of 100 valid requests decided."""
    conf = _conf(kafka_bootstrap, topics, tmp_path / "checkpoint")
    valid, ancient = _year_one_batch()
    produce_records(kafka_bootstrap, topics["events"], _keyed(_bookies("c1")))
    produce_records(kafka_bootstrap, topics["requests"], _keyed(valid[:50] + [ancient] + valid[50:]))
    _run_until_caught_up(spark, conf, "poison-year-one")
    decisions, letters = _outputs(kafka_bootstrap, topics)
    _assert_year_one_outcome(decisions, letters, valid)


def test_replay_decides_a_batch_holding_a_request_dated_year_one(spark, tmp_path):
    valid, ancient = _year_one_batch()
    summary, decisions, letters = _replayed(spark, tmp_path, _bookies("c1") + valid + [ancient], "year-one")
    _assert_year_one_outcome(decisions, letters, valid)
    assert summary["dead_letters"] == {"total": 1, "INVALID_TIME": 1}


CONTROL_RECORD = "\x01" * 300_000
"""300,000 control characters: about 1.8 MB of dead letter once JSON escapes each as `\\u0001`."""


def _assert_cut_dead_letter(letters, max_raw_bytes=65_536):
    [letter] = [d for d in letters if d.get("raw_truncated")]
    assert letter["code"] == "INVALID_JSON"
    assert letter["raw_length"] == 300_000
    assert letter["raw_sha256"] == hashlib.sha256(CONTROL_RECORD.encode()).hexdigest()
    assert letter["raw"] and set(letter["raw"]) == {"\x01"}
    assert len(json.dumps(letter["raw"])) <= max_raw_bytes
    return letter


def test_run_delivers_a_dead_letter_of_a_record_too_large_to_send_whole(spark, kafka_bootstrap, topics, tmp_path):
    """Regression: the dead letter of a 300,000-character record of control characters was about 1.8 MB,
    and the producer failed it with MSG_SIZE_TOO_LARGE on every start."""
    conf = _conf(kafka_bootstrap, topics, tmp_path / "checkpoint")
    valid = _creates("c1", 0, 10)
    produce_records(kafka_bootstrap, topics["events"], _keyed(_bookies("c1")))
    produce_records(kafka_bootstrap, topics["requests"], _keyed(valid[:5]) + [("c1", CONTROL_RECORD)]
                    + _keyed(valid[5:]))
    _run_until_caught_up(spark, conf, "poison-control-characters")
    decisions, letters = _outputs(kafka_bootstrap, topics)
    assert all(decisions[r["request_id"]]["status"] == "ok" for r in valid)
    letter = _assert_cut_dead_letter(letters)
    assert letter["source"]["topic"] == topics["requests"]


def test_replay_cuts_the_raw_text_of_a_huge_dead_letter(spark, tmp_path):
    valid = _creates("c1", 0, 10)
    summary, decisions, letters = _replayed(spark, tmp_path, _bookies("c1") + valid + [CONTROL_RECORD],
                                            "control", **{"engine.deadLetter.maxRawBytes": "1000"})
    assert all(decisions[r["request_id"]]["status"] == "ok" for r in valid)
    _assert_cut_dead_letter(letters, max_raw_bytes=1000)
    assert summary["dead_letters"] == {"total": 1, "INVALID_JSON": 1}


def test_batch_bounds_cut_by_records_and_by_bytes_and_keep_a_long_item_alone():
    assert batch_bounds([1] * 5, 2, 100) == [(0, 2), (2, 4), (4, 5)]
    assert batch_bounds([3, 3, 3, 10, 1, 1], 100, 6) == [(0, 2), (2, 3), (3, 4), (4, 6)]
    assert batch_bounds([], 10, 10) == []


def test_replay_cuts_batches_by_bytes_so_long_lines_do_not_share_one_batch(spark, tmp_path):
    """Regression: with 200,000 records per batch, a log with a few lines of several MB went into one
    micro-batch, and the JVM ran out of memory or hung. 20 lines of 3 MB among short ones, 8 MiB per
    batch: no batch holds more than two of them, and every line is answered as before."""
    valid = _creates("c1", 0, 200)
    huge = [json.dumps({**valid[0], "request_id": f"huge-{n}", "pad": "x" * 3_000_000}) for n in range(20)]
    records = _bookies("c1") + [item for pair in zip(valid[::10], huge) for item in pair] \
        + [r for n, r in enumerate(valid) if n % 10]
    summary, decisions, letters = _replayed(spark, tmp_path, records, "long-lines",
                                            **{"engine.replay.bytesPerTrigger": str(8 << 20)})
    assert summary["batches"] >= 10, "20 lines of 3 MB in batches of at most 8 MiB"
    assert all(decisions[r["request_id"]]["status"] == "ok" for r in valid)
    assert not any(f"huge-{n}" in decisions for n in range(20)), "a record too large is not read, so not answered"
    too_large = [d for d in letters if d["code"] == "RECORD_TOO_LARGE"]
    assert len(too_large) == 20
    assert {d["raw_length"] for d in too_large} == {len(line) for line in huge}
    assert all(d["raw_truncated"] and len(d["raw"]) <= 65_536 for d in too_large)
