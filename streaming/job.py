"""The streaming query: sources -> (cluster, shard) groups -> `state.step` -> outputs.

Sources are normalised to the columns of `schemas.INPUT_COLUMNS` before grouping:
`value` (the record text), the ordering key `o1, o2, o3` (arrival order inside a batch) and the source
identity `src_name, src_part, src_pos` (file and line, or topic, partition and offset).

Sharding (`engine.shardsPerCluster = N`): every cluster event is sent to all N shards of its cluster,
a request to shard `pmod(xxhash64(ledger_id, else request_id), N)`, so one big cluster's requests
spread over N groups while each shard sees the full topology, and all requests about one ledger
(creates, replaces, checks) meet in one shard, where the audit remembers it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.state import GroupStateTimeout

from events import REQUEST_TYPES
from events.limits import MAX_TIME_MS

from .config import ConfigError
from .kafka_health import client_logging
from .metrics_rows import METRICS, OBSERVATION, ROWS
from .output_limits import record_budget
from .packed import routing_names
from .schemas import EPOCH_MS_TYPE, INPUT_COLUMNS, INPUT_TYPES, KAFKA_HEADER_VALUE_TYPE, OUTPUT_DDL, STATE_DDL
from .session import use_local_checkpoint_writer
from .settings import BOOTSTRAP_SERVERS, EngineSettings, native_connector_missing
from .stateful import INVALID_UTF8, SOURCE_PACKED, make_state_function

log = logging.getLogger(__name__)


def routing_fields(records: DataFrame, names: Sequence[str]) -> DataFrame:
    """`records` with one column `_<name>` per name (`streaming.packed.routing_names`): the record's
    top-level field as text (strings unquoted, other values as JSON), null when absent, null or
    unreadable; every one null when Jackson cannot write one of them (a lone surrogate).

    One `json_tuple` reads them all in one parse of the record. It keeps the last of duplicate keys
    that is not null, as Python's `json` (and so `events.parse_record`) keeps the last, so Spark routes
    a record by the values the engine then reads in it; `streaming.packed.read_fields` reproduces it
    for the replay. Cost: one JSON parse per record for all the names; creating a parser is most of
    the cost of reading a field, so `get_json_object` (one parse per field) would cost that per name.
    """
    return records.select("*", F.json_tuple("value", *names).alias(*(f"_{name}" for name in names)))


def _shard_column(shards: int) -> Column:
    """The shards a record goes to, from `routing_fields`' columns."""
    if shards <= 1:
        return F.array(F.lit(0))
    # A ledger's requests all reach one shard, so its audit trail lives in one place; requests
    # without a ledger id are spread by request id.
    route = F.coalesce(F.concat(F.lit("l:"), F.col("_ledger_id")),
                       F.concat(F.lit("r:"), F.coalesce(F.col("_request_id"), F.lit(""))))
    is_request = F.col("_type").isin(*sorted(REQUEST_TYPES))
    return F.when(is_request, F.array(F.pmod(F.xxhash64(route), F.lit(shards)).cast(INPUT_TYPES["shard"]))) \
        .otherwise(F.sequence(F.lit(0), F.lit(shards - 1)))


SPREAD_TRIES = 16
"""Labels tried per shard by `spread_shards` (a shard stays unspread with probability (1-1/P)^16)."""


def spread_shards(cluster: Column, shard: Column, shards: int, partitions: int) -> Column:
    """The grouping label of a shard: `shard + shards * j`, the first j whose group Spark's shuffle puts
    in partition `shard mod partitions`.

    Spark places the group (cluster, label) in partition `pmod(hash(cluster, label), partitions)`. With
    plain shard numbers, a cluster's shards often share one partition (the shards 0, 1 and 2 of
    "busy" all hash to partition 0 of 2), so they run one after the other in one task and sharding
    gains nothing. The label keeps the shard (`label mod shards`), and the same (cluster, shard)
    always gets the same label, so state and ids do not depend on it.
    """
    if shards <= 1 or partitions <= 1:
        return shard
    labels = F.transform(F.sequence(F.lit(0), F.lit(SPREAD_TRIES - 1)), lambda j: shard + j * F.lit(shards))
    target = F.pmod(shard, F.lit(partitions))
    placed = F.filter(labels, lambda label: F.pmod(F.hash(cluster, label), F.lit(partitions)) == target)
    return F.coalesce(F.element_at(placed, 1), shard).cast(INPUT_TYPES["shard"])


def _partitions(frame: DataFrame) -> int:
    return int(frame.sparkSession.conf.get("spark.sql.shuffle.partitions"))


FUTURE_TOLERANCE = "5 minutes"
"""How far past the wall clock a record's time may move the watermark (a bad producer clock must not
fast-forward every idle cluster's timers; see `event_time`)."""


def event_time(text: Column) -> Column:
    """The record's `time` (its text, `routing_fields`' `_time`) as a timestamp for the watermark, or
    null when Spark cannot read it or it is before 1970-01-01T00:00:00Z.

    Only idle ticks read the watermark (never a decision), so a time Spark reads differently from
    `events.parse_time_ms` can only delay a tick. Times past the wall clock by more than
    `FUTURE_TOLERANCE` count as the wall clock plus that tolerance. A time before 1970 is null, not
    the time: pyspark hands the column to the state function as pandas' `datetime64[ns]`, which holds
    1677-09-21 .. 2262-04-11 only, and one record outside it (`0001-01-01T00:00:00Z`) would fail the
    whole batch on every start; the parser refuses such a time, so the record stays a dead letter.
    Epoch milliseconds are read only from 0 to `events.limits.MAX_TIME_MS` (larger ones overflow
    Spark's microseconds).
    """
    millis = text.try_cast(EPOCH_MS_TYPE)
    parsed = F.coalesce(F.try_to_timestamp(text),
                        F.when(millis.between(0, MAX_TIME_MS), F.timestamp_millis(millis)))
    # least() skips nulls: an unreadable time must stay null, not become the wall clock.
    return F.when(parsed >= F.timestamp_millis(F.lit(0)),
                  F.least(parsed, F.current_timestamp() + F.expr(f"INTERVAL {FUTURE_TOLERANCE}")))


def keyed_records(records: DataFrame, shards: int, *, with_time: bool = False) -> DataFrame:
    """Normalised records with the `cluster` and `shard` columns `place` groups by (`INPUT_COLUMNS`),
    plus `event_time` when `with_time`.

    `shard` is 0 for one shard; else every event comes once per shard and each request once, in the
    shard its ledger (or request) goes to, labelled by `spread_shards`.
    """
    keyed = routing_fields(records, routing_names(shards, with_time))
    keyed = keyed.withColumn("cluster", F.coalesce(F.col("_cluster"), F.lit("")))
    if shards <= 1:
        keyed = keyed.withColumn("shard", F.lit(0))
    else:
        keyed = keyed.withColumn("shard", F.explode(_shard_column(shards)))
        keyed = keyed.withColumn("shard", spread_shards(F.col("cluster"), F.col("shard"), shards, _partitions(keyed)))
    extra = [event_time(F.col("_time")).alias("event_time")] if with_time else []
    return keyed.select(*INPUT_COLUMNS, *extra)


def place(records: DataFrame, settings: EngineSettings, source_kind: str, files: Sequence[str] = (), *,
          idle_ticks: bool = False, record_budget: int | None = None, metrics: bool = False) -> DataFrame:
    """Group normalised records by (cluster, shard) and run the cluster model over them.

    `idle_ticks` (the `run` job, with `engine.idleTickSeconds` > 0): an event-time watermark on the
    records' `time` (`engine.watermarkDelaySeconds` behind the latest) and processing-time timeouts
    settle idle clusters (see `streaming.stateful`). A replay ticks at the end of its input instead.
    `record_budget`: the largest dead letter the sink delivers (`streaming.output_limits`), None for none.
    `metrics` (the `run` job): each group's call also emits a row of kind `streaming.metrics_rows.METRICS`,
    which `observed_metrics` takes out before the sink.

    Returns a streaming DataFrame of `kind, cluster, id, value` (value = output JSON).
    """
    shards = settings.shards_per_cluster
    tick_seconds = settings.idle_tick_seconds if idle_ticks else 0
    keyed = keyed_records(records, shards, with_time=bool(tick_seconds))
    timeout = GroupStateTimeout.NoTimeout
    if tick_seconds:
        keyed = keyed.withWatermark("event_time", f"{settings.watermark_delay_seconds} seconds")
        timeout = GroupStateTimeout.ProcessingTimeTimeout
    function = make_state_function(settings.model, source_kind, shards, files, tick_seconds,
                                   settings.dead_letter_max_raw_bytes, record_budget, metrics=metrics)
    return keyed.groupBy("cluster", "shard").applyInPandasWithState(
        function, OUTPUT_DDL, STATE_DDL, "append", timeout)


def place_packed(rows: DataFrame, settings: EngineSettings, files: Sequence[str]) -> DataFrame:
    """The replay's `place`: rows already routed and packed in Python (`streaming.packed`).

    `rows` has `cluster, shard, o1` (the first record's position in the spool) and `value` (packed
    entries of `files`' lines). Returns packed outputs: `kind, cluster, id, value` with one row per
    group, kind and cluster (value = the outputs' JSON lines, id = their count) plus `summary` rows.
    """
    shard = spread_shards(F.col("cluster"), F.col("shard"), settings.shards_per_cluster, _partitions(rows))
    zero = F.lit(0).cast(INPUT_TYPES["o2"])
    keyed = rows.select("cluster", shard.alias("shard"), "o1", zero.alias("o2"), zero.alias("o3"),
                        F.lit("").alias("src_name"), F.lit(0).alias("src_part"), zero.alias("src_pos"), "value")
    function = make_state_function(settings.model, SOURCE_PACKED, settings.shards_per_cluster, files,
                                   max_raw_bytes=settings.dead_letter_max_raw_bytes)
    return keyed.groupBy("cluster", "shard").applyInPandasWithState(
        function, OUTPUT_DDL, STATE_DDL, "append", GroupStateTimeout.NoTimeout)


def kafka_records(spark: SparkSession, settings: EngineSettings) -> DataFrame:
    """Events and requests topics, read with the configured connector, normalised for `place`."""
    topics = [settings.events_topic, settings.requests_topic]
    reader = spark.readStream
    if settings.kafka_connector == "native":
        reader = reader.format("kafka").option("kafka.bootstrap.servers", settings.bootstrap_servers)
    else:
        reader = reader.format("placement-kafka").option("kafka.bootstrap.servers", settings.bootstrap_servers) \
            .option("endOffsetProbe", settings.end_offset_probe) \
            .option("unreachableTimeoutSeconds", str(settings.unreachable_timeout_seconds))
        if settings.consumer_group:
            reader = reader.option("commitGroup", settings.consumer_group)
    reader = reader.option("failOnDataLoss", "true" if settings.fail_on_data_loss else "false")
    reader = reader.option("subscribe", ",".join(topics)).option("startingOffsets", settings.starting_offsets)
    if settings.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(settings.max_offsets_per_trigger))
    for key, value in sorted(settings.kafka_client.items()):
        reader = reader.option(f"kafka.{key}", value)
    raw = _load_native_checked(reader) if settings.kafka_connector == "native" else reader.load()
    rank = F.when(F.col("topic") == settings.events_topic, F.lit(0)).otherwise(F.lit(1))
    text = F.col("value").cast(INPUT_TYPES["value"])
    # Bytes that are not UTF-8 would fail pyspark's hand-over to the state function (stateful.INVALID_UTF8).
    value = F.when(text.isNull() | F.is_valid_utf8(text), text) \
        .otherwise(F.concat(F.lit(INVALID_UTF8), F.make_valid_utf8(text)))
    return raw.select(
        value.alias("value"),
        rank.cast(INPUT_TYPES["o1"]).alias("o1"),
        F.col("partition").cast(INPUT_TYPES["o2"]).alias("o2"),
        F.col("offset").cast(INPUT_TYPES["o3"]).alias("o3"),
        F.col("topic").alias("src_name"),
        F.col("partition").cast(INPUT_TYPES["src_part"]).alias("src_part"),
        F.col("offset").cast(INPUT_TYPES["src_pos"]).alias("src_pos"),
    )


NATIVE_MISSING = "KAFKA_DATA_SOURCE_NOT_ENABLED"


def _load_native_checked(reader) -> DataFrame:  # noqa: ANN001 - a DataStreamReader
    """Load with Spark's own connector; its absence is a configuration error, not a stack trace."""
    from pyspark.errors import AnalysisException

    try:
        return reader.load()
    except AnalysisException as exc:
        if exc.getCondition() != NATIVE_MISSING:
            raise
        version = getattr(getattr(reader, "_spark", None), "version", "<your Spark version>")
        raise native_connector_missing(version) from None


CLOUDEVENT_HEADERS = (("ce_specversion", "$.specversion"), ("ce_id", "$.id"), ("ce_source", "$.source"),
                      ("ce_type", "$.type"), ("ce_subject", "$.subject"), ("ce_time", "$.time"))


def kafka_outputs(outputs: DataFrame, settings: EngineSettings) -> DataFrame:
    """Outputs as Kafka rows: topic by kind (decisions, alerts, status records, and dead letters), key =
    cluster, value = JSON.

    Alerts follow the CloudEvents Kafka binding chosen by `engine.alerts.kafkaMode`: `binary` puts the
    attributes in `ce_*` headers and the event's `data` in the value; `structured` sends the whole event
    as the value with `content-type: application/cloudevents+json`.
    """
    is_alert = F.col("kind") == "alert"
    topic = F.when(F.col("kind") == "decision", F.lit(settings.decisions_topic)) \
        .when(is_alert, F.lit(settings.alerts_topic)) \
        .when(F.col("kind") == "status", F.lit(settings.status_topic)) \
        .otherwise(F.lit(settings.dead_letters_topic))

    def header(name: str, value: Column) -> Column:
        return F.struct(F.lit(name).alias("key"), value.cast(KAFKA_HEADER_VALUE_TYPE).alias("value"))

    if settings.alerts_kafka_mode == "binary":
        # One parse of each alert for all its attributes and data (a get_json_object each would parse it
        # seven times); other outputs give json_tuple a null, which it does not parse.
        fields = [path[2:] for _, path in CLOUDEVENT_HEADERS] + ["data"]
        outputs = outputs.select("*", F.json_tuple(F.when(is_alert, F.col("value")), *fields)
                                 .alias(*(f"_ce_{field}" for field in fields)))
        alert_headers = F.array(*[header(name, F.col(f"_ce_{path[2:]}")) for name, path in CLOUDEVENT_HEADERS],
                                header("content-type", F.lit("application/json")))
        alert_headers = F.filter(alert_headers, lambda h: h["value"].isNotNull())
        value = F.when(is_alert, F.col("_ce_data")).otherwise(F.col("value"))
    else:
        alert_headers = F.array(header("content-type", F.lit("application/cloudevents+json")))
        value = F.col("value")
    plain = F.array(header("content-type", F.lit("application/json")))
    return outputs.select(topic.alias("topic"), F.col("cluster").alias("key"), value.alias("value"),
                          F.when(is_alert, alert_headers).otherwise(plain).alias("headers"))


def check_topics(settings: EngineSettings, timeout_s: float = 15.0) -> None:
    """Fail at start-up, naming the key, when the broker is unreachable or a topic does not exist."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": settings.bootstrap_servers, **settings.kafka_client, **client_logging()})
    try:
        existing = admin.list_topics(timeout=timeout_s).topics
    except KafkaException as exc:
        raise ConfigError(f"{BOOTSTRAP_SERVERS}: cannot reach {settings.bootstrap_servers} "
                          f"within {timeout_s:.0f} s ({exc.args[0]}); "
                          "check the address and that the broker runs") from exc
    for key, topic in settings.topics_by_key():
        if topic not in existing:
            raise ConfigError(f"{key}: topic {topic!r} does not exist on {settings.bootstrap_servers}; "
                              "create it or name an existing topic")


PRODUCER_LIMIT = "message.max.bytes"
"""The producer's (librdkafka's) limit on one record, `engine.kafka.client.message.max.bytes`."""
PRODUCER_LIMIT_DEFAULT = 1_000_000
TOPIC_LIMIT = "max.message.bytes"
"""The topic's limit on one record batch, read from the broker at start (`dead_letter_budget`)."""


def dead_letter_budget(settings: EngineSettings, timeout_s: float = 10.0) -> int:
    """The largest dead letter the `run` job's sink delivers (`streaming.output_limits.record_budget`):
    from the producer's `message.max.bytes` and the dead-letters topic's `max.message.bytes`.

    The topic's limit is asked of the broker once; a broker that does not answer leaves the producer's.
    """
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, ConfigResource

    try:
        producer_limit = int(settings.kafka_client.get(PRODUCER_LIMIT, PRODUCER_LIMIT_DEFAULT))
    except ValueError:
        raise ConfigError(f"engine.kafka.client.{PRODUCER_LIMIT}: expected an integer, "
                          f"got {settings.kafka_client[PRODUCER_LIMIT]!r}") from None
    topic_limit = None
    admin = AdminClient({"bootstrap.servers": settings.bootstrap_servers, **settings.kafka_client, **client_logging()})
    resource = ConfigResource(ConfigResource.Type.TOPIC, settings.dead_letters_topic)
    try:
        entries = admin.describe_configs([resource], request_timeout=timeout_s)[resource].result(timeout=timeout_s)
        entry = entries.get(TOPIC_LIMIT)
        topic_limit = int(entry.value) if entry is not None and entry.value else None
    except (KafkaException, ValueError, TypeError, TimeoutError) as exc:
        log.info("dead letters: the broker did not tell %s of topic %s (%s); the producer's %s=%d bounds them",
                 TOPIC_LIMIT, settings.dead_letters_topic, exc, PRODUCER_LIMIT, producer_limit)
    return record_budget(producer_limit, topic_limit)


def start_kafka_job(spark: SparkSession, settings: EngineSettings, query_name: str = "placement-engine"):
    """Start the `run` query: Kafka events + requests -> decisions, alerts, dead letters on Kafka.

    Returns the running `StreamingQuery`; its checkpoint (`engine.checkpointLocation`) holds the
    source offsets and every cluster's state, so a restart resumes where the last batch committed.
    """
    placed = place(kafka_records(spark, settings), settings, "kafka", idle_ticks=True,
                   record_budget=dead_letter_budget(settings), metrics=True)
    outputs = kafka_outputs(observed_metrics(placed), settings)
    use_local_checkpoint_writer(spark, settings.checkpoint_location)
    writer = outputs.writeStream.option("checkpointLocation", settings.checkpoint_location) \
        .trigger(processingTime=f"{settings.trigger_seconds} seconds").queryName(query_name)
    writer = writer.format("kafka" if settings.kafka_connector == "native" else "placement-kafka")
    for key, value in sink_options(settings).items():
        writer = writer.option(key, value)
    return writer.outputMode("append").start()


def observed_metrics(placed: DataFrame) -> DataFrame:
    """`placed` without its metrics rows, which Spark gathers on the way (`DataFrame.observe`) and hands
    to the driver with each micro-batch's progress: `observedMetrics[OBSERVATION][ROWS]`, the list of
    the batch's rows (`streaming.metrics_rows`; read by `streaming.metrics`).

    An observed aggregate is collected from the tasks that completed the micro-batch, so the counts are
    those of the outputs the batch wrote; the rows never reach the sink.
    """
    is_metrics = F.col("kind") == METRICS
    observed = placed.observe(OBSERVATION, F.collect_list(F.when(is_metrics, F.col("value"))).alias(ROWS))
    return observed.filter(~is_metrics)


def sink_options(settings: EngineSettings) -> dict[str, str]:
    """The Kafka sink's options: the brokers, how long a record waits for unreachable brokers
    (`engine.kafka.unreachableTimeoutSeconds`, the engine's own sink only), then the user's client keys,
    which win."""
    options = {"kafka.bootstrap.servers": settings.bootstrap_servers}
    if settings.kafka_connector != "native":
        options["kafka.message.timeout.ms"] = str(settings.unreachable_timeout_seconds * 1000)
    options.update((f"kafka.{key}", value) for key, value in sorted(settings.kafka_client.items()))
    return options
