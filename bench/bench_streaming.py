"""Streaming: requests/s from Kafka to decisions in Kafka, and event-to-decision latency, at trigger 1 s.

Re-run from the repository root (about 6-10 minutes on a 2-core machine):

    .venv/bin/python bench/bench_streaming.py
    .venv/bin/python bench/bench_streaming.py --clusters 1 --pipelines placement --backlog 50000 --duration 20

A tansu broker (in memory, 127.0.0.1 only, tests/kafka_broker.py) and one local[2] SparkSession run in
this process tree. For each pipeline and each cluster count, on fresh topics and a fresh checkpoint:

* `placement`: the engine's `run` query (streaming.job.start_kafka_job): the placement-kafka source on the
  events and requests topics, grouping by cluster, the state function (parse, model, policy), the sink.
* `passthrough`: the same source, the same `cluster` column and grouping, an applyInPandasWithState function
  that parses every record with events.parse_record and emits it unchanged (a one-counter state), the same
  Kafka output mapping and sink; no model, no policy. Its rate is the limit the placement rate compares with.

Phases of one run:

1. warm-up: the clusters register (--bookies on --racks each, writable + disk report), then one request per
   cluster; wait for their decisions (Python workers started, models built). Then --warmup requests (default
   20,000), all answered before measuring: a JVM runs Spark's code interpreted until its JIT compilers have
   seen it often enough, and a short benchmark of a cold session measures mostly that (the first pipeline of a
   session pays several times the JVM CPU per request of the second, the same, one). A running job is warm.
   Before any pipeline is measured, each runs this warm-up once on one cluster (the session warm-up;
   --no-prewarm skips it): even after its own 20,000 requests, the pipeline measured first would pay part of
   the JVM's compilation of the code both share.
2. throughput: --backlog requests are produced at once (round-robin over the clusters); the rate is the backlog
   over the time from the first produce to the last distinct decision read back (consumer on the decisions
   topic). Batches are capped by engine.kafka.maxOffsetsPerTrigger (--max-offsets). Spark's own
   processedRowsPerSecond per batch is reported too. The phase runs --repeat times (default 3) and the
   median run is the figure: one backlog is only two or three micro-batches.
3. latency: --rate requests/s for --duration s, paced in 10 ms ticks (one phase per rate when --rate is a
   list). Each request_id carries its produce
   wall time (time.time_ns() just before produce()); the latency of a request is the Kafka timestamp
   (CreateTime, set by the sink's producer when the decision is produced) of its first decision minus that
   time. Same machine, same clock. p50/p99/max over all requests of the phase; requests without a decision
   after --drain-timeout are counted as missing.

The reader's consumer can skip decisions that are in the topic: tansu, with concurrent producers, may answer a
fetch at a partition's end with a later batch before earlier ones are returned, and a live consumer then moves
past them (the engine's own source plans ranges and reads every offset: tests/streaming/test_kafka_no_gaps.py).
After 10 s without a new decision, a phase reads the topic again from the start for the ids still missing, keeps
their Kafka timestamps (which the figures use) and prints how many it recovered.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common

_REQUEST_ID = re.compile(rb'"request_id":"([^"]*)"')


# -- the pass-through pipeline ------------------------------------------------------------------------


def make_passthrough_function(source_kind: str = "kafka"):
    """An applyInPandasWithState function: parse every record (as the engine does), emit it unchanged."""

    def on_group(key: tuple, frames: Iterator, group_state) -> Iterator:
        import pandas as pd

        from events import DeadLetter, Origin, parse_record

        cluster = key[0]
        chunks = list(frames)
        frame = chunks[0] if len(chunks) == 1 else pd.concat(chunks, ignore_index=True)
        frame = frame.sort_values(["o1", "o2", "o3"], kind="stable")
        kinds, ids = [], []
        for name, part, pos, value in zip(frame["src_name"], frame["src_part"], frame["src_pos"], frame["value"]):
            item = parse_record(value if value is not None else "", Origin.from_kafka(name, int(part), int(pos)))
            kinds.append("dead_letter" if isinstance(item, DeadLetter) else "decision")
            ids.append(getattr(item, "request_id", None) or "")
        seen = (group_state.get[0] if group_state.exists else 0) + len(ids)
        group_state.update((seen,))
        yield pd.DataFrame({"kind": kinds, "cluster": [cluster] * len(ids), "id": ids,
                            "value": list(frame["value"])}, columns=["kind", "cluster", "id", "value"])

    return on_group


def start_passthrough(spark, settings, query_name: str):
    """The pass-through query, built like streaming.job.start_kafka_job with the state function swapped."""
    from pyspark.sql.streaming.state import GroupStateTimeout

    from streaming.job import kafka_outputs, kafka_records, keyed_records
    from streaming.schemas import OUTPUT_DDL
    from streaming.session import use_local_checkpoint_writer

    keyed = keyed_records(kafka_records(spark, settings), settings.shards_per_cluster)  # the engine's grouping
    outputs = keyed.groupBy("cluster", "shard").applyInPandasWithState(
        make_passthrough_function(), OUTPUT_DDL, "seen long", "append", GroupStateTimeout.NoTimeout)
    use_local_checkpoint_writer(spark, settings.checkpoint_location)
    writer = kafka_outputs(outputs, settings).writeStream.option("checkpointLocation", settings.checkpoint_location) \
        .trigger(processingTime=f"{settings.trigger_seconds} seconds").queryName(query_name) \
        .format("placement-kafka").option("kafka.bootstrap.servers", settings.bootstrap_servers)
    for key, value in sorted(settings.kafka_client.items()):
        writer = writer.option(f"kafka.{key}", value)
    return writer.outputMode("append").start()


# -- reading decisions back ---------------------------------------------------------------------------


class DecisionReader:
    """Reads the decisions topic in a thread; keeps the first Kafka timestamp (ms) of each request_id."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        from confluent_kafka import Consumer, TopicPartition

        self.bootstrap, self.topic = bootstrap, topic
        self._consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{topic}",
                                   "enable.auto.commit": False, "fetch.wait.max.ms": 10,
                                   "auto.offset.reset": "earliest"})
        metadata = self._consumer.list_topics(topic, timeout=10)
        self._consumer.assign([TopicPartition(topic, p, 0) for p in sorted(metadata.topics[topic].partitions)])
        self.first_ts: dict[bytes, int] = {}
        self.first_read_ns: dict[bytes, int] = {}
        self.arrived: list[bytes] = []   # request ids in the order their first decision was read
        self.records = 0
        self.errors: collections.Counter[str] = collections.Counter()   # consumer errors by name
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="decision-reader", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        find = _REQUEST_ID.search
        while not self._stop.is_set():
            messages = self._consumer.consume(num_messages=2000, timeout=0.05)
            now = time.time_ns()
            with self._lock:
                for msg in messages:
                    if msg.error() is not None:
                        self.errors[msg.error().name()] += 1
                        continue
                    self.records += 1
                    match = find(msg.value() or b"")
                    if match is None:
                        continue
                    rid = match.group(1)
                    if rid not in self.first_ts:
                        self.first_ts[rid] = msg.timestamp()[1]
                        self.first_read_ns[rid] = now
                        self.arrived.append(rid)

    def count(self, prefix: bytes) -> int:
        with self._lock:
            return sum(1 for rid in self.first_ts if rid.startswith(prefix))

    def wait_for(self, ids: set[bytes], timeout_s: float, stall_s: float = 10.0) -> bool:
        """Whether every one of `ids` has a decision within `timeout_s`.

        Each poll looks only at the ids that arrived since the last one: testing the whole set on every
        poll would cost O(ids) of the benchmark's CPU per poll, taken from the pipeline it measures, and
        more from the slower one (it polls for longer). Cost: O(new arrivals) per poll.

        The reader's consumer can skip decisions that are in the topic (tansu's fetch answer at a partition's
        end, see the module docstring). After
        `stall_s` without a new arrival, the topic is read again from the start for the ids still
        missing (`recover`): their Kafka timestamps are exact, their read times unknown.
        """
        deadline = time.monotonic() + timeout_s
        with self._lock:
            remaining = ids - self.first_ts.keys()
            seen = len(self.arrived)
        progress = time.monotonic()
        while time.monotonic() < deadline:
            with self._lock:
                new, seen = self.arrived[seen:], len(self.arrived)
            if new:
                remaining.difference_update(new)
                progress = time.monotonic()
            if not remaining:
                return True
            if time.monotonic() - progress > stall_s:
                remaining.difference_update(self.recover(remaining))
                progress = time.monotonic()
                continue
            time.sleep(0.05)  # poll interval of a condition check
        return False

    def recover(self, ids: set[bytes]) -> set[bytes]:
        """Read the topic again from the start for `ids`; keep the Kafka timestamp of each one found."""
        found = self._scan(ids)
        with self._lock:
            for rid, stamp in found.items():
                self.first_ts.setdefault(rid, stamp)
        if found:
            print(f"  ! the reader had skipped {len(found):,} decisions that are in the topic; read again "
                  "from the start (Kafka timestamps kept, read times unknown)", flush=True)
        return set(found)

    def scan_for(self, ids: set[bytes], timeout_s: float = 60.0) -> set[bytes]:
        """Which of `ids` have a decision in the topic, read again from the start by a fresh consumer (tells
        a decision the reader missed from one that was never written)."""
        return set(self._scan(ids, timeout_s))

    def _scan(self, ids: set[bytes], timeout_s: float = 60.0) -> dict[bytes, int]:
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"bench-scan-{self.topic}",
                             "enable.auto.commit": False, "auto.offset.reset": "earliest"})
        try:
            metadata = consumer.list_topics(self.topic, timeout=10)
            ends = {p: consumer.get_watermark_offsets(TopicPartition(self.topic, p), timeout=10)[1]
                    for p in metadata.topics[self.topic].partitions}
            consumer.assign([TopicPartition(self.topic, p, 0) for p in sorted(ends)])
            found: dict[bytes, int] = {}
            done: set[int] = {p for p, end in ends.items() if end == 0}
            deadline = time.monotonic() + timeout_s
            while len(done) < len(ends) and time.monotonic() < deadline:
                for msg in consumer.consume(num_messages=5000, timeout=0.5):
                    if msg.error() is not None:
                        continue
                    match = _REQUEST_ID.search(msg.value() or b"")
                    if match is not None and match.group(1) in ids:
                        found.setdefault(match.group(1), msg.timestamp()[1])
                    if msg.offset() + 1 >= ends[msg.partition()]:
                        done.add(msg.partition())
            return found
        finally:
            consumer.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self._consumer.close()


# -- producing ----------------------------------------------------------------------------------------


def _producer(bootstrap: str):
    from confluent_kafka import Producer

    return Producer({"bootstrap.servers": bootstrap, "linger.ms": 2, "queue.buffering.max.messages": 1_000_000})


def _produce(producer, topic: str, key: str, value: str) -> None:
    while True:
        try:
            producer.produce(topic, value=value.encode(), key=key.encode())
            return
        except BufferError:
            producer.poll(0.05)


def _produce_requests(producer, topic: str, names: list[str], members: list[str], rng, count: int,
                      prefix: str) -> set[bytes]:
    """Produce `count` requests round-robin over the clusters (ids `<prefix><n>`), flushed; returns their ids."""
    ids = set()
    for n in range(count):
        cluster = names[n % len(names)]
        rid = f"{prefix}{n}"
        ids.add(rid.encode())
        _produce(producer, topic, cluster, _request_line(cluster, n, rid, members, rng))
        if n % 5000 == 0:
            producer.poll(0)
    producer.flush(60)
    return ids


def _request_line(cluster: str, n: int, rid: str, members: list[str], rng) -> str:
    record = common.request(cluster, n, int(time.time() * 1000), members, rng, request_id=rid)
    return json.dumps(record, separators=(",", ":"))


def batch_profile(progress: list) -> dict:
    """Median of each durationMs part, rows and rows/s over batches that read data; `each` keeps every
    such batch's id, rows, durationMs and state-store commit time (in the --json output)."""
    rows = [p for p in progress if (p.get("numInputRows") or 0) > 0]
    if not rows:
        return {"batches": 0}
    parts: dict[str, list[float]] = {}
    for p in rows:
        for name, value in (p.get("durationMs") or {}).items():
            parts.setdefault(name, []).append(float(value))
    rates = [p["numInputRows"] / max(p["durationMs"]["triggerExecution"] / 1000, 1e-3) for p in rows]
    return {"batches": len(rows), "rows_median": common.percentile([p["numInputRows"] for p in rows], 50),
            "rows_per_s_median": common.percentile(rates, 50),
            "duration_ms_median": {k: common.percentile(v, 50) for k, v in sorted(parts.items())},
            "each": [{"batch": p.get("batchId"), "rows": p["numInputRows"], "ms": p.get("durationMs"),
                      "state_commit_ms": sum(op.get("commitTimeMs", 0) for op in p.get("stateOperators") or ())}
                     for p in rows]}


def _progress(query) -> list:
    return [json.loads(p.json) if hasattr(p, "json") else dict(p) for p in query.recentProgress]


def _last_batch_id(query) -> int:
    return max((p.get("batchId", -1) for p in _progress(query)), default=-1)


def _progress_after(query, batch_id: int) -> list:
    """Progress of the batches after `batch_id` (recentProgress keeps only the last 100 batches, so
    positions in it shift once the query has run that many)."""
    return [p for p in _progress(query) if p.get("batchId", -1) > batch_id]


def settle(query, timeout_s: float = 60.0) -> None:
    """Wait until the query has no batch running (so its last batch is in recentProgress)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        status = query.status
        if not status.get("isTriggerActive") and not status.get("isDataAvailable"):
            return
        time.sleep(0.05)  # poll interval of a condition check


MEMORY_INTERVAL_S = 2.0
"""How often the peak-memory sampler reads the process tree. Each read of PSS (/proc/PID/smaps_rollup)
walks the page tables, O(mapped memory) of CPU taken from the pipeline being measured, so it is read
rarely. The tree's memory changes over seconds, not milliseconds."""

WINDOW_S = 5
"""The latency phase's p99 is also given per WINDOW_S seconds of produce time: the first windows show
how long the job takes to settle after the throughput phase's backlog."""


def latency_phase(query, producer, reader, memory, topics, names, members, rng, rate: int, args) -> dict:
    """Produce `rate` requests/s for `args.duration` s; latency of each from produce time to its decision."""
    clusters = len(names)
    load = common.load_average()
    batch_before = _last_batch_id(query)
    cpu_before = memory.cpu_now()
    ids = set()
    sent_ns: dict[bytes, int] = {}
    tick = 0.01
    due = 0.0
    n = 0
    begin = time.perf_counter()
    begin_ns = time.time_ns()
    while True:
        elapsed_phase = time.perf_counter() - begin
        if elapsed_phase >= args.duration:
            break
        due = min(rate * args.duration, (elapsed_phase + tick) * rate)
        while n < due:
            cluster = names[n % clusters]
            stamp = time.time_ns()
            rid = f"L{n}-{stamp}"
            key = rid.encode()
            ids.add(key)
            sent_ns[key] = stamp
            _produce(producer, topics["requests"], cluster, _request_line(cluster, n, rid, members, rng))
            n += 1
        producer.poll(0)
        pause = begin + (elapsed_phase // tick + 1) * tick - time.perf_counter()
        if pause > 0:
            time.sleep(pause)  # pacing of the producer, not a wait for a condition
    producer.flush(30)
    produce_s = time.perf_counter() - begin
    complete = reader.wait_for(ids, args.drain_timeout)
    settle(query)
    cpu = common.cpu_between(cpu_before, memory.cpu_now())
    missing = {} if complete else _missing(reader, ids)
    with reader._lock:  # noqa: SLF001
        latencies = [reader.first_ts[i] - sent_ns[i] / 1e6 for i in ids if i in reader.first_ts]
        read_latencies = [(reader.first_read_ns[i] - sent_ns[i]) / 1e6 for i in ids if i in reader.first_read_ns]
        by_window: dict[int, list[float]] = {}
        for i in ids:
            if i in reader.first_ts:
                window = int((sent_ns[i] - begin_ns) / 1e9 // WINDOW_S)
                by_window.setdefault(window, []).append(reader.first_ts[i] - sent_ns[i] / 1e6)
    return {"rate_target": rate, "produced": len(ids), "rate_offered": len(ids) / produce_s,
            "answered": len(latencies), "complete": complete, "missing": missing,
            "p50_ms": common.percentile(latencies, 50), "p99_ms": common.percentile(latencies, 99),
            "max_ms": max(latencies) if latencies else float("nan"),
            "p99_ms_by_window": [common.percentile(by_window[w], 99) for w in sorted(by_window)],
            "p50_read_ms": common.percentile(read_latencies, 50),
            "p99_read_ms": common.percentile(read_latencies, 99),
            "batches": batch_profile(_progress_after(query, batch_before)), "cpu": cpu,
            "load": [load[0], common.load_average()[0]]}


def run_scenario(spark, bootstrap: str, pipeline: str, clusters: int, args, work: Path, measure: bool = True) -> dict:
    import random

    from streaming.job import start_kafka_job
    from streaming.settings import engine_settings
    from tests.kafka_broker import create_topic, unique_topic_name

    topics = {name: create_topic(bootstrap, unique_topic_name(f"bench-{name}"), partitions=parts)
              for name, parts in (("events", 2), ("requests", 2), ("decisions", 2), ("alerts", 1), ("dead", 1),
                                           ("status", 1))}
    conf = {**common.BENCH_CONF,
            "engine.kafka.bootstrapServers": bootstrap,
            "engine.kafka.eventsTopic": topics["events"], "engine.kafka.requestsTopic": topics["requests"],
            "engine.kafka.decisionsTopic": topics["decisions"], "engine.kafka.alertsTopic": topics["alerts"],
            "engine.kafka.deadLettersTopic": topics["dead"], "engine.kafka.statusTopic": topics["status"],
            "engine.kafka.maxOffsetsPerTrigger": str(args.max_offsets),
            "engine.checkpointLocation": str(work / f"checkpoint-{pipeline}-{clusters}"),
            "engine.trigger.seconds": "1", **dict(item.split("=", 1) for item in args.set)}
    settings = engine_settings(conf)
    names = [f"c{c:03d}" for c in range(clusters)]
    layout = common.rack_layout(args.bookies, args.racks)
    members = list(layout)
    rng = random.Random(11)
    producer = _producer(bootstrap)
    now_ms = int(time.time() * 1000)
    for cluster in names:
        for record in common.registration(cluster, layout, now_ms - 60_000, rng):
            _produce(producer, topics["events"], cluster, json.dumps(record, separators=(",", ":")))
    producer.flush(30)
    reader = DecisionReader(bootstrap, topics["decisions"])
    memory = common.PeakMemory(interval_s=MEMORY_INTERVAL_S).start()
    name = f"bench-{pipeline}-{clusters}"
    query = (start_kafka_job(spark, settings, query_name=name) if pipeline == "placement"
             else start_passthrough(spark, settings, name))
    result: dict = {"pipeline": pipeline, "clusters": clusters, "bookies_per_cluster": args.bookies}
    try:
        # 1. warm-up
        started = time.perf_counter()
        warm = _produce_requests(producer, topics["requests"], names, members, rng, len(names), "W")
        if not reader.wait_for(warm, args.drain_timeout):
            raise RuntimeError(f"{name}: warm-up decisions did not arrive within {args.drain_timeout} s; "
                               f"query status {query.status}, exception {query.exception()}")
        warm = _produce_requests(producer, topics["requests"], names, members, rng, args.warmup, "V")
        if not reader.wait_for(warm, args.drain_timeout + args.warmup / 500):
            raise RuntimeError(f"{name}: the {args.warmup:,} warm-up requests were not all answered; "
                               f"query status {query.status}, exception {query.exception()}")
        result["warmup_s"] = time.perf_counter() - started
        result["warmup_requests"] = args.warmup
        settle(query)
        if not measure:
            return result

        # 2. throughput on a backlog, --repeat times; the median run is the figure
        runs = [throughput_phase(query, producer, reader, memory, topics, names, members, rng, args, f"B{n}")
                for n in range(args.repeat)]
        result["throughput"] = sorted(runs, key=lambda run: run["requests_per_s"])[len(runs) // 2]
        result["throughput_runs"] = [run["requests_per_s"] for run in runs]

        # 3. latency at steady rates
        result["latency"] = [latency_phase(query, producer, reader, memory, topics, names, members, rng, rate, args)
                             for rate in args.rates]
    finally:
        query.stop()
        memory.stop()
        reader.close()
        result["peak_rss_mib"] = memory.peak_mib
        result["peak_rss"] = memory.describe()
        result["cpu"] = memory.describe_cpu()
    return result


def throughput_phase(query, producer, reader, memory, topics, names, members, rng, args, prefix: str) -> dict:
    """Produce --backlog requests at once and time them until the last decision is read back."""
    load = common.load_average()
    batch_before = _last_batch_id(query)
    cpu_before = memory.cpu_now()
    started_ns = time.time_ns()
    started = time.perf_counter()
    ids = _produce_requests(producer, topics["requests"], names, members, rng, args.backlog, prefix)
    produced_s = time.perf_counter() - started
    complete = reader.wait_for(ids, args.drain_timeout + args.backlog / 500)
    with reader._lock:  # noqa: SLF001
        stamps = [reader.first_ts[i] for i in ids if i in reader.first_ts]
    elapsed = (max(stamps) - started_ns / 1e6) / 1000 if stamps else float("nan")
    settle(query)
    batches = batch_profile(_progress_after(query, batch_before))
    cpu = common.cpu_between(cpu_before, memory.cpu_now())
    missing = {} if complete else _missing(reader, ids)
    return {"backlog": args.backlog, "answered": len(stamps), "complete": complete, "missing": missing,
            "produce_s": produced_s, "elapsed_s": elapsed,
            "requests_per_s": len(stamps) / elapsed if stamps else 0.0,
            "batches": batches, "cpu": cpu,
            "us_cpu_per_request": sum(cpu.values()) / max(len(stamps), 1) * 1e6,
            "load": [load[0], common.load_average()[0]]}


def _missing(reader, ids: set[bytes]) -> dict:
    """After an incomplete phase: how many requests went unanswered, and how many of those have a
    decision in the topic after all (read again from the start: the reader missed them) or none."""
    with reader._lock:  # noqa: SLF001
        unanswered = ids - reader.first_ts.keys()
        errors = dict(reader.errors)
    in_topic = reader.scan_for(unanswered)
    missing = {"unanswered": len(unanswered), "in_topic": len(in_topic), "reader_errors": errors,
               "examples": sorted(rid.decode() for rid in unanswered - in_topic)[:5]}
    print(f"  ! {len(unanswered):,} of {len(ids):,} requests unanswered after the drain timeout; "
          f"{len(in_topic):,} of them have a decision in the topic (read again from the start); reader "
          f"errors {errors}; never written, e.g. {missing['examples']}", flush=True)
    return missing


def _describe_batches(b: dict) -> str:
    if not b.get("batches"):
        return "none with data"
    parts = b["duration_ms_median"]
    shown = ", ".join(f"{k} {v:,.0f}" for k, v in parts.items() if v >= 1)
    return (f"{b['batches']} with data, median {b['rows_median']:,.0f} rows at {b['rows_per_s_median']:,.0f} rows/s; "
            f"median ms: {shown}")


def print_result(r: dict) -> None:
    t, lat = r.get("throughput"), r.get("latency")
    print(f"\n{r['pipeline']}, {r['clusters']} cluster(s) of {r['bookies_per_cluster']} bookies "
          f"(warm-up {r.get('warmup_requests', 0):,} requests in {r.get('warmup_s', float('nan')):.1f} s)")
    if t:
        runs = r.get("throughput_runs", [t["requests_per_s"]])
        if len(runs) > 1:
            print(f"  throughput runs: {', '.join(f'{rate:,.0f}' for rate in runs)} requests/s; the median run:")
        print(f"  throughput: {t['answered']:,}/{t['backlog']:,} requests answered in {t['elapsed_s']:.1f} s -> "
              f"{t['requests_per_s']:,.0f} requests/s Kafka to Kafka (backlog produced in {t['produce_s']:.1f} s; "
              f"load {t['load'][0]:.1f}->{t['load'][1]:.1f})")
        print(f"    batches: {_describe_batches(t['batches'])}")
        print(f"    CPU: {common.describe_cpu(t['cpu'])} -> {t['us_cpu_per_request']:,.0f} CPU-us per request")
    for phase in lat or ():
        print(f"  latency at {phase['rate_target']:,} requests/s offered "
              f"({phase['rate_offered']:,.0f}/s achieved by the producer): "
              f"p50 {phase['p50_ms']:,.0f} ms, p99 {phase['p99_ms']:,.0f} ms, max {phase['max_ms']:,.0f} ms "
              f"(decision timestamp - produce time; read back by the consumer: p50 {phase['p50_read_ms']:,.0f} ms, "
              f"p99 {phase['p99_read_ms']:,.0f} ms); {phase['answered']:,}/{phase['produced']:,} answered; "
              f"load {phase['load'][0]:.1f}->{phase['load'][1]:.1f}")
        windows = phase.get("p99_ms_by_window") or []
        if len(windows) > 1:
            print(f"    p99 per {WINDOW_S} s of the phase (by produce time): "
                  f"{', '.join(f'{p99:,.0f}' for p99 in windows)} ms")
        print(f"    batches: {_describe_batches(phase['batches'])}")
        print(f"    CPU: {common.describe_cpu(phase['cpu'])} over {phase['produced']:,} requests")
    print(f"  peak memory (PSS) of the process tree: {r['peak_rss']}", flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pipelines", default="placement,passthrough")
    parser.add_argument("--clusters", default="1,100", help="cluster counts, e.g. 1,100")
    parser.add_argument("--bookies", type=int, default=12, help="bookies per cluster")
    parser.add_argument("--racks", type=int, default=4, help="racks per cluster")
    parser.add_argument("--backlog", type=int, default=100_000, help="requests of the throughput phase")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override one key of the engine's configuration (repeatable)")
    parser.add_argument("--warmup", type=int, default=20_000,
                        help="requests answered before the throughput phase (JIT-compiles the JVM's paths, fills "
                             "the ledger audit), so the phases measure a running job, not a starting one")
    parser.add_argument("--no-prewarm", dest="prewarm", action="store_false",
                        help="skip the session warm-up (each pipeline's warm-up on one cluster, run before any "
                             "pipeline is measured, so the order of --pipelines does not favour the second)")
    parser.add_argument("--repeat", type=int, default=3,
                        help="throughput phases per scenario, one after the other; the median is the figure (one "
                             "backlog is two or three micro-batches, and this machine's speed drifts)")
    parser.add_argument("--max-offsets", type=int, default=50_000, help="engine.kafka.maxOffsetsPerTrigger")
    parser.add_argument("--rate", default="5000", help="requests/s of the latency phase; a comma-separated list "
                        "runs one phase per rate (e.g. 5000,1000)")
    parser.add_argument("--duration", type=float, default=30.0, help="seconds of the latency phase")
    parser.add_argument("--drain-timeout", type=float, default=120.0,
                        help="seconds to wait for the last decisions of a phase")
    parser.add_argument("--shuffle-partitions", type=int, default=2,
                        help="spark.sql.shuffle.partitions (engine.spark.shufflePartitions; the engine's default is 2)")
    parser.add_argument("--spark-conf", action="append", default=[], metavar="KEY=VALUE",
                        help="a Spark setting for the session (repeatable), e.g. a state store option")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    args = parser.parse_args(argv)
    args.rates = [int(r) for r in str(args.rate).split(",") if r.strip()]
    for item in args.spark_conf:
        if not item.partition("=")[0].strip() or "=" not in item:
            parser.error(f"--spark-conf: expected KEY=VALUE (a Spark setting), got {item!r}")
    pipelines = [p.strip() for p in args.pipelines.split(",") if p.strip()]
    if set(pipelines) - {"placement", "passthrough"}:
        parser.error("--pipelines: expected placement and/or passthrough")
    counts = [int(c) for c in args.clusters.split(",")]
    info = common.header(
        "streaming: Kafka -> decisions in Kafka, trigger 1 s; the engine vs a pass-through of the same pipeline",
        f"pipelines {', '.join(pipelines)}; clusters {counts}; {args.bookies} bookies on {args.racks} racks per "
        f"cluster; backlog {args.backlog:,} (median of {args.repeat} runs), maxOffsetsPerTrigger {args.max_offsets:,}; "
        f"latency at {', '.join(f'{r:,}' for r in args.rates)}/s for {args.duration:g} s; "
        f"shuffle partitions {args.shuffle_partitions}\n"
        "broker: tansu (in memory, 127.0.0.1), in this process tree with Spark local[2]",
        spark=True)
    from streaming.session import build_session
    from tests.kafka_broker import TansuBroker

    results: dict = {"machine": info, "args": vars(args), "runs": []}
    work = Path(tempfile.mkdtemp(prefix="bench-streaming-"))
    broker = TansuBroker().start()
    try:
        started = time.perf_counter()
        spark = build_session(app_name="bench-streaming", log_level="ERROR",
                              conf={"spark.sql.shuffle.partitions": str(args.shuffle_partitions),
                                    **dict(item.split("=", 1) for item in args.spark_conf)})
        print(f"# SparkSession started in {time.perf_counter() - started:.1f} s; broker {broker.bootstrap}", flush=True)
        if args.prewarm:
            # Every pipeline's warm-up before any is measured: the JVM compiles the code they share once,
            # so the pipeline measured first does not pay for the one measured second.
            for pipeline in pipelines:
                warmed = run_scenario(spark, broker.bootstrap, pipeline, 1, args, work, measure=False)
                print(f"# session warm-up, not measured: {pipeline}, {args.warmup:,} requests in "
                      f"{warmed['warmup_s']:.1f} s", flush=True)
        for clusters in counts:
            for pipeline in pipelines:
                try:
                    result = run_scenario(spark, broker.bootstrap, pipeline, clusters, args, work)
                except Exception as exc:  # noqa: BLE001 - report and go on with the next scenario
                    result = {"pipeline": pipeline, "clusters": clusters, "error": f"{type(exc).__name__}: {exc}"}
                    print(f"\n{pipeline}, {clusters} cluster(s): FAILED: {result['error'][:2000]}", flush=True)
                else:
                    print_result(result)
                results["runs"].append(result)
        spark.stop()
    finally:
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)
    by = {(r["pipeline"], r["clusters"]): r for r in results["runs"] if "error" not in r}
    for clusters in counts:
        placed, passed = by.get(("placement", clusters)), by.get(("passthrough", clusters))
        if placed and passed:
            ratio = placed["throughput"]["requests_per_s"] / max(passed["throughput"]["requests_per_s"], 1e-9)
            p99 = ", ".join(f"{lat['p99_ms']:,.0f} ms at {lat['rate_target']:,}/s" for lat in placed["latency"])
            print(f"\n{clusters} cluster(s): placement/pass-through throughput = {ratio:.2f} (target >= 0.5); "
                  f"placement p99 latency {p99} (target < 2000 ms at 5,000/s)")
    results["load_after"] = common.footer(info)
    common.save_json(args.json, results)


if __name__ == "__main__":
    main()
