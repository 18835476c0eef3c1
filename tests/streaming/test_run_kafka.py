"""`placement-engine run` against a real Kafka-protocol broker (tansu over TCP): records in, decisions,
alerts and dead letters out, restart from the checkpoint, and the kafka-python alert consumer."""

import io
import json
import subprocess
import sys
import time
from argparse import Namespace

import pytest

from streaming.alert_consumer import run_alerts
from streaming.job import start_kafka_job
from streaming.session import CHECKPOINT_FILE_MANAGER, DEFAULT_CONF, LOCAL_CHECKPOINT_FILE_MANAGER
from streaming.settings import engine_settings
from tests.kafka_broker import consume_all, produce_records

T0 = 1_790_000_000_000


def _iso(seconds: float) -> str:
    from events import format_time

    return format_time(T0 + int(seconds * 1000))


def _bookies(cluster: str) -> list[dict]:
    return [{"type": "bookie_writable", "cluster": cluster, "time": _iso(0), "bookie": f"bk{i}:3181",
             "location": f"/rack{i % 3}"} for i in range(6)]


def _creates(cluster: str, start: int, count: int) -> list[dict]:
    return [{"type": "ledger_create", "cluster": cluster, "time": _iso(10 + n), "request_id": f"{cluster}-r{n}",
             "ledger_id": n, "ensemble_size": 3, "write_quorum": 3, "ack_quorum": 2}
            for n in range(start, start + count)]


def _keyed(records):
    return [(r["cluster"], json.dumps(r)) for r in records]


@pytest.fixture
def topics(kafka_topic):
    return {name: kafka_topic(partitions=2, prefix=name) for name in
            ("events", "requests", "decisions", "alerts", "dead", "status")}


def _conf(kafka_bootstrap, topics, checkpoint):
    return {
        "ensemblePlacementPolicy": "rackaware",
        "minNumRacksPerWriteQuorum": "2",
        "engine.seed": "11",
        "engine.kafka.bootstrapServers": kafka_bootstrap,
        "engine.kafka.eventsTopic": topics["events"],
        "engine.kafka.requestsTopic": topics["requests"],
        "engine.kafka.decisionsTopic": topics["decisions"],
        "engine.kafka.alertsTopic": topics["alerts"],
        "engine.kafka.deadLettersTopic": topics["dead"],
        "engine.kafka.statusTopic": topics["status"],
        "engine.metrics.port": "0",
        "engine.kafka.consumerGroup": "",
        "engine.checkpointLocation": str(checkpoint),
        "engine.trigger.seconds": "0.5",
    }


CAUGHT_UP_GUARD_S = 240


def _caught_up(query) -> bool:
    """The last micro-batch ended with every source at the end of its topics (as they were when it began)."""
    progress = query.lastProgress
    return bool(progress) and all(
        json.loads(source["endOffset"]) == json.loads(source["latestOffset"]) for source in progress["sources"])


def _wait_for(condition, query, what):
    """Poll `condition()` until it holds (the query's failure is re-raised); a hang guard, not a timing."""
    deadline = time.monotonic() + CAUGHT_UP_GUARD_S
    while not condition():
        if query.exception() is not None:
            raise query.exception()
        assert time.monotonic() < deadline, f"{what}: not reached within {CAUGHT_UP_GUARD_S} s"
        time.sleep(0.2)


def _run_once(spark, conf, name, *, stop_mid_stream=False):
    """Run until the job has consumed everything (or, `stop_mid_stream`, until its first micro-batch
    with input committed), then stop. With idle ticks on (the default), Spark runs no-data micro-batches
    every trigger, so processAllAvailable() would never return."""
    query = start_kafka_job(spark, engine_settings(conf), query_name=name)
    try:
        if stop_mid_stream:
            _wait_for(lambda: any(p["numInputRows"] > 0 for p in query.recentProgress), query,
                      "the job's first micro-batch with input")
            assert not _caught_up(query), "the first batch took everything: the restart would not be mid-stream"
        else:
            _wait_for(lambda: _caught_up(query), query, "the job consuming both topics")
    finally:
        query.stop()


def _files(directory, suffix: str) -> list:
    return list(directory.rglob(f"*{suffix}"))


def test_run_answers_every_request_across_a_restart(spark, kafka_bootstrap, topics, tmp_path):
    conf = _conf(kafka_bootstrap, topics, tmp_path / "checkpoint")
    produce_records(kafka_bootstrap, topics["events"], _keyed(_bookies("c1") + _bookies("c2")))
    first = _creates("c1", 0, 20) + _creates("c2", 0, 5)
    produce_records(kafka_bootstrap, topics["requests"], _keyed(first))
    produce_records(kafka_bootstrap, topics["requests"], [("c1", "{not json"),
                                                          ("c1", json.dumps({**first[0], "request_id": "bad",
                                                                             "write_quorum": 9})),
                                                          # Not UTF-8: pyspark could not hand it to Python
                                                          # (the task failed, batch after batch).
                                                          ("c1", json.dumps(first[1]).encode().replace(
                                                              b'"c1-r1"', b'"c1-r1\xff"'))])
    # A single-rack ensemble: the check answers FAIL and raises a not-adhering alert.
    check = {"type": "ensemble_check", "cluster": "c1", "time": _iso(50), "request_id": "check-1",
             "ledger_id": 99, "ensemble": ["bk0:3181", "bk3:3181"], "write_quorum": 2, "ack_quorum": 2}
    produce_records(kafka_bootstrap, topics["requests"], _keyed([check]))
    # At most 10 records per micro-batch: the first run stops with most of the backlog unread. It writes
    # its state without RocksDB changelog checkpointing, as engines before the session turned it on did:
    # the second run, with the session's default, must carry every cluster's model on from there.
    changelog = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"
    spark.conf.set(changelog, "false")
    try:
        _run_once(spark, {**conf, "engine.kafka.maxOffsetsPerTrigger": "10"}, "run-e2e-1", stop_mid_stream=True)
    finally:
        spark.conf.set(changelog, DEFAULT_CONF[changelog])

    state = tmp_path / "checkpoint" / "state"
    assert _files(state, ".zip") and not _files(state, ".changelog"), "the first run commits RocksDB snapshots"

    second = _creates("c1", 20, 15)
    produce_records(kafka_bootstrap, topics["requests"], _keyed(second))
    _run_once(spark, conf, "run-e2e-2")
    assert _files(state, ".changelog"), "with the engine's session defaults a commit writes a changelog"

    decisions = [json.loads(r.value) for r in consume_all(kafka_bootstrap, topics["decisions"])]
    by_request: dict[str, dict] = {}
    for decision in decisions:
        earlier = by_request.setdefault(decision["request_id"], decision)
        assert earlier == decision, "a duplicate (at-least-once) must be identical, id included"
    expected = {r["request_id"] for r in first + second} | {"bad", "check-1"}
    assert set(by_request) == expected
    assert all(by_request[r["request_id"]]["status"] == "ok" for r in first + second)
    assert by_request["bad"]["error"]["code"] == "INVALID_REQUEST"
    assert by_request["check-1"]["adherence"] == "FAIL"
    keys = {r.key for r in consume_all(kafka_bootstrap, topics["decisions"])}
    assert keys == {b"c1", b"c2"}

    letters = [json.loads(r.value) for r in consume_all(kafka_bootstrap, topics["dead"])]
    not_json = [d for d in letters if d["code"] == "INVALID_JSON"]
    assert len({d["id"] for d in not_json}) == 1
    assert not_json[0]["raw"] == "{not json"
    assert set(not_json[0]["source"]) == {"topic", "partition", "offset"}
    assert not_json[0]["source"]["topic"] == topics["requests"]
    [encoding] = {d["id"]: d for d in letters if d["code"] == "INVALID_ENCODING"}.values()
    assert '"c1-r1\ufffd"' in encoding["raw"] and encoding["source"]["topic"] == topics["requests"]

    alerts = consume_all(kafka_bootstrap, topics["alerts"])
    assert alerts, "the FAIL ensemble check must raise an alert"
    headers = dict(alerts[0].headers)
    assert headers["ce_specversion"] == b"1.0" and headers["ce_type"].startswith(b"placement.")
    assert headers["ce_source"] == b"placement-engine/c1"
    assert json.loads(alerts[0].value)["severity"]


def _alert_types(bootstrap, topic):
    return [(dict(r.headers)["ce_type"].decode(), dict(r.headers)["ce_subject"].decode(),
             dict(r.headers)["ce_time"].decode(), json.loads(r.value)) for r in consume_all(bootstrap, topic)]


def test_an_idle_cluster_reports_an_ended_stabilization_delay_without_a_record(unset_manager, kafka_bootstrap,
                                                                              topics, tmp_path):
    """c1 loses a bookie and then sends nothing; c2's later records move the event-time watermark past
    the end of c1's 2 s delay, and the idle tick reports it, stamped with the time the delay ended."""
    conf = {**_conf(kafka_bootstrap, topics, tmp_path / "checkpoint"), "networkTopologyStabilizePeriodSeconds": "2",
            "engine.idleTickSeconds": "1", "engine.watermarkDelaySeconds": "0"}
    lost = {"type": "bookie_lost", "cluster": "c1", "time": _iso(20), "bookie": "bk0:3181"}
    later = {"type": "bookie_writable", "cluster": "c2", "time": _iso(60), "bookie": "bk9:3181", "location": "/rack0"}
    produce_records(kafka_bootstrap, topics["events"], _keyed(_bookies("c1") + _bookies("c2") + [lost, later]))
    spark = unset_manager
    query = start_kafka_job(spark, engine_settings(conf), query_name="run-idle-tick")
    # A local checkpoint is written through the FileSystem API (no process per renamed file).
    assert spark.conf.get(CHECKPOINT_FILE_MANAGER) == LOCAL_CHECKPOINT_FILE_MANAGER
    resolved = "placement.bookie.departure_pending.resolved"
    try:
        _wait_for(lambda: any(t == resolved for t, *_ in _alert_types(kafka_bootstrap, topics["alerts"])), query,
                  "the idle tick's departure_pending.resolved alert")
    finally:
        query.stop()
    alerts = _alert_types(kafka_bootstrap, topics["alerts"])
    pending = [(subject, time_, data) for t, subject, time_, data in alerts
               if t == "placement.bookie.departure_pending"]
    ended = [(subject, time_, data) for t, subject, time_, data in alerts if t == resolved]
    assert [(s, t) for s, t, _ in pending] == [("bk0:3181", _iso(20))]
    assert [(s, t) for s, t, _ in ended] == [("bk0:3181", _iso(22))]
    assert ended[0][2]["outcome"] == "expired"


def test_alert_consumer_deduplicates_and_filters_against_the_broker(kafka_bootstrap, topics, tmp_path):
    def event(event_id, cluster, kind, severity):
        return {"specversion": "1.0", "id": event_id, "source": f"placement-engine/{cluster}", "type": kind,
                "subject": "bk1:3181", "time": _iso(1), "datacontenttype": "application/json",
                "data": {"cluster": cluster, "severity": severity, "message": f"{kind} on {cluster}"}}

    structured = [event("a1", "c1", "placement.bookie.flapping", "warning"),
                  event("a1", "c1", "placement.bookie.flapping", "warning"),
                  event("a2", "c2", "placement.decision.failed", "error"),
                  event("a3", "c1", "placement.decision.not_adhering", "info")]
    produce_records(kafka_bootstrap, topics["alerts"], [("c", json.dumps(e)) for e in structured])
    binary = event("a4", "c1", "placement.decision.failed", "error")
    headers = [(f"ce_{k}", str(binary[k]).encode()) for k in ("specversion", "id", "source", "type", "subject",
                                                                "time")]
    produce_records(kafka_bootstrap, topics["alerts"], [("c1", json.dumps(binary["data"]))], headers=headers)
    produce_records(kafka_bootstrap, topics["alerts"], [("c1", json.dumps(binary["data"]))], headers=headers)
    conf_file = tmp_path / "alerts.properties"
    conf_file.write_text(f"engine.kafka.bootstrapServers={kafka_bootstrap}\n"
                         f"engine.kafka.alertsTopic={topics['alerts']}\n")

    def run(**options):
        args = Namespace(conf=str(conf_file), set=[], cluster=[], type=[], severity="info", json=True,
                         from_beginning=True, idle_timeout=3.0, max_messages=None)
        for key, value in options.items():
            setattr(args, key, value)
        out = io.StringIO()
        assert run_alerts(args, out) == 0
        return [json.loads(line) for line in out.getvalue().splitlines()]

    assert sorted(e["id"] for e in run()) == ["a1", "a2", "a3", "a4"]
    assert sorted(e["id"] for e in run(cluster=["c1"])) == ["a1", "a3", "a4"]
    assert sorted(e["id"] for e in run(severity="error")) == ["a2", "a4"]
    assert [e["id"] for e in run(type=["placement.bookie."])] == ["a1"]

    # The command itself: the alerts on stdout, and no kafka-python chatter on stderr.
    command = [sys.executable, "-c", "import sys; from streaming.cli import main; sys.exit(main())", "alerts",
               "--conf", str(conf_file), "--from-beginning", "--idle-timeout", "3", "--severity", "error"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) == 2, done.stdout
    assert " kafka" not in done.stderr, done.stderr


def test_run_refuses_to_start_on_a_missing_topic_naming_the_key(kafka_bootstrap, topics, tmp_path, capsys):
    from streaming.cli import main

    conf_file = tmp_path / "run.properties"
    conf_file.write_text("".join(f"{k}={v}\n" for k, v in _conf(kafka_bootstrap, topics, tmp_path / "c").items()))
    assert main(["run", "--conf", str(conf_file), "--set", "engine.kafka.alertsTopic=no-such-topic"]) == 2
    err = capsys.readouterr().err
    assert "engine.kafka.alertsTopic" in err and "no-such-topic" in err and "Traceback" not in err


def test_run_with_the_native_connector_missing_is_a_configuration_error(spark, kafka_bootstrap, topics, tmp_path,
                                                                         capsys):
    """This Spark has no spark-sql-kafka jar (no Maven here): `native` must say so and how to fix it."""
    from streaming.cli import main

    conf_file = tmp_path / "run.properties"
    conf_file.write_text("".join(f"{k}={v}\n" for k, v in _conf(kafka_bootstrap, topics, tmp_path / "c").items()))
    assert main(["run", "--conf", str(conf_file), "--set", "engine.kafka.connector=native"]) == 2
    err = capsys.readouterr().err
    assert "engine.kafka.connector" in err and "spark-sql-kafka-0-10_2.13:4.3" in err
    assert "Traceback" not in err


def test_run_stops_on_sigterm_after_its_micro_batch_with_status_0_and_no_error_logs(kafka_bootstrap, topics, tmp_path):
    """What Kubernetes, systemd and YARN send: the job stops between micro-batches, quietly (streaming.shutdown)."""
    import signal
    import subprocess
    import sys
    import threading
    from pathlib import Path

    conf = _conf(kafka_bootstrap, topics, tmp_path / "checkpoint")
    properties = tmp_path / "run.properties"
    properties.write_text("".join(f"{key}={value}\n" for key, value in conf.items()), encoding="utf-8")
    produce_records(kafka_bootstrap, topics["events"], _keyed(_bookies("c1")))
    produce_records(kafka_bootstrap, topics["requests"], _keyed(_creates("c1", 0, 30)))
    script = Path(sys.executable).with_name("placement-engine")
    job = subprocess.Popen([str(script), "run", "--conf", str(properties)], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(job.stdout), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + CAUGHT_UP_GUARD_S
        while len(consume_all(kafka_bootstrap, topics["decisions"])) < 30:   # the job is up and answering
            assert job.poll() is None, "".join(lines)[-3000:]
            assert time.monotonic() < deadline, "no decisions within the guard"
            time.sleep(0.5)
        job.send_signal(signal.SIGTERM)
        code = job.wait(timeout=CAUGHT_UP_GUARD_S)
    finally:
        if job.poll() is None:
            job.kill()
    reader.join(timeout=10)
    log = "".join(lines)
    assert code == 0, log[-3000:]
    assert "SIGTERM received: stopping after the micro-batch in progress" in log
    assert "stopped on SIGTERM" in log
    # What the old handling printed: py4j's broken command and the interrupt in the driver. (A micro-batch
    # that starts in the instant before the stop reaches Spark is cut short, and pyspark may print its
    # accumulator server's EOF; that is Spark's, and rare, so it is not asserted against.)
    assert "Exception while sending command" not in log and "KeyboardInterrupt" not in log, log[-3000:]
    assert "streaming/cli.py" not in log and "streaming/shutdown.py" not in log, log[-3000:]   # no traceback of ours
