"""The `applyInPandasWithState` function: Arrow frames of one (cluster, shard) <-> `state.step`.

Spark calls `make_state_function(...)`'s result once per group and micro-batch, on an executor's
Python worker. Everything it needs travels in its closure (picklable: the configuration mapping and
the replay file table). Records are parsed here, inside the group, so every dead letter keeps its
source; the model is one versioned blob in Spark's state store (`state.snapshot`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from events import DeadLetter, Origin, Reason, parse_record, to_json_text
from state import outputs
from state.outputs import Output
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


def _internal_error_outputs(item: Any, cluster: str, exc: Exception, settings: ModelSettings) -> list[Output]:
    """A record the engine failed on: a dead letter (nothing is lost) and, for a request, a failed decision."""
    if isinstance(item, DeadLetter):
        letter = item
    else:
        letter = DeadLetter(raw=to_json_text(item), source={"engine": "internal"}, reason=Reason.INTERNAL_ERROR,
                            detail=f"{type(exc).__name__}: {exc}", cluster=item.cluster,
                            request_id=getattr(item, "request_id", None), ledger_id=getattr(item, "ledger_id", None),
                            record_type=item.type)
    produced = [outputs.dead_letter(letter, cluster)]
    if letter.request_id is not None and letter.cluster is not None:
        produced.append(outputs.decision(
            cluster=letter.cluster, request_id=letter.request_id, request_type=letter.record_type,
            ledger_id=letter.ledger_id, time_ms=getattr(item, "time_ms", None), policy=settings.placement.policy,
            topology_version=None,
            error={"code": "INTERNAL_ERROR", "message": f"the engine failed on this request ({letter.detail}); "
                                                        "it is kept in the dead letters, please report it"}))
    return produced


def guarded_step(state: bytes | None, cluster: str, items: Sequence[Any], settings: ModelSettings,
                 conf: Mapping[str, str], shard: int = 0, shards: int = 1,
                 step_fn: Callable[..., Any] = step) -> tuple[bytes | None, list[Output]]:
    """`state.step` over one group's records, with the engine's one catch-all (STYLE R8).

    A bug must not turn into a crash loop (Spark would re-run the same batch forever) nor lose a
    record: when the batch step raises, the records are stepped one at a time from the last good
    state, and each record the engine fails on becomes an INTERNAL_ERROR dead letter (plus a failed
    decision for a request), while the others are applied normally.

    Returns:
        The new state blob (None for the unreadable-cluster group, which keeps no state) and the outputs.
    """
    model = loads(state, conf) if state is not None else None
    try:
        result = step_fn(model, cluster, items, settings, conf, shard=shard, shards=shards)
        return (dumps(result.model) if cluster else None), list(result.outputs)
    except Exception as exc:  # noqa: BLE001 - the per-request guard; everything else is typed
        log.error("cluster %s: processing %d records failed (%s: %s); retrying them one by one",
                  cluster, len(items), type(exc).__name__, exc)
    current, produced = state, []
    for item in items:
        model = loads(current, conf) if current is not None else None
        try:
            result = step_fn(model, cluster, [item], settings, conf, shard=shard, shards=shards)
        except Exception as exc:  # noqa: BLE001 - as above, for one record
            log.error("cluster %s: record %s failed (%s: %s); sent to the dead letters", cluster,
                      getattr(item, "request_id", None) or getattr(item, "type", "?"), type(exc).__name__, exc)
            produced.extend(_internal_error_outputs(item, cluster, exc, settings))
            continue
        current = dumps(result.model) if cluster else None
        produced.extend(result.outputs)
    return current, produced


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
        order = np.lexsort((frame["o3"].to_numpy(), frame["o2"].to_numpy(), frame["o1"].to_numpy()))
        names, parts = frame["src_name"].to_numpy()[order], frame["src_part"].to_numpy()[order]
        positions, values = frame["src_pos"].to_numpy()[order], frame["value"].to_numpy()[order]
        items = []
        for name, part, pos, value in zip(names, parts, positions, values):
            origin = _origin(source_kind, name, part, pos, files)
            item = parse_record(value if value is not None else "", origin)
            if not isinstance(item, DeadLetter) and item.cluster != cluster:
                # Spark grouped by the first `cluster` key, Python read another: refuse to guess.
                item = DeadLetter(raw=value, source=origin.to_record(), reason=Reason.INVALID_JSON,
                                  detail="cluster: the record names its cluster more than once")
            items.append(item)
        state = group_state.get[0] if cluster and group_state.exists else None
        new_state, produced = guarded_step(state, cluster, items, settings, conf, shard, shards)
        if new_state is not None:
            group_state.update((new_state,))
        yield pd.DataFrame({
            "kind": [o.kind for o in produced],
            "cluster": [o.cluster for o in produced],
            "id": [o.id for o in produced],
            "value": [o.to_json() for o in produced],
        })

    return on_group
