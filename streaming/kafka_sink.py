"""Kafka as a PySpark streaming sink (``df.writeStream.format("placement-kafka")``), append mode only.

The stream writer of :class:`streaming.kafka_source.KafkaDataSource` (spec/spark-kafka-facts.md §3, Appendix A);
its options are parsed by :class:`streaming.kafka_options.KafkaSinkSettings`:

* Input columns: ``value`` (string or binary, required), ``key`` (string or binary), ``topic`` (string),
  ``partition`` (int) and ``headers`` (``array<struct<key:string,value:binary>>``, e.g. CloudEvents binary
  mode). Other columns are ignored, as Spark's own Kafka sink does. A row's topic is its ``topic`` column when
  that is not null, else the ``topic`` option.
* Each Python worker process keeps one confluent-kafka Producer per configuration (creating one is slow,
  facts §3) and flushes it at the end of every ``write()``, so a task succeeds only once all its
  records are acknowledged. A failed delivery fails the task, and Spark retries it.
* A record larger than the producer's ``message.max.bytes`` (option ``kafka.message.max.bytes``, default
  1,000,000) or the topic's ``max.message.bytes`` fails the task with an error naming its size and both
  limits. The placement job cuts its dead letters to fit (``streaming.output_limits``), so only an
  oversized decision or alert can meet it.
* Delivery is at-least-once: a retried task or a replayed micro-batch produces its records again, so
  consumers must tolerate duplicates (decisions and alerts carry stable ids for that).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import pyarrow as pa
from confluent_kafka import KafkaError, KafkaException, Producer
from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage

from .kafka_options import KafkaSinkSettings, KafkaWriteError
from .shutdown import STOPPING
from .worker_gc import tune_worker_gc

logger = logging.getLogger(__name__)

# One Producer per configuration per Python worker process; Spark reuses workers across tasks and batches.
_PRODUCERS: dict[tuple[tuple[str, str], ...], Producer] = {}


def cached_producer(conf: Mapping[str, object]) -> Producer:
    """The worker's Producer for ``conf``, created on first use."""
    cache_key = tuple(sorted((k, str(v)) for k, v in conf.items()))
    producer = _PRODUCERS.get(cache_key)
    if producer is None:
        producer = _PRODUCERS[cache_key] = Producer(dict(conf))
    return producer


def _as_bytes(value: object) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    return bytes(value)


PRODUCER_LIMIT = "message.max.bytes"
PRODUCER_LIMIT_DEFAULT = 1_000_000
"""librdkafka's default ``message.max.bytes``: the largest record a producer sends unless configured."""


def _too_large(topic: str, kwargs: Mapping[str, object], limit: object) -> str:
    size = sum(len(kwargs.get(part) or b"") for part in ("key", "value"))
    return (f"a record of {size} bytes (key and value) to topic {topic!r} is larger than the producer's "
            f"{PRODUCER_LIMIT}={limit}; raise the kafka.{PRODUCER_LIMIT} option and the topic's max.message.bytes "
            "(the placement job: engine.kafka.client.message.max.bytes)")


@dataclass(frozen=True)
class KafkaCommitMessage(WriterCommitMessage):
    """What one task wrote: records produced per topic."""

    records: tuple[tuple[str, int], ...]


class KafkaStreamWriter(DataSourceStreamArrowWriter):
    """Writes each task's rows to Kafka and returns once every record is acknowledged."""

    def __init__(self, settings: KafkaSinkSettings):
        self._settings = settings

    @property
    def settings(self) -> KafkaSinkSettings:
        return self._settings

    def write(self, iterator: Iterator[pa.RecordBatch]) -> KafkaCommitMessage:
        """Produce the rows of one task (executor, once per task), then flush.

        Raises:
            KafkaWriteError: a row has no topic, a delivery failed, or the flush did not finish in
                ``flushTimeoutMs``. The message names the topic.
        """
        tune_worker_gc()
        settings = self._settings
        conf = settings.producer_conf()
        producer = cached_producer(conf)
        producer_limit = conf.get(PRODUCER_LIMIT, PRODUCER_LIMIT_DEFAULT)
        failures: list[tuple[str, KafkaError]] = []
        counts: dict[str, int] = {}

        def on_delivery(err: KafkaError | None, msg) -> None:
            if err is not None:
                failures.append((msg.topic(), err))

        for batch in iterator:
            data = {name: batch.column(name).to_pylist() for name in settings.columns}
            values = data["value"]
            keys = data.get("key")
            topics = data.get("topic")
            partitions = data.get("partition")
            headers = data.get("headers")
            for i, value in enumerate(values):
                topic = (topics[i] if topics is not None else None) or settings.topic
                if topic is None:
                    raise KafkaWriteError("a row has a null 'topic' and the sink has no topic option; set "
                                          "option('topic', ...) or fill the column")
                kwargs = {"value": _as_bytes(value), "on_delivery": on_delivery}
                if keys is not None and keys[i] is not None:
                    kwargs["key"] = _as_bytes(keys[i])
                if partitions is not None and partitions[i] is not None:
                    kwargs["partition"] = partitions[i]
                if headers is not None and headers[i]:
                    kwargs["headers"] = [(h["key"], h["value"]) for h in headers[i]]
                while True:
                    try:
                        producer.produce(topic, **kwargs)
                        break
                    except BufferError:  # local queue full: serve delivery reports, then retry
                        producer.poll(0.1)
                    except KafkaException as exc:  # rejected before sending, e.g. an unknown partition
                        if exc.args and exc.args[0].code() == KafkaError.MSG_SIZE_TOO_LARGE:
                            raise KafkaWriteError(_too_large(topic, kwargs, producer_limit)) from exc
                        raise KafkaWriteError(f"producing to topic {topic!r} failed: {exc}; check the topic "
                                              "and partition columns") from exc
                counts[topic] = counts.get(topic, 0) + 1
            producer.poll(0)
        remaining = producer.flush(settings.flush_timeout_ms / 1000.0)
        if remaining:
            raise KafkaWriteError(f"{remaining} record(s) to {', '.join(sorted(counts))} were not acknowledged "
                                  f"within flushTimeoutMs={settings.flush_timeout_ms}; is the broker reachable?")
        if failures:
            topic, err = failures[0]
            if err.code() == KafkaError.MSG_SIZE_TOO_LARGE:
                raise KafkaWriteError(f"{len(failures)} record(s) to topic {topic!r} were refused by the broker as "
                                      f"larger than the topic's max.message.bytes; raise it or lower "
                                      f"kafka.{PRODUCER_LIMIT} (now {producer_limit}) below it")
            raise KafkaWriteError(f"{len(failures)} record(s) could not be delivered, the first to topic "
                                  f"{topic!r}: {err.str()}; check that the topic exists and accepts writes")
        return KafkaCommitMessage(records=tuple(sorted(counts.items())))

    def commit(self, messages, batchId: int) -> None:
        """All tasks of batch ``batchId`` succeeded (driver). Records are already in Kafka; nothing to do."""
        total = sum(n for m in messages if m is not None for _t, n in m.records)
        logger.debug("placement-kafka sink: batch %d wrote %d record(s)", batchId, total)

    def abort(self, messages, batchId: int) -> None:
        """Some task of ``batchId`` failed (driver). Records already sent stay in Kafka (at-least-once)."""
        if STOPPING.is_set():
            logger.info("placement-kafka sink: batch %d stopped with the job; records written by its finished tasks "
                        "remain in Kafka and are written again when the job restarts", batchId)
            return
        logger.warning("placement-kafka sink: batch %d aborted; records written by its successful tasks remain in "
                       "Kafka and will be written again when the batch is retried", batchId)
