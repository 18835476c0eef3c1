"""The placement-kafka sink while its brokers are away: one line when they go, one when they return, every
record delivered once after a short outage, and a clear error naming the brokers after a long one.

The writer runs in this process (as it runs in a Spark Python worker), so its log lines can be seen. Each test
has its own tansu broker behind a TCP forwarder (:class:`tests.streaming.test_kafka_faults.Forwarder`) that
the test stops and starts; conditions are polled with a deadline, never slept for.
"""

from __future__ import annotations

import logging
import threading

import pyarrow as pa
import pytest
from pyspark.sql.types import StringType, StructField, StructType

from streaming.kafka_health import BrokerUnreachableError
from streaming.kafka_options import KafkaSinkSettings
from streaming.kafka_sink import KafkaCommitMessage, KafkaStreamWriter, cached_client
from tests.kafka_broker import consume_all, create_topic, external_bootstrap, unique_topic_name
from tests.streaming.test_kafka_faults import forwarded, outage_lines, wait_for  # noqa: F401 - a fixture

pytestmark = pytest.mark.skipif(external_bootstrap() is not None,
                                reason="cuts off its own tansu broker; an external one cannot be")

SCHEMA = StructType([StructField("value", StringType())])


def _writer(bootstrap: str, topic: str, message_timeout_ms: int) -> KafkaStreamWriter:
    return KafkaStreamWriter(KafkaSinkSettings.from_options(
        {"kafka.bootstrap.servers": bootstrap, "topic": topic, "kafka.message.timeout.ms": str(message_timeout_ms)},
        SCHEMA))


def _rows(values: list[str]) -> list[pa.RecordBatch]:
    return [pa.record_batch({"value": pa.array(values, pa.string())})]


def _values(bootstrap: str, topic: str) -> list[str]:
    return [record.value.decode() for record in consume_all(bootstrap, topic)]


def _librdkafka_warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and "librdkafka" in r.name]


def test_a_short_outage_delays_the_task_and_every_record_arrives_once(forwarded, caplog):  # noqa: F811 - the fixture
    """Regression: the sink said nothing of its own while the brokers were away."""
    topic = create_topic(forwarded.bootstrap, unique_topic_name("sink-outage"), partitions=1)
    writer = _writer(forwarded.bootstrap, topic, message_timeout_ms=60_000)
    before = [f"r{i}" for i in range(5)]
    during = [f"r{i}" for i in range(5, 25)]
    outcome: list = []

    def write_during_outage() -> None:
        try:
            outcome.append(writer.write(iter(_rows(during))))
        except Exception as exc:  # noqa: BLE001 - handed to the test thread
            outcome.append(exc)

    with caplog.at_level(logging.INFO, logger="streaming"):
        assert writer.write(iter(_rows(before))) == KafkaCommitMessage(records=((topic, 5),))
        forwarded.stop()
        task = threading.Thread(target=write_during_outage)
        task.start()
        wait_for(lambda: outage_lines(caplog) or outcome, "the unreachable warning")
        assert task.is_alive(), f"the task ended during the outage: {outcome}"
        forwarded.start()
        task.join(timeout=60)
        assert not task.is_alive(), "the task did not finish after the brokers returned"

    assert outcome == [KafkaCommitMessage(records=((topic, 20),))]
    assert _values(forwarded.bootstrap, topic) == before + during
    lines = outage_lines(caplog)
    assert [level for level, _ in lines] == [logging.WARNING, logging.INFO]
    assert lines[0][1].startswith(f"Kafka brokers {forwarded.bootstrap} unreachable (")
    assert lines[1][1].startswith(f"Kafka brokers {forwarded.bootstrap} reachable again after ")
    assert not _librdkafka_warnings(caplog)


def test_an_outage_longer_than_the_message_timeout_fails_the_task_naming_the_brokers(forwarded, caplog):  # noqa: F811 - the fixture
    """Regression: the sink failed after 5 minutes with "check that the topic exists". The failed task's
    records are dropped from the producer; the next task, once the brokers are back, writes and logs it."""
    topic = create_topic(forwarded.bootstrap, unique_topic_name("sink-outage"), partitions=1)
    writer = _writer(forwarded.bootstrap, topic, message_timeout_ms=3_000)
    with caplog.at_level(logging.INFO, logger="streaming"):
        writer.write(iter(_rows(["r0"])))
        forwarded.stop()
        with pytest.raises(BrokerUnreachableError) as failure:
            writer.write(iter(_rows(["lost1", "lost2"])))
        message = str(failure.value)
        assert f"the Kafka brokers {forwarded.bootstrap} have been unreachable for " in message
        assert "(last error: " in message and "kafka.message.timeout.ms" in message
        assert "engine.kafka.unreachableTimeoutSeconds" in message
        assert "check that the topic exists" not in message
        producer = cached_client(writer.settings.producer_conf()).producer
        assert len(producer) == 0, "the failed task's records must not be delivered later"

        forwarded.start()
        assert writer.write(iter(_rows(["r1"]))) == KafkaCommitMessage(records=((topic, 1),))

    assert _values(forwarded.bootstrap, topic) == ["r0", "r1"]
    assert [level for level, _ in outage_lines(caplog)] == [logging.WARNING, logging.INFO]
    assert not _librdkafka_warnings(caplog)


def test_the_job_gives_the_sink_the_engine_outage_timeout_and_the_users_client_keys_win():
    from streaming.job import sink_options
    from streaming.settings import engine_settings

    base = {"engine.kafka.bootstrapServers": "127.0.0.1:1", "engine.kafka.unreachableTimeoutSeconds": "42"}
    assert sink_options(engine_settings(base))["kafka.message.timeout.ms"] == "42000"
    mine = sink_options(engine_settings({**base, "engine.kafka.client.message.timeout.ms": "5000"}))
    assert mine["kafka.message.timeout.ms"] == "5000"
    assert mine["kafka.bootstrap.servers"] == "127.0.0.1:1"
