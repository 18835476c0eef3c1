"""Faults against `placement-engine run`, counted: requests sent, decisions received, missing, duplicates and
mismatches against a `replay` of the same input.

Every test sends the same known input (:data:`SCENARIO`): bookies joining two clusters on the events topic,
then ledger creates and ensemble checks on the requests topic, one partition each, so the job reads them in
the order the replay does (time order). The replay's decisions, keyed by `request_id`, are the reference
(:func:`replay_decisions`, once per module). Each test injects its fault into a running job, collects the
decisions topic, and asserts on one :class:`Counts`: nothing missing, nothing decided differently, and
duplicates (at-least-once) identical to the first copy, `id` included.

The job runs as a `placement-engine run` subprocess (:class:`EngineRun`) in its own process group, with a
properties file, so the test can kill its driver, its JVM or one of its Python workers and read its log.
Progress is read from the checkpoint (`offsets/N` written when batch N is planned, `commits/N` when it is
done) and from the decisions topic; every wait polls a condition with a deadline, never a sleep.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition

from events import format_time
from streaming.replay import run_replay
from streaming.settings import engine_settings
from tests.kafka_broker import (
    TansuBroker,
    consume_all,
    create_topic,
    external_bootstrap,
    produce_records,
    unique_topic_name,
)
from tests.streaming.test_kafka_faults import Forwarder, _free_port

T0 = 1_790_000_000_000
CLUSTERS = ("c1", "c2")
REQUESTS = 480
"""Requests sent in every test: enough for several micro-batches of :data:`PER_TRIGGER` records."""
PER_TRIGGER = 120

# Guards against a hung job only (a healthy step takes seconds); never used to assert on speed.
START_GUARD_S = 90
STEP_GUARD_S = 60
STOP_GUARD_S = 30


def _iso(seconds: float) -> str:
    return format_time(T0 + int(seconds * 1000))


def _scenario() -> tuple[list[dict], list[dict]]:
    events = [{"type": "bookie_writable", "cluster": cluster, "time": _iso(0), "bookie": f"bk{i}:3181",
               "location": f"/rack{i % 3}"} for cluster in CLUSTERS for i in range(6)]
    requests = []
    for n in range(REQUESTS):
        cluster = CLUSTERS[n % len(CLUSTERS)]
        time_s = 10 + n * 0.01
        if n % 10 == 9:   # a check of an ensemble on one rack: FAIL, with an alert
            requests.append({"type": "ensemble_check", "cluster": cluster, "time": _iso(time_s),
                             "request_id": f"r{n}", "ledger_id": 100_000 + n, "ensemble": ["bk0:3181", "bk3:3181"],
                             "write_quorum": 2, "ack_quorum": 2})
        else:
            requests.append({"type": "ledger_create", "cluster": cluster, "time": _iso(time_s),
                             "request_id": f"r{n}", "ledger_id": n, "ensemble_size": 3, "write_quorum": 3,
                             "ack_quorum": 2})
    return events, requests


SCENARIO = _scenario()
BASE_CONF = {"ensemblePlacementPolicy": "rackaware", "minNumRacksPerWriteQuorum": "2", "engine.seed": "11"}


# ------------------------------------------------------------------------------------------------- counting


@dataclass(frozen=True)
class Counts:
    """What one fault test observed on the decisions topic, against the replay's decisions."""

    sent: int
    received: int
    missing: int
    duplicates: int
    differing_duplicates: int
    mismatches: int

    def __str__(self) -> str:
        return (f"sent={self.sent} received={self.received} missing={self.missing} duplicates={self.duplicates} "
                f"differing_duplicates={self.differing_duplicates} mismatches={self.mismatches}")


def count_decisions(expected: dict[str, dict], received: list[dict]) -> Counts:
    """Compare the decisions read from the topic with the reference, by `request_id`.

    A duplicate is a second record for a request; it differs when any field (the `id` included) differs from
    the first. A mismatch is a request whose first decision differs from the reference, or one the
    reference does not know.
    """
    first: dict[str, dict] = {}
    differing: set[str] = set()
    for decision in received:
        earlier = first.setdefault(decision["request_id"], decision)
        if earlier != decision:
            differing.add(decision["request_id"])
    mismatches = sum(1 for request_id, decision in first.items() if expected.get(request_id) != decision)
    return Counts(sent=len(expected), received=len(received), missing=len(expected.keys() - first.keys()),
                  duplicates=len(received) - len(first), differing_duplicates=len(differing),
                  mismatches=mismatches)


def assert_counts(counts: Counts) -> None:
    """Every request decided, as the replay decides it; duplicates identical."""
    assert (counts.missing, counts.mismatches, counts.differing_duplicates) == (0, 0, 0), str(counts)


@pytest.fixture(scope="module")
def replay_decisions(spark, tmp_path_factory) -> dict[str, dict]:
    """The replay's decisions of :data:`SCENARIO`, by request id: what every fault test must get."""
    work = tmp_path_factory.mktemp("fault-replay")
    source = work / "input.jsonl"
    events, requests = SCENARIO
    source.write_text("".join(json.dumps(r) + "\n" for r in events + requests), encoding="utf-8")
    run_replay(spark, engine_settings(BASE_CONF), [source], work / "out")
    decisions = [json.loads(line) for path in sorted((work / "out" / "decisions").glob("*.jsonl"))
                 for line in path.read_text(encoding="utf-8").splitlines()]
    by_request = {d["request_id"]: d for d in decisions}
    assert len(by_request) == len(decisions) == REQUESTS
    return by_request


# ----------------------------------------------------------------------------------- the job and its inputs


class DecisionsReader:
    """Reads the decisions topic in a background thread as the job writes it (an assigned consumer)."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self._consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique_topic_name("counts"),
                                   "enable.auto.commit": False, "reconnect.backoff.max.ms": 500,
                                   "logger": _Quiet()})
        self._consumer.assign([TopicPartition(topic, p, 0) for p in range(2)])
        self._lock = threading.Lock()
        self._decisions: list[dict] = []
        self._running = True
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while self._running:
            for msg in self._consumer.consume(num_messages=500, timeout=0.05):
                if msg.error() is None:
                    with self._lock:
                        self._decisions.append(json.loads(msg.value()))
                elif msg.error().code() not in (KafkaError._PARTITION_EOF, KafkaError._TRANSPORT):
                    raise RuntimeError(f"reading decisions: {msg.error()}")

    @property
    def decisions(self) -> list[dict]:
        with self._lock:
            return list(self._decisions)

    def distinct(self) -> int:
        return len({d["request_id"] for d in self.decisions})

    def close(self) -> None:
        self._running = False
        self._thread.join(timeout=STOP_GUARD_S)
        self._consumer.close()


class _Quiet:
    """librdkafka's logger for the test's own consumer: its reconnection lines during an outage are noise."""

    def log(self, level: int, fmt: str, *args: object) -> None:
        pass


@dataclass
class Job:
    """The topics and checkpoint of one test's job, and its properties file."""

    bootstrap: str
    topics: dict[str, str]
    checkpoint: Path
    properties: Path

    @classmethod
    def create(cls, bootstrap: str, tmp_path: Path, **extra: str) -> Job:
        topics = {name: create_topic(bootstrap, unique_topic_name(f"faults-{name}"), partitions=partitions)
                  for name, partitions in (("events", 1), ("requests", 1), ("decisions", 2), ("alerts", 1),
                                           ("dead", 1), ("status", 1))}
        checkpoint = tmp_path / "checkpoint"
        conf = {**BASE_CONF,
                "engine.kafka.bootstrapServers": bootstrap,
                "engine.kafka.eventsTopic": topics["events"],
                "engine.kafka.requestsTopic": topics["requests"],
                "engine.kafka.decisionsTopic": topics["decisions"],
                "engine.kafka.alertsTopic": topics["alerts"],
                "engine.kafka.deadLettersTopic": topics["dead"],
                "engine.kafka.statusTopic": topics["status"],
                "engine.metrics.port": "0",
                "engine.kafka.consumerGroup": "",
                "engine.kafka.maxOffsetsPerTrigger": str(PER_TRIGGER),
                "engine.checkpointLocation": str(checkpoint),
                "engine.trigger.seconds": "0.5",
                **extra}
        properties = tmp_path / "run.properties"
        properties.write_text("".join(f"{key}={value}\n" for key, value in conf.items()), encoding="utf-8")
        return cls(bootstrap, topics, checkpoint, properties)

    def send_events(self) -> None:
        produce_records(self.bootstrap, self.topics["events"], [(r["cluster"], json.dumps(r)) for r in SCENARIO[0]])

    def send_requests(self) -> None:
        produce_records(self.bootstrap, self.topics["requests"],
                        [(r["cluster"], json.dumps(r)) for r in SCENARIO[1]])

    # The checkpoint's logs: batch N planned (offsets/N) and done (commits/N).
    def _batches(self, log: str) -> set[int]:
        folder = self.checkpoint / log
        return {int(p.name) for p in folder.iterdir() if p.name.isdigit()} if folder.is_dir() else set()

    def committed(self) -> set[int]:
        return self._batches("commits")

    def in_progress(self) -> list[int]:
        """Batches planned and not committed (at most one while the job runs)."""
        return sorted(self._batches("offsets") - self._batches("commits"))

    def read_by(self, batch: int, name: str) -> int | None:
        """Where batch ``batch`` ends in topic ``name`` (one partition), from ``offsets/batch``; 0 before the
        first batch, None while the file is being written."""
        if batch < 0:
            return 0
        try:
            ends = json.loads((self.checkpoint / "offsets" / str(batch)).read_text(encoding="utf-8")
                              .splitlines()[-1])
            return int(ends.get(f"{self.topics[name]}:0", 0))
        except (OSError, IndexError, ValueError):
            return None

    def events_read(self) -> bool:
        """A committed batch has read every event."""
        return any((self.read_by(batch, "events") or 0) >= len(SCENARIO[0]) for batch in self.committed())

    def batch_of_requests(self) -> tuple[int, range] | None:
        """The batch in progress, if it reads requests, and the requests (their offsets) it reads."""
        progress = self.in_progress()
        if not progress:
            return None
        batch = progress[-1]
        start, end = self.read_by(batch - 1, "requests"), self.read_by(batch, "requests")
        if start is None or end is None or end <= start:
            return None
        return batch, range(start, end)


class EngineRun:
    """`placement-engine run --conf FILE` in its own process group; its output is collected as it runs."""

    def __init__(self, job: Job) -> None:
        script = Path(sys.executable).with_name("placement-engine")
        self.process = subprocess.Popen([str(script), "run", "--conf", str(job.properties)], stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True, start_new_session=True)
        self._lines: list[str] = []
        self._reader = threading.Thread(target=lambda: self._lines.extend(self.process.stdout), daemon=True)
        self._reader.start()

    @property
    def log(self) -> str:
        return "".join(self._lines)

    def summary(self) -> str:
        """The log's error lines and its end, for a failure message (a query's failure repeats its plan)."""
        errors = [line for line in self.log.splitlines() if "Error" in line or "Exception" in line][:20]
        return "\n".join(errors) + "\n...\n" + self.log[-2000:]

    def alive(self) -> bool:
        return self.process.poll() is None

    def descendants(self) -> list[int]:
        """Every process below the job's driver (its JVM, the Python daemon, its workers), from /proc."""
        children: dict[int, list[int]] = {}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                except (OSError, IndexError, ValueError):
                    continue   # the process ended while being read
                children.setdefault(parent, []).append(int(entry.name))
        found, todo = [], [self.process.pid]
        while todo:
            for child in children.get(todo.pop(), []):
                found.append(child)
                todo.append(child)
        return found

    def kill(self) -> None:
        """SIGKILL the driver, its JVM and its Python workers at once (a crashed driver host)."""
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=STOP_GUARD_S)
        wait_until(lambda: not _group_alive(self.process.pid), "the killed job's processes to end", STOP_GUARD_S)

    def stop(self) -> int:
        """SIGTERM (the job stops after its micro-batch) and wait; SIGKILL if it does not end."""
        if self.alive():
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=STOP_GUARD_S)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=STOP_GUARD_S)
        if _group_alive(self.process.pid):
            os.killpg(self.process.pid, signal.SIGKILL)
        self._reader.join(timeout=STOP_GUARD_S)
        return self.process.returncode


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def wait_until(condition: Callable[[], object], what: str, timeout_s: float,
               run: EngineRun | None = None) -> None:
    """Poll ``condition`` until it is true; fail naming ``what`` (and the job's log tail) at the deadline or
    when the job ends."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if run is not None and not run.alive():
            raise AssertionError(f"the job ended while waiting for {what}:\n{run.summary()}")
        assert time.monotonic() < deadline, f"timed out after {timeout_s} s waiting for {what}" + (
            f"\n{run.summary()}" if run is not None else "")
        time.sleep(0.02)   # poll interval of the condition check


def _lines(log: str, text: str) -> list[str]:
    return [line for line in log.splitlines() if text in line]


@pytest.fixture
def engine_runs() -> Iterator[list[EngineRun]]:
    """Every job a test starts is stopped at its end, whatever happened."""
    runs: list[EngineRun] = []
    yield runs
    for run in runs:
        run.stop()


def start_job(job: Job, runs: list[EngineRun]) -> EngineRun:
    run = EngineRun(job)
    runs.append(run)
    return run


def start_with_events(job: Job, runs: list[EngineRun]) -> EngineRun:
    """Send the events, start the job, and send the requests once a batch has read every event: the job
    then reads the requests after the whole topology, in time order, as the replay does."""
    job.send_events()
    run = start_job(job, runs)
    wait_until(job.events_read, "a batch reading the events", START_GUARD_S, run)
    job.send_requests()
    return run


def collect(job: Job, reader: DecisionsReader, run: EngineRun, expected: dict[str, dict]) -> Counts:
    """Wait until every request has a decision (or the step guard passes), stop the job, count."""
    wait_until(lambda: reader.distinct() >= len(expected), "a decision for every request", STEP_GUARD_S * 2, run)
    run.stop()
    return count_decisions(expected, reader.decisions)



def _request_index(decision: dict) -> int:
    return int(decision["request_id"][1:])   # "r<n>" is the n-th request, at offset n of its topic


def wait_mid_batch(job: Job, run: EngineRun, reader: DecisionsReader) -> tuple[int, str]:
    """Wait for a batch of requests in progress: one caught while it writes its decisions (some written, not
    all), or else the last batch of requests as soon as it is planned.

    Returns:
        The batch and what it was doing.
    """
    found: list[tuple[int, str]] = []

    def caught() -> bool:
        planned = job.batch_of_requests()
        if planned is None:
            return False
        batch, requests = planned
        written = len({d["request_id"] for d in reader.decisions if _request_index(d) in requests})
        if 0 < written < len(requests):
            found.append((batch, f"{written} of its {len(requests)} decisions written"))
        elif written == 0 and requests.stop >= REQUESTS:
            found.append((batch, f"planned, none of its {len(requests)} decisions written"))
        return bool(found)

    wait_until(caught, "a batch of requests in progress", STEP_GUARD_S, run)
    return found[0]


def test_kill_9_of_the_driver_mid_batch_then_a_restart_decides_every_request_once(
        kafka_bootstrap, replay_decisions, tmp_path, engine_runs):
    job = Job.create(kafka_bootstrap, tmp_path)
    reader = DecisionsReader(kafka_bootstrap, job.topics["decisions"])
    try:
        run = start_with_events(job, engine_runs)
        kills: list[str] = []
        while True:
            batch, doing = wait_mid_batch(job, run, reader)
            run.kill()
            kills.append(f"batch {batch} ({doing}; {reader.distinct()} requests decided)")
            if batch not in job.committed():
                break
            # The batch committed in the instant before the kill: not mid-batch; again, on a restart.
            assert len(kills) < 3, kills
            run = start_job(job, engine_runs)
        counts = collect(job, reader, start_job(job, engine_runs), replay_decisions)
    finally:
        reader.close()
    print(f"kill -9 of the driver in {', then '.join(kills)}: {counts}")
    assert_counts(counts)


def _cpu_ticks(pid: int) -> int:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return -1   # ended
    return int(fields[11]) + int(fields[12])   # utime + stime


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


TASK_DAEMON = "-m pyspark.daemon pyspark.worker"
"""The daemon forking the Python workers that run tasks. Other daemons fork the data sources' driver-side
runners (planning reads, committing a batch's writes): killing one of those fails the query, not a task."""


def _python_workers(run: EngineRun) -> list[int]:
    """The job's task workers: processes forked by its task daemon (the daemon itself excluded)."""
    daemons = [pid for pid in run.descendants() if _cmdline(pid).strip().endswith(TASK_DAEMON)]
    return [pid for pid in daemons if _parent(pid) in daemons]


def _parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except OSError:
        return -1   # ended


def busy_python_worker(run: EngineRun, samples: int = 3) -> int | None:
    """A Python worker of the job that used the CPU in each of ``samples`` consecutive 50 ms intervals: one
    in the middle of a task, most likely (a worker that just finished one has stopped by the second)."""
    busy = set(_python_workers(run))
    ticks = {pid: _cpu_ticks(pid) for pid in busy}
    for _ in range(samples):
        time.sleep(0.05)   # the sampling interval of the CPU counters, not a wait for a condition
        now = {pid: _cpu_ticks(pid) for pid in busy}
        busy = {pid for pid in busy if now[pid] > ticks[pid] >= 0}
        ticks = now
    return max(busy, key=lambda pid: ticks[pid]) if busy else None


def test_a_python_worker_killed_mid_task_is_retried_and_every_request_decided(
        kafka_bootstrap, replay_decisions, tmp_path, engine_runs):
    """A busy worker is killed while a batch of requests is in progress; if Spark lost no task for it (the
    worker had just finished its task), another is killed, until a task fails and is retried. Small batches
    give the kill many batches to land in: on an idle machine the default size lets the job decide every
    request before a busy worker is seen."""
    job = Job.create(kafka_bootstrap, tmp_path, **{"engine.kafka.maxOffsetsPerTrigger": str(PER_TRIGGER // 4)})
    reader = DecisionsReader(kafka_bootstrap, job.topics["decisions"])
    killed: list[tuple[int, int]] = []

    def a_task_lost() -> bool:
        if _lines(run.log, "Lost task"):
            return True
        planned = job.batch_of_requests()
        worker = busy_python_worker(run) if planned is not None else None
        if worker is not None and job.batch_of_requests() == planned:
            os.kill(worker, signal.SIGKILL)
            killed.append((planned[0], worker))
        return False

    try:
        run = start_with_events(job, engine_runs)
        wait_until(a_task_lost, "a task lost to a killed Python worker", STEP_GUARD_S, run)
        counts = collect(job, reader, run, replay_decisions)
    finally:
        reader.close()
    lost = _lines(run.log, "Lost task")
    print(f"Python workers killed (batch, pid): {killed}; {len(lost)} task(s) lost and retried: {counts}")
    assert_counts(counts)


skip_external = pytest.mark.skipif(external_bootstrap() is not None,
                                   reason="cuts off or restarts its own tansu broker; an external one cannot be")


@pytest.fixture
def forwarded() -> Iterator[Forwarder]:
    """A broker that clients reach only through a forwarder the test stops and starts (it keeps its data)."""
    port = _free_port()
    with TansuBroker(advertised_port=port) as own:
        forwarder = Forwarder(port, own.port).start()
        try:
            yield forwarder
        finally:
            forwarder.stop()


@skip_external
def test_a_broker_outage_with_its_data_kept_delays_decisions_and_loses_none(
        forwarded, replay_decisions, tmp_path, engine_runs):
    """The outage begins while a batch of requests is in progress and ends once the job has said so."""
    job = Job.create(forwarded.bootstrap, tmp_path)
    reader = DecisionsReader(forwarded.bootstrap, job.topics["decisions"])
    unreachable = f"Kafka brokers {forwarded.bootstrap} unreachable"
    try:
        run = start_with_events(job, engine_runs)
        wait_until(job.batch_of_requests, "a batch of requests in progress", STEP_GUARD_S, run)
        forwarded.stop()
        wait_until(lambda: _lines(run.log, unreachable), "the job's unreachable warning", STEP_GUARD_S, run)
        during = reader.distinct()
        forwarded.start()
        counts = collect(job, reader, run, replay_decisions)
    finally:
        reader.close()
    warnings, recoveries = _lines(run.log, unreachable), _lines(run.log, "reachable again after")
    print(f"broker outage ({len(warnings)} unreachable warning(s), {len(recoveries)} recovery line(s), "
          f"{during} decided when it was noticed): {counts}")
    assert recoveries, run.summary()
    assert not _lines(run.log, "check that the topic exists") and not _lines(run.log, "BrokerUnreachableError")
    assert_counts(counts)


@skip_external
def test_a_broker_that_lost_its_data_stops_the_job_and_nothing_was_decided_wrongly_before(
        replay_decisions, tmp_path, engine_runs):
    """engine.kafka.failOnDataLoss=true (the default): the job stops with DataLossError once the broker comes
    back empty, and decides none of the records written after the loss."""
    with TansuBroker() as broker:
        job = Job.create(broker.bootstrap, tmp_path, **{"engine.kafka.failOnDataLoss": "true"})
        reader = DecisionsReader(broker.bootstrap, job.topics["decisions"])
        try:
            run = start_with_events(job, engine_runs)
            wait_until(lambda: reader.distinct() >= REQUESTS, "a decision for every request", STEP_GUARD_S * 2, run)
            counts = count_decisions(replay_decisions, reader.decisions)
        finally:
            reader.close()
        broker.restart()
        for name, topic in job.topics.items():
            create_topic(broker.bootstrap, topic, partitions=2 if name == "decisions" else 1)
        produce_records(broker.bootstrap, job.topics["requests"],
                        [(r["cluster"], json.dumps(r)) for r in SCENARIO[1][:3]])
        wait_until(lambda: not run.alive(), "the job to stop", STEP_GUARD_S)
        code = run.stop()
        after = consume_all(broker.bootstrap, job.topics["decisions"])
    print(f"broker lost its data, exit code {code}, {len(after)} decided after the loss: {counts}")
    assert code != 0
    assert _lines(run.log, "DataLossError") and _lines(run.log, "failOnDataLoss=false"), run.summary()
    assert after == []
    assert_counts(counts)
