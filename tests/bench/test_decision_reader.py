"""bench_streaming's DecisionReader: what its throughput and latency figures are computed from."""

import sys
import time
from pathlib import Path

import pytest

from tests.kafka_broker import create_topic, produce_records, unique_topic_name
from tests.streaming.conftest import kafka_bootstrap  # noqa: F401 - the broker fixture

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import bench_streaming


def _until(condition, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.02)  # poll interval of a condition check


@pytest.fixture
def decisions(kafka_bootstrap):  # noqa: F811
    topic = create_topic(kafka_bootstrap, unique_topic_name("decisions"), partitions=2)
    ids = {f"x-{n}".encode() for n in range(200)}
    produce_records(kafka_bootstrap, topic, [(str(n), f'{{"request_id":"x-{n}","status":"ok"}}') for n in range(200)])
    return kafka_bootstrap, topic, ids


def test_a_reader_that_saw_every_decision_is_done_and_keeps_each_kafka_timestamp(decisions):
    bootstrap, topic, ids = decisions
    reader = bench_streaming.DecisionReader(bootstrap, topic)
    try:
        assert reader.wait_for(ids, timeout_s=20, stall_s=60)   # from the arrivals alone, no re-read
        assert set(reader.arrived) == ids and len(reader.arrived) == len(ids)
        assert all(stamp > 0 for stamp in reader.first_ts.values())
        assert not reader.wait_for(ids | {b"never-written"}, timeout_s=0.3, stall_s=60)
    finally:
        reader.close()


def test_decisions_the_reader_skipped_are_recovered_from_the_topic_with_their_timestamps(decisions, monkeypatch):
    """The reader's consumer has skipped decisions that were in the topic; after `stall_s` without a
    new one, wait_for reads the topic again and completes, with the decisions' Kafka timestamps."""
    bootstrap, topic, ids = decisions
    real = bench_streaming._REQUEST_ID

    class SkipsEveryTenth:
        def search(self, value):
            match = real.search(value)
            return None if match is not None and match.group(1).endswith(b"7") else match

    monkeypatch.setattr(bench_streaming, "_REQUEST_ID", SkipsEveryTenth())
    reader = bench_streaming.DecisionReader(bootstrap, topic)
    try:
        _until(lambda: reader.records == len(ids))       # every decision read, a tenth of them skipped
        monkeypatch.setattr(bench_streaming, "_REQUEST_ID", real)
        skipped = {rid for rid in ids if rid.endswith(b"7")}
        assert not skipped & reader.first_ts.keys()
        assert reader.wait_for(ids, timeout_s=30, stall_s=0.2)
        assert skipped <= reader.first_ts.keys() and all(reader.first_ts[rid] > 0 for rid in skipped)
        assert not skipped & reader.first_read_ns.keys()  # their read times are unknown
    finally:
        reader.close()
