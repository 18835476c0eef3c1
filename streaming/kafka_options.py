"""The options of the ``placement-kafka`` source and sink, parsed once into frozen settings, and the
connector's errors.

Spark hands a data source its options as strings with lower-cased names; this module is the one place
that knows how they are spelled (:class:`KafkaSourceSettings`, :class:`KafkaSinkSettings`) and turns a
missing or malformed option into a :class:`KafkaOptionError` naming it. Both settings are picklable
and hold no client: the reader (`streaming.kafka_source`) and the writer (`streaming.kafka_sink`)
create their clients where they run. Option names and meanings: docs/kafka.md.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from .schemas import KAFKA_SINK_COLUMN_TYPES

EARLIEST = -2  # Spark connector convention in startingOffsets JSON
LATEST = -1

# Kafka client properties the source sets itself; a user's kafka.<prop> for these is rejected.
_SOURCE_OWNED_PROPS = frozenset({"enable.auto.commit", "auto.offset.reset", "enable.partition.eof"})

# Producer properties a user may not override (none: kafka.bootstrap.servers is read as the broker list).
_SINK_OWNED_PROPS: frozenset[str] = frozenset()


# --------------------------------------------------------------------------------------------------- errors


class KafkaConnectorError(RuntimeError):
    """Root of the errors raised by the placement-kafka source and sink."""


class KafkaOptionError(KafkaConnectorError, ValueError):
    """An option of the placement-kafka source or sink is missing or malformed."""


class MissingTopicError(KafkaOptionError):
    """A subscribed topic does not exist on the broker (a configuration error, not a transient one)."""

    def __init__(self, topics: tuple[str, ...], bootstrap: str):
        self.topics = topics
        super().__init__(
            f"subscribed topic(s) {', '.join(topics)} do not exist on {bootstrap}; create them "
            "(or fix 'subscribe'), or set option failOnMissingTopic=false to start without them and read them "
            "from the earliest offset once they appear"
        )


class KafkaReadError(KafkaConnectorError):
    """The broker did not return the records of a planned offset range, or returned an error."""


@dataclass(frozen=True, slots=True)
class LostRange:
    """Records of one partition that the query has not read and the broker no longer holds.

    ``expected`` is the offset the query would read next; ``earliest`` and ``end`` are what the partition
    holds now (both None when the partition no longer exists).
    """

    topic: str
    partition: int
    expected: int
    earliest: int | None
    end: int | None

    def describe(self) -> str:
        """One sentence: which partition, what the query expected, what the broker has now."""
        where = f"{self.topic} partition {self.partition}"
        if self.end is None:
            return f"{where} no longer exists (the query had read it up to offset {self.expected})"
        if self.end < self.expected:
            return (f"{where} now ends at offset {self.end} (earliest {self.earliest}), below offset "
                    f"{self.expected} where the query would continue: its offsets went backwards")
        return (f"{where} now begins at offset {self.earliest}, after offset {self.expected} where the query "
                f"would continue: records {self.expected}..{self.earliest - 1} were deleted before being read")


class DataLossError(KafkaReadError):
    """Records the query has not read are gone from the broker (the option failOnDataLoss is true)."""

    def __init__(self, lost: tuple[LostRange, ...], bootstrap: str):
        self.lost = lost
        super().__init__(
            f"data loss on {bootstrap}: {'; '.join(r.describe() for r in lost)}. The broker lost its data, or "
            "the topic was deleted and recreated, and the records between are lost to this query (new records "
            "at the old offsets would be skipped). Re-send the lost records if they exist elsewhere; to go on "
            "from each partition's new beginning, restart with option failOnDataLoss=false "
            "(engine.kafka.failOnDataLoss=false), or start a new checkpoint"
        )


class KafkaWriteError(KafkaConnectorError):
    """Records could not be delivered to Kafka; the task fails and Spark retries it."""


# ------------------------------------------------------------------------------------------------- settings


def offset_key(topic: str, partition: int) -> str:
    """The offset-JSON key of one Kafka partition: ``"topic:partition"``."""
    return f"{topic}:{partition}"


def parse_offset_key(key: str) -> tuple[str, int]:
    """Inverse of :func:`offset_key` (topic names cannot contain ``:``)."""
    topic, sep, partition = key.rpartition(":")
    if not sep or not topic or not partition.lstrip("-").isdigit():
        raise KafkaReadError(f"malformed offset key {key!r}: expected 'topic:partition'; the checkpoint's offsets "
                             "were not written by this source")
    return topic, int(partition)


def _parse_bool(name: str, raw: str) -> bool:
    value = raw.strip().lower()
    if value in ("true", "1", "yes"):
        return True
    if value in ("false", "0", "no"):
        return False
    raise KafkaOptionError(f"{name}: expected true or false, got {raw!r}")


def parse_positive_int(name: str, raw: str) -> int:
    """``raw`` as an integer >= 1; the error names the option ``name``."""
    try:
        value = int(raw.strip())
    except ValueError:
        value = 0
    if value < 1:
        raise KafkaOptionError(f"{name}: expected an integer >= 1, got {raw!r}")
    return value


def kafka_client_props(options: Mapping[str, str], owned: frozenset[str]) -> tuple[tuple[str, str], ...]:
    """The ``kafka.<prop>`` options as confluent-kafka properties, sorted (Kafka property names are lower-case).

    Raises:
        KafkaOptionError: a property in ``owned`` is set by the connector itself.
    """
    props = []
    for name, value in options.items():
        if name.startswith("kafka."):
            prop = name[len("kafka."):]
            if prop in owned:
                raise KafkaOptionError(f"kafka.{prop}: this property is managed by the placement-kafka connector "
                                       "and cannot be overridden; remove the option")
            props.append((prop, str(value)))
    return tuple(sorted(props))


def lower_options(options: Mapping[str, str]) -> dict[str, str]:
    """Options with lower-case names, as Spark hands them to the data source."""
    return {str(k).lower(): str(v) for k, v in options.items()}


@dataclass(frozen=True, slots=True)
class StartingOffsets:
    """Where a new query starts: ``mode`` is ``earliest``, ``latest`` or ``specific``.

    For ``specific``, ``offsets`` maps ``(topic, partition)`` to an offset, -2 (earliest) or -1 (latest);
    partitions not listed start at earliest.
    """

    mode: str
    offsets: tuple[tuple[str, int, int], ...] = ()

    @classmethod
    def parse(cls, raw: str, topics: tuple[str, ...]) -> StartingOffsets:
        text = raw.strip()
        if text.lower() in ("earliest", "latest"):
            return cls(text.lower())
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            raise KafkaOptionError(f"startingOffsets: expected earliest, latest or JSON like "
                                   f'{{"topic": {{"0": 42}}}}, got {raw!r} ({exc})') from exc
        if not isinstance(obj, dict):
            raise KafkaOptionError(f"startingOffsets: JSON must be an object of topics, got {raw!r}")
        entries = []
        for topic, parts in obj.items():
            if topic not in topics:
                raise KafkaOptionError(f"startingOffsets: topic {topic!r} is not in subscribe "
                                       f"({','.join(topics)}); add it to subscribe or remove it")
            if not isinstance(parts, dict):
                raise KafkaOptionError(f"startingOffsets: {topic!r} must map partition numbers to offsets, "
                                       f"got {parts!r}")
            for partition, offset in parts.items():
                if not str(partition).isdigit() or isinstance(offset, bool) or not isinstance(offset, int) \
                        or offset < EARLIEST:
                    raise KafkaOptionError(f"startingOffsets: {topic}/{partition}: expected a partition number "
                                           f"and an offset >= 0 (or -2 earliest, -1 latest), got {offset!r}")
                entries.append((topic, int(partition), offset))
        return cls("specific", tuple(sorted(entries)))


@dataclass(frozen=True, slots=True)
class KafkaSourceSettings:
    """The source's options, read once (STYLE R2). Picklable; holds no client."""

    bootstrap_servers: str
    topics: tuple[str, ...]
    starting_offsets: StartingOffsets
    max_offsets_per_trigger: int | None = None
    commit_group: str | None = None
    end_offset_probe: str = "fetch"
    fail_on_missing_topic: bool = True
    fail_on_data_loss: bool = True
    poll_timeout_ms: int = 120_000
    unreachable_timeout_s: int = 300
    client_props: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> KafkaSourceSettings:
        """Build settings from data-source options (names matched case-insensitively).

        Raises:
            KafkaOptionError: a required option is missing or a value is malformed; the message names it.
        """
        opts = lower_options(options)
        bootstrap = opts.get("kafka.bootstrap.servers", "").strip()
        if not bootstrap:
            raise KafkaOptionError("kafka.bootstrap.servers: required, e.g. option('kafka.bootstrap.servers', "
                                   "'broker1:9092,broker2:9092')")
        if "assign" in opts or "subscribepattern" in opts:
            raise KafkaOptionError("assign / subscribePattern are not supported by placement-kafka; "
                                   "use subscribe=topic1,topic2")
        topics = tuple(dict.fromkeys(t.strip() for t in opts.get("subscribe", "").split(",") if t.strip()))
        if not topics:
            raise KafkaOptionError("subscribe: required, a comma-separated list of topics, e.g. 'events'")
        probe = opts.get("endoffsetprobe", "fetch").strip().lower()
        if probe not in ("fetch", "list"):
            raise KafkaOptionError(f"endOffsetProbe: expected fetch or list, got {opts['endoffsetprobe']!r}")
        max_offsets = opts.get("maxoffsetspertrigger")
        group = opts.get("commitgroup", "").strip() or None
        return cls(
            bootstrap_servers=bootstrap,
            topics=topics,
            starting_offsets=StartingOffsets.parse(opts.get("startingoffsets", "latest"), topics),
            max_offsets_per_trigger=(None if max_offsets is None
                                     else parse_positive_int("maxOffsetsPerTrigger", max_offsets)),
            commit_group=group,
            end_offset_probe=probe,
            fail_on_missing_topic=_parse_bool("failOnMissingTopic", opts.get("failonmissingtopic", "true")),
            fail_on_data_loss=_parse_bool("failOnDataLoss", opts.get("failondataloss", "true")),
            poll_timeout_ms=parse_positive_int("kafkaConsumer.pollTimeoutMs",
                                                opts.get("kafkaconsumer.polltimeoutms", "120000")),
            unreachable_timeout_s=parse_positive_int("unreachableTimeoutSeconds",
                                                     opts.get("unreachabletimeoutseconds", "300")),
            client_props=kafka_client_props(opts, _SOURCE_OWNED_PROPS),
        )

    def consumer_conf(self, **overrides: object) -> dict[str, object]:
        """confluent-kafka Consumer config: user ``kafka.*`` properties, then the connector's own."""
        conf: dict[str, object] = {"group.id": "placement-kafka-reader"}
        conf.update(self.client_props)
        conf.update({"bootstrap.servers": self.bootstrap_servers, "enable.auto.commit": False,
                     "enable.partition.eof": True, "auto.offset.reset": "error"})
        conf.update(overrides)
        return conf


@dataclass(frozen=True, slots=True)
class KafkaSinkSettings:
    """The sink's options and the input columns it uses, read once on the driver (STYLE R2). Picklable."""

    bootstrap_servers: str
    topic: str | None
    columns: tuple[str, ...]
    flush_timeout_ms: int = 300_000
    client_props: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_options(cls, options: Mapping[str, str], schema) -> KafkaSinkSettings:
        """Build settings from the writer's options and its input schema.

        Args:
            schema: the input DataFrame's ``StructType``.

        Raises:
            KafkaOptionError: a required option or the ``value`` column is missing, a column has an unsupported
                type, or there is neither a ``topic`` column nor a ``topic`` option.
        """
        opts = lower_options(options)
        bootstrap = opts.get("kafka.bootstrap.servers", "").strip()
        if not bootstrap:
            raise KafkaOptionError("kafka.bootstrap.servers: required for the placement-kafka sink")
        types = {field.name: field.dataType.simpleString() for field in schema.fields}
        if "value" not in types:
            raise KafkaOptionError(f"the placement-kafka sink needs a 'value' column (string or binary); "
                                   f"the input has {', '.join(types) or 'no columns'}")
        for name, accepted in KAFKA_SINK_COLUMN_TYPES.items():
            if name in types and types[name] not in accepted:
                raise KafkaOptionError(f"column {name!r} has type {types[name]}; the placement-kafka sink "
                                       f"accepts {' or '.join(accepted)}; cast it")
        topic = opts.get("topic", "").strip() or None
        if topic is None and "topic" not in types:
            raise KafkaOptionError("the placement-kafka sink needs option('topic', ...) or a 'topic' column")
        return cls(
            bootstrap_servers=bootstrap,
            topic=topic,
            columns=tuple(name for name in KAFKA_SINK_COLUMN_TYPES if name in types),
            flush_timeout_ms=parse_positive_int("flushTimeoutMs", opts.get("flushtimeoutms", "300000")),
            client_props=kafka_client_props(opts, _SINK_OWNED_PROPS),
        )

    def producer_conf(self) -> dict[str, object]:
        """confluent-kafka Producer config: ``linger.ms=5`` unless overridden, user ``kafka.*`` properties."""
        conf: dict[str, object] = {"linger.ms": 5}
        conf.update(self.client_props)
        conf["bootstrap.servers"] = self.bootstrap_servers
        return conf
