"""`placement-engine run`'s metrics endpoint against the real broker (tansu): scraped over HTTP while the job
runs, its counters equal the records in the output topics and the consumer lag falls to 0 once caught up."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from tests.kafka_broker import consume_all, produce_records

T0 = 1_790_000_000_000
GUARD_S = 240   # a hang guard for the whole run, never asserted as a speed
NAMES = ("events", "requests", "decisions", "alerts", "dead", "status")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _inputs() -> tuple[list, list]:
    """Two clusters of six bookies on three racks; creates, one nobody can place (a failed decision and
    its alert); three records that are not events (dead letters)."""
    events = [(c, json.dumps({"type": "bookie_writable", "cluster": c, "time": T0, "bookie": f"bk{i}:3181",
                              "location": f"/rack{i % 3}"})) for c in ("c1", "c2") for i in range(6)]
    events += [("c1", "not json"), ("c2", "[1, 2]"), ("c1", json.dumps({"type": "bookie_writable", "cluster": "c1"}))]
    requests = [(c, json.dumps({"type": "ledger_create", "cluster": c, "time": T0 + 1000 + n,
                                "request_id": f"{c}-r{n}", "ledger_id": n, "ensemble_size": 3, "write_quorum": 3,
                                "ack_quorum": 2})) for c in ("c1", "c2") for n in range(15)]
    requests.append(("c1", json.dumps({"type": "ledger_create", "cluster": "c1", "time": T0 + 9000,
                                       "request_id": "too-big", "ledger_id": 99, "ensemble_size": 9,
                                       "write_quorum": 9, "ack_quorum": 2})))
    return events, requests


def _scrape(port: int) -> dict[str, list] | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
            text = answer.read().decode()
    except (urllib.error.URLError, ConnectionError):
        return None                               # not listening yet
    return {family.name: family.samples for family in text_string_to_metric_families(text)}


def _sums(samples: list, by: str, name: str) -> Counter:
    totals = Counter()
    for sample in samples:
        if sample.name == name:
            totals[sample.labels[by]] += int(sample.value)
    return totals


def _written(bootstrap: str, topics: dict[str, str]) -> dict[str, Counter]:
    """What the output topics hold: decisions by status, alerts by type (the binary mode's ce_type header),
    dead letters by code."""
    decisions = Counter(json.loads(r.value)["status"] for r in consume_all(bootstrap, topics["decisions"]))
    alerts = Counter(dict(r.headers)["ce_type"].decode() for r in consume_all(bootstrap, topics["alerts"]))
    dead = Counter(json.loads(r.value)["code"] for r in consume_all(bootstrap, topics["dead"]))
    return {"decisions": decisions, "alerts": alerts, "dead": dead}


def _conf(kafka_bootstrap: str, topics: dict[str, str], tmp_path: Path, port: int) -> Path:
    conf = {"ensemblePlacementPolicy": "rackaware", "minNumRacksPerWriteQuorum": "2", "engine.seed": "5",
            "engine.kafka.bootstrapServers": kafka_bootstrap, "engine.kafka.consumerGroup": "",
            **{f"engine.kafka.{key}Topic": topics[name] for key, name in
               (("events", "events"), ("requests", "requests"), ("decisions", "decisions"), ("alerts", "alerts"),
                ("deadLetters", "dead"), ("status", "status"))},
            "engine.checkpointLocation": str(tmp_path / "checkpoint"), "engine.trigger.seconds": "0.5",
            "engine.kafka.maxOffsetsPerTrigger": "8",      # several batches, so the lag is seen above 0
            "engine.metrics.host": "127.0.0.1", "engine.metrics.port": str(port),
            "engine.statusIntervalSeconds": "1"}
    path = tmp_path / "run.properties"
    path.write_text("".join(f"{key}={value}\n" for key, value in conf.items()), encoding="utf-8")
    return path


def test_scraped_counters_equal_the_output_topics_and_the_lag_falls_to_0(kafka_bootstrap, kafka_topic, tmp_path,
                                                                        capsys):
    topics = {name: kafka_topic(partitions=2, prefix=f"metrics-{name}") for name in NAMES}
    port = _free_port()
    properties = _conf(kafka_bootstrap, topics, tmp_path, port)
    events, requests = _inputs()
    produce_records(kafka_bootstrap, topics["events"], events)
    produce_records(kafka_bootstrap, topics["requests"], requests)
    job = subprocess.Popen([str(Path(sys.executable).with_name("placement-engine")), "run", "--conf", str(properties)],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(job.stdout), daemon=True)
    reader.start()
    lag_seen: list[int] = []
    try:
        deadline = time.monotonic() + GUARD_S
        while True:
            assert job.poll() is None, "".join(lines)[-3000:]
            assert time.monotonic() < deadline, f"the metrics did not settle:\n{''.join(lines)[-3000:]}"
            scraped = _scrape(port)
            if scraped is not None and "placement_kafka_lag_records" in scraped:
                lags = [int(s.value) for s in scraped["placement_kafka_lag_records"]]
                lag_seen.append(sum(lags))
                decided = _sums(scraped.get("placement_decisions", []), "status", "placement_decisions_total")
                if sum(decided.values()) == len(requests) and sum(lags) == 0:
                    written = _written(kafka_bootstrap, topics)
                    if sum(written["decisions"].values()) == len(requests):
                        break
            time.sleep(0.3)
        # The job has answered everything and read to the end: what the endpoint says is what was written.
        assert decided == written["decisions"] and written["decisions"]["failed"] >= 1
        alerts = _sums(scraped["placement_alerts"], "type", "placement_alerts_total")
        assert alerts == written["alerts"] and alerts["placement.decision.failed"] >= 1
        dead = _sums(scraped["placement_dead_letters"], "code", "placement_dead_letters_total")
        assert dead == written["dead"] and sum(dead.values()) == 3
        assert {s.labels["source"] for s in scraped["placement_dead_letters"]} == {topics["events"]}
        bookies = {(s.labels["cluster"], s.labels["state"]): s.value for s in scraped["placement_bookies"]}
        assert bookies[("c1", "writable")] == bookies[("c2", "writable")] == 6
        assert max(lag_seen) > 0 and lag_seen[-1] == 0
        assert {s.labels["topic"] for s in scraped["placement_kafka_lag_records"]} == {topics["events"],
                                                                                     topics["requests"]}
        job.send_signal(signal.SIGTERM)
        code = job.wait(timeout=GUARD_S)
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()
    reader.join(timeout=10)
    log = "".join(lines)
    assert code == 0, log[-3000:]
    said = [line for line in log.splitlines() if " behind: " in line or " caught up: " in line]
    assert all(" behind: " not in a or " caught up: " in b for a, b in zip(said, said[1:])), said   # once each

    # The operator's view of the same run: the status command reads the status topic to its end.
    from streaming.cli import main

    capsys.readouterr()
    assert main(["status", "--conf", str(properties), "--json"]) == 0
    shown = {c["cluster"]: c for c in json.loads(capsys.readouterr().out)["clusters"]}
    latest = {}
    for record in consume_all(kafka_bootstrap, topics["status"]):
        status = json.loads(record.value)
        if status["time_ms"] >= latest.get(status["cluster"], {}).get("time_ms", -1):
            latest[status["cluster"]] = status
    # (A record shows its cluster as of its event time: what changed less than engine.statusIntervalSeconds
    # before the cluster's last record waits for a later record, so the counts are not asserted here.)
    assert sorted(shown) == sorted(latest) == ["c1", "c2"]
    for cluster, status in latest.items():
        assert shown[cluster]["bookies"] == status["bookies"] and status["bookies"]["writable"] >= 1
        assert shown[cluster]["ledgers"] == status["ledgers"]
        assert shown[cluster]["topology_version"] == status["topology_version"]


def test_a_metrics_port_in_use_stops_run_with_one_line_and_exit_2(kafka_bootstrap, kafka_topic, tmp_path, capsys):
    from streaming.cli import main

    topics = {name: kafka_topic(partitions=1, prefix=f"metrics-{name}") for name in NAMES}
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        properties = _conf(kafka_bootstrap, topics, tmp_path, port)
        assert main(["run", "--conf", str(properties)]) == 2
    err = capsys.readouterr().err
    assert f"engine.metrics.port: port {port} is in use on 127.0.0.1" in err and "Traceback" not in err
    assert len([line for line in err.splitlines() if "configuration error" in line]) == 1
