"""`placement-engine replay`: the streaming job over recorded JSON-lines files, then stop.

The input files are first merged into one spool ordered by (record time, file, line), so a replay
decides exactly as if the records had arrived in time order, whatever the batch size: batch
boundaries then fall between records that are already in order. A line whose time cannot be read
keeps its place in its file (it inherits the time of the line before it) and is dead-lettered by the
job with its file and line. The spool is cut into files of `engine.replay.recordsPerTrigger` records
and read by Spark's text source one file per micro-batch (availableNow).

The end of the input is the end of time for a replay: a last spool file holds one marker row per
cluster (`stateful.HORIZON_PART`) that settles its model up to the latest record time of the whole
input, so a stabilization delay or flap window that ended after a cluster's last record, but before
the recording ends, is reported, as an idle tick of the `run` job would report it.

Outputs: `DIR/decisions/`, `DIR/alerts/`, `DIR/dead-letters/` (JSON lines, one file per batch and kind)
and `DIR/summary.json`.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from events import parse_time_ms

from .config import ConfigError
from .settings import EngineSettings
from .stateful import HORIZON_PART

log = logging.getLogger(__name__)

OUTPUT_DIRS = {"decision": "decisions", "alert": "alerts", "dead_letter": "dead-letters"}
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


def _time_and_cluster(line: str) -> tuple[int | None, str | None]:
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError):
        return None, None
    if not isinstance(obj, dict):
        return None, None
    cluster = obj.get("cluster")
    cluster = cluster if isinstance(cluster, str) and cluster else None
    try:
        return (parse_time_ms(obj["time"]) if "time" in obj else None), cluster
    except Exception:  # noqa: BLE001 - a sort key only; the job dead-letters the line with its reason
        return None, cluster


def write_spool(files: Sequence[str], spool: Path, records_per_file: int) -> int:
    """Merge the inputs into time-ordered spool files `seq \\t file \\t line \\t raw`; return the record count.

    After the records, one end-of-input marker per cluster: `seq \\t -1 \\t horizon_ms \\t {"cluster": name}`.
    """
    keyed: list[tuple[int, int, int, str]] = []
    clusters: set[str] = set()
    horizon = -1
    for index, name in enumerate(files):
        last = -1
        with open(name, encoding="utf-8", errors="surrogateescape", newline="\n") as handle:
            for number, line in enumerate(handle, start=1):
                text = line.rstrip("\r\n")
                if not text.strip():
                    continue
                at, cluster = _time_and_cluster(text)
                if cluster is not None:
                    clusters.add(cluster)
                if at is None:
                    at = last
                horizon = max(horizon, at)
                last = at
                keyed.append((at, index, number, text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")))
    keyed.sort(key=lambda item: (item[0], item[1], item[2]))
    spool.mkdir(parents=True, exist_ok=True)
    base = time.time() - len(keyed) // max(records_per_file, 1) - 10
    for chunk, start in enumerate(range(0, len(keyed), records_per_file)):
        target = spool / f"part-{chunk:08d}{SPOOL_SUFFIX}"
        with open(target, "w", encoding="utf-8", newline="\n") as out:
            for seq in range(start, min(start + records_per_file, len(keyed))):
                _, index, number, text = keyed[seq]
                out.write(f"{seq}\t{index}\t{number}\t{text}\n")
        # Spark's file source plans files by modification time: make the order explicit.
        os.utime(target, (base + chunk, base + chunk))
    if clusters and horizon >= 0:
        chunk = -(-len(keyed) // max(records_per_file, 1))
        target = spool / f"part-{chunk:08d}{SPOOL_SUFFIX}"
        with open(target, "w", encoding="utf-8", newline="\n") as out:
            for seq, cluster in enumerate(sorted(clusters), start=len(keyed)):
                out.write(f"{seq}\t{HORIZON_PART}\t{horizon}\t{json.dumps({'cluster': cluster})}\n")
        os.utime(target, (base + chunk, base + chunk))
    return len(keyed)


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

    def add_output(self, kind: str, cluster: str, value: str) -> None:
        """Count one output from its JSON text (decision status, adherence and error code; alert
        type; dead-letter code)."""
        payload = json.loads(value)
        if kind == "decision":
            error = payload.get("error")
            self.add(kind, cluster, payload.get("status"), payload.get("adherence"),
                     error.get("code") if isinstance(error, dict) else None, None)
        elif kind == "alert":
            self.add(kind, cluster, None, None, None, payload.get("type"))
        else:
            self.add(kind, cluster, None, None, payload.get("code"), None)

    def add(self, kind: str, cluster: str, status: str | None, adherence: str | None, code: str | None,
            alert_type: str | None) -> None:
        """Count one output, given the fields the summary reads."""
        self.outputs[kind] += 1
        if cluster:
            self.clusters.add(cluster)
        if kind == "decision":
            self.decisions[status] += 1
            if adherence:
                self.adherence[adherence] += 1
            if code:
                self.errors[code] += 1
        elif kind == "alert":
            self.alerts[alert_type] += 1
        else:
            self.dead_letters[code] += 1

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
            **extra,
        }


def run_replay(spark, conf: Mapping[str, str], settings: EngineSettings, events: Sequence[str | Path],
               out: str | Path, progress: Callable[[dict], None] | None = None) -> dict:
    """Replay `events` through the job into `out`; return the summary (also written to summary.json)."""
    from pyspark.sql import functions as F

    from .job import place

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
        summary.records = write_spool(files, work / "spool", settings.replay_records_per_trigger)
        lines = spark.readStream.format("text").option("maxFilesPerTrigger", 1).load(str(work / "spool"))
        parts = F.split(F.col("value"), "\t", 4)
        records = lines.select(
            parts.getItem(3).alias("value"),
            parts.getItem(0).cast("long").alias("o1"),
            F.lit(0).cast("long").alias("o2"),
            F.lit(0).cast("long").alias("o3"),
            F.lit("").alias("src_name"),
            parts.getItem(1).cast("int").alias("src_part"),
            parts.getItem(2).cast("long").alias("src_pos"),
        )
        outputs = place(records, conf, settings, "file", files)

        def write_batch(frame, batch_id: int) -> None:
            # One pass over the outputs, moved to the driver as Arrow columns (no row pickling); the
            # summary reads each output's JSON here once (reading five fields with Spark's
            # get_json_object was about 80% of the executors' JVM time).
            table = frame.select("kind", "cluster", "value").toArrow()
            buckets: dict[str, list[str]] = {kind: [] for kind in OUTPUT_DIRS}
            for kind, cluster, value in zip(table.column("kind").to_pylist(), table.column("cluster").to_pylist(),
                                            table.column("value").to_pylist()):
                buckets[kind].append(value)
                summary.add_output(kind, cluster, value)
            for kind, values in buckets.items():
                if values:
                    target = out_dir / OUTPUT_DIRS[kind] / f"part-{batch_id:06d}.jsonl"
                    target.write_text("".join(v + "\n" for v in values), encoding="utf-8")
            summary.batches += 1
            if progress is not None:
                progress({"batch": batch_id, "records": summary.records, **summary.outputs})

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
        policy=conf.get("ensemblePlacementPolicy", "rackaware"),
        seed=conf.get("engine.seed", "0"),
        shards_per_cluster=settings.shards_per_cluster,
    )
    (out_dir / "summary.json").write_text(json.dumps(result, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return result
