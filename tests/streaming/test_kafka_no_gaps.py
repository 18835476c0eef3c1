"""The placement-kafka source and sink under load: no record lost, skipped or read twice across many batches.

Two producer threads write sequence-numbered records, in many small record batches (``linger.ms=0``), to a
two-partition topic while a Spark query reads it with a small ``maxOffsetsPerTrigger``. Every offset of every
partition must be read exactly once, and every ``(producer, seq)`` with it. The sink test writes records
through the sink over many micro-batches and reads the topic back from the beginning.

Each test runs its own tansu broker: the load must not slow the tests sharing the session broker.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from tests.kafka_broker import (
    TansuBroker,
    consume_all,
    create_topic,
    external_bootstrap,
    produce_records,
    unique_topic_name,
)

pytestmark = pytest.mark.skipif(external_bootstrap() is not None,
                                reason="loads its own tansu broker; an external one is shared")

PER_PRODUCER = 60_000
PER_TRIGGER = 4_000
# A producer waits every LEAD_CHECK records until the query is at most PER_TRIGGER // 2 of its records behind.
LEAD_CHECK = 1_000
# Guard against a hung query only (a healthy run takes seconds); never used to assert on speed.
HANG_GUARD_S = 120


@pytest.fixture
def broker() -> Iterator[TansuBroker]:
    with TansuBroker() as own:
        yield own


class OffsetCollector:
    """foreachBatch sink keeping ``(partition, offset, value)`` of every row (runs in the driver's process).

    :meth:`wait_until_read` lets producers stay close ahead of the query, so it reads at the partitions' ends
    while they are being written.
    """

    def __init__(self) -> None:
        self.rows: list[tuple[int, int, bytes]] = []
        self.batches = 0
        self._read = threading.Condition()

    def __call__(self, df, batch_id: int) -> None:
        rows = [(r.partition, r.offset, bytes(r.value)) for r in df.select("partition", "offset", "value").collect()]
        with self._read:
            self.rows.extend(rows)
            self.batches += 1
            self._read.notify_all()

    def wait_until_read(self, count: int, stopped: threading.Event) -> None:
        """Block until ``count`` rows were read or ``stopped`` is set; the hang guard running out sets it."""
        with self._read:
            if not self._read.wait_for(lambda: len(self.rows) >= count or stopped.is_set(), timeout=HANG_GUARD_S):
                stopped.set()


def _produce_paced(bootstrap: str, topic: str, producer_id: int, collector: OffsetCollector,
                   stopped: threading.Event, outcome: dict) -> None:
    """Write ``b"<producer_id>:<seq>"`` for seq in range(PER_PRODUCER), keeping close ahead of what the query
    has read (LEAD_CHECK), until ``stopped``; ``outcome[producer_id]`` = (unacknowledged records, first delivery
    errors)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    errors = []

    def on_delivery(err, _msg) -> None:
        if err is not None:
            errors.append(err.str())

    for seq in range(PER_PRODUCER):
        if seq % LEAD_CHECK == 0:
            collector.wait_until_read(2 * (seq - PER_TRIGGER // 2), stopped)
            if stopped.is_set():
                break
        producer.produce(topic, value=b"%d:%d" % (producer_id, seq), on_delivery=on_delivery)
        producer.poll(0)
    outcome[producer_id] = (producer.flush(60), errors[:3])


def _assert_contiguous(rows: list[tuple[int, int, bytes]], ends: dict[int, int]) -> None:
    """Each partition's offsets are exactly 0..end-1, each once (no transactions, so no marker gaps)."""
    by_partition: dict[int, list[int]] = {}
    for partition, offset, _value in rows:
        by_partition.setdefault(partition, []).append(offset)
    for partition, end in sorted(ends.items()):
        offsets = sorted(by_partition.get(partition, []))
        holes = sorted(set(range(end)) - set(offsets))
        twice = len(offsets) - len(set(offsets))
        assert not holes and not twice and offsets[-1:] == [end - 1], (
            f"partition {partition}: {len(holes)} offsets never read (first {holes[:5]}), {twice} read twice, "
            f"last read {offsets[-1:]}, end {end}")


def test_the_source_reads_every_offset_once_while_two_producers_write(spark, broker, tmp_path):
    """Regression guard: a live reader of a topic written by concurrent producers must not skip offsets.

    tansu can answer a fetch with a record batch appended after one it does not yet return (a consumer at an
    earlier offset jumps over the hidden batch): the benchmark's plain reader lost decisions that way.
    """
    topic = create_topic(broker.bootstrap, unique_topic_name("nogap"), partitions=2)
    reader = (spark.readStream.format("placement-kafka").option("kafka.bootstrap.servers", broker.bootstrap)
              .option("subscribe", topic).option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", str(PER_TRIGGER)).load())
    collector = OffsetCollector()
    query = reader.writeStream.foreachBatch(collector).option("checkpointLocation", str(tmp_path / "ckpt")) \
        .queryName("no_gaps_source").trigger(processingTime="0 seconds").start()
    stopped = threading.Event()
    outcome: dict[int, tuple] = {}
    producers = [threading.Thread(target=_produce_paced, args=(broker.bootstrap, topic, k, collector, stopped, outcome))
                 for k in (0, 1)]
    try:
        for thread in producers:
            thread.start()
        for thread in producers:
            while thread.is_alive():
                assert not query.awaitTermination(1), "the query ended while the producers wrote"
                thread.join(0)
        assert outcome == {0: (0, []), 1: (0, [])}, outcome
        ends = {r.partition: r.offset + 1 for r in _last_records(broker.bootstrap, topic)}
        assert sum(ends.values()) == 2 * PER_PRODUCER
        query.processAllAvailable()
    finally:
        stopped.set()
        query.stop()
    assert query.exception() is None
    assert collector.batches >= 2 * PER_PRODUCER // PER_TRIGGER
    _assert_contiguous(collector.rows, ends)
    assert sorted(value for _p, _o, value in collector.rows) == \
        sorted(b"%d:%d" % (k, seq) for k in (0, 1) for seq in range(PER_PRODUCER))


def _last_records(bootstrap: str, topic: str) -> list:
    """The last record of each partition, read to end-of-partition (tansu's ListOffsets is wrong)."""
    last = {}
    for record in consume_all(bootstrap, topic, timeout_s=HANG_GUARD_S):
        last[record.partition] = record
    return list(last.values())


def test_the_sink_delivers_every_record_over_many_batches(spark, broker, tmp_path):
    """Records read from one topic in many micro-batches and written through the sink all reach the other."""
    count = 40_000
    source = create_topic(broker.bootstrap, unique_topic_name("nogap-in"), partitions=2)
    sink = create_topic(broker.bootstrap, unique_topic_name("nogap-out"), partitions=2)
    produce_records(broker.bootstrap, source, (b"0:%d" % seq for seq in range(count)), timeout_s=HANG_GUARD_S)
    records = (spark.readStream.format("placement-kafka").option("kafka.bootstrap.servers", broker.bootstrap)
               .option("subscribe", source).option("startingOffsets", "earliest")
               .option("maxOffsetsPerTrigger", str(PER_TRIGGER)).load().select("value"))
    query = records.writeStream.format("placement-kafka").option("kafka.bootstrap.servers", broker.bootstrap) \
        .option("topic", sink).option("checkpointLocation", str(tmp_path / "ckpt")) \
        .queryName("no_gaps_sink").trigger(availableNow=True).start()
    try:
        assert query.awaitTermination(HANG_GUARD_S), f"query still running after {HANG_GUARD_S} s"
    finally:
        query.stop()
    assert query.exception() is None
    assert len(query.recentProgress) >= count // PER_TRIGGER

    written = consume_all(broker.bootstrap, sink, timeout_s=HANG_GUARD_S)

    assert sorted(r.value for r in written) == sorted(b"0:%d" % seq for seq in range(count))
    for partition in {r.partition for r in written}:
        offsets = [r.offset for r in written if r.partition == partition]
        assert offsets == list(range(len(offsets))), f"partition {partition} has offset gaps"
