"""The placement-kafka source under broker faults: a broker that lost its data, a topic deleted and recreated.

Each test runs its own tansu broker (restarting it, or stopping the forwarder in front of it, must not
disturb other tests), its own topics and checkpoint, and waits for conditions with a deadline, never a sleep.
Reader-level tests drive :class:`KafkaStreamReader` in this process, where its log lines can be seen; the
query-level tests check what a Spark query does.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Iterator

import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql.streaming.datasource import ReadAllAvailable

from streaming.kafka_health import BrokerUnreachableError, BrokerWatch
from streaming.kafka_options import DataLossError, KafkaSourceSettings, offset_key
from streaming.kafka_source import KafkaStreamReader
from tests.kafka_broker import (
    TansuBroker,
    _free_port,
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


# -------------------------------------------------------------------------------------- broker outages


class Forwarder:
    """A TCP forwarder on 127.0.0.1 in front of the broker; :meth:`stop` cuts every connection (an outage),
    :meth:`start` accepts again on the same port."""

    def __init__(self, port: int, target_port: int) -> None:
        self.port, self._target = port, target_port
        self._server: socket.socket | None = None
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> Forwarder:
        server = socket.socket()
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", self.port))
        server.listen()
        self._server = server
        threading.Thread(target=self._accept, args=(server,), daemon=True).start()
        return self

    def _accept(self, server: socket.socket) -> None:
        while True:
            try:
                client, _ = server.accept()
                upstream = socket.create_connection(("127.0.0.1", self._target))
            except OSError:
                return  # stopped
            with self._lock:
                self._sockets += [client, upstream]
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass  # the other direction, or stop(), closed the connection
        finally:
            for sock in (source, sink):
                sock.close()

    def stop(self) -> None:
        if self._server is not None:
            try:
                self._server.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread; close() alone would not
            except OSError:
                pass  # not connected: nothing to wake on this platform
            self._server.close()
            self._server = None
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already closed by its pump
            sock.close()


@pytest.fixture
def forwarded() -> Iterator[Forwarder]:
    """A broker that clients reach only through a forwarder (it advertises the forwarder's port)."""
    port = _free_port()
    with TansuBroker(advertised_port=port) as own:
        forwarder = Forwarder(port, own.port).start()
        try:
            yield forwarder
        finally:
            forwarder.stop()


def wait_for(condition, what: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out after {timeout_s} s waiting for {what}"
        time.sleep(0.05)  # poll interval of the condition check


def outage_lines(caplog) -> list[tuple[int, str]]:
    return [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "streaming.kafka_health"]


def test_the_reader_logs_one_line_when_the_brokers_go_away_and_one_when_they_return(forwarded, caplog):
    """Regression: an outage was silent (only librdkafka's per-attempt noise) until a misleading failure."""
    topic = create_topic(forwarded.bootstrap, unique_topic_name("outage"), partitions=1)
    produce_records(forwarded.bootstrap, topic, ["a", "b"])
    key = offset_key(topic, 0)
    reader = _reader(forwarded.bootstrap, topic, **{"kafkaConsumer.pollTimeoutMs": "1000",
                                                    "unreachableTimeoutSeconds": "60"})
    answers: list = []
    try:
        with caplog.at_level(logging.INFO, logger="streaming"):
            assert reader.latestOffset({key: 0}, ReadAllAvailable()) == {key: 2}
            forwarded.stop()
            planning = threading.Thread(target=lambda: answers.append(reader.latestOffset({key: 2},
                                                                                          ReadAllAvailable())))
            planning.start()
            wait_for(lambda: outage_lines(caplog), "the unreachable warning")
            forwarded.start()
            planning.join(timeout=30)
            assert not planning.is_alive()
        assert answers == [{key: 2}]
        lines = outage_lines(caplog)
        assert [level for level, _ in lines] == [logging.WARNING, logging.INFO]
        assert lines[0][1].startswith(f"Kafka brokers {forwarded.bootstrap} unreachable (")
        assert lines[1][1].startswith(f"Kafka brokers {forwarded.bootstrap} reachable again after ")
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING and "librdkafka" in r.name]
    finally:
        reader.stop()


def _streaming_query(spark, bootstrap: str, topic: str, checkpoint, name: str, **options):
    reader = spark.readStream.format("placement-kafka").option("kafka.bootstrap.servers", bootstrap) \
        .option("subscribe", topic).option("startingOffsets", "earliest")
    for option, value in options.items():
        reader = reader.option(option, str(value))
    collector = Collector()
    query = reader.load().writeStream.foreachBatch(collector).option("checkpointLocation", str(checkpoint)) \
        .queryName(name).trigger(processingTime="200 milliseconds").start()
    return query, collector


def test_a_query_goes_on_after_an_outage_shorter_than_the_timeout(spark, forwarded, tmp_path):
    topic = create_topic(forwarded.bootstrap, unique_topic_name("outage"), partitions=1)
    produce_records(forwarded.bootstrap, topic, [f"r{i}" for i in range(5)])
    query, collector = _streaming_query(spark, forwarded.bootstrap, topic, tmp_path / "ckpt", "faults_short_outage",
                                        **{"kafkaConsumer.pollTimeoutMs": "1000", "unreachableTimeoutSeconds": "60"})
    try:
        wait_for(lambda: len(collector.rows) == 5, "the first records")
        forwarded.stop()
        # The outage itself: longer than a metadata call's wait (1 s here), well within the timeout.
        time.sleep(4)
        assert query.isActive
        forwarded.start()
        produce_records(forwarded.bootstrap, topic, [f"r{i}" for i in range(5, 10)])
        wait_for(lambda: len(collector.rows) == 10, "the records produced after the outage")
        assert values(collector.rows) == [f"r{i}" for i in range(10)]
    finally:
        query.stop()


def test_a_query_stops_naming_the_brokers_after_an_outage_longer_than_the_timeout(spark, forwarded, tmp_path):
    """Regression: the query failed after 5 minutes with "check that the topic exists"."""
    topic = create_topic(forwarded.bootstrap, unique_topic_name("outage"), partitions=1)
    produce_records(forwarded.bootstrap, topic, ["r0"])
    query, collector = _streaming_query(spark, forwarded.bootstrap, topic, tmp_path / "ckpt", "faults_long_outage",
                                        **{"kafkaConsumer.pollTimeoutMs": "1000", "unreachableTimeoutSeconds": "5"})
    try:
        wait_for(lambda: len(collector.rows) == 1, "the first record")
        forwarded.stop()
        with pytest.raises(StreamingQueryException) as failure:
            query.awaitTermination(HANG_GUARD_S)
    finally:
        query.stop()
    message = str(failure.value)
    assert BrokerUnreachableError.__name__ in message
    assert f"the Kafka brokers {forwarded.bootstrap} have been unreachable for " in message
    assert "engine.kafka.unreachableTimeoutSeconds" in message


def test_the_watch_warns_once_per_outage_and_raises_past_the_timeout(caplog):
    now = [0.0]
    watch = BrokerWatch("b1:9092,b2:9092", timeout_s=10, clock=lambda: now[0])
    with caplog.at_level(logging.INFO, logger="streaming.kafka_health"):
        watch.on_failure("Local: Broker transport failure")
        now[0] = 9.0
        watch.on_failure("Local: Broker transport failure")
        watch.on_success()
        watch.on_success()
        watch.on_failure("Local: Timed out")
        now[0] = 19.5
        with pytest.raises(BrokerUnreachableError, match=r"b1:9092,b2:9092 have been unreachable for 10 s "
                                                         r"\(last error: Local: Timed out\)"):
            watch.check()
    assert [level for level, _ in outage_lines(caplog)] == [logging.WARNING, logging.INFO, logging.WARNING]


@pytest.mark.parametrize(("loss", "timeout"), [("true", "300"), ("false", "7")])
def test_the_job_hands_its_data_loss_and_outage_settings_to_the_source(spark, loss, timeout):
    """`run` reads Kafka through `kafka_records`: the engine keys must reach the source's options."""
    from streaming.job import kafka_records
    from streaming.settings import engine_settings

    settings = engine_settings({"engine.kafka.bootstrapServers": "127.0.0.1:1", "engine.kafka.failOnDataLoss": loss,
                                "engine.kafka.unreachableTimeoutSeconds": timeout})
    plan = kafka_records(spark, settings)._jdf.queryExecution().logical().toString()
    assert f"failOnDataLoss={loss}" in plan
    assert f"unreachableTimeoutSeconds={timeout}" in plan
