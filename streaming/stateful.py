"""The `applyInPandasWithState` function: Arrow frames of one (cluster, shard) <-> `state.step`.

Spark calls `make_state_function(...)`'s result once per group and micro-batch, on an executor's
Python worker. Everything it needs travels in its closure (picklable: the configuration mapping and
the replay file table). Records are parsed here, inside the group, so every dead letter keeps its
source; the model is one versioned blob in Spark's state store (`state.snapshot`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence

import pandas as pd

from events import DeadLetter, Origin, Reason, parse_record
from state.settings import ModelSettings
from state.snapshot import dumps, loads
from state.step import step

log = logging.getLogger(__name__)

INPUT_COLUMNS = ("cluster", "shard", "o1", "o2", "o3", "src_name", "src_part", "src_pos", "value")
OUTPUT_DDL = "kind string, cluster string, id string, value string"
STATE_DDL = "model binary"

SOURCE_FILE = "file"
SOURCE_KAFKA = "kafka"


def _origin(kind: str, name: str, part: int, pos: int, files: Sequence[str]) -> Origin:
    if kind == SOURCE_FILE:
        return Origin.from_file(files[part] if 0 <= part < len(files) else name, int(pos))
    return Origin.from_kafka(name, int(part), int(pos))


def make_state_function(conf: Mapping[str, str], source_kind: str, shards: int = 1,
                        files: Sequence[str] = ()):
    """Build the per-group function; `conf` holds placement and engine keys as strings."""
    conf = dict(conf)
    files = list(files)
    settings = ModelSettings.from_conf(conf)

    def on_group(key: tuple, frames: Iterator[pd.DataFrame], group_state) -> Iterator[pd.DataFrame]:
        cluster, shard = key[0], int(key[1])
        chunks = list(frames)
        frame = chunks[0] if len(chunks) == 1 else pd.concat(chunks, ignore_index=True)
        frame = frame.sort_values(["o1", "o2", "o3"], kind="stable")
        items = []
        for name, part, pos, value in zip(frame["src_name"], frame["src_part"], frame["src_pos"], frame["value"]):
            origin = _origin(source_kind, name, part, pos, files)
            item = parse_record(value if value is not None else "", origin)
            if not isinstance(item, DeadLetter) and item.cluster != cluster:
                # Spark grouped by the first `cluster` key, Python read another: refuse to guess.
                item = DeadLetter(raw=value, source=origin.to_record(), reason=Reason.INVALID_JSON,
                                  detail="cluster: the record names its cluster more than once")
            items.append(item)
        if not cluster:
            outputs = step(None, "", items, settings, conf, shard=shard, shards=shards).outputs
        else:
            model = loads(group_state.get[0], conf) if group_state.exists else None
            result = step(model, cluster, items, settings, conf, shard=shard, shards=shards)
            group_state.update((dumps(result.model),))
            outputs = result.outputs
        yield pd.DataFrame({
            "kind": [o.kind for o in outputs],
            "cluster": [o.cluster for o in outputs],
            "id": [o.id for o in outputs],
            "value": [o.to_json() for o in outputs],
        }, columns=["kind", "cluster", "id", "value"])

    return on_group
