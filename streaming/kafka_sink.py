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
  consumers must tolerate duplicates (decisions and alerts carry stable ids for that). A failed task drops
  what its producer still holds, so nothing of it is delivered later, behind the retry's records.
* Brokers that go away: librdkafka retries each record for the producer's ``message.timeout.ms`` (option
  ``kafka.message.timeout.ms``; the placement job sets it from ``engine.kafka.unreachableTimeoutSeconds``).
  A :class:`streaming.kafka_health.BrokerWatch` per producer logs one WARNING when all brokers become
  unreachable and one INFO line when a record is acknowledged again; once they have been away for that long,
  the task fails with ``BrokerUnreachableError`` naming the brokers, the duration and the last error.
  librdkafka's own lines go to the ``streaming.librdkafka`` logger at DEBUG.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import pyarrow as pa
from confluent_kafka import KafkaError, KafkaException, Producer
from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage

from .kafka_health import UNREACHABLE_CODES, BrokerWatch, client_logging, log_in_spark_worker
from .kafka_options import KafkaSinkSettings, KafkaWriteError
from .shutdown import STOPPING
from .worker_gc import tune_worker_gc

logger = logging.getLogger(__name__)

MESSAGE_TIMEOUT = "message.timeout.ms"
MESSAGE_TIMEOUT_ALIAS = "delivery.timeout.ms"
MESSAGE_TIMEOUT_DEFAULT_MS = 300_000
"""librdkafka's default ``message.timeout.ms``: how long a record is retried before its delivery fails."""

PROBE_TIMEOUT_S = 5.0
"""How long a task that starts during an outage waits for the brokers' metadata before producing."""

FLUSH_SLICE_S = 1.0
"""The flush waits in slices this long, checking between them whether an outage has lasted too long."""

FLUSH_MARGIN_S = 10.0
"""How long the flush waits past ``message.timeout.ms``, for the last delivery reports to arrive."""


@dataclass(frozen=True)
class SinkClient:
    """A worker's producer for one configuration and the watch over its brokers."""

    producer: Producer
    watch: BrokerWatch
    message_timeout_s: float


# One client per configuration per Python worker process; Spark reuses workers across tasks and batches.
_CLIENTS: dict[tuple[tuple[str, str], ...], SinkClient] = {}


def message_timeout_ms(conf: Mapping[str, object]) -> int:
    """The producer's ``message.timeout.ms`` (or its alias ``delivery.timeout.ms``), librdkafka's default if unset
    or unreadable (librdkafka then refuses the configuration itself)."""
    raw = conf.get(MESSAGE_TIMEOUT, conf.get(MESSAGE_TIMEOUT_ALIAS, MESSAGE_TIMEOUT_DEFAULT_MS))
    try:
        return int(str(raw).strip())
    except ValueError:
        return MESSAGE_TIMEOUT_DEFAULT_MS


def cached_client(conf: Mapping[str, object]) -> SinkClient:
    """The worker's producer and broker watch for ``conf``, created on first use.

    The producer's ``error_cb`` feeds the watch: librdkafka's all-brokers-down error starts an outage, its
    failed connection attempts during one become the outage's last error.
    """
    cache_key = tuple(sorted((k, str(v)) for k, v in conf.items()))
    client = _CLIENTS.get(cache_key)
    if client is None:
        timeout_ms = message_timeout_ms(conf)
        watch = BrokerWatch(str(conf["bootstrap.servers"]), timeout_ms / 1000.0,
                            option=f"kafka.{MESSAGE_TIMEOUT}")

        def on_error(error: KafkaError) -> None:
            if error.code() == KafkaError._ALL_BROKERS_DOWN and not watch.is_down:
                watch.on_failure(error.str())   # starts the outage: logs, never raises
            elif error.code() in UNREACHABLE_CODES:
                watch.note(error.str())

        producer = Producer({**conf, **client_logging(), "error_cb": on_error})
        client = _CLIENTS[cache_key] = SinkClient(producer, watch, timeout_ms / 1000.0)
    return client


def _as_bytes(value: object) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    return bytes(value)


PRODUCER_LIMIT = "message.max.bytes"
PRODUCER_LIMIT_DEFAULT = 1_000_000
"""librdkafka's default ``message.max.bytes``: the largest record a producer sends unless configured."""


def _probe(client: SinkClient) -> None:
    """A task starts while its producer's brokers are marked unreachable: ask them for metadata, so an
    outage that ended is logged as ended, and one that lasts too long fails the task before it produces.

    Raises:
        BrokerUnreachableError: they still do not answer, and have not for ``message.timeout.ms``.
    """
    try:
        client.producer.list_topics(timeout=min(PROBE_TIMEOUT_S, client.message_timeout_s))
    except KafkaException as exc:
        client.watch.note(str(exc.args[0].str() if exc.args and isinstance(exc.args[0], KafkaError) else exc))
        client.watch.check()
    else:
        client.watch.on_success()


def _delivery_error(client: SinkClient, failures: list[tuple[str, KafkaError]], producer_limit: object) -> Exception:
    """The error for a task some of whose records were not delivered, from the first failure."""
    topic, err = failures[0]
    code = err.code()
    if code == KafkaError.MSG_SIZE_TOO_LARGE:
        return KafkaWriteError(f"{len(failures)} record(s) to topic {topic!r} were refused by the broker as "
                               f"larger than the topic's max.message.bytes; raise it or lower "
                               f"kafka.{PRODUCER_LIMIT} (now {producer_limit}) below it")
    timed_out = code == KafkaError._MSG_TIMED_OUT or code in UNREACHABLE_CODES
    if timed_out and client.watch.is_down:
        return client.watch.unreachable_error()
    if timed_out:
        return KafkaWriteError(f"{len(failures)} record(s) to topic {topic!r} were not acknowledged within "
                               f"{MESSAGE_TIMEOUT}={client.message_timeout_s * 1000:.0f} ({err.str()}) by the brokers "
                               f"{client.watch.bootstrap}; raise "
                               f"kafka.{MESSAGE_TIMEOUT} (engine.kafka.unreachableTimeoutSeconds) to wait longer")
    return KafkaWriteError(f"{len(failures)} record(s) could not be delivered, the first to topic "
                           f"{topic!r}: {err.str()}; check that the topic exists and accepts writes")


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
                ``flushTimeoutMs`` (at least ``message.timeout.ms``). The message names the topic.
            BrokerUnreachableError: no broker answered for ``message.timeout.ms``.
        """
        tune_worker_gc()
        log_in_spark_worker()
        conf = self._settings.producer_conf()
        client = cached_client(conf)
        try:
            return self._write(client, iterator, conf.get(PRODUCER_LIMIT, PRODUCER_LIMIT_DEFAULT))
        except BaseException:
            # Records this task still has queued would be delivered later, behind the retried task's own.
            client.producer.purge(in_queue=True, in_flight=True, blocking=False)
            client.producer.poll(0)
            raise

    def _write(self, client: SinkClient, iterator: Iterator[pa.RecordBatch], producer_limit: object
               ) -> KafkaCommitMessage:
        settings = self._settings
        producer, watch = client.producer, client.watch
        failures: list[tuple[str, KafkaError]] = []
        counts: dict[str, int] = {}

        def on_delivery(err: KafkaError | None, msg) -> None:
            if err is not None:
                failures.append((msg.topic(), err))
            else:
                watch.on_success()

        if watch.is_down:
            _probe(client)
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
                        watch.check()  # a queue that stays full may be an outage
                    except KafkaException as exc:  # rejected before sending, e.g. an unknown partition
                        if exc.args and exc.args[0].code() == KafkaError.MSG_SIZE_TOO_LARGE:
                            raise KafkaWriteError(_too_large(topic, kwargs, producer_limit)) from exc
                        raise KafkaWriteError(f"producing to topic {topic!r} failed: {exc}; check the topic "
                                              "and partition columns") from exc
                counts[topic] = counts.get(topic, 0) + 1
            producer.poll(0)
        self._flush(client, counts)
        if failures:
            raise _delivery_error(client, failures, producer_limit)
        return KafkaCommitMessage(records=tuple(sorted(counts.items())))

    def _flush(self, client: SinkClient, counts: Mapping[str, int]) -> None:
        """Wait until every record is acknowledged or has failed.

        The wait is ``flushTimeoutMs``, and at least ``message.timeout.ms`` (plus a margin): librdkafka decides
        within that whether a record is delivered. Between slices of the wait, an outage that has lasted
        ``message.timeout.ms`` ends it.

        Raises:
            BrokerUnreachableError: the brokers have been unreachable for ``message.timeout.ms``.
            KafkaWriteError: records were still unacknowledged at the end of the wait.
        """
        wait_s = max(self._settings.flush_timeout_ms / 1000.0, client.message_timeout_s + FLUSH_MARGIN_S)
        deadline = time.monotonic() + wait_s
        while remaining := client.producer.flush(min(FLUSH_SLICE_S, max(0.0, deadline - time.monotonic()))):
            client.watch.check()
            if time.monotonic() >= deadline:
                raise KafkaWriteError(f"{remaining} record(s) to {', '.join(sorted(counts))} were not acknowledged "
                                      f"within {wait_s:.0f} s (flushTimeoutMs={self._settings.flush_timeout_ms}, "
                                      f"{MESSAGE_TIMEOUT}={client.message_timeout_s * 1000:.0f}); "
                                      "is the broker reachable?")

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
