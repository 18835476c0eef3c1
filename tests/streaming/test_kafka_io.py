"""The placement-kafka source and sink against a real broker (tansu, or PLACEMENT_TEST_KAFKA) and real Spark.

Every query uses its own topics and checkpoint (tmp_path), runs with availableNow or processAllAvailable (no
sleeps) and is stopped in try/finally.
"""

from __future__ import annotations

import threading
from collections import Counter, defaultdict

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, Producer
from confluent_kafka.admin import AdminClient
from pyspark.errors import StreamingQueryException
from pyspark.sql import functions as F
from pyspark.sql.streaming.datasource import ReadAllAvailable

from streaming.kafka_options import KafkaOptionError, KafkaSinkSettings, KafkaSourceSettings, offset_key
from streaming.kafka_source import KafkaStreamReader, ListOffsetsError, share_limit
from streaming.query_start import start_query
from streaming.schemas import KAFKA_SOURCE_ARROW_SCHEMA, KAFKA_SOURCE_DDL
from tests.kafka_broker import consume_all, create_topic, produce_records, unique_topic_name

# --------------------------------------------------------------------------------------------- helpers


class Collector:
    """foreachBatch sink that keeps each batch's rows (the function runs in the driver's Python process)."""

    def __init__(self) -> None:
        self.batches: list[list] = []

    def __call__(self, df, batch_id: int) -> None:
        self.batches.append(df.collect())

    @property
    def rows(self) -> list:
        return [row for batch in self.batches for row in batch]


def kafka_stream(spark, bootstrap: str, topic: str, **options):
    reader = (spark.readStream.format("placement-kafka").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic))
    for name, value in {"startingOffsets": "earliest", **options}.items():
        reader = reader.option(name, str(value))
    return reader.load()


# Guard against a hung query only (a healthy run takes seconds); never used to assert on speed.
HANG_GUARD_S = 300


def await_finished(query) -> None:
    """Wait for an availableNow query to end (re-raising its failure), then stop it."""
    try:
        assert query.awaitTermination(HANG_GUARD_S), f"query {query.name} still running after {HANG_GUARD_S} s"
    finally:
        query.stop()


def run_available_now(df, checkpoint, name: str) -> Collector:
    """Run ``df`` with Trigger.AvailableNow into a Collector and wait for it to finish."""
    collector = Collector()
    await_finished(start_query(lambda: df.writeStream.foreachBatch(collector)
                               .option("checkpointLocation", str(checkpoint))
                               .queryName(name).trigger(availableNow=True).start()))
    return collector


def keyed_values(count: int, start: int = 0) -> list[tuple[str, str]]:
    return [(f"k{i % 17}", f"v{i}") for i in range(start, start + count)]


def end_offsets(records) -> dict[int, int]:
    ends: dict[int, int] = defaultdict(int)
    for record in records:
        ends[record.partition] = max(ends[record.partition], record.offset + 1)
    return dict(ends)


def assert_partition_order(rows) -> None:
    """Within each partition, rows arrive in strictly increasing offset order, with no gaps."""
    by_partition = defaultdict(list)
    for row in rows:
        by_partition[row.partition].append(row.offset)
    for partition, offsets in by_partition.items():
        assert offsets == list(range(offsets[0], offsets[0] + len(offsets))), f"partition {partition}"


# ------------------------------------------------------------------------------------- no-broker units


def test_arrow_schema_is_what_spark_expects_for_the_declared_schema(spark):
    """read() yields Arrow batches; Spark rejects any whose schema differs from the declared one."""
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import StructType

    assert to_arrow_schema(StructType.fromDDL(KAFKA_SOURCE_DDL), timezone="UTC").equals(KAFKA_SOURCE_ARROW_SCHEMA)


def test_share_limit_splits_in_proportion_to_lag_and_sums_to_the_limit():
    shares = share_limit({"t:0": 900, "t:1": 90, "t:2": 10, "t:3": 0}, 100)
    assert shares == {"t:0": 90, "t:1": 9, "t:2": 1}
    assert sum(share_limit({"t:0": 5, "t:1": 5, "t:2": 5}, 7).values()) == 7
    assert share_limit({"t:0": 3, "t:1": 4}, 100) == {"t:0": 3, "t:1": 4}


@pytest.mark.parametrize(("options", "named"), [
    ({"subscribe": "a"}, "kafka.bootstrap.servers"),
    ({"kafka.bootstrap.servers": "h:1"}, "subscribe"),
    ({"kafka.bootstrap.servers": "h:1", "subscribe": "a", "startingOffsets": '{"b": {"0": 1}}'}, "'b'"),
    ({"kafka.bootstrap.servers": "h:1", "subscribe": "a", "startingOffsets": "first"}, "startingOffsets"),
    ({"kafka.bootstrap.servers": "h:1", "subscribe": "a", "maxoffsetspertrigger": "0"}, "maxOffsetsPerTrigger"),
    ({"kafka.bootstrap.servers": "h:1", "subscribe": "a", "endoffsetprobe": "guess"}, "endOffsetProbe"),
    ({"kafka.bootstrap.servers": "h:1", "subscribe": "a", "kafka.enable.auto.commit": "true"},
     "kafka.enable.auto.commit"),
])
def test_bad_source_options_raise_an_error_naming_the_option(options, named):
    with pytest.raises(KafkaOptionError, match=named):
        KafkaSourceSettings.from_options(options)


@pytest.mark.parametrize(("ddl", "options", "named"), [
    ("key string", {"topic": "t"}, "'value' column"),
    ("value int", {"topic": "t"}, "'value' has type int"),
    ("value string, headers array<string>", {"topic": "t"}, "'headers'"),
    ("value string", {}, "topic"),
])
def test_sink_rejects_unusable_input_columns_naming_them(spark, ddl, options, named):
    """Checked on the driver when the query starts (DataSource.streamWriter), before any record is written."""
    from pyspark.sql.types import StructType

    with pytest.raises(KafkaOptionError, match=named):
        KafkaSinkSettings.from_options({"kafka.bootstrap.servers": "h:1", **options}, StructType.fromDDL(ddl))


def test_option_names_are_matched_case_insensitively():
    settings = KafkaSourceSettings.from_options({"KAFKA.BOOTSTRAP.SERVERS": "h:1", "Subscribe": "a, b",
                                                 "maxoffsetspertrigger": "5", "kafka.client.id": "x"})
    assert (settings.bootstrap_servers, settings.topics, settings.max_offsets_per_trigger) == ("h:1", ("a", "b"), 5)
    assert settings.consumer_conf()["client.id"] == "x"


# ------------------------------------------------------------------------------------------ with Spark


def test_reads_each_record_once_in_order_and_resumes_from_checkpoint(spark, kafka_bootstrap, kafka_topic, tmp_path):
    topic = kafka_topic(partitions=3)
    produce_records(kafka_bootstrap, topic, keyed_values(600))
    checkpoint = tmp_path / "ckpt"

    first = run_available_now(kafka_stream(spark, kafka_bootstrap, topic), checkpoint, "kafka_io_first")

    produced = consume_all(kafka_bootstrap, topic)
    assert len({r.partition for r in produced}) == 3, "the test needs records in every partition"
    rows = first.rows
    assert Counter((r.partition, r.offset) for r in rows) == Counter((r.partition, r.offset) for r in produced)
    assert {(r.partition, r.offset): (r.key, r.value) for r in rows} == \
        {(r.partition, r.offset): (r.key, r.value) for r in produced}
    assert {r.topic for r in rows} == {topic} and all(r.timestamp is not None for r in rows)
    assert_partition_order(rows)

    produce_records(kafka_bootstrap, topic, keyed_values(150, start=600))
    second = run_available_now(kafka_stream(spark, kafka_bootstrap, topic), checkpoint, "kafka_io_second")

    first_ends = end_offsets(produced)
    new_rows = second.rows
    assert len(new_rows) == 150
    assert all(r.offset >= first_ends.get(r.partition, 0) for r in new_rows)
    assert sorted(r.value.decode() for r in new_rows) == sorted(v for _k, v in keyed_values(150, start=600))
    assert_partition_order(new_rows)


def test_max_offsets_per_trigger_splits_the_backlog_and_commit_group_reaches_the_end(spark, kafka_bootstrap,
                                                                                    kafka_topic, tmp_path):
    """One availableNow run over a 1000-record backlog with maxOffsetsPerTrigger=300 (two behaviours, one query,
    to keep the Spark tier fast): the batches hold 300, 300, 300 and 100 records, and afterwards the commitGroup
    offsets that lag tools read are the end of the data, not one batch behind."""
    topic = kafka_topic(partitions=3)
    produce_records(kafka_bootstrap, topic, keyed_values(1000))
    group = unique_topic_name("lag-group")

    result = run_available_now(
        kafka_stream(spark, kafka_bootstrap, topic, maxOffsetsPerTrigger=300, commitGroup=group),
        tmp_path / "ckpt", "kafka_io_limit")

    assert [len(batch) for batch in result.batches] == [300, 300, 300, 100]
    assert len({(r.partition, r.offset) for r in result.rows}) == 1000
    assert_partition_order(result.rows)
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    answer = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(timeout=30)
    committed = {tp.partition: tp.offset for tp in answer.topic_partitions if tp.topic == topic}
    assert committed == end_offsets(consume_all(kafka_bootstrap, topic))


def test_latest_skips_existing_records_and_topics_created_later_are_read_from_earliest(spark, kafka_bootstrap,
                                                                                      kafka_topic, tmp_path):
    """startingOffsets=latest starts at the end of existing topics; with failOnMissingTopic=false a subscribed topic
    created while the query runs is read from its first record."""
    existing, later = kafka_topic(partitions=3), unique_topic_name("later")
    produce_records(kafka_bootstrap, existing, keyed_values(200))
    collector = Collector()
    stream = kafka_stream(spark, kafka_bootstrap, f"{existing},{later}", startingOffsets="latest",
                          failOnMissingTopic="false")
    query = start_query(lambda: stream.writeStream.foreachBatch(collector)
                        .option("checkpointLocation", str(tmp_path / "ckpt")).queryName("kafka_io_latest").start())
    try:
        query.processAllAvailable()  # the start position (the end of `existing`) is fixed now
        produce_records(kafka_bootstrap, existing, keyed_values(40, start=200))
        create_topic(kafka_bootstrap, later, partitions=2)
        produce_records(kafka_bootstrap, later, keyed_values(30, start=1000))
        query.processAllAvailable()
    finally:
        query.stop()

    read = sorted((r.topic, r.value.decode()) for r in collector.rows)
    assert read == sorted([(existing, v) for _k, v in keyed_values(40, start=200)]
                          + [(later, v) for _k, v in keyed_values(30, start=1000)])


def test_sink_writes_key_value_and_headers_that_a_plain_consumer_reads(spark, kafka_bootstrap, kafka_topic,
                                                                       tmp_path):
    source, out, routed = kafka_topic(partitions=3), kafka_topic(partitions=1), kafka_topic(partitions=1)
    produce_records(kafka_bootstrap, source, keyed_values(60))
    headers = F.array(
        F.struct(F.lit("ce_specversion").alias("key"), F.lit("1.0").cast("binary").alias("value")),
        F.struct(F.lit("ce_id").alias("key"), F.col("value").alias("value")),
    )
    number = F.regexp_extract(F.col("value").cast("string"), r"v(\d+)", 1).cast("int")
    outputs = kafka_stream(spark, kafka_bootstrap, source).select(
        F.col("key").cast("string").alias("key"),          # string key
        F.upper(F.col("value").cast("string")).alias("value"),  # string value
        F.when(number % 10 == 0, F.lit(routed)).alias("topic"),  # null -> the topic option
        headers.alias("headers"),
    )
    query = start_query(lambda: outputs.writeStream.format("placement-kafka")
                        .option("kafka.bootstrap.servers", kafka_bootstrap)
                        .option("topic", out).option("checkpointLocation", str(tmp_path / "ckpt"))
                        .queryName("kafka_io_sink").trigger(availableNow=True).start())
    await_finished(query)

    written = consume_all(kafka_bootstrap, out) + consume_all(kafka_bootstrap, routed)
    expected = {f"V{i}": f"k{i % 17}" for i in range(60)}
    assert Counter(r.value.decode() for r in written) == Counter(expected.keys()), "each row written once"
    for record in written:
        number = int(record.value.decode()[1:])
        assert record.topic == (routed if number % 10 == 0 else out)
        assert record.key == expected[record.value.decode()].encode()
        assert record.headers == (("ce_specversion", b"1.0"), ("ce_id", f"v{number}".encode()))


def test_missing_topic_fails_at_start_with_a_typed_error(spark, kafka_bootstrap, tmp_path):
    missing = unique_topic_name("missing")
    query = start_query(lambda: kafka_stream(spark, kafka_bootstrap, missing).writeStream.foreachBatch(Collector())
                        .option("checkpointLocation", str(tmp_path / "ckpt")).queryName("kafka_io_missing")
                        .trigger(availableNow=True).start())
    with pytest.raises(StreamingQueryException) as failure:
        await_finished(query)
    assert "MissingTopicError" in str(failure.value) and missing in str(failure.value)


def test_sink_delivery_failure_fails_the_batch_with_an_error_naming_the_topic(spark, kafka_bootstrap, kafka_topic,
                                                                              tmp_path):
    source, out = kafka_topic(partitions=1), kafka_topic(partitions=1)
    produce_records(kafka_bootstrap, source, ["a", "b"])
    to_missing_partition = kafka_stream(spark, kafka_bootstrap, source).select(
        "value", F.lit(7).alias("partition"))  # `out` has only partition 0
    query = start_query(lambda: to_missing_partition.writeStream.format("placement-kafka")
                        .option("kafka.bootstrap.servers", kafka_bootstrap).option("topic", out)
                        .option("flushTimeoutMs", "20000").option("checkpointLocation", str(tmp_path / "ckpt"))
                        .queryName("kafka_io_bad_partition").trigger(availableNow=True).start())
    with pytest.raises(StreamingQueryException) as failure:
        await_finished(query)
    assert "KafkaWriteError" in str(failure.value) and out in str(failure.value)


def test_planned_ends_are_readable_while_a_producer_appends_and_reach_the_log_end_once_it_stops(kafka_bootstrap,
                                                                                               kafka_topic):
    """The driver plans end offsets while records keep arriving (the end-offset probe reads each partition
    up to the high watermark of its first fetch, not on to end-of-partition): every planned range reads in
    full, in order, and the plan after the last write reaches the log end, the last batch's tail included."""
    topic = kafka_topic(partitions=2)
    reader = KafkaStreamReader(KafkaSourceSettings.from_options(
        {"kafka.bootstrap.servers": kafka_bootstrap, "subscribe": topic, "startingOffsets": "earliest"}))
    delivered: Counter = Counter()
    finished = threading.Event()

    def produce() -> None:
        def acknowledged(err, msg) -> None:
            assert err is None, err
            delivered[msg.partition()] += 1

        producer = Producer({"bootstrap.servers": kafka_bootstrap, "linger.ms": 5})
        try:
            for i in range(20_000):
                producer.produce(topic, key=f"k{i % 17}".encode(), value=f"v{i}".encode(), on_delivery=acknowledged)
                if i % 200 == 0:
                    producer.poll(0)
            assert producer.flush(30) == 0
        finally:
            finished.set()

    writer = threading.Thread(target=produce, daemon=True)
    start = reader.initialOffset()
    ranges = []
    try:
        writer.start()
        while not finished.is_set():
            end = reader.latestOffset(start, ReadAllAvailable())
            ranges += reader.partitions(start, end)
            start = end
        writer.join()
        end = reader.latestOffset(start, ReadAllAvailable())
        ranges += reader.partitions(start, end)
        offsets = defaultdict(list)
        for planned in ranges:
            for batch in reader.read(planned):
                offsets[planned.partition] += batch.column("offset").to_pylist()
    finally:
        reader.stop()
    assert len(ranges) > 2, "the producer should still have been writing while batches were planned"
    assert end == {offset_key(topic, p): n for p, n in delivered.items()}
    assert {p: list(o) for p, o in offsets.items()} == {p: list(range(n)) for p, n in delivered.items()}


def _list_reader(bootstrap: str, topic: str) -> KafkaStreamReader:
    return KafkaStreamReader(KafkaSourceSettings.from_options(
        {"kafka.bootstrap.servers": bootstrap, "subscribe": topic, "startingOffsets": "earliest",
         "endOffsetProbe": "list"}))


def test_list_probe_on_a_broker_whose_list_offsets_is_wrong_stops_before_reading_a_partial_view(kafka_bootstrap,
                                                                                               kafka_topic):
    """tansu lists a partition's end as its last record batch's base offset + 1: 100 records in one batch are
    listed as 1. Trusting that would read one record and wait there forever; the reader stops instead, naming
    the partition and the fix, before it plans anything."""
    topic = kafka_topic(partitions=2)
    produce_records(kafka_bootstrap, topic, [f"v{i}" for i in range(100)], partition=1)
    reader = _list_reader(kafka_bootstrap, topic)
    try:
        start = reader.initialOffset()
        with pytest.raises(ListOffsetsError) as failure:
            reader.latestOffset(start, ReadAllAvailable())
    finally:
        reader.stop()
    message = str(failure.value)
    assert failure.value.stalled == ((offset_key(topic, 1), 1, 1, 100),)
    assert f"{topic}:1" in message and "endOffsetProbe=fetch" in message and "engine.kafka.endOffsetProbe" in message


def test_list_probe_on_correct_list_offsets_reads_to_the_end_without_a_false_alarm(kafka_bootstrap, kafka_topic):
    """Records sent one batch at a time are listed right even by tansu: the checks find nothing past the ends,
    while the query is behind, once it has caught up, and after more records arrive."""
    topic = kafka_topic(partitions=1)
    for i in range(3):
        produce_records(kafka_bootstrap, topic, [f"v{i}"], partition=0)
    reader = _list_reader(kafka_bootstrap, topic)
    key = offset_key(topic, 0)
    try:
        start = reader.initialOffset()
        end = reader.latestOffset(start, ReadAllAvailable())
        assert end == {key: 3}
        assert reader.latestOffset(end, ReadAllAvailable()) == {key: 3}   # caught up: the end is checked
        produce_records(kafka_bootstrap, topic, ["v3"], partition=0)
        assert reader.latestOffset(end, ReadAllAvailable()) == {key: 4}
    finally:
        reader.stop()
