"""The placement-kafka source under broker faults: a broker that lost its data, a topic deleted and recreated.

Each test runs its own tansu broker (restarting it, or stopping the forwarder in front of it, must not
disturb other tests), its own topics and checkpoint, and waits for conditions with a deadline, never a sleep.
Reader-level tests drive :class:`KafkaStreamReader` in this process, where its log lines can be seen; the
query-level tests check what a Spark query does.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql.streaming.datasource import ReadAllAvailable

from streaming.kafka_options import DataLossError, KafkaSourceSettings, offset_key
from streaming.kafka_source import KafkaStreamReader
from tests.kafka_broker import (
    TansuBroker,
    create_topic,
    delete_topic,
    external_bootstrap,
    produce_records,
    unique_topic_name,
)

pytestmark = pytest.mark.skipif(external_bootstrap() is not None,
                                reason="restarts and cuts off its own tansu broker; an external one cannot be")

# Guard against a hung query only (a healthy run takes seconds); never used to assert on speed.
HANG_GUARD_S = 60


@pytest.fixture
def broker() -> Iterator[TansuBroker]:
    with TansuBroker() as own:
        yield own


class Collector:
    """foreachBatch sink keeping every row (the function runs in the driver's Python process)."""

    def __init__(self) -> None:
        self.rows: list = []

    def __call__(self, df, batch_id: int) -> None:
        self.rows.extend(df.collect())


def run_available_now(spark, bootstrap: str, topic: str, checkpoint, name: str, **options) -> Collector:
    """Read ``topic`` with Trigger.AvailableNow into a Collector; re-raise the query's failure."""
    reader = spark.readStream.format("placement-kafka").option("kafka.bootstrap.servers", bootstrap) \
        .option("subscribe", topic).option("startingOffsets", "earliest")
    for option, value in options.items():
        reader = reader.option(option, str(value))
    collector = Collector()
    query = reader.load().writeStream.foreachBatch(collector).option("checkpointLocation", str(checkpoint)) \
        .queryName(name).trigger(availableNow=True).start()
    try:
        assert query.awaitTermination(HANG_GUARD_S), f"query {name} still running after {HANG_GUARD_S} s"
    finally:
        query.stop()
    return collector


def values(rows) -> list[str]:
    return [row.value.decode() for row in sorted(rows, key=lambda row: row.offset)]


def data_loss_warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.levelno == logging.WARNING and r.getMessage().startswith("data loss")]


# ------------------------------------------------------------------------------ offsets going backwards


def _read_then_lose(spark, broker: TansuBroker, tmp_path) -> tuple[str, object]:
    """Read 10 records of a one-partition topic, then restart the broker empty and write 3 new records."""
    topic = create_topic(broker.bootstrap, unique_topic_name("lost"), partitions=1)
    produce_records(broker.bootstrap, topic, [f"old{i}" for i in range(10)])
    checkpoint = tmp_path / "ckpt"
    first = run_available_now(spark, broker.bootstrap, topic, checkpoint, "faults_before_loss")
    assert values(first.rows) == [f"old{i}" for i in range(10)]
    broker.restart()
    create_topic(broker.bootstrap, topic, partitions=1)
    produce_records(broker.bootstrap, topic, ["new0", "new1", "new2"])
    return topic, checkpoint


def test_a_broker_that_lost_its_data_stops_the_query_naming_partition_and_offsets(spark, broker, tmp_path):
    """Regression: the source waited for the new partition to pass the old offset; records before it were
    never read and nothing was logged."""
    topic, checkpoint = _read_then_lose(spark, broker, tmp_path)

    with pytest.raises(StreamingQueryException) as failure:
        run_available_now(spark, broker.bootstrap, topic, checkpoint, "faults_after_loss")

    message = str(failure.value)
    assert "DataLossError" in message
    assert f"{topic} partition 0 now ends at offset 3 (earliest 0), below offset 10" in message
    assert "failOnDataLoss=false" in message


def test_with_fail_on_data_loss_false_the_new_records_are_read_from_offset_0(spark, broker, tmp_path):
    topic, checkpoint = _read_then_lose(spark, broker, tmp_path)

    after = run_available_now(spark, broker.bootstrap, topic, checkpoint, "faults_lossy", failOnDataLoss="false")

    assert [(row.offset, row.value.decode()) for row in sorted(after.rows, key=lambda r: r.offset)] == \
        [(0, "new0"), (1, "new1"), (2, "new2")]
    produce_records(broker.bootstrap, topic, ["new3"])
    later = run_available_now(spark, broker.bootstrap, topic, checkpoint, "faults_lossy_later",
                              failOnDataLoss="false")
    assert values(later.rows) == ["new3"]


def _reader(bootstrap: str, topic: str, **options: str) -> KafkaStreamReader:
    return KafkaStreamReader(KafkaSourceSettings.from_options(
        {"kafka.bootstrap.servers": bootstrap, "subscribe": topic, "startingOffsets": "earliest", **options}))


def _read_batch(reader: KafkaStreamReader, start: dict, end: dict) -> list[str]:
    rows = []
    for planned in reader.partitions(start, end):
        for batch in reader.read(planned):
            rows.extend(value.decode() for value in batch.column("value").to_pylist())
    return rows


def test_the_reader_warns_once_and_goes_on_from_the_new_beginning_when_told_to(broker, caplog):
    """The warning a lossy restart logs: one line naming topic, partition, the expected and found offsets."""
    topic = create_topic(broker.bootstrap, unique_topic_name("lost"), partitions=1)
    produce_records(broker.bootstrap, topic, ["new0", "new1"])
    key = offset_key(topic, 0)
    reader = _reader(broker.bootstrap, topic, failOnDataLoss="false")
    try:
        with caplog.at_level(logging.INFO, logger="streaming"):
            reset = reader.latestOffset({key: 10}, ReadAllAvailable())
            assert reset == {key: 0} and reader.partitions({key: 10}, reset) == []
            end = reader.latestOffset(reset, ReadAllAvailable())
        assert end == {key: 2}
        assert _read_batch(reader, reset, end) == ["new0", "new1"]
        assert data_loss_warnings(caplog) == [
            f"data loss: {topic} partition 0 now ends at offset 2 (earliest 0), below offset 10 where the query "
            "would continue: its offsets went backwards; failOnDataLoss=false: reading on from offset 0, its new "
            "beginning"]
    finally:
        reader.stop()


def test_a_topic_deleted_and_recreated_between_triggers_is_data_loss(broker, caplog):
    """Deleted while the query runs: the default stops at the next trigger; failOnDataLoss=false warns once,
    then reads the recreated topic from its beginning, even when it already holds more records than before.

    The reader's clients are closed between triggers (``stop``; the next call opens new ones): with tansu, a
    librdkafka client that knew the topic crashes the process (SIGSEGV in its metadata cache) when it learns
    of the deletion, so the long-lived one cannot be used here.
    """
    topic = create_topic(broker.bootstrap, unique_topic_name("recreated"), partitions=1)
    produce_records(broker.bootstrap, topic, [f"old{i}" for i in range(3)])
    key = offset_key(topic, 0)
    strict = _reader(broker.bootstrap, topic)
    lossy = _reader(broker.bootstrap, topic, failOnDataLoss="false")
    try:
        assert strict.latestOffset({key: 0}, ReadAllAvailable()) == {key: 3}
        assert lossy.latestOffset({key: 0}, ReadAllAvailable()) == {key: 3}
        strict.stop()
        lossy.stop()
        delete_topic(broker.bootstrap, topic)

        with pytest.raises(DataLossError, match=f"{topic} partition 0 no longer exists .* up to offset 3"):
            strict.latestOffset({key: 3}, ReadAllAvailable())
        with caplog.at_level(logging.INFO, logger="streaming"):
            assert lossy.latestOffset({key: 3}, ReadAllAvailable()) == {key: 3}
            lossy.stop()
            create_topic(broker.bootstrap, topic, partitions=1)
            produce_records(broker.bootstrap, topic, [f"new{i}" for i in range(5)])
            reset = lossy.latestOffset({key: 3}, ReadAllAvailable())
            assert reset == {key: 0}
            end = lossy.latestOffset(reset, ReadAllAvailable())
        assert _read_batch(lossy, reset, end) == [f"new{i}" for i in range(5)]
        assert len(data_loss_warnings(caplog)) == 1
    finally:
        strict.stop()
        lossy.stop()
