"""Every Spark schema of the streaming layer, as DDL strings and type names; the only place they are spelled.

The other streaming modules refer to these names instead of writing Spark types themselves, so a
column's type changes in one place:

* the normalised records the state function groups (`INPUT_COLUMNS`, `INPUT_TYPES`), from the Kafka
  source (`streaming.job.kafka_records`) or a replay's spool (`streaming.replay`);
* the state function's output rows and its state (`OUTPUT_DDL`, `STATE_DDL`);
* the ``placement-kafka`` source's rows, as Spark declares them and as Arrow must deliver them
  (`KAFKA_SOURCE_DDL`, `KAFKA_SOURCE_ARROW_SCHEMA`), and the columns its sink accepts
  (`KAFKA_SINK_COLUMN_TYPES`, `KAFKA_HEADER_VALUE_TYPE`).
"""

from __future__ import annotations

import pyarrow as pa

INPUT_TYPES: dict[str, str] = {
    "cluster": "string",
    "shard": "int",
    "o1": "long",
    "o2": "long",
    "o3": "long",
    "src_name": "string",
    "src_part": "int",
    "src_pos": "long",
    "value": "string",
}
"""The normalised record columns the state function receives, with their Spark types: the group key
(`cluster`, `shard`), the ordering key inside a batch (`o1, o2, o3`), the record's source (`src_name`,
`src_part`, `src_pos`: file and line, or topic, partition and offset) and its text (`value`)."""

INPUT_COLUMNS: tuple[str, ...] = tuple(INPUT_TYPES)
"""`INPUT_TYPES`' column names, in the order the query selects them."""

EPOCH_MS_TYPE = "long"
"""The type a record's numeric `time` (epoch milliseconds) is read as for the watermark (`streaming.job.event_time`)."""

OUTPUT_DDL = "kind string, cluster string, id string, value string"
"""The state function's output rows: the output's kind, its cluster, its id and its JSON text (a replay
packs many outputs into one row: then `id` is their count)."""

STATE_DDL = "model binary, next_due_ms long"
"""The state of one (cluster, shard) group: the model's blob and when its next timed change falls due."""

KAFKA_SOURCE_DDL = "topic string, partition int, offset long, timestamp timestamp, key binary, value binary"
"""The rows of the ``placement-kafka`` source."""

KAFKA_SOURCE_ARROW_SCHEMA = pa.schema([
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", pa.timestamp("us", tz="UTC")),
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
])
"""`KAFKA_SOURCE_DDL` as the Arrow batches the source's `read` yields. Must equal pyspark's
``to_arrow_schema(KAFKA_SOURCE_DDL, timezone="UTC")``: Spark rejects record batches whose schema differs
(DATA_SOURCE_RETURN_SCHEMA_MISMATCH); tests/streaming/test_kafka_io.py checks it."""

KAFKA_HEADER_VALUE_TYPE = "binary"
"""The type of a Kafka header's value in the sink's ``headers`` column."""

KAFKA_SINK_COLUMN_TYPES: dict[str, tuple[str, ...]] = {
    "value": ("string", "binary"),
    "key": ("string", "binary"),
    "topic": ("string",),
    "partition": ("int",),
    "headers": (f"array<struct<key:string,value:{KAFKA_HEADER_VALUE_TYPE}>>",),
}
"""The input columns the ``placement-kafka`` sink uses -> the Spark type names it accepts for each
(``DataType.simpleString()``); other columns are ignored."""
