"""Kafka as a PySpark streaming source (``format("placement-kafka")``), built on confluent-kafka.

Spark's own ``format("kafka")`` needs the spark-sql-kafka jar, which this project cannot ship
(spec/spark-kafka-facts.md §3), so this module implements the Python Data Source API instead:

* :class:`KafkaDataSource` is the data source (short name ``placement-kafka``). Its reader is here, its stream
  writer in :mod:`streaming.kafka_sink`; both take their options parsed by :mod:`streaming.kafka_options`.
* :class:`KafkaStreamReader` plans micro-batches on the driver and reads them on the executors. Offsets are JSON
  objects of *next* offsets, ``{"topic:partition": next_offset}`` (facts Appendix A). Each planned range
  ``[start, end)`` of one Kafka partition becomes one Spark input partition; :meth:`KafkaStreamReader.read` is
  static and stateless, so Spark can re-read a batch from its offset log after a crash and get the same rows.

tansu quirk (facts §4 quirk 1): ListOffsets reports "base offset of the last record batch + 1" as the high
watermark. With ``endOffsetProbe=fetch`` (default) the driver fetches from that offset and takes the end from the
fetch response (end-of-partition), which is correct on tansu and on Apache Kafka; ``endOffsetProbe=list`` trusts
ListOffsets (fine for real Kafka, and cheaper). A ``list`` probe on a broker whose ListOffsets is wrong would stop
short of the records silently, so the reader checks what it is told (:meth:`KafkaStreamReader._check_listed_ends`)
and stops with :class:`ListOffsetsError` when a fetch finds records past a listed end.

Output schema: ``streaming.schemas.KAFKA_SOURCE_DDL``, delivered as ``KAFKA_SOURCE_ARROW_SCHEMA`` batches.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass

import pyarrow as pa
from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, Consumer, KafkaError, KafkaException, TopicPartition
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from .kafka_health import UNREACHABLE_CODES, BrokerWatch, client_logging, log_in_spark_worker
from .kafka_options import (
    EARLIEST,
    LATEST,
    DataLossError,
    KafkaConnectorError,
    KafkaOptionError,
    KafkaReadError,
    KafkaSinkSettings,
    KafkaSourceSettings,
    LostRange,
    MissingTopicError,
    offset_key,
    parse_offset_key,
)
from .kafka_sink import KafkaStreamWriter
from .schemas import KAFKA_SOURCE_ARROW_SCHEMA, KAFKA_SOURCE_DDL
from .worker_gc import tune_worker_gc

logger = logging.getLogger(__name__)

SHORT_NAME = "placement-kafka"

# Rows per Arrow RecordBatch handed to Spark; matches spark.sql.execution.arrow.maxRecordsPerBatch's default.
_ROWS_PER_ARROW_BATCH = 10_000
# consume() blocks until it has num_messages or times out (facts §3), so never ask for more than are left in the
# range; 1000 per call is the fastest size (facts §5d).
_MAX_CONSUME_CHUNK = 1_000
_CONSUME_WAIT_S = 0.5
# How long one driver metadata call waits for an answer before it counts as unanswered and is retried.
_BROKER_ATTEMPT_S = 5.0
# endOffsetProbe=list: a partition's new listed end is checked at most this often, unless the query has read up to it.
_LIST_CHECK_INTERVAL_S = 10.0


class ListOffsetsError(KafkaReadError):
    """``endOffsetProbe=list``: the broker's ListOffsets names an end before records a fetch returns.

    Reading on would stop short of those records for good, and the engine would decide on a partial view.

    Args:
        stalled: ``(partition key, listed end, offset of a record found at or past it, the fetch's end)``.
        bootstrap: the brokers asked.
    """

    def __init__(self, stalled: tuple[tuple[str, int, int, int], ...], bootstrap: str):
        self.stalled = stalled
        where = "; ".join(f"{key}: ListOffsets says the partition ends at offset {listed}, but a fetch from there "
                          f"returned offset {found} (the fetch reports the end at {fetched})"
                          for key, listed, found, fetched in stalled)
        super().__init__(
            f"endOffsetProbe=list cannot be used with the brokers {bootstrap}: their ListOffsets answer is wrong "
            f"({where}); the query would stop reading short of these records. Set endOffsetProbe=fetch "
            "(engine.kafka.endOffsetProbe=fetch, the default) and restart: the query goes on from its checkpoint"
        )


# ----------------------------------------------------------------------------------------------- planning


def share_limit(lags: Mapping[str, int], limit: int) -> dict[str, int]:
    """Split ``limit`` records across partitions in proportion to their lag (what the Spark connector does).

    Every partition gets ``floor(limit * lag / total)``; the remainder goes one each to the largest fractional
    parts, ties broken by key, so the result is deterministic and sums to ``min(limit, total)``.
    """
    total = sum(lags.values())
    if total <= limit:
        return dict(lags)
    keys = sorted(k for k, lag in lags.items() if lag > 0)
    shares = {k: lags[k] * limit // total for k in keys}
    remainder = limit - sum(shares.values())
    for k in sorted(keys, key=lambda k: (-(lags[k] * limit % total), k))[:remainder]:
        shares[k] += 1
    return shares


@dataclass(frozen=True)
class KafkaInputPartition(InputPartition):
    """One Spark task: records ``[start, end)`` of one Kafka partition."""

    topic: str
    partition: int
    start: int
    end: int


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch reader for the subscribed topics.

    Driver side (one long-lived Python process per query): :meth:`initialOffset`, :meth:`latestOffset`,
    :meth:`partitions`, :meth:`commit` and :meth:`stop` share one lazily created metadata consumer (never
    pickled). Executor side: :meth:`read` creates its own consumer per planned range.
    """

    def __init__(self, settings: KafkaSourceSettings):
        self._settings = settings
        self._init_driver_state()

    def _init_driver_state(self) -> None:
        log_in_spark_worker()
        self._admin: Consumer | None = None
        self._committer: Consumer | None = None
        self._target: dict[str, int] | None = None  # Trigger.AvailableNow end, fixed when the query starts
        self._probe_cache: dict[str, tuple[int, int]] = {}  # key -> (listed high watermark, probed end)
        self._last_available: dict[str, int] | None = None
        self._last_committed: dict[str, int] = {}
        self._vanished: set[str] = set()  # partitions read before, gone now, already warned about
        self._resets: dict[str, int] = {}  # partitions the planned batch moves to a new beginning, unread
        self._list_checked: dict[str, tuple[int, float]] = {}  # endOffsetProbe=list: key -> (listed end, when)
        self._watch = BrokerWatch(self._settings.bootstrap_servers, self._settings.unreachable_timeout_s)

    # Only the settings travel to executors (STYLE R10); clients are process-local.
    def __getstate__(self) -> dict:
        return {"settings": self._settings}

    def __setstate__(self, state: dict) -> None:
        self._settings = state["settings"]
        self._init_driver_state()

    @property
    def settings(self) -> KafkaSourceSettings:
        return self._settings

    # ---------------------------------------------------------------------------- driver: broker access

    def _metadata_consumer(self) -> Consumer:
        if self._admin is None:
            # fetch.wait.max.ms is small because the fetch probe waits for end-of-partition, which needs an
            # (empty) fetch response; tansu holds empty fetches for the whole wait.
            self._admin = Consumer(self._settings.consumer_conf(**{"fetch.wait.max.ms": 10}, **client_logging()))
        return self._admin

    def _ask_broker(self, call):  # noqa: ANN001 - call(timeout_s) -> any broker answer
        """``call(timeout_s)``, retried while no broker answers (driver).

        The first unanswered call logs a WARNING, the first answer after it an INFO line (:class:`BrokerWatch`).

        Raises:
            BrokerUnreachableError: no broker answered for ``unreachableTimeoutSeconds``.
            KafkaException: the broker answered with an error.
        """
        while True:
            try:
                answer = call(min(self._timeout_s, _BROKER_ATTEMPT_S))
            except KafkaException as exc:
                error = exc.args[0]
                if not isinstance(error, KafkaError) or error.code() not in UNREACHABLE_CODES:
                    raise
                self._watch.on_failure(error.str())
                self._probe_cache.clear()  # the broker that answers next may hold other data
                continue
            self._watch.on_success()
            return answer

    @property
    def _timeout_s(self) -> float:
        return self._settings.poll_timeout_ms / 1000.0

    def _discover(self, reading: Collection[str] = ()) -> list[tuple[str, int]]:
        """Partitions of the subscribed topics that exist now, sorted.

        Args:
            reading: topics the query has offsets for; one of them missing is data loss, which the caller
                checks (:meth:`_check_offsets`), not a missing topic.

        Raises:
            MissingTopicError: a subscribed topic is absent and failOnMissingTopic is true.
        """
        try:
            metadata = self._ask_broker(lambda timeout_s: self._metadata_consumer().list_topics(timeout=timeout_s))
        except KafkaException as exc:
            raise KafkaReadError(f"could not read topic metadata from {self._settings.bootstrap_servers} within "
                                 f"{self._timeout_s} s: {exc}; check kafka.bootstrap.servers and that the broker "
                                 "is up") from exc
        found = []
        missing = []
        for topic in self._settings.topics:
            meta = metadata.topics.get(topic)
            if meta is None or meta.error is not None or not meta.partitions:
                missing.append(topic)
                continue
            found.extend((topic, p) for p in meta.partitions)
        missing = [topic for topic in missing if topic not in reading]
        if missing and self._settings.fail_on_missing_topic:
            raise MissingTopicError(tuple(missing), self._settings.bootstrap_servers)
        return sorted(found)

    def _watermarks(self, partitions: list[tuple[str, int]]) -> dict[str, tuple[int, int]]:
        consumer = self._metadata_consumer()
        out = {}
        for topic, partition in partitions:
            tp = TopicPartition(topic, partition)
            try:
                low, high = self._ask_broker(lambda timeout_s, tp=tp:
                                             consumer.get_watermark_offsets(tp, timeout=timeout_s, cached=False))
            except KafkaException as exc:
                raise KafkaReadError(f"could not list offsets of {topic} partition {partition}: {exc}") from exc
            out[offset_key(topic, partition)] = (low, high)
        return out

    def _available(self, partitions: list[tuple[str, int]]) -> dict[str, tuple[int, int]]:
        """``key -> (earliest, end)`` for each partition, end being the offset after the last record."""
        marks = self._watermarks(partitions)
        if self._settings.end_offset_probe == "list":
            return marks
        # A partition that vanished may come back recreated with the same listed value and fewer records.
        self._probe_cache = {key: cached for key, cached in self._probe_cache.items() if key in marks}
        result = {}
        to_probe = {}
        for key, (low, listed) in marks.items():
            cached = self._probe_cache.get(key)
            if listed <= low:
                result[key] = (low, listed)
            elif cached is not None and cached[0] == listed:
                # Any newly appended batch moves the listed value, so an unchanged one means an unchanged end.
                result[key] = (low, cached[1])
            else:
                to_probe[key] = (low, listed)
        if to_probe:
            ends = self._probe_ends({k: listed - 1 for k, (_low, listed) in to_probe.items()})
            for key, (low, listed) in to_probe.items():
                self._probe_cache[key] = (listed, ends[key])
                result[key] = (low, ends[key])
        return result

    def _probe_ends(self, fetch_from: dict[str, int]) -> dict[str, int]:
        """True end offsets, read from fetch responses starting at each partition's last listed batch.

        tansu quirk (facts §4 quirk 1): its ListOffsets answer is the last batch's base offset + 1, while its
        fetch responses carry the right high watermark. The batch at ``listed - 1`` is fetched, and each
        partition is read up to the high watermark that the fetch response of its first record reported (the
        client's cached one): every record before it has then been delivered, so every offset before it is
        readable. Records appended later are left to the next micro-batch: reading on to end-of-partition
        would chase a producer that keeps writing. End-of-partition still ends a partition first where it
        comes first: with transactions (read_committed), records past the last stable offset are not delivered
        and the end is that offset, as librdkafka reports it.

        Cost: one fetch per changed partition, reading the records of its last listed batch.
        """
        consumer = self._metadata_consumer()
        consumer.assign([TopicPartition(*parse_offset_key(k), off) for k, off in sorted(fetch_from.items())])
        ends: dict[str, int] = {}
        targets: dict[str, int] = {}  # the high watermark when the partition's first record arrived
        seen = dict(fetch_from)
        deadline = time.monotonic() + self._timeout_s
        try:
            while len(ends) < len(fetch_from):
                if time.monotonic() > deadline:
                    pending = sorted(set(fetch_from) - set(ends))
                    raise KafkaReadError(f"end-offset probe got no end-of-partition for {', '.join(pending)} "
                                         f"within {self._timeout_s} s; if the broker is Apache Kafka, set "
                                         "endOffsetProbe=list")
                msg = consumer.poll(0.1)
                if msg is None:
                    continue
                key = offset_key(msg.topic(), msg.partition())
                if key not in fetch_from or key in ends or msg.offset() < fetch_from[key]:
                    continue  # left over from an earlier assignment, or a partition already settled
                err = msg.error()
                if err is None:
                    seen[key] = max(seen[key], msg.offset() + 1)
                    target = targets.get(key)
                    if target is None:
                        _low, target = consumer.get_watermark_offsets(TopicPartition(msg.topic(), msg.partition()),
                                                                      cached=True)
                        targets[key] = target  # negative while unknown: end-of-partition decides
                    if 0 <= target <= seen[key]:
                        ends[key] = seen[key]
                elif err.code() == KafkaError._PARTITION_EOF:
                    ends[key] = max(seen[key], msg.offset())
                else:
                    raise KafkaReadError(f"end-offset probe of {key} failed: {err}")
        finally:
            consumer.unassign()  # stop background fetching between probes
        return ends

    # ----------------------------------------------------------------------------- driver: Spark hooks

    def initialOffset(self) -> dict:
        """Where a new query starts (driver, once; a restarted query uses its checkpoint instead).

        Raises:
            MissingTopicError: a subscribed topic does not exist and failOnMissingTopic is true.
            KafkaOptionError: startingOffsets names a partition that does not exist.
        """
        partitions = self._discover()
        available = self._available(partitions)
        start = self._settings.starting_offsets
        specific = {offset_key(t, p): off for t, p, off in start.offsets}
        unknown = sorted(set(specific) - set(available))
        if unknown:
            raise KafkaOptionError(f"startingOffsets: partition(s) {', '.join(unknown)} do not exist; "
                                   "list only existing partitions")
        offsets = {}
        for key, (low, end) in available.items():
            wanted = {"earliest": EARLIEST, "latest": LATEST}.get(start.mode, specific.get(key, EARLIEST))
            offsets[key] = low if wanted == EARLIEST else end if wanted == LATEST else wanted
        return offsets

    def getDefaultReadLimit(self) -> ReadLimit:
        """``ReadMaxRows(maxOffsetsPerTrigger)`` when that option is set, else read all available."""
        limit = self._settings.max_offsets_per_trigger
        return ReadAllAvailable() if limit is None else ReadMaxRows(limit)

    def prepareForTriggerAvailableNow(self) -> None:
        """Fix the end of an availableNow run at what the topics hold now (driver, once per query run)."""
        self._target = {key: end for key, (_low, end) in self._available(self._discover()).items()}

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        """End offsets of the next micro-batch (driver, once per trigger).

        Partitions missing from ``start`` (new partitions, or topics created after the query started) begin at
        their earliest offset. ``ReadMaxRows`` caps the records of the whole batch, shared across partitions
        by :func:`share_limit`.
        """
        available = self._available(self._discover(reading={parse_offset_key(key)[0] for key in start}))
        self._commit_processed(start)  # after the brokers answered: a commit to none would block
        self._last_available = {key: end for key, (_low, end) in available.items()}
        self._resets = self._check_offsets(start, available)
        if self._settings.end_offset_probe == "list":
            self._check_listed_ends(start, available)
        lags = {}
        for key, (low, end) in available.items():
            if key in self._resets:
                continue  # this batch only moves the partition to its new beginning
            if self._target is not None:
                if key not in self._target:
                    continue  # appeared after the availableNow run started: leave it for a later run
                end = min(end, self._target[key])
            begin = start.get(key, low)
            lags[key] = max(0, end - begin)
        if isinstance(limit, ReadMaxRows):
            lags = share_limit(lags, limit.max_rows)
        elif not isinstance(limit, ReadAllAvailable):
            raise KafkaConnectorError(f"placement-kafka supports the read limits ReadAllAvailable and ReadMaxRows, "
                                      f"Spark passed {limit!r}")
        end_offsets = {**start, **self._resets}
        for key, count in lags.items():
            if key in start or count > 0:
                end_offsets[key] = start.get(key, available[key][0]) + count
        return end_offsets

    def _check_offsets(self, start: Mapping[str, int], available: Mapping[str, tuple[int, int]]) -> dict[str, int]:
        """Find partitions whose unread records are gone, and say where each goes on (driver, per trigger).

        A partition is lost when its end is below the offset the query would read next (the broker lost its
        data, or the topic was deleted and recreated), its earliest offset is above it (records deleted
        before being read), or it no longer exists. Spark's own Kafka source calls this data loss
        (``failOnDataLoss``). New records at the old offsets cannot be told from old ones by offsets alone:
        a partition that vanished and came back is recognised only while this reader runs.

        Returns:
            ``key -> new beginning`` for each lost partition that exists now (failOnDataLoss false).

        Raises:
            DataLossError: a partition is lost and failOnDataLoss is true (the default).
        """
        lost: list[LostRange] = []
        resets: dict[str, int] = {}
        for key, expected in sorted(start.items()):
            topic, partition = parse_offset_key(key)
            if key not in available:
                if key not in self._vanished:
                    lost.append(LostRange(topic, partition, int(expected), None, None))
                continue
            low, end = available[key]
            if key in self._vanished:
                logger.info("%s partition %d exists again; reading it from offset %d", topic, partition, low)
                resets[key] = low
            elif end < expected or low > expected:
                lost.append(LostRange(topic, partition, int(expected), low, end))
        if lost and self._settings.fail_on_data_loss:
            raise DataLossError(tuple(lost), self._settings.bootstrap_servers)
        for gone in lost:
            key = offset_key(gone.topic, gone.partition)
            if gone.end is None:
                self._vanished.add(key)
                logger.warning("data loss: %s; failOnDataLoss=false: it will be read from its beginning if it "
                               "exists again", gone.describe())
            else:
                resets[key] = gone.earliest
                logger.warning("data loss: %s; failOnDataLoss=false: reading on from offset %d, its new "
                               "beginning", gone.describe(), gone.earliest)
        for key in resets:
            self._vanished.discard(key)
            self._last_committed.pop(key, None)  # let the commit group follow the partition back
        return resets

    def _check_listed_ends(self, start: Mapping[str, int], available: Mapping[str, tuple[int, int]]) -> None:
        """``endOffsetProbe=list``: make sure no record lies past a listed end (driver, per trigger).

        A partition's listed end is checked by a fetch from it when it is new to this reader, when the query
        has read up to it (it would otherwise wait there), and otherwise at most every
        ``_LIST_CHECK_INTERVAL_S`` while it moves. A record at or past the listed end is expected only when
        it was appended since: a fresh ListOffsets then lists it. When it does not, ListOffsets is wrong (tansu
        lists the last record batch's base offset + 1), and the query stops.

        Raises:
            ListOffsetsError: a fetch returned a record at or past the end that ListOffsets still lists.

        Cost: one fetch per checked partition; on a correct broker, none for a partition whose listed end has
        not moved since its last check.
        """
        now = time.monotonic()
        to_check = {}
        for key, (low, end) in available.items():
            checked = self._list_checked.get(key)
            if end <= low or key in self._resets or (checked is not None and checked[0] == end):
                continue
            if checked is None or start.get(key, low) >= end or now - checked[1] >= _LIST_CHECK_INTERVAL_S:
                to_check[key] = end
        if not to_check:
            return
        found = self._records_at(to_check)
        stalled = []
        for key, (offset, fetched_end) in sorted(found.items()):
            _low, listed_now = self._watermarks([parse_offset_key(key)])[key]
            if listed_now <= offset:
                stalled.append((key, to_check[key], offset, fetched_end))
        if stalled:
            for key, listed, offset, fetched_end in stalled:
                logger.error("endOffsetProbe=list: %s is listed to end at offset %d, but a fetch returned offset "
                             "%d (end %d): the broker's ListOffsets is wrong; set engine.kafka.endOffsetProbe=fetch",
                             key, listed, offset, fetched_end)
            raise ListOffsetsError(tuple(stalled), self._settings.bootstrap_servers)
        for key, end in to_check.items():
            self._list_checked[key] = (end, now)

    def _records_at(self, fetch_from: dict[str, int]) -> dict[str, tuple[int, int]]:
        """Fetch each partition from the given offset: ``key -> (offset of the first record returned, the
        end the fetch response reports)`` for partitions that hold a record there; partitions that reach their
        end, or do not answer within ``_BROKER_ATTEMPT_S``, are left out."""
        consumer = self._metadata_consumer()
        consumer.assign([TopicPartition(*parse_offset_key(k), off) for k, off in sorted(fetch_from.items())])
        found: dict[str, tuple[int, int]] = {}
        settled: set[str] = set()
        deadline = time.monotonic() + _BROKER_ATTEMPT_S
        try:
            while len(settled) < len(fetch_from) and time.monotonic() < deadline:
                msg = consumer.poll(0.1)
                if msg is None:
                    continue
                key = offset_key(msg.topic(), msg.partition())
                if key not in fetch_from or key in settled or msg.offset() < fetch_from[key]:
                    continue
                settled.add(key)
                if msg.error() is None:
                    _low, fetched_end = consumer.get_watermark_offsets(TopicPartition(msg.topic(), msg.partition()),
                                                                       cached=True)
                    found[key] = (msg.offset(), fetched_end)
        finally:
            consumer.unassign()
        return found

    def reportLatestOffset(self) -> dict | None:
        """The newest end offsets seen by the last :meth:`latestOffset` (for query progress; no broker call)."""
        return self._last_available

    def partitions(self, start: dict, end: dict) -> list[KafkaInputPartition]:
        """One input partition per Kafka partition with records in ``[start, end)`` (driver, once per batch)."""
        new_keys = [k for k in end if k not in start]
        lows = {k: low for k, (low, _high) in self._watermarks([parse_offset_key(k) for k in new_keys]).items()}
        planned = []
        for key in sorted(end):
            begin = start.get(key, lows.get(key, 0))
            if self._resets.get(key) == end[key]:
                continue  # moved to a new beginning: the records before it are gone
            if end[key] > begin:
                topic, partition = parse_offset_key(key)
                planned.append(KafkaInputPartition(topic, partition, begin, end[key]))
        return planned

    def commit(self, end: dict) -> None:
        """Spark has processed everything before ``end`` (driver); see :meth:`_commit_processed`."""
        self._commit_processed(end)

    def _commit_processed(self, processed: dict) -> None:
        """Record processed offsets in the ``commitGroup`` consumer group, if set (driver).

        Spark calls :meth:`commit` for a batch only when it plans the following one, which would leave the group
        one batch behind and never cover the last batch of an availableNow run. With Spark's (default) synchronous
        micro-batch execution, the ``start`` of :meth:`latestOffset` is the end of the last completed batch, so
        it is committed too. Only lag tools read these offsets (the checkpoint is the source of truth), so a
        failed commit is logged and the query goes on.
        """
        group = self._settings.commit_group
        if group is None:
            return
        # Spark's commit(end) arrives after latestOffset has seen a newer start: never move the group back.
        forward = {k: int(v) for k, v in processed.items() if int(v) > self._last_committed.get(k, -1)}
        if not forward:
            return
        if self._committer is None:
            self._committer = Consumer(self._settings.consumer_conf(**{"group.id": group}))
        offsets = [TopicPartition(*parse_offset_key(k), v) for k, v in sorted(forward.items())]
        try:
            self._committer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as exc:
            logger.warning("could not commit offsets to consumer group %s (used by lag tools only): %s", group, exc)
            return
        self._last_committed.update(forward)

    def stop(self) -> None:
        """Close the driver-side clients (driver, when the query terminates)."""
        for client in (self._admin, self._committer):
            if client is not None:
                client.close()
        self._admin = self._committer = None

    # --------------------------------------------------------------------------------- executor: reading

    def read(self, partition: KafkaInputPartition) -> Iterator[pa.RecordBatch]:
        """Yield the records ``[start, end)`` of one Kafka partition as Arrow batches.

        Executor, once per planned range; never reads past ``end``. Static and stateless: the result depends
        only on ``partition``, so a replayed batch reads the same records.

        Raises:
            KafkaReadError: the broker returned an error, or no record arrived for ``kafkaConsumer.pollTimeoutMs``.
            BrokerUnreachableError: no broker answered for ``unreachableTimeoutSeconds``.
        """
        tune_worker_gc()
        settings = self._settings
        topic, start, end = partition.topic, partition.start, partition.end
        # Prefetch the whole range but not much past it: librdkafka keeps fetching until queued.min.messages
        # are queued (default 100k); matching it to the range makes reads markedly faster on tansu.
        prefetch = {"queued.min.messages": max(1_000, min(end - start, 1_000_000))}
        watch = BrokerWatch(settings.bootstrap_servers, settings.unreachable_timeout_s)
        consumer = Consumer(settings.consumer_conf(**{**prefetch, **dict(settings.client_props)}, **client_logging(),
                                                   error_cb=watch.error_cb))
        try:
            consumer.assign([TopicPartition(topic, partition.partition, start)])
            columns: tuple[list, list, list, list] = ([], [], [], [])  # offset, timestamp, key, value
            next_offset = start
            timeout_s = settings.poll_timeout_ms / 1000.0
            deadline = time.monotonic() + timeout_s
            while next_offset < end:
                wanted = min(end - next_offset, _MAX_CONSUME_CHUNK)
                progressed = False
                for msg in consumer.consume(num_messages=wanted, timeout=_CONSUME_WAIT_S):
                    err = msg.error()
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:
                            if msg.offset() >= end:
                                next_offset = end  # offsets up to end hold no more records (e.g. markers)
                            continue
                        raise KafkaReadError(f"reading {topic} partition {partition.partition} at offset "
                                             f"{next_offset} (planned end {end}) failed: {err}")
                    offset = msg.offset()
                    if offset < next_offset:
                        continue
                    if offset >= end:
                        next_offset = end
                        break
                    columns[0].append(offset)
                    ts_type, ts_ms = msg.timestamp()
                    columns[1].append(None if ts_type == TIMESTAMP_NOT_AVAILABLE else ts_ms * 1000)
                    columns[2].append(msg.key())
                    columns[3].append(msg.value())
                    next_offset = offset + 1
                    progressed = True
                if progressed:
                    watch.on_success()
                    deadline = time.monotonic() + timeout_s
                elif watch.is_down:
                    watch.check()  # an outage may last up to unreachableTimeoutSeconds
                elif next_offset < end and time.monotonic() > deadline:
                    raise KafkaReadError(f"no records from {topic} partition {partition.partition} at offset "
                                         f"{next_offset} for {timeout_s} s although the batch was planned up to "
                                         f"{end}; the records may have been deleted, or the broker is "
                                         "unreachable")
                if len(columns[0]) >= _ROWS_PER_ARROW_BATCH:
                    yield _to_arrow(topic, partition.partition, columns)
                    columns = ([], [], [], [])
            if columns[0]:
                yield _to_arrow(topic, partition.partition, columns)
        finally:
            consumer.close()


def _to_arrow(topic: str, partition: int, columns: tuple[list, list, list, list]) -> pa.RecordBatch:
    offsets, timestamps, keys, values = columns
    n = len(offsets)
    return pa.RecordBatch.from_arrays([
        pa.array([topic] * n, pa.string()),
        pa.array([partition] * n, pa.int32()),
        pa.array(offsets, pa.int64()),
        pa.array(timestamps, pa.timestamp("us", tz="UTC")),
        pa.array(keys, pa.binary()),
        pa.array(values, pa.binary()),
    ], schema=KAFKA_SOURCE_ARROW_SCHEMA)


# ------------------------------------------------------------------------------------------- data source


class KafkaDataSource(DataSource):
    """``spark.readStream.format("placement-kafka")`` / ``df.writeStream.format("placement-kafka")``.

    Options are documented in docs/kafka.md. Register it with ``spark.dataSource.register(KafkaDataSource)``
    (``streaming.session.build_session`` does this).
    """

    @classmethod
    def name(cls) -> str:
        return SHORT_NAME

    def schema(self) -> str:
        return KAFKA_SOURCE_DDL

    def streamReader(self, schema) -> KafkaStreamReader:
        """Called by Spark on the driver when the query starts; validates the options."""
        return KafkaStreamReader(KafkaSourceSettings.from_options(self.options))

    def streamWriter(self, schema, overwrite: bool):
        """Called by Spark on the driver when the query starts; validates options and the input columns."""
        if overwrite:
            raise KafkaOptionError("placement-kafka is an append-only sink; use outputMode('append')")
        return KafkaStreamWriter(KafkaSinkSettings.from_options(self.options, schema))
