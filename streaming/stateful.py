"""The `applyInPandasWithState` function: Arrow frames of one (cluster, shard) <-> `state.step`.

Spark calls `make_state_function(...)`'s result once per group and micro-batch, on an executor's
Python worker. Everything it needs travels in its closure (picklable: the model's settings,
`state.settings.ModelSettings`, and the replay file table). Records are parsed here, inside the group, so every dead
letter keeps its source; the model is one versioned blob in Spark's state store (`state.snapshot`), stored with the
time its next timed change falls due.

Idle clusters (`engine.idleTickSeconds` > 0, the `run` job): a group whose model has a stabilization
delay or flap window running, or a changed status record waiting for its interval to end, arms a
processing-time timeout. When it fires (the cluster had no records
for that long), the model is settled up to the event-time watermark (`state.step`'s `horizon_ms`), so an
ended stabilization delay or flap window is reported without waiting for the cluster's next record, with the outputs and
ids that record would have brought. While the watermark has not reached the due time the timeout is
re-armed without loading the model. A replay ticks every cluster once, at the end of its input,
through marker rows (`HORIZON_PART`) the spool writer adds.

Worker-local model cache: Spark reuses its Python workers across micro-batches, so each worker
keeps the live models it stepped last (`ModelCache`, bounded), keyed by (model settings, cluster,
shard, shards) and tagged with the exact state blob the step stored. The next batch reuses the live
model (its policy's caches warm) only when the blob Spark hands back is byte-for-byte that blob;
otherwise (another worker stepped the group since, a batch re-run after a failure reads an older
state, a fresh checkpoint) it is loaded from the blob as before. The blob is still written every
batch, so recovery never depends on the cache, and outputs are the same with or without it.
Spark hands a group to whichever Python worker is idle, so the cache pays off only when the same
worker gets the group again: in `run` most batches load the blob, which is why loading one is
cheap (the ledger audit stays packed until read, `state.registry`).
Cost: O(records) per group and batch, plus one blob load (on a cache miss) and one store, each
O(model size) and dominated by compression and JSON.

Slices: a group's batch larger than `SLICE_RECORDS` records is stepped slice by slice in the order the
step applies records (`time_slices`), and each slice's outputs are handed to Spark before the next is
stepped, so the sink writes while the worker steps on. The outputs are those of the whole batch, in
the same order; the live model goes from slice to slice and is stored once, after the last slice
(`step_slices`).
"""

from __future__ import annotations

import dataclasses
import logging
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
import pyarrow as pa

from events import REQUEST_TYPES, DeadLetter, Origin, Reason, parse_record, to_json_text
from state import outputs
from state.ordering import in_time_order
from state.outputs import Output
from state.settings import ModelSettings
from state.snapshot import dumps, loads
from state.status import status_gauges
from state.step import step

from .metrics_rows import OutputCounts
from .output_limits import DEFAULT_MAX_RAW_BYTES, deliverable
from .packed import pack_outputs, read_fields, routing_names, top_level, unpack
from .worker_gc import paused_gc, tune_worker_gc

log = logging.getLogger(__name__)

INVALID_UTF8 = "\u0000placement-engine:invalid-utf-8\u0000"
"""Prefix of a record whose bytes were not valid UTF-8, put there before Python sees it (the Kafka
source's value in `streaming.job.kafka_records`, a replayed line in `streaming.replay`): Spark's
string columns carry such bytes, but pyspark cannot hand them to the state function (its Arrow to
pandas conversion fails and the task with it, batch after batch). The rest is the text with each
bad byte replaced by U+FFFD; the state function turns it into an INVALID_ENCODING dead letter. No
JSON text starts with a NUL, so no usable record is taken for one."""

SOURCE_FILE = "file"
SOURCE_KAFKA = "kafka"
SOURCE_PACKED = "packed"
"""A replay's packed rows (`streaming.packed`): file records, many per row, outputs packed alike."""

HORIZON_PART = -1
"""`src_part` of a replay's end-of-input marker row (file source only; its value is the horizon in ms)."""


class ZstdCodec:
    """The state blobs' compression (`state.snapshot.Codec`): zstd through pyarrow, level 1.

    A micro-batch loads and stores every group's model, so the codec's speed is on every batch's path:
    zstd level 1 is several times faster than zlib level 1 both ways on a model's JSON and makes
    smaller blobs, so the JVM also moves and stores fewer bytes. zlib blobs (engines before it) still
    load. Cost: O(blob size) each way.
    """

    magic = b"PEZ\x01"

    def __init__(self, level: int = 1) -> None:
        self._codec = pa.Codec("zstd", compression_level=level)

    def compress(self, data: bytes) -> bytes:
        return self._codec.compress(data, asbytes=True)

    def decompress(self, data: bytes, size: int) -> bytes:
        return self._codec.decompress(data, decompressed_size=size, asbytes=True)


STATE_CODEC = ZstdCodec() if pa.Codec.is_available("zstd") else None
"""The codec of the stored models (None, so zlib, where this pyarrow was built without zstd)."""


def dump_model(model: Any) -> bytes:
    """The model as the streaming job stores it (`state.snapshot.dumps` framed by `STATE_CODEC`)."""
    return dumps(model, STATE_CODEC)


def load_model(blob: bytes, settings: ModelSettings) -> Any:
    """A model the streaming job stored (or an earlier engine's zlib blob): `state.snapshot.loads`."""
    return loads(blob, settings, STATE_CODEC)


class ModelCache:
    """Live models of this worker's recent groups, each tagged with the state blob it was stored as.

    Bounded by `max_entries` models and by `max_bytes` of their blobs (a model's heap is roughly
    ten to twenty times its compressed blob); the least recently used go first. A model is taken out
    while it is stepped (`take`) and put back only after a successful step (`put`), so a step that
    raised can never leave a half-applied model behind.
    """

    def __init__(self, max_entries: int = 256, max_bytes: int = 32 << 20) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._entries: OrderedDict[tuple, tuple[bytes, Any]] = OrderedDict()
        self._bytes = 0
        self.hits = 0
        self.misses = 0

    def take(self, key: tuple, blob: bytes) -> Any | None:
        """The live model stored as exactly `blob` under `key` (removed from the cache), or None."""
        entry = self._entries.pop(key, None)
        if entry is not None:
            self._bytes -= len(entry[0])
            if entry[0] == blob:
                self.hits += 1
                return entry[1]
        self.misses += 1
        return None

    def put(self, key: tuple, blob: bytes, model: Any) -> None:
        """Keep `model`, just stored as `blob`, for the group's next batch."""
        old = self._entries.pop(key, None)
        if old is not None:
            self._bytes -= len(old[0])
        if self.max_entries <= 0 or len(blob) > self.max_bytes:
            return
        self._entries[key] = (blob, model)
        self._bytes += len(blob)
        while len(self._entries) > self.max_entries or self._bytes > self.max_bytes:
            _, (dropped, _) = self._entries.popitem(last=False)
            self._bytes -= len(dropped)

    def clear(self) -> None:
        self._entries.clear()
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._entries)


MODEL_CACHE = ModelCache()
"""This worker's cache (module-level: it outlives the per-task function Spark unpickles)."""

def tick_due_ms(model: Any) -> int | None:
    """When an idle tick is worth arming for: the next stabilization delay or flap window to end, or the
    end of the interval a changed status record waits for (None: neither)."""
    dues = [due for due in (model.next_departure_due_ms(), model.next_status_due_ms()) if due is not None]
    return min(dues) if dues else None


class Stepped(NamedTuple):
    """What `guarded_step` returns: the new state blob, the outputs, and when the model's next idle tick
    is due (`tick_due_ms`; None: nothing waits, or the group keeps no state)."""

    state: bytes | None
    outputs: list[Output]
    next_due_ms: int | None


def _origin(kind: str, name: str, part: int, pos: int, files: Sequence[str]) -> Origin:
    if kind == SOURCE_FILE:
        return Origin.from_file(files[part] if 0 <= part < len(files) else name, int(pos))
    return Origin.from_kafka(name, int(part), int(pos))


def _routed_as_spark_did(item: Any, value: str, origin: Origin, names: Sequence[str]) -> Any:
    """`item` as the shard Spark sent it to must see it, for a record whose `type` Spark may read
    differently from Python.

    Spark routes by the last `type` that is not null (`json_tuple`: a cluster event to every shard, a
    request to one shard); Python reads the last, null included. When the last is null after a
    request type, the record is a dead letter Spark sent to one shard only, not necessarily shard 0,
    which alone reports the dead letters of events: it is reported as the request's, by that shard.
    A field Jackson cannot write (a lone surrogate) nulls every field Spark reads (`names`), the
    `type` with them: such a record went to every shard as an event. Should the two readings ever
    disagree otherwise, every shard would answer the record, or one shard alone would apply an event:
    the record becomes a dead letter reported once.
    """
    routed_by = read_fields(top_level(value), names)["type"]
    parsed = item.record_type if isinstance(item, DeadLetter) else item.type
    if (routed_by in REQUEST_TYPES) == (parsed in REQUEST_TYPES):
        return item
    routed = routed_by if routed_by in REQUEST_TYPES else None
    if isinstance(item, DeadLetter):
        return dataclasses.replace(item, record_type=routed)
    return DeadLetter(raw=value, source=origin.to_record(), reason=Reason.INVALID_JSON, record_type=routed,
                      detail="type: Spark's routing and the parser read the record's type differently")


def _internal_error_outputs(item: Any, cluster: str, exc: Exception, settings: ModelSettings,
                            origins: Mapping[int, Origin] | None = None) -> list[Output]:
    """A record the engine failed on: a dead letter (nothing is lost) and, for a request, a failed decision.

    `origins` maps `id(record)` to where it came from (CONTRACT §2: file and line, or topic, partition
    and offset); a record without one is marked `{"engine": "internal"}`.
    """
    if isinstance(item, DeadLetter):
        letter = item
    else:
        origin = (origins or {}).get(id(item))
        source = origin.to_record() if origin is not None else {"engine": "internal"}
        letter = DeadLetter(raw=to_json_text(item), source=source, reason=Reason.INTERNAL_ERROR,
                            detail=f"{type(exc).__name__}: {exc}", cluster=item.cluster,
                            request_id=getattr(item, "request_id", None), ledger_id=getattr(item, "ledger_id", None),
                            record_type=item.type)
    produced = [outputs.dead_letter(letter, cluster)]
    if letter.request_id is not None and letter.cluster is not None:
        produced.append(outputs.decision(
            cluster=letter.cluster, request_id=letter.request_id, request_type=letter.record_type,
            ledger_id=letter.ledger_id, time_ms=getattr(item, "time_ms", None), policy=settings.placement.policy,
            topology_version=None, content=outputs.dead_letter_content(letter),
            error={"code": "INTERNAL_ERROR", "message": f"the engine failed on this request ({letter.detail}); "
                                                        "it is kept in the dead letters, please report it"}))
    return produced


def guarded_step(state: bytes | None, cluster: str, items: Sequence[Any], settings: ModelSettings,
                 shard: int = 0, shards: int = 1, horizon_ms: int | None = None,
                 step_fn: Callable[..., Any] = step, cache_key: tuple | None = None,
                 cache: ModelCache | None = None, origins: Mapping[int, Origin] | None = None,
                 keep_model: Callable[[Any], None] | None = None) -> Stepped:
    """`state.step` over one group's records (or an idle tick), with the engine's one catch-all (STYLE R8).

    A bug must not turn into a crash loop (Spark would re-run the same batch forever) nor lose a
    record: when the batch step raises, the records are stepped one at a time from the last good
    state, and each record the engine fails on becomes an INTERNAL_ERROR dead letter (plus a failed
    decision for a request), while the others are applied normally. A failing tick leaves the state
    as it was (the cluster's next record settles it).

    With a `cache_key` (and `cache`, by default this worker's `MODEL_CACHE`), the live model stored
    as `state` by an earlier call is reused instead of loading `state`, and the stepped model is kept
    for the next call; see `ModelCache`.

    `keep_model`, when given, is called with the model the stored state holds (not for the
    unreadable-cluster group, nor when a failing tick left the state as it was): the run job's
    metrics row reads its gauges there, without loading the blob again.

    Returns:
        The new state blob (None for the unreadable-cluster group, which keeps no state), the
        outputs, and when the model's next departure timer ends.
    """
    if cache_key is not None and cache is None:
        cache = MODEL_CACHE
    model = None
    if state is not None:
        model = cache.take(cache_key, state) if cache_key is not None else None
        if model is None:
            model = load_model(state, settings)
    try:
        result = step_fn(model, cluster, items, settings, shard=shard, shards=shards, horizon_ms=horizon_ms,
                          origins=origins)
        if not cluster:
            return Stepped(None, list(result.outputs), None)
        stepped = _stepped(result.model, list(result.outputs))
        if cache_key is not None:
            cache.put(cache_key, stepped.state, result.model)
        if keep_model is not None:
            keep_model(result.model)
        return stepped
    except Exception as exc:  # noqa: BLE001 - the per-request guard; everything else is typed
        if not items:
            log.error("cluster %s: settling up to %s failed (%s: %s); left to the cluster's next record",
                      cluster, horizon_ms, type(exc).__name__, exc)
            return Stepped(state, [], None)
        log.error("cluster %s: processing %d records failed (%s: %s); retrying them one by one",
                  cluster, len(items), type(exc).__name__, exc)
    current, produced = state, []
    model = None
    for item in items:
        model = load_model(current, settings) if current is not None else None
        try:
            result = step_fn(model, cluster, [item], settings, shard=shard, shards=shards, origins=origins)
        except Exception as exc:  # noqa: BLE001 - as above, for one record
            log.error("cluster %s: record %s failed (%s: %s); sent to the dead letters", cluster,
                      getattr(item, "request_id", None) or getattr(item, "type", "?"), type(exc).__name__, exc)
            produced.extend(_internal_error_outputs(item, cluster, exc, settings, origins))
            model = None
            continue
        model = result.model
        current = dump_model(model) if cluster else None
        produced.extend(result.outputs)
    if current is None or not cluster:
        return Stepped(current, produced, None)
    if horizon_ms is not None:
        ticked = guarded_step(current, cluster, [], settings, shard, shards, horizon_ms, step_fn,
                              keep_model=keep_model)
        return Stepped(ticked.state, produced + ticked.outputs, ticked.next_due_ms)
    model = model if model is not None else load_model(current, settings)
    if keep_model is not None:
        keep_model(model)
    return Stepped(current, produced, tick_due_ms(model))


def step_slices(state: bytes | None, cluster: str, parts: Sequence[Sequence[Any]], settings: ModelSettings,
                shard: int = 0, shards: int = 1, horizon_ms: int | None = None,
                step_fn: Callable[..., Any] = step, cache_key: tuple | None = None,
                cache: ModelCache | None = None, origins: Mapping[int, Origin] | None = None,
                keep_model: Callable[[Any], None] | None = None) -> Iterator[Stepped]:
    """`guarded_step` over the consecutive slices of one group's batch (`time_slices`), one `Stepped`
    per slice; the model is stored once, after the last slice (only the last `Stepped` has a state).

    The live model goes from slice to slice. When a slice raises, the state it started from is rebuilt
    (the stored state stepped through the slices before it, whose outputs were already handed on and
    come out the same again) and that slice and the rest are stepped by `guarded_step`, as if each had
    been stored: the guard's record-by-record retry then starts from the right state. `keep_model`
    is handed the model the last slice ends with (see `guarded_step`).
    """
    if len(parts) <= 1 or not cluster:
        for part in parts:
            yield guarded_step(state, cluster, part, settings, shard, shards, horizon_ms, step_fn,
                               cache_key, cache, origins, keep_model)
        return
    if cache_key is not None and cache is None:
        cache = MODEL_CACHE
    model = cache.take(cache_key, state) if cache_key is not None and state is not None else None
    if model is None and state is not None:
        model = load_model(state, settings)
    applied: list[Any] = []
    for number, part in enumerate(parts, 1):
        last = number == len(parts)
        try:
            result = step_fn(model, cluster, part, settings, shard=shard, shards=shards,
                             horizon_ms=horizon_ms if last else None, origins=origins)
        except Exception:  # noqa: BLE001 - handed to the guard below, which logs and retries
            break
        model = result.model
        if not last:
            applied.extend(part)
            yield Stepped(None, list(result.outputs), None)
            continue
        stepped = _stepped(model, list(result.outputs))
        if cache_key is not None:
            cache.put(cache_key, stepped.state, model)
        if keep_model is not None:
            keep_model(model)
        yield stepped
        return
    if applied:
        before = load_model(state, settings) if state is not None else None
        rebuilt = step_fn(before, cluster, applied, settings, shard=shard, shards=shards).model
        state = dump_model(rebuilt)
    failed = number
    for number, part in enumerate(parts[failed - 1:], failed):
        last = number == len(parts)
        stepped = guarded_step(state, cluster, part, settings, shard, shards, horizon_ms if last else None,
                               step_fn, origins=origins, keep_model=keep_model if last else None)
        state = stepped.state
        yield stepped if last else Stepped(None, stepped.outputs, None)


def _stepped(model: Any, produced: list[Output]) -> Stepped:
    return Stepped(dump_model(model), produced, tick_due_ms(model))


def make_state_function(settings: ModelSettings, source_kind: str, shards: int = 1,
                        files: Sequence[str] = (), tick_seconds: float = 0,
                        max_raw_bytes: int = DEFAULT_MAX_RAW_BYTES, record_budget: int | None = None,
                        metrics: bool = False):
    """Build the per-group function for the model `settings` (`EngineSettings.model`).

    `tick_seconds` > 0 arms idle ticks (the query must use `GroupStateTimeout.ProcessingTimeTimeout`
    and define an event-time watermark); 0 leaves idle clusters to their next record.
    Every dead letter leaves cut to `max_raw_bytes` of raw text and `record_budget` bytes in all
    (`streaming.output_limits`; None: no sink limit).
    `metrics` (the `run` job only): every call that stepped the model ends with one metrics row, the
    counts of the outputs it handed on and the model's gauges (`streaming.metrics_rows`); a timeout
    that found nothing due (no model loaded) adds none.
    """
    files = list(files)
    packed = source_kind == SOURCE_PACKED
    tick_ms = int(tick_seconds * 1000)
    # The fields Spark read of each record (with idle ticks, the watermark's `time` too; a replay has none).
    routed_names = routing_names(shards, with_time=bool(tick_ms))

    def on_group(key: tuple, frames: Iterator[pd.DataFrame], group_state) -> Iterator[pd.DataFrame]:
        tune_worker_gc()
        cluster, shard = key[0], int(key[1]) % max(shards, 1)  # the key holds a spread label (streaming.job)
        stored = group_state.get if cluster and group_state.exists else None
        if group_state.hasTimedOut:
            kept: list[Any] = []
            produced = deliverable(on_tick(cluster, shard, stored, group_state, kept.append), max_raw_bytes,
                                   record_budget)
            if metrics and kept:
                counts = OutputCounts()
                counts.add(produced)
                produced.append(counts.to_output(cluster, shard, status_gauges(kept[-1])))
            yield _frame(produced)
            return
        # The collector stays off for the group's whole call, the slices handed on included
        # (streaming.worker_gc): switched back on after each slice, its first young collection
        # scanned the slice's decisions and the batch's parsed records, all still alive, for nothing.
        # Here it runs once the call is over, on what the model kept.
        with paused_gc():
            yield from answer_group(cluster, shard, stored, frames, group_state)

    def answer_group(cluster: str, shard: int, stored: tuple | None, frames: Iterator[pd.DataFrame],
                     group_state) -> Iterator[pd.DataFrame]:
        items, horizon_ms, origins = parse_group(cluster, list(frames))
        state = stored[0] if stored is not None else None
        parts = time_slices(items, SLICE_RECORDS) if cluster else [items]
        kept: list[Any] = []
        counts = OutputCounts() if metrics else None
        for stepped in step_slices(state, cluster, parts, settings, shard, shards, horizon_ms,
                                   cache_key=(settings, cluster, shard, shards), origins=origins,
                                   keep_model=kept.append if metrics else None):
            if stepped.state is not None:
                _store(group_state, stepped)
            produced = deliverable(stepped.outputs, max_raw_bytes, record_budget)
            if counts is not None:
                counts.add(produced)
            yield pd.DataFrame(pack_outputs(produced)) if packed else _frame(produced)
        if counts is not None:
            yield _frame([counts.to_output(cluster, shard, status_gauges(kept[-1]) if kept else None)])

    def parse_group(cluster: str, chunks: list[pd.DataFrame]) -> tuple[list[Any], int | None, dict[int, Origin]]:
        """The group's records in the order Spark's columns give, parsed; the replay's horizon; and where
        each record came from, by `id` (for the dead letter of a record the engine fails on)."""
        frame = chunks[0] if len(chunks) == 1 else pd.concat(chunks, ignore_index=True)
        order = np.lexsort((frame["o3"].to_numpy(), frame["o2"].to_numpy(), frame["o1"].to_numpy()))
        values = frame["value"].to_numpy()[order]
        if packed:
            entries = ((SOURCE_FILE, "", part, pos, text) for _, part, pos, text in unpack(values))
        else:
            names, parts = frame["src_name"].to_numpy()[order], frame["src_part"].to_numpy()[order]
            positions = frame["src_pos"].to_numpy()[order]
            entries = ((source_kind, name, part, pos, value)
                       for name, part, pos, value in zip(names, parts, positions, values))
        items = []
        origins: dict[int, Origin] = {}
        horizon_ms = None
        for kind, name, part, pos, value in entries:
            if kind == SOURCE_FILE and part == HORIZON_PART:
                horizon_ms = max(horizon_ms or 0, int(pos))
                continue
            origin = _origin(kind, name, part, pos, files)
            if value is not None and value.startswith(INVALID_UTF8):
                items.append(DeadLetter(raw=value[len(INVALID_UTF8):], source=origin.to_record(),
                                        reason=Reason.INVALID_ENCODING,
                                        detail="record: not valid UTF-8 (raw shows each bad byte as U+FFFD)"))
                continue
            item = parse_record(value if value is not None else "", origin)
            if not isinstance(item, DeadLetter) and item.cluster != cluster:
                # Spark's json_tuple and Python's json read the cluster differently: refuse to guess.
                item = DeadLetter(raw=value, source=origin.to_record(), reason=Reason.INVALID_JSON,
                                  detail=f"cluster: Spark's grouping read it as {cluster!r}, "
                                         f"the parser as {item.cluster!r}")
            elif shards > 1 and (value.count('"type"') > 1 or "\\u" in value):  # two `type` keys, an escape
                item = _routed_as_spark_did(item, value, origin, routed_names)
            items.append(item)
            origins[id(item)] = origin
        return items, horizon_ms, origins

    def on_tick(cluster: str, shard: int, stored: tuple | None, group_state,
                keep_model: Callable[[Any], None]) -> list[Output]:
        if stored is None or stored[1] is None:
            return []
        blob, due = stored
        horizon = group_state.getCurrentWatermarkMs()
        if horizon < due:
            group_state.setTimeoutDuration(tick_ms)
            return []
        stepped = guarded_step(blob, cluster, [], settings, shard, shards, horizon,
                               cache_key=(settings, cluster, shard, shards), keep_model=keep_model)
        _store(group_state, stepped)
        return stepped.outputs

    def _store(group_state, stepped: Stepped) -> None:
        if stepped.state is None:
            return
        group_state.update((stepped.state, stepped.next_due_ms))
        if tick_ms and stepped.next_due_ms is not None:
            group_state.setTimeoutDuration(tick_ms)

    return on_group


SLICE_RECORDS = 10_000
"""Records a group's batch is stepped in at a time; each slice's outputs are handed to Spark before the
next slice is stepped, so the sink writes them while the worker steps on (`time_slices`)."""


def time_slices(items: Sequence[Any], size: int) -> list[list[Any]]:
    """A group's parsed batch as consecutive slices that `state.step` applies exactly as the whole.

    `step` emits a batch's dead letters first and applies its records in (time, arrival) order
    (`state.ordering.in_time_order`): here the records are put in that order once and cut every `size`
    records, the dead letters going with the first slice, so stepping the slices one after the other
    applies the same records in the same order, with the same outputs in the same order
    (`step_slices` steps them).
    """
    if len(items) <= size:
        return [list(items)]
    letters = [item for item in items if isinstance(item, DeadLetter)]
    records = in_time_order([item for item in items if not isinstance(item, DeadLetter)])
    slices = [records[start:start + size] for start in range(0, len(records), size)] or [[]]
    slices[0] = letters + slices[0]
    return slices


def _frame(produced: Sequence[Output]) -> pd.DataFrame:
    return pd.DataFrame({
        "kind": [o.kind for o in produced],
        "cluster": [o.cluster for o in produced],
        "id": [o.id for o in produced],
        "value": [o.to_json() for o in produced],
    })
