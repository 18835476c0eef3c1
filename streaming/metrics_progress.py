"""The `run` job's Prometheus metrics, from the streaming query's progress: `EngineMetrics`.

`EngineMetrics.on_progress(progress)` takes one micro-batch's progress (Spark's `StreamingQueryProgress`
as a dict, the JSON `lastProgress` gives) and updates the metrics of its own `CollectorRegistry`:

* stream health, from Spark's numbers: input rows and rates per source, batch durations and phases,
  consumer lag per topic-partition (from the source's offsets), state rows and memory, watermark delay;
* engine counters and per-cluster gauges, from the metrics rows the state function emitted and Spark
  observed for the batch (`streaming.metrics_rows`, `observedMetrics`).

Every metric, its labels and meaning are listed in docs/metrics.md. Nothing here imports Spark or reads
the wall clock: `streaming.metrics` feeds it from a `StreamingQueryListener` and serves the registry.

Consumer lag of a partition is the broker's end offset when the micro-batch was planned (`latestOffset`)
minus the offset the batch started from (`startOffset`): the records not yet processed when the batch
began, which is what Kafka's lag tools show, sampled at each batch. It is 0 once a batch starts with
nothing left to read (the idle ticks' empty micro-batches, or Spark's idle event: `on_idle`). A partition
whose start is unknown (the first batch after a start, a new partition) counts what the batch left
unread (`latestOffset - endOffset`).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.process_collector import ProcessCollector

from state.outputs import ALERT_LEDGER_NOT_ADHERING, ALERT_LEDGER_RE_ADHERE

from .metrics_rows import OBSERVATION, ROWS, MetricsRow

log = logging.getLogger("placement-engine")

OTHER_CLUSTERS = "_other"
"""The `cluster` label of every cluster past the first `engine.metrics.maxClusters` seen."""

BOOKIE_STATES = ("writable", "readonly", "pending_departure")
"""`placement_bookies`' `state` label values (the `state.status.status_gauges` keys)."""

LEDGER_GAUGES = ("remembered_ledgers", "not_adhering", "re_adhere_possible", "skew_open")
"""Gauges a shard keeps of its own ledgers and decisions: a cluster's value is the sum over its shards."""

OPEN_LEDGER_ALERTS = (("not_adhering", ALERT_LEDGER_NOT_ADHERING), ("re_adhere_possible", ALERT_LEDGER_RE_ADHERE))
"""`status_gauges` key -> `placement_open_ledger_alerts`' `type` label (the alert's type)."""

DURATION_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, float("inf"))
"""Buckets of the batch duration histograms, in seconds (a trigger is typically 1 s)."""


def iso_seconds(text: str | None) -> float | None:
    """Spark's progress time (`2026-01-02T03:04:05.678Z`) as Unix seconds; None for none."""
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _offsets(value: Any) -> dict[str, int]:
    """A source's offsets as `{"topic:partition": next offset}` (Spark gives the JSON, or its text)."""
    if value is None:
        return {}
    if isinstance(value, str):
        value = json.loads(value) if value.strip().startswith("{") else {}
    return {str(key): int(offset) for key, offset in value.items() if isinstance(offset, int)} \
        if isinstance(value, dict) else {}


@dataclass(frozen=True, slots=True)
class SourceLag:
    """One source's lag at a micro-batch: per `topic:partition` (`lag`, see the module docstring) and
    the records the batch left unread although they were there when it was planned (`left`)."""

    lag: Mapping[str, int]
    left: int


def source_lag(source: Mapping[str, Any]) -> SourceLag:
    """The lag of one entry of a progress' `sources`. Cost: O(partitions)."""
    start, end, latest = (_offsets(source.get(key)) for key in ("startOffset", "endOffset", "latestOffset"))
    lag, left = {}, 0
    for key, last in latest.items():
        read_to = end.get(key, last)
        left += max(last - read_to, 0)
        lag[key] = max(last - start.get(key, read_to), 0)
    return SourceLag(lag, left)


def source_label(source: Mapping[str, Any]) -> str:
    """A bounded label for a source: the topics it reads, sorted, comma-separated (else Spark's
    description without its instance suffix)."""
    topics = sorted({key.rpartition(":")[0] for key in _offsets(source.get("latestOffset"))
                     | _offsets(source.get("endOffset"))})
    return ",".join(topics) if topics else str(source.get("description", "")).split("@", 1)[0]


class ClusterLabels:
    """The `cluster` label of each cluster: its name for the first `limit` clusters seen (they keep
    it for the life of the process), `OTHER_CLUSTERS` for the rest."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._named: set[str] = set()

    def __call__(self, cluster: str) -> str:
        if cluster in self._named:
            return cluster
        if len(self._named) < self.limit:
            self._named.add(cluster)
            return cluster
        return OTHER_CLUSTERS


class BehindLog:
    """Says "behind" once per episode, with the lag, and "caught up" once when it ends.

    A micro-batch is behind when records were waiting at its start (lag > 0) and either it took longer
    than the trigger interval (Spark starts the next one late) or it left records it had seen unread
    (`engine.kafka.maxOffsetsPerTrigger`). The first micro-batch of a start, which also sets the query
    up, is not judged by its duration.
    """

    def __init__(self, trigger_seconds: float) -> None:
        self.trigger_seconds = trigger_seconds
        self.behind = False
        self._judged_duration = False

    def update(self, batch_id: int, duration_s: float, lag: Mapping[str, int], left: int) -> None:
        waiting = sum(lag.values())
        slow = self._judged_duration and duration_s > self.trigger_seconds
        self._judged_duration = True
        behind = waiting > 0 and (slow or left > 0)
        if behind and not self.behind:
            worst = max(lag, key=lambda key: (lag[key], key))
            log.warning("behind: micro-batch %d took %.1f s (trigger %g s) with %d record(s) waiting at its "
                        "start (most on %s: %d); this is said once, and again when caught up", batch_id,
                        duration_s, self.trigger_seconds, waiting, worst, lag[worst])
        elif self.behind and not behind:
            log.info("caught up: micro-batch %d took %.1f s with %d record(s) waiting at its start",
                     batch_id, duration_s, waiting)
        self.behind = behind

    def idle(self) -> None:
        """Spark found nothing to read at a trigger."""
        if self.behind:
            log.info("caught up: nothing left to read")
        self.behind = False


class EngineMetrics:
    """Every metric of the `run` job, in its own registry (`registry`), fed one progress at a time.

    Thread-safe (Spark's listener calls and the HTTP server's reads may overlap).
    """

    def __init__(self, *, max_clusters: int = 50, trigger_seconds: float = 1.0, process: bool = True) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.clusters = ClusterLabels(max_clusters)
        self.behind_log = BehindLog(trigger_seconds)
        self._lock = threading.Lock()
        self._gauges: dict[str, dict[tuple[str, int], tuple[int, Mapping[str, int]]]] = {}
        self._members: dict[str, set[str]] = {}
        self._lag_keys: set[tuple[str, str]] = set()
        self._sequence = 0
        registry = self.registry
        if process:
            ProcessCollector(registry=registry)

        def counter(name: str, doc: str, labels: tuple[str, ...] = ()) -> Counter:
            return Counter(name, doc, labels, registry=registry)

        def gauge(name: str, doc: str, labels: tuple[str, ...] = ()) -> Gauge:
            return Gauge(name, doc, labels, registry=registry)

        self.batches = counter("placement_batches", "Micro-batches completed.")
        self.input_rows = counter("placement_input_rows", "Records read, per source.", ("source",))
        self.input_rate = gauge("placement_input_rows_per_second",
                                "Records arriving per second in the last micro-batch, per source.", ("source",))
        self.processed_rate = gauge("placement_processed_rows_per_second",
                                    "Records processed per second in the last micro-batch, per source.", ("source",))
        self.batch_duration = Histogram("placement_batch_duration_seconds",
                                        "Time a micro-batch spends reading, stepping the clusters and writing "
                                        "(Spark's addBatch).", buckets=DURATION_BUCKETS, registry=registry)
        self.trigger_to_commit = Histogram("placement_trigger_to_commit_seconds",
                                           "Time from a micro-batch's trigger to the commit of its offsets "
                                           "(Spark's triggerExecution).", buckets=DURATION_BUCKETS, registry=registry)
        self.phase = gauge("placement_batch_phase_seconds", "The last micro-batch's time per phase "
                           "(Spark's durationMs: latestOffset, queryPlanning, addBatch, walCommit, commitOffsets, "
                           "triggerExecution, ...).", ("phase",))
        self.last_batch = gauge("placement_last_batch_timestamp_seconds",
                                "When the last micro-batch started (Unix time).")
        self.lag = gauge("placement_kafka_lag_records", "Records of the partition not yet processed when the last "
                         "micro-batch began (consumer lag).", ("topic", "partition"))
        self.behind = gauge("placement_behind", "1 while the job is behind its input (see docs/metrics.md), else 0.")
        self.state_rows = gauge("placement_state_rows", "Rows in the state store (one per cluster and shard).")
        self.state_bytes = gauge("placement_state_memory_bytes", "Memory the state store reports using.")
        self.state_dropped = counter("placement_state_rows_dropped_by_watermark",
                                     "Input rows the stateful operator dropped as later than the watermark.")
        self.watermark_delay = gauge("placement_watermark_delay_seconds",
                                     "How far the event-time watermark is behind the last micro-batch's start.")
        self.decisions = counter("placement_decisions", "Decisions written.",
                                 ("cluster", "status", "policy", "adherence"))
        self.alerts = counter("placement_alerts", "Alerts written (opening and .resolved events).",
                              ("cluster", "type", "severity"))
        self.dead_letters = counter("placement_dead_letters", "Dead letters written.", ("source", "code"))
        self.clusters_seen = gauge("placement_clusters", "Clusters (each counted once) that have reported gauges.")
        self.bookies = gauge("placement_bookies", "Bookies by state.", ("cluster", "state"))
        self.default_rack = gauge("placement_default_rack_bookies",
                                  "Writable bookies placed in the policy's default rack.", ("cluster",))
        self.join_failures = gauge("placement_bookie_join_failures",
                                   "Writable bookies whose location is unusable (join failed).", ("cluster",))
        self.flapping = gauge("placement_flapping_bookies", "Bookies currently flapping.", ("cluster",))
        self.remembered = gauge("placement_remembered_ledgers", "Ledgers the audit remembers.", ("cluster",))
        self.open_ledger_alerts = gauge("placement_open_ledger_alerts",
                                        "Open ledger alerts (placement debt), by alert type.", ("cluster", "type"))
        self.open_skew_alerts = gauge("placement_open_skew_alerts",
                                      "Open placement.cluster.skew alerts (one per scope and shard).", ("cluster",))
        self.topology_version = gauge("placement_topology_version", "The cluster's topology version.", ("cluster",))
        self.clock = gauge("placement_cluster_clock_seconds", "The cluster's event-time clock (Unix time).",
                           ("cluster",))

    # ----------------------------------------------------------------------------------------- progress

    def on_progress(self, progress: Mapping[str, Any]) -> None:
        """Take one micro-batch's progress. Cost: O(sources' partitions + metrics rows + clusters touched
        × their shards), plus O(clusters under `_other` × shards) when one of them reported."""
        with self._lock:
            self._stream(progress)
            rows = ((progress.get("observedMetrics") or {}).get(OBSERVATION) or {}).get(ROWS) or []
            self._engine([MetricsRow.from_json(text) for text in rows if text])

    def on_idle(self) -> None:
        """Spark found nothing to read at a trigger: every partition's lag is 0."""
        with self._lock:
            for topic, partition in self._lag_keys:
                self.lag.labels(topic, partition).set(0)
            self.behind_log.idle()
            self.behind.set(0)

    def _stream(self, progress: Mapping[str, Any]) -> None:
        self.batches.inc()
        durations = progress.get("durationMs") or {}
        for phase, millis in durations.items():
            self.phase.labels(phase).set(millis / 1000)
        if "addBatch" in durations:
            self.batch_duration.observe(durations["addBatch"] / 1000)
        trigger_s = durations.get("triggerExecution", progress.get("batchDuration", 0)) / 1000
        self.trigger_to_commit.observe(trigger_s)
        started = iso_seconds(progress.get("timestamp"))
        if started is not None:
            self.last_batch.set(started)
        lag: dict[str, int] = {}
        left = 0
        for source in progress.get("sources") or []:
            label = source_label(source)
            self.input_rows.labels(label).inc(int(source.get("numInputRows") or 0))
            self.input_rate.labels(label).set(_number(source.get("inputRowsPerSecond")))
            self.processed_rate.labels(label).set(_number(source.get("processedRowsPerSecond")))
            measured = source_lag(source)
            lag.update(measured.lag)
            left += measured.left
        for key, records in lag.items():
            topic, _, partition = key.rpartition(":")
            self._lag_keys.add((topic, partition))
            self.lag.labels(topic, partition).set(records)
        operators = progress.get("stateOperators") or []
        if operators:
            self.state_rows.set(sum(int(op.get("numRowsTotal") or 0) for op in operators))
            self.state_bytes.set(sum(int(op.get("memoryUsedBytes") or 0) for op in operators))
            self.state_dropped.inc(sum(int(op.get("numRowsDroppedByWatermark") or 0) for op in operators))
        watermark = iso_seconds((progress.get("eventTime") or {}).get("watermark"))
        if watermark and started is not None:    # 0: no watermark yet (no record with a time)
            self.watermark_delay.set(max(started - watermark, 0.0))
        self.behind_log.update(int(progress.get("batchId", -1)), trigger_s, lag, left)
        self.behind.set(1 if self.behind_log.behind else 0)

    # ------------------------------------------------------------------------------------------ engine

    def _engine(self, rows: list[MetricsRow]) -> None:
        touched: set[str] = set()
        for row in rows:
            for (source, code), n in row.dead_letters:
                self.dead_letters.labels(source, code).inc(n)
            if not (row.decisions or row.alerts or row.gauges is not None):
                continue                       # the unreadable-cluster group: dead letters only
            cluster = self.clusters(row.cluster)
            for (status, policy, adherence), n in row.decisions:
                self.decisions.labels(cluster, status, policy, adherence).inc(n)
            for (alert_type, severity), n in row.alerts:
                self.alerts.labels(cluster, alert_type, severity).inc(n)
            if row.gauges is not None:
                self._sequence += 1
                self._gauges.setdefault(row.cluster, {})[row.shard] = (self._sequence, row.gauges)
                self._members.setdefault(cluster, set()).add(row.cluster)
                touched.add(cluster)
        for label in touched:
            self._export_cluster(label)
        self.clusters_seen.set(len(self._gauges))

    def _export_cluster(self, label: str) -> None:
        """Set the gauges of one `cluster` label: ledger gauges summed over shards, topology gauges from
        the shard that reported last; for `_other`, sums over its clusters, without version or clock."""
        totals: dict[str, int] = {}
        newest: Mapping[str, int] = {}
        for name in self._members[label]:
            shards = self._gauges[name].values()
            newest = max(shards, key=lambda entry: entry[0])[1]
            for key, value in newest.items():
                if key not in LEDGER_GAUGES:
                    totals[key] = totals.get(key, 0) + value
            for _, gauges in shards:
                for key in LEDGER_GAUGES:
                    totals[key] = totals.get(key, 0) + gauges.get(key, 0)
        for state in BOOKIE_STATES:
            self.bookies.labels(label, state).set(totals.get(state, 0))
        self.default_rack.labels(label).set(totals.get("default_rack", 0))
        self.join_failures.labels(label).set(totals.get("join_failures", 0))
        self.flapping.labels(label).set(totals.get("flapping", 0))
        self.remembered.labels(label).set(totals.get("remembered_ledgers", 0))
        for key, alert_type in OPEN_LEDGER_ALERTS:
            self.open_ledger_alerts.labels(label, alert_type).set(totals.get(key, 0))
        self.open_skew_alerts.labels(label).set(totals.get("skew_open", 0))
        if label != OTHER_CLUSTERS:                 # one cluster: `newest` is its latest row
            self.topology_version.labels(label).set(newest.get("topology_version", 0))
            self.clock.labels(label).set(newest.get("clock_ms", 0) / 1000)


def _number(value: Any) -> float:
    return float(value) if isinstance(value, int | float) else 0.0


__all__ = ["BOOKIE_STATES", "OTHER_CLUSTERS", "BehindLog", "ClusterLabels", "EngineMetrics", "SourceLag",
           "iso_seconds", "source_label", "source_lag"]
