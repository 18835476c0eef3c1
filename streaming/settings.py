"""The configuration -> frozen `EngineSettings`, parsed once at start-up; only this module spells the
streaming layer's keys (`engine.*`).

`engine_settings(conf)` is what every command calls: it parses the streaming keys, the cluster model's
keys (`state.settings.ModelSettings`, kept as `EngineSettings.model`) and checks the BookKeeper/Pulsar
placement keys by building the placement policy once (`check_placement_conf`). Unknown `engine.*` keys,
bad values and a missing required key raise `ConfigError` naming the key, before Spark starts. Code
below the command line takes these settings, never the raw mapping.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from policies import create_policy
from state.settings import MODEL_KEYS, SEED, ModelSettings

from .config import ConfigError

DEFAULTS: dict[str, str] = {
    "engine.spark.master": "local[2]",
    "engine.spark.shufflePartitions": "2",
    "engine.trigger.seconds": "1",
    "engine.idleTickSeconds": "5",
    "engine.watermarkDelaySeconds": "10",
    "engine.checkpointLocation": "",
    "engine.shardsPerCluster": "1",
    "engine.kafka.bootstrapServers": "",
    "engine.kafka.eventsTopic": "placement-events",
    "engine.kafka.requestsTopic": "placement-requests",
    "engine.kafka.decisionsTopic": "placement-decisions",
    "engine.kafka.alertsTopic": "placement-alerts",
    "engine.kafka.deadLettersTopic": "placement-dead-letters",
    "engine.kafka.statusTopic": "placement-status",
    "engine.kafka.startingOffsets": "earliest",
    "engine.kafka.maxOffsetsPerTrigger": "",
    "engine.kafka.consumerGroup": "placement-engine",
    "engine.kafka.connector": "python",
    "engine.kafka.endOffsetProbe": "fetch",
    "engine.kafka.failOnDataLoss": "true",
    "engine.kafka.unreachableTimeoutSeconds": "300",
    "engine.alerts.kafkaMode": "binary",
    "engine.replay.recordsPerTrigger": "200000",
    "engine.replay.bytesPerTrigger": "33554432",
    "engine.deadLetter.maxRawBytes": "65536",
    "engine.stopGraceSeconds": "20",
    "engine.metrics.port": "9464",
    "engine.metrics.host": "0.0.0.0",
    "engine.metrics.maxClusters": "50",
}
"""Every engine key the streaming layer reads, with its default (the README lists them)."""

KAFKA_CLIENT_PREFIX = "engine.kafka.client."
"""`engine.kafka.client.<librdkafka property>` is passed to every Kafka consumer and producer."""

BOOTSTRAP_SERVERS = "engine.kafka.bootstrapServers"
KAFKA_CONNECTOR = "engine.kafka.connector"
STOP_GRACE_SECONDS = "engine.stopGraceSeconds"
METRICS_PORT = "engine.metrics.port"
POLICY = "ensemblePlacementPolicy"
"""The placement key naming the policy (parsed by `policies.settings`; read here as written, for the
replay's summary)."""

TOPIC_KEYS = (("engine.kafka.eventsTopic", "events_topic"), ("engine.kafka.requestsTopic", "requests_topic"),
              ("engine.kafka.decisionsTopic", "decisions_topic"), ("engine.kafka.alertsTopic", "alerts_topic"),
              ("engine.kafka.deadLettersTopic", "dead_letters_topic"),
              ("engine.kafka.statusTopic", "status_topic"))
"""Each topic key and the `EngineSettings` attribute holding its topic."""

DEMO_CONF: dict[str, str] = {
    POLICY: "rackaware",
    "minNumRacksPerWriteQuorum": "2",
    "enforceMinNumRacksPerWriteQuorum": "true",
    "diskWeightBasedPlacementEnabled": "true",
    "networkTopologyStabilizePeriodSeconds": "30",
    SEED: "1",
    "engine.replay.recordsPerTrigger": "1500",
}
"""The `demo` command's configuration (a `--conf` file and `--set` overrides go over it): rack-aware,
two racks per write quorum enforced, disk weights, 30 s stabilization."""


def _int(conf: Mapping[str, str], key: str, minimum: int) -> int:
    value = conf.get(key, DEFAULTS[key])
    try:
        number = int(str(value).strip())
    except ValueError:
        raise ConfigError(f"{key}: expected an integer >= {minimum}, got {value!r}") from None
    if number < minimum:
        raise ConfigError(f"{key}: expected an integer >= {minimum}, got {value!r}")
    return number


def _port(conf: Mapping[str, str], key: str) -> int:
    value = conf.get(key, DEFAULTS[key])
    try:
        number = int(str(value).strip())
    except ValueError:
        number = -1
    if not 0 <= number <= 65535:
        raise ConfigError(f"{key}: expected a TCP port 1..65535, or 0 for none, got {value!r}")
    return number


def _choice(conf: Mapping[str, str], key: str, choices: tuple[str, ...]) -> str:
    value = str(conf.get(key, DEFAULTS[key])).strip()
    if value not in choices:
        raise ConfigError(f"{key}: expected one of {', '.join(choices)}, got {value!r}")
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineSettings:
    """Streaming-layer settings (see DEFAULTS for keys and defaults)."""

    spark_master: str = "local[2]"
    shuffle_partitions: int = 2
    trigger_seconds: float = 1.0
    idle_tick_seconds: int = 5
    watermark_delay_seconds: int = 10
    checkpoint_location: str = ""
    shards_per_cluster: int = 1
    bootstrap_servers: str = ""
    events_topic: str = "placement-events"
    requests_topic: str = "placement-requests"
    decisions_topic: str = "placement-decisions"
    alerts_topic: str = "placement-alerts"
    dead_letters_topic: str = "placement-dead-letters"
    status_topic: str = "placement-status"
    starting_offsets: str = "earliest"
    max_offsets_per_trigger: int | None = None
    consumer_group: str = "placement-engine"
    kafka_connector: str = "python"
    end_offset_probe: str = "fetch"
    fail_on_data_loss: bool = True
    unreachable_timeout_seconds: int = 300
    alerts_kafka_mode: str = "binary"
    replay_records_per_trigger: int = 200000
    replay_bytes_per_trigger: int = 33554432
    dead_letter_max_raw_bytes: int = 65536
    stop_grace_seconds: int = 20
    metrics_port: int = 9464
    metrics_host: str = "0.0.0.0"
    metrics_max_clusters: int = 50
    kafka_client: dict[str, str] = field(default_factory=dict)
    model: ModelSettings = field(default_factory=ModelSettings)
    configured_policy: str = "rackaware"
    configured_seed: str = "0"

    @classmethod
    def from_conf(cls, conf: Mapping[str, str], extra_known: frozenset[str] = frozenset()) -> EngineSettings:
        """Parse the `engine.*` keys and the cluster model's keys (`model`).

        Args:
            conf: the whole configuration mapping, values as strings.
            extra_known: further `engine.*` keys to accept (the model's keys always are).

        Attributes set besides the `engine.*` values: `model`, the parsed `state.settings.ModelSettings`
        (its placement settings included); `configured_policy` and `configured_seed`, the policy and seed
        as written (`ensemblePlacementPolicy`, `engine.seed`), which the replay's summary reports.

        Raises:
            ConfigError: an unknown `engine.*` key or a malformed value; the message names the key.
        """
        known = frozenset(MODEL_KEYS) | extra_known
        for key in conf:
            if key.startswith("engine.") and key not in DEFAULTS and key not in known \
                    and not key.startswith(KAFKA_CLIENT_PREFIX):
                raise ConfigError(f"{key}: unknown engine key; known keys are listed in conf/engine.properties")
        trigger = str(conf.get("engine.trigger.seconds", DEFAULTS["engine.trigger.seconds"])).strip()
        try:
            trigger_seconds = float(trigger)
        except ValueError:
            raise ConfigError(f"engine.trigger.seconds: expected a number of seconds >= 0, got {trigger!r}") from None
        if trigger_seconds < 0:
            raise ConfigError(f"engine.trigger.seconds: expected a number of seconds >= 0, got {trigger!r}")
        max_offsets = str(conf.get("engine.kafka.maxOffsetsPerTrigger", "")).strip()
        starting = str(conf.get("engine.kafka.startingOffsets", "earliest")).strip()
        if starting not in ("earliest", "latest") and not starting.startswith("{"):
            raise ConfigError("engine.kafka.startingOffsets: expected earliest, latest or a JSON object "
                              f"{{\"topic\": {{\"0\": offset}}}}, got {starting!r}")
        return cls(
            spark_master=str(conf.get("engine.spark.master", DEFAULTS["engine.spark.master"])).strip(),
            shuffle_partitions=_int(conf, "engine.spark.shufflePartitions", minimum=1),
            trigger_seconds=trigger_seconds,
            idle_tick_seconds=_int(conf, "engine.idleTickSeconds", minimum=0),
            watermark_delay_seconds=_int(conf, "engine.watermarkDelaySeconds", minimum=0),
            checkpoint_location=str(conf.get("engine.checkpointLocation", "")).strip(),
            shards_per_cluster=_int(conf, "engine.shardsPerCluster", minimum=1),
            bootstrap_servers=str(conf.get("engine.kafka.bootstrapServers", "")).strip(),
            events_topic=str(conf.get("engine.kafka.eventsTopic", DEFAULTS["engine.kafka.eventsTopic"])).strip(),
            requests_topic=str(conf.get("engine.kafka.requestsTopic", DEFAULTS["engine.kafka.requestsTopic"])).strip(),
            decisions_topic=str(conf.get("engine.kafka.decisionsTopic",
                                         DEFAULTS["engine.kafka.decisionsTopic"])).strip(),
            alerts_topic=str(conf.get("engine.kafka.alertsTopic", DEFAULTS["engine.kafka.alertsTopic"])).strip(),
            dead_letters_topic=str(conf.get("engine.kafka.deadLettersTopic",
                                            DEFAULTS["engine.kafka.deadLettersTopic"])).strip(),
            status_topic=str(conf.get("engine.kafka.statusTopic", DEFAULTS["engine.kafka.statusTopic"])).strip(),
            starting_offsets=starting,
            max_offsets_per_trigger=_int(conf, "engine.kafka.maxOffsetsPerTrigger", minimum=1) if max_offsets else None,
            consumer_group=str(conf.get("engine.kafka.consumerGroup", DEFAULTS["engine.kafka.consumerGroup"])).strip(),
            kafka_connector=_choice(conf, "engine.kafka.connector", ("python", "native")),
            end_offset_probe=_choice(conf, "engine.kafka.endOffsetProbe", ("fetch", "list")),
            fail_on_data_loss=_choice(conf, "engine.kafka.failOnDataLoss", ("true", "false")) == "true",
            unreachable_timeout_seconds=_int(conf, "engine.kafka.unreachableTimeoutSeconds", minimum=1),
            alerts_kafka_mode=_choice(conf, "engine.alerts.kafkaMode", ("binary", "structured")),
            replay_records_per_trigger=_int(conf, "engine.replay.recordsPerTrigger", minimum=1),
            replay_bytes_per_trigger=_int(conf, "engine.replay.bytesPerTrigger", minimum=1),
            dead_letter_max_raw_bytes=_int(conf, "engine.deadLetter.maxRawBytes", minimum=256),
            stop_grace_seconds=_int(conf, "engine.stopGraceSeconds", minimum=0),
            metrics_port=_port(conf, METRICS_PORT),
            metrics_host=str(conf.get("engine.metrics.host", DEFAULTS["engine.metrics.host"])).strip(),
            metrics_max_clusters=_int(conf, "engine.metrics.maxClusters", minimum=1),
            kafka_client={k[len(KAFKA_CLIENT_PREFIX):]: str(v) for k, v in conf.items()
                          if k.startswith(KAFKA_CLIENT_PREFIX)},
            model=_model_settings(conf),
            configured_policy=conf.get(POLICY, "rackaware"),
            configured_seed=conf.get(SEED, "0"),
        )

    def require_kafka(self) -> None:
        """`run` needs a broker and topic names."""
        if not self.bootstrap_servers:
            raise ConfigError("engine.kafka.bootstrapServers: required by `run` (host:port[,host:port]); "
                              "set it in the --conf file or with --set")
        for key, attribute in TOPIC_KEYS:
            if not getattr(self, attribute):
                raise ConfigError(f"{key}: must name a Kafka topic")
        if not self.checkpoint_location:
            raise ConfigError("engine.checkpointLocation: required by `run` (a durable directory, e.g. on HDFS "
                              "or S3, where Spark keeps offsets and state); set it in the --conf file")


    def require_alerts_broker(self) -> None:
        """`alerts` needs a broker."""
        if not self.bootstrap_servers:
            raise ConfigError(f"{BOOTSTRAP_SERVERS}: required by `alerts` (host:port)")

    def topics_by_key(self) -> tuple[tuple[str, str], ...]:
        """`(key, topic)` for each topic the `run` job reads or writes, in `TOPIC_KEYS` order."""
        return tuple((key, getattr(self, attribute)) for key, attribute in TOPIC_KEYS)


def _model_settings(conf: Mapping[str, str]) -> ModelSettings:
    try:
        return ModelSettings.from_conf(conf)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc


def engine_settings(conf: Mapping[str, str]) -> EngineSettings:
    """The whole configuration, parsed and checked once at start-up (every command calls this first).

    Raises:
        ConfigError: an unknown `engine.*` key, a malformed value, or placement keys the policy refuses;
            the message names the key.
    """
    settings = EngineSettings.from_conf(conf)
    check_placement_conf(conf)
    return settings


def native_connector_missing(spark_version: str) -> ConfigError:
    """The error for `engine.kafka.connector=native` on a Spark without its Kafka connector."""
    return ConfigError(
        f"{KAFKA_CONNECTOR}: 'native' needs Spark's Kafka connector on the classpath, which this Spark "
        f"does not have; add --packages org.apache.spark:spark-sql-kafka-0-10_2.13:{spark_version} (or the jar) "
        f"to spark-submit, or set {KAFKA_CONNECTOR}=python")


def check_placement_conf(conf: Mapping[str, str]) -> None:
    """Build the placement policy once so a bad BookKeeper/Pulsar key stops the job at start-up."""
    try:
        create_policy({k: v for k, v in conf.items() if not k.startswith("engine.")})
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
