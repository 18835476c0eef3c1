"""`placement-engine replay`: the streaming job over recorded JSON-lines files, then stop.

The input files are first merged into one spool ordered by (record time, file, line), so a replay
decides exactly as if the records had arrived in time order, whatever the batch size: batch
boundaries then fall between records that are already in order. A line whose time cannot be read
keeps its place in its file (it inherits the time of the line before it) and is dead-lettered by the
job with its file and line. The spool is cut into files of `engine.replay.recordsPerTrigger` records
and at most `engine.replay.bytesPerTrigger` bytes of record text, whichever comes first (a line longer
than that is a file of its own), read by Spark's text source one file per micro-batch (availableNow):
so a log of very long lines replays in the memory a log of short ones takes.

The driver reads every line anyway (for its time), so it also routes it to its (cluster, shard) group
exactly as the `run` job's Spark expressions would, and packs each group's records into a few rows
(`streaming.packed`): Spark then moves a handful of rows per batch instead of one per record, and the
state function, the same one `run` uses, unpacks them. Outputs come back packed the same way.

The end of the input is the end of time for a replay: a last spool file holds one marker per
cluster and shard (`stateful.HORIZON_PART`) that settles its model up to the latest record time of the
whole input, so a stabilization delay or flap window that ended after a cluster's last record, but
before the recording ends, is reported, as an idle tick of the `run` job would report it.

Outputs: `DIR/decisions/`, `DIR/alerts/`, `DIR/dead-letters/`, `DIR/status/` (the clusters' status
records; JSON lines, one file per batch and kind) and `DIR/summary.json`.

Progress (`streaming.progress`): reading the input is metered in bytes (its files' sizes are the total),
replaying in records (the spool's count is the total; a micro-batch is one spool file, so the driver knows
the records done when it writes a batch's outputs).
"""

from __future__ import annotations

import base64
import json
import logging
import os
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from events import parse_time_ms

from .config import ConfigError
from .job import place_packed
from .packed import PACK_BYTES, PACK_SIZE, SUMMARY, last_value, pack, route, top_level
from .progress import BYTES, ProgressDisplay
from .schemas import INPUT_TYPES
from .session import use_local_checkpoint_writer
from .settings import EngineSettings
from .stateful import HORIZON_PART, INVALID_UTF8

log = logging.getLogger(__name__)

OUTPUT_DIRS = {"decision": "decisions", "alert": "alerts", "dead_letter": "dead-letters", "status": "status"}
SPOOL_SUFFIX = ".tsv"


def input_files(paths: Iterable[str | Path]) -> list[str]:
    """Files named by `--events`: a file as is, a folder's regular files recursively (sorted, hidden skipped)."""
    found: list[str] = []
    for path in paths:
        p = Path(path)
        if p.is_file():
            found.append(str(p.resolve()))
        elif p.is_dir():
            for child in sorted(p.rglob("*")):
                if child.is_file() and not any(part.startswith((".", "_")) for part in child.relative_to(p).parts):
                    found.append(str(child.resolve()))
        else:
            raise ConfigError(f"--events {path}: no such file or folder")
    if not found:
        raise ConfigError("--events: the given paths hold no files")
    return found


def _time_ms(pairs: list | None, text: str) -> int | None:
    """The record's `time` in ms as the job reads it (the last `time` key), or None when unreadable."""
    if pairs is not None:
        value = last_value(pairs, "time")
    else:
        try:  # unreadable for get_json_object (e.g. NaN somewhere) may still be readable for the job
            obj = json.loads(text)
        except (ValueError, RecursionError):
            return None
        value = obj.get("time") if isinstance(obj, dict) else None
    if value is None:
        return None
    try:
        return parse_time_ms(value)
    except Exception:  # noqa: BLE001 - a sort key only; the job dead-letters the line with its reason
        return None


def batch_bounds(sizes: Sequence[int], max_records: int, max_bytes: int) -> list[tuple[int, int]]:
    """`(start, end)` of consecutive runs of `sizes` with at most `max_records` items and at most
    `max_bytes` in all; an item larger than `max_bytes` is a run of its own. Cost: O(len(sizes))."""
    bounds: list[tuple[int, int]] = []
    start, total = 0, 0
    for position, size in enumerate(sizes):
        if position > start and (position - start >= max_records or total + size > max_bytes):
            bounds.append((start, position))
            start, total = position, 0
        total += size
    if start < len(sizes):
        bounds.append((start, len(sizes)))
    return bounds


def _runs(entries: list, max_records: int, max_bytes: int) -> Iterable[list]:
    """`entries` (`(seq, part, pos, text)`) cut into packed rows of at most `max_records` records and
    about `max_bytes` of text (a longer record is a row of its own)."""
    for start, end in batch_bounds([len(entry[3]) for entry in entries], max_records, max_bytes):
        yield entries[start:end]


def end_of_input(keyed: Sequence[tuple], max_future_skew_ms: int | None) -> int:
    """The time the replay settles every cluster up to at the end: the latest record time a cluster's model
    accepts, over all clusters (-1: none).

    `keyed` is in time order, `(time_ms, ..., cluster, ...)` with the cluster at index 4. A record more than
    `max_future_skew_ms` ahead of its cluster's latest accepted one is refused by the model
    (`TIME_TOO_FAR_AHEAD`), so its time does not count: a refused record changes nothing but its dead
    letter, as in `run`, whose watermark never runs ahead of the wall clock. Cost: O(records).
    """
    latest: dict[str, int] = {}
    for item in keyed:
        at, cluster = item[0], item[4]
        previous = latest.get(cluster)
        if previous is None or max_future_skew_ms is None or at <= previous + max_future_skew_ms:
            latest[cluster] = at if previous is None else max(previous, at)
    return max(latest.values(), default=-1)


@dataclass(frozen=True, slots=True)
class Spool:
    """What `write_spool` wrote: `records` in all, and after each spool file (in the order the replay
    reads them, one per micro-batch) the records written so far (`ends`)."""

    records: int
    ends: tuple[int, ...]

    def done_after(self, batch: int) -> int:
        """Records replayed once micro-batch `batch` (= spool file `batch`) is written."""
        if not self.ends:
            return 0
        return self.ends[min(max(batch, 0), len(self.ends) - 1)]


READ_REPORT_LINES = 10_000
"""`write_spool` reports the bytes it has read every this many lines."""


def write_spool(files: Sequence[str], spool: Path, records_per_file: int, shards: int = 1,
                bytes_per_file: int = 1 << 62, max_future_skew_ms: int | None = None,
                on_read: Callable[[int], None] | None = None) -> Spool:
    """Merge the inputs into time-ordered, routed, packed spool files.

    A spool file holds at most `records_per_file` records and `bytes_per_file` bytes of record text
    (UTF-8), a longer record alone. A spool line is `base64(cluster) \t shard \t first seq \t packed
    entries` (`streaming.packed`), one per (cluster, shard) and run of at most `PACK_SIZE` records and
    about `PACK_BYTES` of text of one spool file; an entry is `[seq, file index, line, text]`. After
    the records, one end-of-input marker per cluster and shard: the entry `[seq, HORIZON_PART, horizon_ms, ""]`
    (see `end_of_input`).

    Args:
        on_read: called with the bytes read so far, every `READ_REPORT_LINES` lines and after each file.
    """
    keyed: list[tuple[int, int, int, str, str, Sequence[int], int]] = []
    read = 0
    for index, name in enumerate(files):
        last = -1
        with open(name, encoding="utf-8", errors="surrogateescape", newline="\n") as handle:
            for number, line in enumerate(handle, start=1):
                if on_read is not None:
                    read += len(line) if line.isascii() else len(line.encode("utf-8", "surrogateescape"))
                    if number % READ_REPORT_LINES == 0:
                        on_read(read)
                text = line.rstrip("\r\n")
                if not text.strip():
                    continue
                invalid = False
                size = len(text)
                if not text.isascii():
                    raw = text.encode("utf-8", "surrogateescape")
                    size = len(raw)
                    repaired = raw.decode("utf-8", "replace")
                    invalid, text = repaired != text, repaired
                pairs = top_level(text)
                at = _time_ms(pairs, text)
                if at is None:
                    at = last
                last = at
                cluster, targets = route(pairs, shards)
                if invalid:  # an INVALID_ENCODING dead letter, not a record (stateful.INVALID_UTF8)
                    text = INVALID_UTF8 + text
                keyed.append((at, index, number, text, cluster, targets, size))
        if on_read is not None:
            on_read(read)
    keyed.sort(key=lambda item: (item[0], item[1], item[2]))
    spool.mkdir(parents=True, exist_ok=True)
    bounds = batch_bounds([item[6] for item in keyed], max(records_per_file, 1), max(bytes_per_file, 1))
    files_written = 0
    base = time.time() - len(bounds) - 10

    def write(groups: dict[tuple[str, int], list]) -> None:
        nonlocal files_written
        target = spool / f"part-{files_written:08d}{SPOOL_SUFFIX}"
        with open(target, "w", encoding="ascii", newline="\n") as out:
            for (cluster, shard), entries in groups.items():
                label = base64.b64encode(cluster.encode("utf-8")).decode("ascii")
                for run in _runs(entries, PACK_SIZE, PACK_BYTES):
                    out.write(f"{label}\t{shard}\t{run[0][0]}\t{pack(run)}\n")
        # Spark's file source plans files by modification time: make the order explicit.
        os.utime(target, (base + files_written, base + files_written))
        files_written += 1

    clusters: set[str] = set()
    ends: list[int] = []
    for start, end in bounds:
        groups: dict[tuple[str, int], list] = {}
        for seq in range(start, end):
            _, index, number, text, cluster, targets, _ = keyed[seq]
            if cluster:
                clusters.add(cluster)
            for shard in targets:
                groups.setdefault((cluster, shard), []).append((seq, index, number, text))
        write(groups)
        ends.append(end)
    log.info("replay: %d records in %d micro-batches (at most %d records and %d bytes each)", len(keyed),
             len(bounds), records_per_file, bytes_per_file)
    horizon = end_of_input(keyed, max_future_skew_ms)
    if clusters and horizon >= 0:
        seq = len(keyed)
        write({(cluster, shard): [(seq, HORIZON_PART, horizon, "")]
               for cluster in sorted(clusters) for shard in range(max(shards, 1))})
        ends.append(len(keyed))
    return Spool(len(keyed), tuple(ends))


@dataclass
class ReplaySummary:
    """Counts gathered while the outputs are written (the content of summary.json)."""

    records: int = 0
    batches: int = 0
    outputs: Counter = field(default_factory=Counter)
    decisions: Counter = field(default_factory=Counter)
    adherence: Counter = field(default_factory=Counter)
    errors: Counter = field(default_factory=Counter)
    alerts: Counter = field(default_factory=Counter)
    dead_letters: Counter = field(default_factory=Counter)
    clusters: set = field(default_factory=set)

    def add_counts(self, cluster: str, counts: Mapping[str, Mapping[str, int]]) -> None:
        """Add one group's output counts (`streaming.packed.summary_counts`)."""
        if cluster:
            self.clusters.add(cluster)
        tallies = {"kind": self.outputs, "status": self.decisions, "adherence": self.adherence,
                   "error": self.errors, "alert": self.alerts, "dead_letter": self.dead_letters}
        for name, values in counts.items():
            tallies[name].update(values)

    def to_dict(self, **extra) -> dict:
        return {
            "records": self.records,
            "batches": self.batches,
            "clusters": len(self.clusters),
            "decisions": {"total": self.outputs["decision"], **dict(sorted(self.decisions.items()))},
            "adherence": dict(sorted(self.adherence.items())),
            "errors": dict(sorted(self.errors.items())),
            "alerts": {"total": self.outputs["alert"], **dict(sorted(self.alerts.items()))},
            "dead_letters": {"total": self.outputs["dead_letter"], **dict(sorted(self.dead_letters.items()))},
            "status_records": self.outputs["status"],
            **extra,
        }


def run_replay(spark: SparkSession, settings: EngineSettings, events: Sequence[str | Path], out: str | Path,
               progress: Callable[[dict], None] | None = None, display: ProgressDisplay | None = None,
               label: str = "replay") -> dict:
    """Replay `events` through the job into `out`; return the summary (also written to summary.json).

    Args:
        progress: called after each micro-batch with `{"batch", "records" (in all), "done" (records
            replayed so far), and the output counts so far by kind}`.
        display: where to show progress (`streaming.progress`): reading the input, then the records
            replayed; `label` starts its lines. None: no progress shown.
    """
    started = time.monotonic()
    files = input_files(events)
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    for sub in OUTPUT_DIRS.values():
        shutil.rmtree(out_dir / sub, ignore_errors=True)
        (out_dir / sub).mkdir()
    work = Path(tempfile.mkdtemp(prefix="replay-", dir=out_dir))
    summary = ReplaySummary()
    try:
        reading = None
        if display is not None:
            reading = display.meter(f"{label} (reading input)", sum(os.path.getsize(name) for name in files), BYTES)
        with reading or nullcontext():
            spool = write_spool(files, work / "spool", settings.replay_records_per_trigger,
                                settings.shards_per_cluster, settings.replay_bytes_per_trigger,
                                settings.model.max_future_skew_ms, reading.update if reading else None)
        summary.records = spool.records
        meter = display.meter(label, spool.records) if display is not None else None
        lines = spark.readStream.format("text").option("maxFilesPerTrigger", 1).load(str(work / "spool"))
        parts = F.split(F.col("value"), "\t", 4)
        rows = lines.select(
            F.unbase64(parts.getItem(0)).cast(INPUT_TYPES["cluster"]).alias("cluster"),
            parts.getItem(1).cast(INPUT_TYPES["shard"]).alias("shard"),
            parts.getItem(2).cast(INPUT_TYPES["o1"]).alias("o1"),
            parts.getItem(3).alias("value"),
        )
        outputs = place_packed(rows, settings, files)

        def write_batch(frame, batch_id: int) -> None:
            # Packed rows (one per group and kind) come to the driver as Arrow columns; the counts for
            # summary.json were made by the workers beside the outputs.
            table = frame.select("kind", "cluster", "value").toArrow()
            buckets: dict[str, list[str]] = {kind: [] for kind in OUTPUT_DIRS}
            for kind, cluster, value in zip(table.column("kind").to_pylist(), table.column("cluster").to_pylist(),
                                            table.column("value").to_pylist()):
                if kind == SUMMARY:
                    summary.add_counts(cluster, json.loads(value))
                else:
                    buckets[kind].append(value)
            for kind, values in buckets.items():
                if values:
                    target = out_dir / OUTPUT_DIRS[kind] / f"part-{batch_id:06d}.jsonl"
                    target.write_text("".join(v + "\n" for v in values), encoding="utf-8")
            summary.batches += 1
            done = spool.done_after(batch_id)
            if meter is not None:
                meter.update(done)
            if progress is not None:
                progress({"batch": batch_id, "records": summary.records, "done": done, **summary.outputs})

        use_local_checkpoint_writer(spark, str(work / "checkpoint"))
        with meter or nullcontext():
            query = (outputs.writeStream.foreachBatch(write_batch)
                     .option("checkpointLocation", str(work / "checkpoint"))
                     .trigger(availableNow=True).queryName(f"replay-{os.getpid()}-{id(summary)}").start())
            query.awaitTermination()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    elapsed = time.monotonic() - started
    result = summary.to_dict(
        inputs=files,
        seconds=round(elapsed, 3),
        records_per_second=round(summary.records / elapsed, 1) if elapsed > 0 else None,
        policy=settings.configured_policy,
        seed=settings.configured_seed,
        shards_per_cluster=settings.shards_per_cluster,
    )
    (out_dir / "summary.json").write_text(json.dumps(result, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return result
