"""`placement-engine run` stops within its deadline: SIGTERM, then exit status 0 within
`engine.stopGraceSeconds` plus 10 s (platforms kill a process that outlives their grace period:
Kubernetes after 30 s by default). The bound is a stop deadline the job promises, not a speed figure;
it is deliberately loose, so that only a stop that waits on something (a hanging shutdown hook) fails it."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from tests.kafka_broker import consume_all, produce_records

GRACE_S = 10
SLACK_S = 10
START_GUARD_S = 300   # a hang guard for the start, never asserted as a speed


def _records(cluster: str) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    t0 = 1_790_000_000_000
    events = [{"type": "bookie_writable", "cluster": cluster, "time": t0, "bookie": f"bk{i}:3181",
               "location": f"/rack{i % 3}"} for i in range(6)]
    creates = [{"type": "ledger_create", "cluster": cluster, "time": t0 + 1000 + n, "request_id": f"r{n}",
                "ledger_id": n, "ensemble_size": 3, "write_quorum": 3, "ack_quorum": 2} for n in range(10)]
    return ([(cluster, json.dumps(r)) for r in events], [(cluster, json.dumps(r)) for r in creates])


def test_run_exits_with_0_within_the_grace_period_plus_10_s_after_sigterm(kafka_bootstrap, kafka_topic, tmp_path):
    topics = {name: kafka_topic(partitions=2, prefix=name) for name in
              ("events", "requests", "decisions", "alerts", "dead", "status")}
    conf = {"engine.kafka.bootstrapServers": kafka_bootstrap, "engine.kafka.eventsTopic": topics["events"],
            "engine.kafka.requestsTopic": topics["requests"], "engine.kafka.decisionsTopic": topics["decisions"],
            "engine.kafka.alertsTopic": topics["alerts"], "engine.kafka.deadLettersTopic": topics["dead"],
            "engine.kafka.statusTopic": topics["status"], "engine.metrics.port": "0",
            "engine.kafka.consumerGroup": "", "engine.checkpointLocation": str(tmp_path / "checkpoint"),
            "engine.trigger.seconds": "0.5", "engine.stopGraceSeconds": str(GRACE_S)}
    properties = tmp_path / "run.properties"
    properties.write_text("".join(f"{key}={value}\n" for key, value in conf.items()), encoding="utf-8")
    events, requests = _records("c1")
    produce_records(kafka_bootstrap, topics["events"], events)
    produce_records(kafka_bootstrap, topics["requests"], requests)
    script = Path(sys.executable).with_name("placement-engine")
    job = subprocess.Popen([str(script), "run", "--conf", str(properties)], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(job.stdout), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + START_GUARD_S
        while len(consume_all(kafka_bootstrap, topics["decisions"])) < len(requests):   # up and answering
            assert job.poll() is None, "".join(lines)[-3000:]
            assert time.monotonic() < deadline, "no decisions within the start guard"
            time.sleep(0.5)
        signalled = time.monotonic()
        job.send_signal(signal.SIGTERM)
        try:
            code = job.wait(timeout=GRACE_S + SLACK_S)
        except subprocess.TimeoutExpired:
            code = None
        stopped_after = time.monotonic() - signalled
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()
    reader.join(timeout=10)
    log = "".join(lines)
    assert code is not None, f"still running {GRACE_S + SLACK_S} s after SIGTERM:\n{log[-3000:]}"
    assert code == 0, log[-3000:]
    assert stopped_after <= GRACE_S + SLACK_S
    assert "stopped on SIGTERM" in log
